/**
 * The job path under load: runsync overhead, sustained throughput with one Temporal workflow per job,
 * the same handler called directly over HTTP, and take latency and memory against a 10,000-job queue.
 *
 *   node --expose-gc --import tsx bench/jobs.ts [--seconds 30] [--workers 8] [--concurrency 64] [--pace 0] [--only a,b]
 *
 * This process runs the API (GANTRY_ROLE=api) on an embedded PostgreSQL and a Temporal dev server
 * with its SQLite file, all started here; the Temporal worker runs in its own process
 * (GANTRY_ROLE=worker, infra/start.ts); a third process (this file with --load) plays the workers (a
 * handler that returns at once) and the clients. CPU seconds per process are read from /proc.
 * Scenarios (--only): direct, latency, throughput-run, throughput-runsync, deep-queue, and, not run
 * unless named, burst (--burst jobs sent with /run by --concurrency clients to the warm workers, how
 * fast they move through the PostgreSQL queue, and how far their workflows trail) and ceiling (the
 * same Temporal server and worker process completing bare job workflows: --concurrency
 * signal-with-starts of a finished job's snapshot for --seconds, nothing of Gantry's in the way;
 * the throughput scenarios' sustained workflow rate is given as a share of it).
 */
import { fork, spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { cpus, tmpdir, totalmem } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { historyToJSON } from '@temporalio/common/lib/proto-utils.js';
import { cpuSeconds, loadAverage, rssMb } from './proc.ts';
import { BENCH_QUOTAS } from './support.ts';

const self = fileURLToPath(import.meta.url);
const { values: args } = parseArgs({
  options: {
    load: { type: 'boolean', default: false },
    seconds: { type: 'string', default: '30' },
    workers: { type: 'string', default: '8' },
    concurrency: { type: 'string', default: '64' },
    latency: { type: 'string', default: '1000' },
    // The latency scenario's client: back to back (0), or this many runsync calls per second.
    pace: { type: 'string', default: '0' },
    depth: { type: 'string', default: '10000' },
    burst: { type: 'string', default: '10000' },
    only: { type: 'string', default: 'direct,latency,throughput-run,throughput-runsync,deep-queue' },
  },
});

// ------------------------------------------------------------------ shared helpers

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] as number;
}
function summary(xs: number[]): { n: number; p50: number; p90: number; p99: number; max: number; mean: number } {
  const s = [...xs].sort((a, b) => a - b);
  const mean = s.reduce((a, b) => a + b, 0) / Math.max(1, s.length);
  return { n: s.length, p50: percentile(s, 50), p90: percentile(s, 90), p99: percentile(s, 99), max: s[s.length - 1] ?? NaN, mean };
}
const f1 = (x: number): string => (Number.isFinite(x) ? x.toFixed(1) : '-');

interface Msg {
  id: number;
  cmd: string;
  [k: string]: unknown;
}

// ------------------------------------------------------------------ the load process

if (args.load) {
  const cfg = JSON.parse(process.env.BENCH_LOAD ?? '{}') as { url: string; key: string; endpointId: string; workers: Array<{ id: string; key: string }> };
  const v2 = `${cfg.url}/v2/${cfg.endpointId}`;
  let workersOn = false;
  let workerJobs = 0;

  async function workerLoop(w: { id: string; key: string }): Promise<void> {
    while (workersOn) {
      const res = await fetch(`${v2}/job-take/${w.id}?gpu=BENCH&job_in_progress=0`, { headers: { authorization: w.key } });
      if (res.status !== 200) {
        await res.text();
        continue;
      }
      const job = (await res.json()) as { id: string; input: unknown };
      // The handler: returns at once.
      const d = await fetch(`${v2}/job-done/${w.id}/${job.id}?gpu=BENCH&isStream=false`, {
        method: 'POST',
        headers: { authorization: w.key, 'content-type': 'application/x-www-form-urlencoded' },
        body: JSON.stringify({ output: job.input }),
      });
      await d.text();
      workerJobs++;
    }
  }

  const client = (method: string, p: string, body?: unknown): Promise<Response> =>
    fetch(v2 + p, { method, headers: { authorization: `Bearer ${cfg.key}`, 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });

  const handlers: Record<string, (m: Msg) => Promise<unknown>> = {
    async workers(m) {
      const on = Boolean(m.on);
      if (on && !workersOn) {
        workersOn = true;
        for (const w of cfg.workers.slice(0, Number(m.count ?? cfg.workers.length))) void workerLoop(w);
      } else if (!on && workersOn) {
        // The loops end when their long-polls return (within the platform's hold time).
        workersOn = false;
      }
      return { on: workersOn };
    },
    async direct(m) {
      // The same handler behind a plain HTTP server: the floor any job path is compared with.
      const server = createServer((req, res) => {
        let body = '';
        req.on('data', (c: Buffer) => (body += c.toString()));
        req.on('end', () => {
          const parsed = JSON.parse(body) as { input: unknown };
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ output: parsed.input }));
        });
      });
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
      const port = (server.address() as { port: number }).port;
      const n = Number(m.n);
      const lat: number[] = [];
      for (let i = 0; i < n + 50; i++) {
        const t = performance.now();
        const r = await fetch(`http://127.0.0.1:${port}/`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ input: { i } }) });
        await r.json();
        if (i >= 50) lat.push(performance.now() - t);
      }
      // Throughput with the same concurrency as the job runs.
      const conc = Number(m.concurrency);
      let done = 0;
      const until = performance.now() + 5_000;
      await Promise.all(
        Array.from({ length: conc }, async () => {
          while (performance.now() < until) {
            const r = await fetch(`http://127.0.0.1:${port}/`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"input":{}}' });
            await r.text();
            done++;
          }
        }),
      );
      server.close();
      return { latency: summary(lat), perSecond: done / 5 };
    },
    async latency(m) {
      const n = Number(m.n);
      // 0: back to back; else one request started every 1/pace s (when the previous one has answered).
      const intervalMs = Number(m.pace) > 0 ? 1000 / Number(m.pace) : 0;
      const lat: number[] = [];
      for (let i = 0; i < n + 50; i++) {
        const t = performance.now();
        const r = await client('POST', '/runsync', { input: { i } });
        const body = (await r.json()) as { status: string };
        if (body.status !== 'COMPLETED') throw new Error(`runsync answered ${JSON.stringify(body)}`);
        if (i >= 50) lat.push(performance.now() - t);
        const rest = intervalMs - (performance.now() - t);
        if (rest > 0) await sleep(rest);
      }
      return { latency: summary(lat) };
    },
    async throughput(m) {
      const seconds = Number(m.seconds);
      const conc = Number(m.concurrency);
      const mode = String(m.mode);
      let completed = 0;
      let submitted = 0;
      const perSecond: number[] = [];
      const lat: number[] = [];
      const until = performance.now() + seconds * 1000;
      const startJobs = workerJobs;
      const ticker = setInterval(() => perSecond.push(workerJobs), 1000);
      await Promise.all(
        Array.from({ length: conc }, async () => {
          while (performance.now() < until) {
            const t = performance.now();
            if (mode === 'runsync') {
              const r = await client('POST', '/runsync', { input: { t } });
              const body = (await r.json()) as { status: string };
              if (body.status === 'COMPLETED') completed++;
              lat.push(performance.now() - t);
            } else {
              const r = await client('POST', '/run', { input: { t } });
              await r.text();
              lat.push(performance.now() - t);
            }
            submitted++;
          }
        }),
      );
      clearInterval(ticker);
      const ticks = perSecond.map((v, i) => v - (i === 0 ? startJobs : (perSecond[i - 1] as number)));
      return { submitted, completed, workerJobs: workerJobs - startJobs, perSecondByWorkers: ticks, latency: summary(lat) };
    },
    async burst(m) {
      // n jobs by `concurrency` clients at once; done when the workers have finished all of them.
      const n = Number(m.n);
      const conc = Number(m.concurrency);
      const startJobs = workerJobs;
      const t0 = performance.now();
      let sent = 0;
      let refused = 0;
      const perSecond: number[] = [];
      const ticker = setInterval(() => perSecond.push(workerJobs - startJobs), 1000);
      await Promise.all(
        Array.from({ length: conc }, async () => {
          while (sent < n) {
            sent++;
            const r = await client('POST', '/run', { input: { burst: sent } });
            await r.text();
            if (r.status !== 200) {
              // Back-pressure (429) or a quota: counted, and sent again.
              refused++;
              sent--;
              await sleep(Number(r.headers.get('retry-after') ?? '1') * 1000);
            }
          }
        }),
      );
      const submitSecs = (performance.now() - t0) / 1000;
      while (workerJobs - startJobs < n) await sleep(20);
      clearInterval(ticker);
      const doneSecs = (performance.now() - t0) / 1000;
      const ticks = perSecond.map((v, i) => v - (i === 0 ? 0 : (perSecond[i - 1] as number)));
      return { submitSecs, doneSecs, refused, perSecondByWorkers: ticks };
    },
    async fill(m) {
      const n = Number(m.n);
      let i = 0;
      await Promise.all(
        Array.from({ length: 32 }, async () => {
          while (i < n) {
            i++;
            const r = await client('POST', '/run', { input: { fill: i } });
            await r.text();
          }
        }),
      );
      return { queued: n };
    },
    async takeLatency(m) {
      // One worker takes and finishes jobs one by one: how long does a take answer take?
      const w = cfg.workers[0] as { id: string; key: string };
      const n = Number(m.n);
      const lat: number[] = [];
      for (let i = 0; i < n; i++) {
        const t = performance.now();
        const res = await fetch(`${v2}/job-take/${w.id}?gpu=BENCH&job_in_progress=0`, { headers: { authorization: w.key } });
        if (res.status !== 200) throw new Error(`take answered ${res.status}`);
        const job = (await res.json()) as { id: string };
        lat.push(performance.now() - t);
        const d = await fetch(`${v2}/job-done/${w.id}/${job.id}?isStream=false`, { method: 'POST', headers: { authorization: w.key }, body: '{"output":1}' });
        await d.text();
      }
      return { latency: summary(lat) };
    },
    async purge() {
      const r = await client('POST', '/purge-queue');
      return r.json();
    },
  };

  process.on('message', (m: Msg) => {
    const h = handlers[m.cmd];
    if (!h) return process.send?.({ id: m.id, error: `unknown command ${m.cmd}` });
    h(m).then(
      (result) => process.send?.({ id: m.id, result }),
      (err: unknown) => process.send?.({ id: m.id, error: String(err instanceof Error ? err.stack : err) }),
    );
  });
  process.send?.({ id: 0, result: 'ready' });
} else {
  await main();
}

// ------------------------------------------------------------------ the platform process

function ownCpuSeconds(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
}

/** The API's heap after a full collection (run with --expose-gc), else as it stands: what it holds, not what it has touched. */
function liveHeapMb(): number {
  (globalThis as { gc?: () => void }).gc?.();
  return process.memoryUsage().heapUsed / 2 ** 20;
}

async function main(): Promise<void> {
  const { loadConfig } = await import('../infra/config.ts');
  const { startPlatform } = await import('../infra/platform.ts');
  const { startEmbeddedPostgres } = await import('../infra/postgres.ts');
  const { resolveTemporalBinary, startTemporalDevServer } = await import('../infra/temporal.ts');
  const { registerWorkerCredential } = await import('../domain/workers/credentials.ts');
  const { randomString } = await import('../domain/shared/ids.ts');
  const { freePort } = await import('../test/support/ports.ts');

  const workers = Number(args.workers);
  const concurrency = Number(args.concurrency);
  const seconds = Number(args.seconds);
  const only = new Set(String(args.only).split(','));
  const dir = mkdtempSync(path.join(tmpdir(), 'gantry-bench-jobs-'));
  chmodSync(dir, 0o755);
  const log = (m: string): void => console.error(m);

  const pg = await startEmbeddedPostgres(path.join(dir, 'pg'), await freePort(), log);
  const binary = resolveTemporalBinary(loadConfig());
  if (!binary) throw new Error('no Temporal CLI; run npm start or npm test once');
  // The dev server as `npm start` runs it (an SQLite file in the data dir).
  const temporal = await startTemporalDevServer({ binary, port: await freePort(), uiPort: undefined, dbFile: path.join(dir, 'temporal.db'), namespace: 'default' });
  const port = await freePort();
  const adminKey = `gntr_bench_${randomString(32)}`;
  const common = {
    DATABASE_URL: pg.url,
    TEMPORAL_ADDRESS: temporal.address,
    GANTRY_ADMIN_API_KEY: adminKey,
    GANTRY_DATA_DIR: path.join(dir, 'data'),
    GANTRY_TASK_QUEUE: 'bench',
    LOG_LEVEL: 'warn',
    // One client at full speed and a deep queue: limits that never bind here.
    GANTRY_JOB_RATE_LIMITS: BENCH_QUOTAS,
    GANTRY_MAX_QUEUED_JOBS: '1000000',
  };
  // The API here (measured in this process); the Temporal worker in a process of its own, as
  // `GANTRY_ROLE=worker npm start` runs it, so that CPU and memory are told apart.
  const platform = await startPlatform(loadConfig({ ...common, PORT: String(port), GANTRY_ROLE: 'api' }), log);
  const temporalWorker = spawn(process.execPath, ['--import', 'tsx', 'infra/start.ts'], {
    env: { ...process.env, ...common, PORT: String(await freePort()), GANTRY_ROLE: 'worker' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await new Promise<void>((resolve, reject) => {
    let seen = '';
    temporalWorker.stdout?.on('data', (d: Buffer) => {
      seen += d.toString();
      if (seen.includes('Gantry is up')) resolve();
    });
    temporalWorker.once('exit', (code) => reject(new Error(`the Temporal worker process exited (${code})`)));
  });
  const url = `http://127.0.0.1:${port}`;
  const created = await fetch(`${url}/v2/serverless`, {
    method: 'POST',
    headers: { authorization: `Bearer ${adminKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'bench', image: 'localhost/bench:1', gpu: { pools: ['AMPERE_24'] }, workers: { min: 0, max: 0 } }),
  });
  const endpointId = ((await created.json()) as { id: string }).id;
  const ws: Array<{ id: string; key: string }> = [];
  for (let i = 0; i < workers; i++) {
    const id = `bench-worker-${i}`;
    await platform.ctx.db.worker.create({ data: { id, endpointId, status: 'IDLE' } });
    ws.push({ id, key: await registerWorkerCredential(platform.ctx.db, { workerId: id, endpointId }) });
  }

  const temporalPid = Number(readFileSync(`${path.join(dir, 'temporal.db')}.pid`, 'utf8'));
  const pgPid = Number(readFileSync(path.join(dir, 'pg', 'postmaster.pid'), 'utf8').split('\n')[0]);
  const load: ChildProcess = fork(self, ['--load'], {
    // The load process imports node built-ins only: plain tsx runs it whatever runs this one.
    execArgv: ['--import', 'tsx'],
    env: { ...process.env, BENCH_LOAD: JSON.stringify({ url, key: adminKey, endpointId, workers: ws }) },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  let nextId = 1;
  const pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  const ready = new Promise<void>((resolve, reject) => pending.set(0, { resolve: () => resolve(), reject }));
  load.on('message', (m: { id: number; result?: unknown; error?: string }) => {
    const p = pending.get(m.id);
    pending.delete(m.id);
    if (m.error) p?.reject(new Error(m.error));
    else p?.resolve(m.result);
  });
  load.once('exit', (code) => {
    for (const p of pending.values()) p.reject(new Error(`load process exited (${code})`));
    pending.clear();
  });
  await ready;
  const ask = <T>(cmd: string, extra: Record<string, unknown> = {}): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      const id = nextId++;
      pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
      load.send({ id, cmd, ...extra });
    });

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

  const { WorkflowSignals } = await import('../domain/jobs/workflow-signals.ts');
  /** Workflow signals the API has yet to send (coalescing, or Temporal behind). */
  const pendingWorkflowSignals = (): number => platform.ctx.jobs?.signals.size ?? 0;
  const { JobStore } = await import('../domain/jobs/queue.ts');
  // Where the time goes inside the platform: each queue statement and each workflow signal, timed.
  const timings = new Map<string, number[]>();
  const timed = (proto: object, names: string[], prefix: string): void => {
    for (const name of names) {
      const original = (proto as Record<string, (...a: unknown[]) => Promise<unknown>>)[name] as (...a: unknown[]) => Promise<unknown>;
      (proto as Record<string, unknown>)[name] = async function (this: unknown, ...a: unknown[]) {
        const t = performance.now();
        try {
          return await original.apply(this, a);
        } finally {
          const list = timings.get(prefix + name) ?? [];
          list.push(performance.now() - t);
          timings.set(prefix + name, list);
        }
      };
    }
  };
  timed(JobStore.prototype, ['insert', 'take', 'finish', 'get', 'clearSignalDue'], 'sql.');
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
    const ACTIONS = new Set(['WORKFLOW_EXECUTION_STARTED', 'WORKFLOW_EXECUTION_SIGNALED', 'ACTIVITY_TASK_SCHEDULED', 'TIMER_STARTED', 'UPSERT_WORKFLOW_SEARCH_ATTRIBUTES', 'MARKER_RECORDED']);
    let jobs = 0;
    let events = 0;
    let tasks = 0;
    let actions = 0;
    for await (const wf of platform.ctx.temporal.workflow.list({ query: 'WorkflowType="jobWorkflow" AND ExecutionStatus="Completed"', pageSize: 50 })) {
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
    const io = await platform.ctx.db.$queryRawUnsafe<Array<{ n: number }>>(`SELECT coalesce(sum(fsyncs), 0)::float8 AS n FROM pg_stat_io WHERE object = 'wal'`).catch(() => null);
    if (io) return io[0]?.n ?? NaN;
    return (await platform.ctx.db.$queryRawUnsafe<Array<{ n: number }>>('SELECT wal_sync::float8 AS n FROM pg_stat_wal'))[0]?.n ?? NaN;
  };
  let maxBacklog = 0;
  /** Job workflows completed per second over each throughput scenario's load and drain. */
  const fullPathSustained = new Map<string, number>();
  const backlogSampler = setInterval(() => (maxBacklog = Math.max(maxBacklog, pendingWorkflowSignals())), 200);
  backlogSampler.unref();

  const results: string[] = [];
  const out = (line: string): void => {
    results.push(line);
    console.log(line);
  };
  out(`# bench/jobs.ts ${new Date().toISOString()} — ${cpus().length} cores, ${(totalmem() / 2 ** 30).toFixed(0)} GiB, Node ${process.version}, load average before: ${loadAverage()}`);

  try {
    if (only.has('direct')) {
      const r = await ask<{ latency: ReturnType<typeof summary>; perSecond: number }>('direct', { n: Number(args.latency), concurrency });
      out(`direct HTTP handler: p50 ${f1(r.latency.p50)} ms, p99 ${f1(r.latency.p99)} ms, ${r.perSecond.toFixed(0)} req/s at concurrency ${concurrency}`);
    }
    await ask('workers', { on: true });
    await sleep(500);
    if (only.has('latency')) {
      const flushesBefore = await walFlushes();
      const before = cpuNow();
      const t = performance.now();
      timings.clear();
      const pace = Number(args.pace);
      const r = await ask<{ latency: ReturnType<typeof summary> }>('latency', { n: Number(args.latency), pace });
      const secs = (performance.now() - t) / 1000;
      out(
        `runsync overhead, 1 client ${pace > 0 ? `at ${pace} jobs/s` : 'back to back'}, ${workers} warm workers, handler returns at once: p50 ${f1(r.latency.p50)} ms, p90 ${f1(r.latency.p90)} ms, p99 ${f1(r.latency.p99)} ms, max ${f1(r.latency.max)} ms (n=${r.latency.n}); CPU ${cpuSince(before, secs, r.latency.n)}`,
      );
      out(`  inside: ${timingReport()}`);
      // The 50 warm-up calls count too; the background tasks' own commits (a few per second) are in it.
      out(`  PostgreSQL WAL flushes per job: ${(((await walFlushes()) - flushesBefore) / (r.latency.n + 50)).toFixed(2)}`);
      out(`  ${await temporalPerJob()}`);
    }
    for (const mode of ['run', 'runsync'] as const) {
      if (!only.has(`throughput-${mode}`)) continue;
      const wfBefore = await countWorkflows('Completed');
      maxBacklog = 0;
      timings.clear();
      const before = cpuNow();
      const t = performance.now();
      const r = await ask<{ submitted: number; completed: number; workerJobs: number; perSecondByWorkers: number[]; latency: ReturnType<typeof summary> }>('throughput', {
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
          `(sustained with one workflow per job: ${(wfDone / (secs + drain)).toFixed(0)} jobs/s; most signals waiting ${maxBacklog}); CPU during the load ${cpu}`,
      );
      out(`  CPU over the load and the drain, per job workflow completed: ${cpuSince(before, secs + drain, wfDone)}`);
      fullPathSustained.set(mode, wfDone / (secs + drain));
      out(`  ${await temporalPerJob()}`);
      out(`  inside: ${timingReport()}`);
    }
    if (only.has('burst')) {
      const n = Number(args.burst);
      const wfBefore = await countWorkflows('Completed');
      const t0 = new Date();
      const before = cpuNow();
      maxBacklog = 0;
      const r = await ask<{ submitSecs: number; doneSecs: number; refused: number; perSecondByWorkers: number[] }>('burst', { n, concurrency });
      const cpu = cpuSince(before, r.doneSecs, n);
      // The workflows catch up: every one started and completed.
      const drainStart = performance.now();
      while (performance.now() - drainStart < 600_000) {
        if (pendingWorkflowSignals() === 0 && (await countWorkflows('Running')) === 0 && (await countWorkflows('Completed')) - wfBefore >= n) break;
        await sleep(500);
      }
      const caughtUpSecs = r.doneSecs + (performance.now() - drainStart) / 1000;
      // The lag of each job's workflow: queued (the job row's createdAt) -> workflow started (Temporal's start time).
      const started = new Map<string, number>();
      for await (const wf of platform.ctx.temporal.workflow.list({ query: `WorkflowType="jobWorkflow" AND StartTime >= "${t0.toISOString()}"`, pageSize: 1000 })) {
        started.set(wf.workflowId.slice('job:'.length), wf.startTime.getTime());
      }
      const ids = [...started.keys()];
      const lags: number[] = [];
      for (let i = 0; i < ids.length; i += 1000) {
        const rows = await platform.ctx.db.job.findMany({ where: { id: { in: ids.slice(i, i + 1000) } }, select: { id: true, createdAt: true } });
        for (const row of rows) lags.push((started.get(row.id) as number) - row.createdAt.getTime());
      }
      const lag = summary(lags);
      out(
        `burst of ${n} jobs, ${concurrency} clients, ${workers} workers: sent in ${r.submitSecs.toFixed(1)} s (${(n / r.submitSecs).toFixed(0)}/s, ${r.refused} refused), ` +
          `all done by workers in ${r.doneSecs.toFixed(1)} s: ${(n / r.doneSecs).toFixed(0)} jobs/s (per second: ${r.perSecondByWorkers.join(' ')}); ` +
          `most workflow signals waiting ${maxBacklog}; every job workflow completed ${caughtUpSecs.toFixed(1)} s after the first job; ` +
          `lag queued -> workflow started (${lag.n} jobs): p50 ${(lag.p50 / 1000).toFixed(1)} s, p99 ${(lag.p99 / 1000).toFixed(1)} s, max ${(lag.max / 1000).toFixed(1)} s; CPU during the burst ${cpu}`,
      );
    }
    if (only.has('ceiling')) {
      // What this Temporal server and worker complete when each job is only its workflow: the floor
      // of "job workflows per second through the full path".
      const { jobTaskQueueOf } = await import('../contracts/workflows.ts');
      const { finishedJobSnapshot, signalFinishedJob } = await import('./finished-job.ts');
      const prefix = `ceiling-${Date.now().toString(36)}`;
      const completed = async (): Promise<number> => (await platform.ctx.temporal.workflow.count(`WorkflowId STARTS_WITH "job:${prefix}-" AND ExecutionStatus="Completed"`)).count;
      const before = cpuNow();
      const t = performance.now();
      const until = Date.now() + seconds * 1000;
      let sent = 0;
      const snapshot = finishedJobSnapshot();
      await Promise.all(
        Array.from({ length: concurrency }, async () => {
          while (Date.now() < until) await signalFinishedJob(platform.ctx.temporal, jobTaskQueueOf('bench'), `${prefix}-${sent++}`, snapshot);
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
        `ceiling: bare job workflows on the same Temporal server and worker, ${concurrency} concurrent signal-with-starts for ${seconds} s: ${sent} sent (${(sent / loadSecs).toFixed(0)}/s), ` +
          `${(duringLoad / loadSecs).toFixed(0)}/s completed during the load, all ${done} after ${totalSecs.toFixed(1)} s: ${sustained.toFixed(0)} workflows/s sustained; CPU during the load ${cpu}`,
      );
      for (const [mode, rate] of fullPathSustained) out(`  job workflows through the full path (/${mode}), sustained: ${rate.toFixed(0)}/s = ${((100 * rate) / sustained).toFixed(0)} % of the ceiling`);
    }
    if (only.has('deep-queue')) {
      const depth = Number(args.depth);
      await ask('workers', { on: false });
      await sleep(35_000); // let the workers' long-polls run out
      const shallow = await ask<{ latency: ReturnType<typeof summary> }>('fill', { n: 300 }).then(() => ask<{ latency: ReturnType<typeof summary> }>('takeLatency', { n: 200 }));
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
  } finally {
    load.kill('SIGKILL');
    await platform.stop();
    temporalWorker.kill('SIGTERM');
    await new Promise((r) => (temporalWorker.exitCode !== null ? r(null) : temporalWorker.once('exit', r)));
    await temporal.stop();
    await pg.stop();
    if (existsSync(dir)) rmSync(dir, { recursive: true, force: true });
  }
  process.exit(0);
}
