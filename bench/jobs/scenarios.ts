/**
 * The scenarios, in the order bench/jobs.ts runs them: each drives its traffic through the load
 * process, reads the probes around it and prints its lines.
 */
import type { SearchAttributePair } from '@temporalio/common';
import { setTimeout as sleep } from 'node:timers/promises';
import { rssMb } from '../proc.ts';
import { liveHeapMb, type Probes } from './probes.ts';
import type { Bench } from './setup.ts';
import { f1, summary } from './stats.ts';

/** What every scenario reads and writes. */
export interface Run {
  bench: Bench;
  probes: Probes;
  out: (line: string) => void;
  workers: number;
  concurrency: number;
  seconds: number;
  /** Most workflow signals waiting since a scenario last reset it (sampled every 200 ms). */
  backlog: { max: number };
  /** Each throughput scenario's job workflows, and how many completed per second over its load and drain. */
  fullPath: Map<string, { rate: number; workflows: number }>;
}

/** The same handler behind a plain HTTP server, `n` calls one by one then 5 s at the run's concurrency. */
export async function direct(run: Run, n: number): Promise<void> {
  const {
    bench: { ask },
    out,
    concurrency,
  } = run;
  const r = await ask<{ latency: ReturnType<typeof summary>; perSecond: number }>('direct', { n, concurrency });
  out(
    `direct HTTP handler: p50 ${f1(r.latency.p50)} ms, p99 ${f1(r.latency.p99)} ms, ${r.perSecond.toFixed(0)} req/s at concurrency ${concurrency}`,
  );
}

/** runsync overhead: `n` calls by one client, back to back or `pace` per second. */
export async function latency(run: Run, n: number, pace: number): Promise<void> {
  const {
    bench: { ask },
    probes: { walFlushes, cpuNow, cpuSince, timings, timingReport, temporalPerJob },
    out,
    workers,
  } = run;
  const flushesBefore = await walFlushes();
  const before = cpuNow();
  const t = performance.now();
  timings.clear();
  const profile = process.env.BENCH_PROFILE ? await startProfile() : undefined;
  type Summary = ReturnType<typeof summary>;
  const r = await ask<{ latency: Summary; toWorker: Summary; fromWorker: Summary }>('latency', { n, pace });
  const secs = (performance.now() - t) / 1000;
  if (profile) out(`  API CPU profile of this scenario: ${await profile.stop(String(process.env.BENCH_PROFILE))}`);
  out(
    `runsync overhead, 1 client ${pace > 0 ? `at ${pace} jobs/s` : 'back to back'}, ${workers} warm workers, handler returns at once: p50 ${f1(r.latency.p50)} ms, p90 ${f1(r.latency.p90)} ms, p99 ${f1(r.latency.p99)} ms, max ${f1(r.latency.max)} ms (n=${r.latency.n}); CPU ${cpuSince(before, secs, r.latency.n)}`,
  );
  out(
    `  split: call to the worker's take answered p50 ${f1(r.toWorker.p50)} p99 ${f1(r.toWorker.p99)} ms; take answered to the call answered (job-done included) p50 ${f1(r.fromWorker.p50)} p99 ${f1(r.fromWorker.p99)} ms`,
  );
  out(`  inside: ${timingReport()}`);
  // The 50 warm-up calls count too; the background tasks' own commits (a few per second) are in it.
  out(`  PostgreSQL WAL flushes per job: ${(((await walFlushes()) - flushesBefore) / (r.latency.n + 50)).toFixed(2)}`);
  out(`  ${await temporalPerJob()}`);
}

/** --concurrency clients for --seconds through /run or /runsync, then the drain of their workflows. */
export async function throughput(run: Run, mode: 'run' | 'runsync'): Promise<void> {
  const {
    bench: { ask },
    probes: { countWorkflows, cpuNow, cpuSince, timings, timingReport, temporalPerJob },
    out,
    workers,
    concurrency,
    seconds,
  } = run;
  const wfBefore = await countWorkflows('Completed');
  run.backlog.max = 0;
  timings.clear();
  const before = cpuNow();
  const t = performance.now();
  const r = await ask<{
    submitted: number;
    completed: number;
    workerJobs: number;
    perSecondByWorkers: number[];
    latency: ReturnType<typeof summary>;
  }>('throughput', {
    mode,
    seconds,
    concurrency,
  });
  const secs = (performance.now() - t) / 1000;
  const cpu = cpuSince(before, secs, r.workerJobs);
  const wfAtEnd = (await countWorkflows('Completed')) - wfBefore;
  // Drain: how long until every job's workflow has caught up?
  const drainStart = performance.now();
  let wfDone = wfAtEnd;
  for (;;) {
    const running = await countWorkflows('Running');
    wfDone = (await countWorkflows('Completed')) - wfBefore;
    if (running === 0 && wfDone >= r.workerJobs) break;
    if (performance.now() - drainStart > 300_000) break;
    await sleep(500);
  }
  const drain = (performance.now() - drainStart) / 1000;
  out(
    `throughput via /${mode}, ${concurrency} clients, ${workers} workers, ${seconds} s: jobs done by workers ${(r.workerJobs / secs).toFixed(0)}/s ` +
      `(per second: ${r.perSecondByWorkers.join(' ')}); client latency p50 ${f1(r.latency.p50)} ms p99 ${f1(r.latency.p99)} ms; ` +
      `job workflows completed during the run ${(wfAtEnd / secs).toFixed(0)}/s, all ${wfDone} done ${drain.toFixed(1)} s after the load stopped ` +
      `(sustained with one workflow per job: ${(wfDone / (secs + drain)).toFixed(0)} jobs/s; most signals waiting ${run.backlog.max}); CPU during the load ${cpu}`,
  );
  out(`  CPU over the load and the drain, per job workflow completed: ${cpuSince(before, secs + drain, wfDone)}`);
  run.fullPath.set(mode, { rate: wfDone / (secs + drain), workflows: wfDone });
  out(`  ${await temporalPerJob()}`);
  out(`  inside: ${timingReport()}`);
}

/** `n` jobs sent with /run at once, how fast the workers move through them, how far their workflows trail. */
export async function burst(run: Run, n: number): Promise<void> {
  const {
    bench: { ask, platform },
    probes: { countWorkflows, cpuNow, cpuSince, pendingWorkflowSignals },
    out,
    workers,
    concurrency,
  } = run;
  const wfBefore = await countWorkflows('Completed');
  const t0 = new Date();
  const before = cpuNow();
  run.backlog.max = 0;
  const r = await ask<{ submitSecs: number; doneSecs: number; refused: number; perSecondByWorkers: number[] }>(
    'burst',
    { n, concurrency },
  );
  const cpu = cpuSince(before, r.doneSecs, n);
  // The workflows catch up: every one started and completed.
  const drainStart = performance.now();
  while (performance.now() - drainStart < 600_000) {
    if (
      pendingWorkflowSignals() === 0 &&
      (await countWorkflows('Running')) === 0 &&
      (await countWorkflows('Completed')) - wfBefore >= n
    )
      break;
    await sleep(500);
  }
  const caughtUpSecs = r.doneSecs + (performance.now() - drainStart) / 1000;
  // The lag of each job's workflow: queued (the job row's createdAt) -> workflow started (Temporal's start time).
  const started = new Map<string, number>();
  for await (const wf of platform.ctx.temporal.workflow.list({
    query: `WorkflowType="jobWorkflow" AND StartTime >= "${t0.toISOString()}"`,
    pageSize: 1000,
  })) {
    started.set(wf.workflowId.slice('job:'.length), wf.startTime.getTime());
  }
  const ids = [...started.keys()];
  const lags: number[] = [];
  for (let i = 0; i < ids.length; i += 1000) {
    const rows = await platform.ctx.db.job.findMany({
      where: { id: { in: ids.slice(i, i + 1000) } },
      select: { id: true, createdAt: true },
    });
    for (const row of rows) lags.push((started.get(row.id) as number) - row.createdAt.getTime());
  }
  const lag = summary(lags);
  out(
    `burst of ${n} jobs, ${concurrency} clients, ${workers} workers: sent in ${r.submitSecs.toFixed(1)} s (${(n / r.submitSecs).toFixed(0)}/s, ${r.refused} refused), ` +
      `all done by workers in ${r.doneSecs.toFixed(1)} s: ${(n / r.doneSecs).toFixed(0)} jobs/s (per second: ${r.perSecondByWorkers.join(' ')}); ` +
      `most workflow signals waiting ${run.backlog.max}; every job workflow completed ${caughtUpSecs.toFixed(1)} s after the first job; ` +
      `lag queued -> workflow started (${lag.n} jobs): p50 ${(lag.p50 / 1000).toFixed(1)} s, p99 ${(lag.p99 / 1000).toFixed(1)} s, max ${(lag.max / 1000).toFixed(1)} s; CPU during the burst ${cpu}`,
  );
}

/** Bare job workflows on the same Temporal server and worker: the throughput scenarios' ceiling. */
export async function ceiling(run: Run): Promise<void> {
  // What this Temporal server and worker complete when each job is only its workflow: the floor
  // of "job workflows per second through the full path", bare and with the search attributes the
  // platform starts every job workflow with (endpoint, account, kind, status), to tell their cost apart.
  // After a throughput scenario, as many workflows as it completed: the server's rate falls as its
  // backlog grows, so the two are compared on the same amount of work.
  const { gantrySearchAttributes } = await import('../../contracts/search-attributes.ts');
  const workflows = Math.max(0, ...[...run.fullPath.values()].map((f) => f.workflows)) || undefined;
  const bare = await ceilingRun(run, 'bare', undefined, workflows);
  const withAttributes = await ceilingRun(
    run,
    "with the platform's search attributes",
    gantrySearchAttributes('job', {
      endpointId: 'ceiling-endpoint',
      accountId: 'ceiling-account',
      jobStatus: 'COMPLETED',
    }),
    workflows,
  );
  for (const [mode, { rate }] of run.fullPath)
    run.out(
      `  job workflows through the full path (/${mode}), sustained: ${rate.toFixed(0)}/s = ${((100 * rate) / withAttributes).toFixed(0)} % of the ceiling with search attributes, ${((100 * rate) / bare).toFixed(0)} % of the bare one`,
    );
}

/** One ceiling run; its sustained workflows per second. */
async function ceilingRun(
  run: Run,
  label: string,
  searchAttributes: SearchAttributePair[] | undefined,
  workflows: number | undefined,
): Promise<number> {
  const {
    bench: { platform },
    probes: { cpuNow, cpuSince },
    out,
    concurrency,
    seconds,
  } = run;
  const { jobTaskQueueOf } = await import('../../contracts/workflows.ts');
  const { finishedJobSnapshot, signalFinishedJob } = await import('../finished-job.ts');
  const prefix = `ceiling-${Date.now().toString(36)}`;
  const completed = async (): Promise<number> =>
    (
      await platform.ctx.temporal.workflow.count(
        `WorkflowId STARTS_WITH "job:${prefix}-" AND ExecutionStatus="Completed"`,
      )
    ).count;
  const before = cpuNow();
  const t = performance.now();
  const until = Date.now() + seconds * 1000;
  let sent = 0;
  const snapshot = finishedJobSnapshot();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (workflows === undefined ? Date.now() < until : sent < workflows)
        await signalFinishedJob(
          platform.ctx.temporal,
          jobTaskQueueOf('bench'),
          `${prefix}-${sent++}`,
          snapshot,
          searchAttributes,
        );
    }),
  );
  const loadSecs = (performance.now() - t) / 1000;
  const cpu = cpuSince(before, loadSecs, sent);
  let done = await completed();
  const duringLoad = done;
  while (done < sent && performance.now() - t < loadSecs * 1000 + 300_000) {
    await sleep(500);
    done = await completed();
  }
  const totalSecs = (performance.now() - t) / 1000;
  const sustained = done / totalSecs;
  out(
    `ceiling (${label}): job workflows on the same Temporal server and worker, ${concurrency} concurrent signal-with-starts ${workflows === undefined ? `for ${seconds} s` : `of ${workflows} workflows`}: ${sent} sent (${(sent / loadSecs).toFixed(0)}/s), ` +
      `${(duringLoad / loadSecs).toFixed(0)}/s completed during the load, all ${done} after ${totalSecs.toFixed(1)} s: ${sustained.toFixed(0)} workflows/s sustained; CPU during the load ${cpu}`,
  );
  return sustained;
}

/** Take latency and memory with `depth` jobs queued, against a queue of about 100. */
export async function deepQueue(run: Run, depth: number): Promise<void> {
  const {
    bench: { ask, temporalWorker },
    probes: { pendingWorkflowSignals },
    out,
  } = run;
  await ask('workers', { on: false });
  await sleep(35_000); // let the workers' long-polls run out
  const shallow = await ask<{ latency: ReturnType<typeof summary> }>('fill', { n: 300 }).then(() =>
    ask<{ latency: ReturnType<typeof summary> }>('takeLatency', { n: 200 }),
  );
  const rssShallow = rssMb(process.pid);
  const heapShallow = liveHeapMb();
  const workerRssShallow = rssMb(temporalWorker.pid as number);
  await ask('purge');
  const tFill = performance.now();
  await ask('fill', { n: depth });
  const fillSecs = (performance.now() - tFill) / 1000;
  // Each queued job's workflow start waits in memory until Temporal takes it: let that drain so
  // that what remains is what the queue itself costs.
  const drainStart = performance.now();
  while (pendingWorkflowSignals() > 0 && performance.now() - drainStart < 600_000) await sleep(500);
  const drained = (performance.now() - drainStart) / 1000;
  await sleep(10_000); // the fill's own traffic settles (PostgreSQL, Temporal timers)
  const rssDeep = rssMb(process.pid);
  const heapDeep = liveHeapMb();
  const workerRssDeep = rssMb(temporalWorker.pid as number);
  const deep = await ask<{ latency: ReturnType<typeof summary> }>('takeLatency', { n: 200 });
  out(
    `queue of ${depth}: filled at ${(depth / fillSecs).toFixed(0)}/s (their workflows all started ${drained.toFixed(0)} s later); take latency p50 ${f1(deep.latency.p50)} ms p99 ${f1(deep.latency.p99)} ms ` +
      `(queue of ~100: p50 ${f1(shallow.latency.p50)} ms p99 ${f1(shallow.latency.p99)} ms); ` +
      `API: live heap ${heapDeep.toFixed(0)} MiB (${heapShallow.toFixed(0)} MiB with ~100 queued), RSS ${rssDeep.toFixed(0)} MiB (${rssShallow.toFixed(0)} MiB); RSS of the Temporal worker ${workerRssDeep.toFixed(0)} MiB (${workerRssShallow.toFixed(0)} MiB)`,
  );
  await ask('purge');
}

/** A CPU profile of this process (the API) from now until `stop`, written to `file` (BENCH_PROFILE). */
async function startProfile(): Promise<{ stop: (file: string) => Promise<string> }> {
  const { Session } = await import('node:inspector/promises');
  const { writeFile } = await import('node:fs/promises');
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.setSamplingInterval', { interval: 100 });
  await session.post('Profiler.start');
  return {
    async stop(file) {
      const { profile } = await session.post('Profiler.stop');
      await writeFile(file, JSON.stringify(profile));
      session.disconnect();
      return file;
    },
  };
}
