/**
 * What the platform process measures around each scenario: CPU per process (from /proc), the API's
 * live heap, the queue statements and workflow signals timed from inside the API, what each job
 * costs Temporal (from workflow histories), and PostgreSQL's WAL flushes.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { historyToJSON } from '@temporalio/common/lib/proto-utils.js';
import { cpuSeconds } from '../proc.ts';
import type { Bench } from './setup.ts';
import { f1, summary } from './stats.ts';

function ownCpuSeconds(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
}

/** The API's heap after a full collection (run with --expose-gc), else as it stands: what it holds, not what it has touched. */
export function liveHeapMb(): number {
  (globalThis as { gc?: () => void }).gc?.();
  return process.memoryUsage().heapUsed / 2 ** 20;
}

export type Probes = Awaited<ReturnType<typeof startProbes>>;

/** Starts timing the API's queue statements and workflow signals; the rest reads on demand. */
export async function startProbes({ platform, temporalWorker, temporalPid, pgPid, load }: Bench) {
  // Where the CPU goes, per process, over one scenario.
  const procs = {
    api: () => ownCpuSeconds(),
    'temporal worker': () => cpuSeconds(temporalWorker.pid as number),
    'temporal server': () => cpuSeconds(temporalPid),
    postgres: () => cpuSeconds(pgPid),
    load: () => cpuSeconds(load.pid as number),
  };
  const cpuNow = (): Record<string, number> => Object.fromEntries(Object.entries(procs).map(([k, f]) => [k, f()]));
  /** Each process's share of one core since `before`, and its CPU milliseconds per job when `jobs` is given. */
  const cpuSince = (before: Record<string, number>, secs: number, jobs?: number): string =>
    Object.entries(cpuNow())
      .map(([k, v]) => {
        const used = v - (before[k] ?? 0);
        return `${k} ${((used / secs) * 100).toFixed(0)}%${jobs ? ` (${((used * 1000) / jobs).toFixed(1)} ms/job)` : ''}`;
      })
      .join(', ');

  const { WorkflowSignals } = await import('../../domain/jobs/index.ts');
  /** Workflow signals the API has yet to send (coalescing, or Temporal behind). */
  const pendingWorkflowSignals = (): number => platform.ctx.jobs?.signals.size ?? 0;
  const { JobStore } = await import('../../domain/jobs/index.ts');
  // Where the time goes inside the platform: each queue statement and each workflow signal, timed.
  const timings = new Map<string, number[]>();
  const record = (name: string, ms: number): void => {
    const list = timings.get(name) ?? [];
    list.push(ms);
    timings.set(name, list);
  };
  const timed = (proto: object, names: string[], prefix: string): void => {
    for (const name of names) {
      const original = (proto as Record<string, (...a: unknown[]) => Promise<unknown>>)[name] as (
        ...a: unknown[]
      ) => Promise<unknown>;
      (proto as Record<string, unknown>)[name] = async function (this: unknown, ...a: unknown[]) {
        const t = performance.now();
        try {
          return await original.apply(this, a);
        } finally {
          record(prefix + name, performance.now() - t);
        }
      };
    }
  };
  // Each job API request from its parsed head to its answer written, by kind (node:http's channels);
  // not the take, whose time is mostly its wait for a job.
  const { subscribe } = await import('node:diagnostics_channel');
  const arrived = new WeakMap<object, number>();
  subscribe('http.server.request.start', (m) => arrived.set((m as { response: object }).response, performance.now()));
  subscribe('http.server.response.finish', (m) => {
    const { request, response } = m as { request: { url?: string }; response: object };
    const t = arrived.get(response);
    const kind = /\/(runsync|run|job-done)\b/.exec(request.url ?? '')?.[1];
    if (t !== undefined && kind) record(`http.${kind}`, performance.now() - t);
  });
  timed(JobStore.prototype, ['insert', 'insertTaken', 'take', 'finish', 'get', 'clearSignalDue'], 'sql.');
  timed(WorkflowSignals.prototype, ['send'], 'temporal.signalWithStart');
  const timingReport = (): string =>
    [...timings.entries()]
      .map(([k, xs]) => {
        const s = summary(xs);
        return `${k} n=${s.n} p50 ${f1(s.p50)} p99 ${f1(s.p99)} ms`;
      })
      .join('; ');
  const countWorkflows = async (status: string): Promise<number> =>
    (await platform.ctx.temporal.workflow.count(`WorkflowType="jobWorkflow" AND ExecutionStatus="${status}"`)).count;
  /**
   * What each job cost Temporal, from the histories of up to 50 completed job workflows: events,
   * workflow tasks, and actions as Temporal counts them (a start or signal-with-start, each signal,
   * activity, timer, search-attribute upsert and marker).
   */
  const temporalPerJob = async (): Promise<string> => {
    const ACTIONS = new Set([
      'WORKFLOW_EXECUTION_STARTED',
      'WORKFLOW_EXECUTION_SIGNALED',
      'ACTIVITY_TASK_SCHEDULED',
      'TIMER_STARTED',
      'UPSERT_WORKFLOW_SEARCH_ATTRIBUTES',
      'MARKER_RECORDED',
    ]);
    let jobs = 0;
    let events = 0;
    let tasks = 0;
    let actions = 0;
    for await (const wf of platform.ctx.temporal.workflow.list({
      query: 'WorkflowType="jobWorkflow" AND ExecutionStatus="Completed"',
      pageSize: 50,
    })) {
      const history = await platform.ctx.temporal.workflow.getHandle(wf.workflowId, wf.runId).fetchHistory();
      // The JSON form (as the Temporal UI downloads it) names each event's type.
      const json = JSON.parse(historyToJSON(history)) as { events: Array<{ eventId: string; eventType: string }> };
      for (const e of json.events) {
        const name = e.eventType.replace(/^EVENT_TYPE_/, '');
        events++;
        if (name === 'WORKFLOW_TASK_COMPLETED') tasks++;
        // A signal-with-start is one action: its Signaled event right after the start is not another.
        if (ACTIONS.has(name) && !(name === 'WORKFLOW_EXECUTION_SIGNALED' && e.eventId === '2')) actions++;
      }
      if (++jobs >= 50) break;
    }
    const per = (n: number): string => (jobs > 0 ? (n / jobs).toFixed(2) : '-');
    return `Temporal per job (${jobs} completed job workflows): ${per(events)} history events, ${per(tasks)} workflow tasks, ${per(actions)} actions`;
  };
  /**
   * WAL flushes (fsyncs) PostgreSQL has made so far, all processes: each commit a client or worker
   * is answered on waits for one. Backends report their I/O counts when idle (at most 10 s late),
   * so a reading waits that long first.
   */
  const walFlushes = async (): Promise<number> => {
    await sleep(11_000);
    const io = await platform.ctx.db
      .$queryRawUnsafe<Array<{ n: number }>>(
        `SELECT coalesce(sum(fsyncs), 0)::float8 AS n FROM pg_stat_io WHERE object = 'wal'`,
      )
      .catch(() => null);
    if (io) return io[0]?.n ?? NaN;
    return (
      (await platform.ctx.db.$queryRawUnsafe<Array<{ n: number }>>('SELECT wal_sync::float8 AS n FROM pg_stat_wal'))[0]
        ?.n ?? NaN
    );
  };

  return {
    cpuNow,
    cpuSince,
    pendingWorkflowSignals,
    timings,
    timingReport,
    countWorkflows,
    temporalPerJob,
    walFlushes,
  };
}
