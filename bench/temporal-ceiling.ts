/**
 * The ceiling one workflow per job puts on job throughput: how many job workflows per second the
 * Temporal dev server (as `npm start` runs it: SQLite file, WAL) starts and completes on this
 * machine when nothing else runs, with no API, no PostgreSQL and no job workers in the way.
 *
 *   node --import tsx bench/temporal-ceiling.ts [--seconds 20] [--concurrency 64] [--memory]
 *     [--call signal-with-start|start|eager] [--worker-options JSON] [--dynamic-config KEY=VALUE ...]
 *     [--address HOST:PORT --server-pid PID]
 *
 * Each "job" is what Gantry sends for a job that was queued, taken and finished within the signal
 * coalescing window: one signal-with-start of `jobWorkflow` carrying the terminal snapshot; the
 * workflow completes in its first workflow task. The Temporal worker (Gantry's workflow bundle, no
 * activities needed) runs in a process of its own. Variants: `--memory` keeps the dev server's state
 * in memory; `--call start` passes the snapshot as the workflow's input (no signal), `--call eager`
 * also asks for eager start (the worker then runs in this process); `--address` measures a Temporal
 * server already running (a cluster) instead of starting the dev server.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, tmpdir, totalmem } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { finishedJobSnapshot, signalFinishedJob } from './finished-job.ts';
import { cpuSeconds, loadAverage } from './proc.ts';

const { values: args } = parseArgs({
  options: {
    worker: { type: 'string' },
    seconds: { type: 'string', default: '20' },
    concurrency: { type: 'string', default: '64' },
    memory: { type: 'boolean', default: false },
    // Worker options over Gantry's, as JSON: e.g. '{"maxConcurrentWorkflowTaskPolls":20}'.
    'worker-options': { type: 'string', default: '{}' },
    call: { type: 'string', default: 'signal-with-start' },
    // A Temporal server already running (a cluster) instead of the dev server, and its process for CPU figures.
    address: { type: 'string' },
    'server-pid': { type: 'string' },
    'dynamic-config': { type: 'string', multiple: true, default: [] },
  },
});
const TASK_QUEUE = 'bench-ceiling';

async function createWorker(connection: import('@temporalio/worker').NativeConnection) {
  const { Worker } = await import('@temporalio/worker');
  const { workflowBundle } = await import('../workers/temporal-worker.ts');
  // The options Gantry's worker uses (workers/temporal-worker.ts); job workflows that end at once call no activity.
  return Worker.create({
    connection,
    namespace: 'default',
    taskQueue: TASK_QUEUE,
    workflowBundle: await workflowBundle(),
    maxCachedWorkflows: 500,
    ...(JSON.parse(String(args['worker-options'])) as object),
  });
}

async function runWorker(address: string): Promise<void> {
  const { NativeConnection } = await import('@temporalio/worker');
  const connection = await NativeConnection.connect({ address });
  const worker = await createWorker(connection);
  process.send?.('ready');
  process.once('disconnect', () => worker.shutdown());
  await worker.run();
  await connection.close();
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}

async function main(): Promise<void> {
  const { Client, Connection } = await import('@temporalio/client');
  const { loadConfig } = await import('../infra/config.ts');
  const { resolveTemporalBinary, startTemporalDevServer } = await import('../infra/temporal.ts');
  const { freePort } = await import('../test/support/ports.ts');
  const { jobWorkflowId } = await import('../contracts/workflows.ts');
  const seconds = Number(args.seconds);
  const concurrency = Number(args.concurrency);

  const dir = mkdtempSync(path.join(tmpdir(), 'gantry-bench-ceiling-'));
  const dbFile = args.memory ? undefined : path.join(dir, 'temporal.db');
  const startDevServer = async () => {
    const binary = resolveTemporalBinary(loadConfig());
    if (!binary) throw new Error('no Temporal CLI: run `npm test` once, or set TEMPORAL_CLI_PATH');
    const extraArgs = (args['dynamic-config'] ?? []).flatMap((v) => ['--dynamic-config-value', v]);
    return startTemporalDevServer({
      binary,
      port: await freePort(),
      uiPort: undefined,
      dbFile,
      namespace: 'default',
      extraArgs,
    });
  };
  const temporal = args.address
    ? { address: args.address, pid: Number(args['server-pid']), stop: async () => {} }
    : await startDevServer();
  const serverPid = temporal.pid as number;
  const call = String(args.call);
  if (!['signal-with-start', 'start', 'eager'].includes(call))
    throw new Error(`--call: signal-with-start, start or eager, not ${call}`);
  let worker: ChildProcess | undefined;
  let localWorker: Awaited<ReturnType<typeof createWorker>> | undefined;
  let localRun: Promise<void> | undefined;
  try {
    let client: InstanceType<typeof Client>;
    let closeConnection: () => Promise<void>;
    if (call === 'eager') {
      // Eager start hands the first workflow task to a worker in the starting process, on the same connection.
      const { NativeConnection } = await import('@temporalio/worker');
      const native = await NativeConnection.connect({ address: temporal.address });
      localWorker = await createWorker(native);
      localRun = localWorker.run();
      client = new Client({ connection: native, namespace: 'default' });
      closeConnection = async () => {
        localWorker?.shutdown();
        await localRun;
        await native.close();
      };
    } else {
      worker = fork(
        fileURLToPath(import.meta.url),
        ['--worker', temporal.address, '--worker-options', String(args['worker-options'])],
        { execArgv: ['--import', 'tsx'] },
      );
      await new Promise<void>((resolve, reject) => {
        worker?.once('message', () => resolve());
        worker?.once('exit', (code) => reject(new Error(`the Temporal worker exited (${code})`)));
      });
      const connection = await Connection.connect({ address: temporal.address });
      client = new Client({ connection, namespace: 'default' });
      closeConnection = () => connection.close();
    }
    // This run's job workflows only (a cluster may hold earlier runs').
    const run = `bench-${Date.now().toString(36)}`;
    const completedCount = async (): Promise<number> =>
      (await client.workflow.count(`WorkflowId STARTS_WITH "job:${run}-" AND ExecutionStatus="Completed"`)).count;

    console.log(
      `# bench/temporal-ceiling.ts ${new Date().toISOString()} — ${cpus().length} cores, ${(totalmem() / 2 ** 30).toFixed(0)} GiB, Node ${process.version}, load average before: ${loadAverage()}`,
    );
    console.log(
      `${args.address ? `Temporal server at ${args.address}` : `dev server state: ${dbFile ? 'SQLite file, WAL, synchronous=normal' : 'in memory'}`}; ${concurrency} concurrent calls (${call}) for ${seconds} s`,
    );

    const cpu = {
      server: () => cpuSeconds(serverPid),
      worker: () => (worker ? cpuSeconds(worker.pid as number) : 0),
      client: () => process.cpuUsage().user / 1e6 + process.cpuUsage().system / 1e6,
    };
    const cpuNow = () => ({ server: cpu.server(), worker: cpu.worker(), client: cpu.client() });
    const cpu0 = cpuNow();
    const latencies: number[] = [];
    let sent = 0;
    let next = 0;
    const start = Date.now();
    const until = start + seconds * 1000;
    const snapshot = finishedJobSnapshot();
    const loops = Array.from({ length: concurrency }, async () => {
      while (Date.now() < until) {
        const jobId = `${run}-${next++}`;
        const t = performance.now();
        if (call === 'signal-with-start') {
          await signalFinishedJob(client, TASK_QUEUE, jobId, snapshot);
        } else {
          // The snapshot as the workflow's input: no signal event.
          await client.workflow.start('jobWorkflow', {
            workflowId: jobWorkflowId(jobId),
            taskQueue: TASK_QUEUE,
            args: [{ jobId, lostAfterMs: 60_000, snapshot }],
            requestEagerStart: call === 'eager',
          });
        }
        latencies.push(performance.now() - t);
        sent++;
      }
    });
    await Promise.all(loops);
    const loadMs = Date.now() - start;
    const completedInLoad = await completedCount();
    const cpu1 = cpuNow();
    // Then let the backlog drain.
    let completed = completedInLoad;
    const drainUntil = Date.now() + 120_000;
    while (completed < sent && Date.now() < drainUntil) {
      await sleep(500);
      completed = await completedCount();
    }
    const totalMs = Date.now() - start;
    latencies.sort((a, b) => a - b);
    const rate = (n: number, ms: number): string => `${((n * 1000) / ms).toFixed(0)}/s`;
    console.log(
      `${call}: ${sent} in ${(loadMs / 1000).toFixed(1)} s = ${rate(sent, loadMs)}; p50 ${percentile(latencies, 50).toFixed(1)} ms, p99 ${percentile(latencies, 99).toFixed(1)} ms`,
    );
    console.log(
      `job workflows completed: ${completedInLoad} during the load (${rate(completedInLoad, loadMs)}); all ${completed} of ${sent} after ${(totalMs / 1000).toFixed(1)} s (${rate(completed, totalMs)} overall)`,
    );
    const perJob = (k: keyof typeof cpu0): string =>
      `${(((cpu1[k] - cpu0[k]) * 1000) / Math.max(1, sent)).toFixed(2)} ms`;
    const share = (k: keyof typeof cpu0): string => `${(((cpu1[k] - cpu0[k]) * 100000) / loadMs).toFixed(0)}%`;
    console.log(
      `CPU during the load (share of one core; per job sent): server ${share('server')} (${perJob('server')}), worker ${share('worker')} (${perJob('worker')}), client ${share('client')}${call === 'eager' ? ' (the worker included)' : ''} (${perJob('client')})`,
    );
    const cpu2 = cpuNow();
    const whole = (k: keyof typeof cpu0): string =>
      `${(((cpu2[k] - cpu0[k]) * 1000) / Math.max(1, completed)).toFixed(1)} ms`;
    console.log(
      `CPU per completed job workflow over the load and the drain: server ${whole('server')}, worker ${whole('worker')}, client ${whole('client')}`,
    );
    await closeConnection();
  } finally {
    if (worker?.connected) worker.disconnect();
    await new Promise((resolve) =>
      worker && worker.exitCode === null ? worker.once('exit', resolve) : resolve(undefined),
    );
    await temporal.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (args.worker) await runWorker(args.worker);
else await main();
