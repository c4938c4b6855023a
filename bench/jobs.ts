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
 * signal-with-starts of a finished job's snapshot for --seconds, or as many as the throughput
 * scenario before it completed, nothing of Gantry's in the way; the throughput scenarios' sustained
 * workflow rate is given as a share of it). BENCH_PROFILE=<file> writes a CPU profile of the API
 * process over the latency scenario.
 *
 * This file reads the command line and runs the scenarios in order; the parts are in bench/jobs/:
 * setup.ts (the processes), load.ts (the --load process), probes.ts (what is measured),
 * scenarios.ts and stats.ts.
 */
import { cpus, totalmem } from 'node:os';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { loadAverage } from './proc.ts';
import { runLoadProcess } from './jobs/load.ts';
import { startProbes } from './jobs/probes.ts';
import { burst, ceiling, deepQueue, direct, latency, throughput, type Run } from './jobs/scenarios.ts';
import { startBench } from './jobs/setup.ts';

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

if (args.load) {
  runLoadProcess();
} else {
  await main();
}

async function main(): Promise<void> {
  const workers = Number(args.workers);
  const concurrency = Number(args.concurrency);
  const seconds = Number(args.seconds);
  const only = new Set(String(args.only).split(','));
  const bench = await startBench(workers, self);
  const probes = await startProbes(bench);
  const backlog = { max: 0 };
  const backlogSampler = setInterval(() => (backlog.max = Math.max(backlog.max, probes.pendingWorkflowSignals())), 200);
  backlogSampler.unref();

  const results: string[] = [];
  const out = (line: string): void => {
    results.push(line);
    console.log(line);
  };
  out(
    `# bench/jobs.ts ${new Date().toISOString()} — ${cpus().length} cores, ${(totalmem() / 2 ** 30).toFixed(0)} GiB, Node ${process.version}, load average before: ${loadAverage()}`,
  );
  const run: Run = { bench, probes, out, workers, concurrency, seconds, backlog, fullPath: new Map() };

  try {
    if (only.has('direct')) await direct(run, Number(args.latency));
    await bench.ask('workers', { on: true });
    await sleep(500);
    if (only.has('latency')) await latency(run, Number(args.latency), Number(args.pace));
    for (const mode of ['run', 'runsync'] as const) {
      if (only.has(`throughput-${mode}`)) await throughput(run, mode);
    }
    if (only.has('burst')) await burst(run, Number(args.burst));
    if (only.has('ceiling')) await ceiling(run);
    if (only.has('deep-queue')) await deepQueue(run, Number(args.depth));
  } finally {
    await bench.stop();
  }
  process.exit(0);
}
