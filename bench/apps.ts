/**
 * Apps: from `gantry deploy` to the first answered call, and what one worker of the Python runtime
 * gets through. Run by hand:
 *   node tooling/bootstrap.mjs node --import tsx bench/apps.ts [runs=1] [jobs=1000]
 *
 * Each run brings up the whole platform (embedded PostgreSQL and Temporal dev server in a temporary
 * data dir, production loop settings), an SSH test host in front of this machine's Podman, and the
 * real CLI (cli/bin/gantry.mjs, a child process with a HOME of its own), then measures:
 *
 * 1. deploy to first answer of the CPU template: build, upload and release as `deploy --json`
 *    reports them, then the first /run polled every 50 ms (cold: the host builds the runtime image
 *    when it has none, starts the container, the runtime downloads the artifact, the first job), as a
 *    ratio to the same job on the warm worker (/runsync, median of 20). Once with no runtime image on
 *    the host, once with it cached (another app: a fresh endpoint with no worker), and a redeploy of
 *    a one-line change;
 * 2. one worker's throughput on a 10 ms function and on a 0 ms one: N jobs through /run, 32
 *    submissions in flight, completion read from the Job table; floor 1 / 10 ms = 100 jobs/s.
 */
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { liveWorker } from '../domain/workers/index.ts';
import { containerNameOf, podVolumePrefix } from '../hostctl/containers.ts';
import type { Platform } from '../infra/platform.ts';
import { ensurePythonBaseImage } from '../test/support/python-base-image.ts';
import { startSshTestHost, type SshTestHost } from '../test/support/ssh-test-host.ts';
import { cpuSeconds, loadAverage } from './proc.ts';
import { appsBenchSettings, startEmbeddedPlatform } from './support.ts';

const runs = Number(process.argv[2] ?? 1);
const jobCount = Number(process.argv[3] ?? 1000);
const IN_FLIGHT = 32;
const FLOOR_CALLS = 20;
const gantryBin = path.join(path.dirname(fileURLToPath(import.meta.url)), '../cli/bin/gantry.mjs');

type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any -- the API's and the CLI's JSON, read loosely

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};
const sec = (ms: number): string => `${(ms / 1000).toFixed(1)} s`;

async function until<T>(
  what: string,
  fn: () => Promise<T | undefined | null | false>,
  timeoutMs = 600_000,
  everyMs = 100,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(everyMs);
  }
}

function podman(args: string[]): string {
  const r = spawnSync('podman', args, { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`podman ${args.join(' ')}: ${r.stderr.trim()}`);
  return r.stdout;
}

/** The first case needs a host without the runtime image: the host then builds it on the first worker start. */
function removeRuntimeImages(): string[] {
  const names = podman(['images', '--format', '{{.Repository}}:{{.Tag}}', 'localhost/gantry-runtime'])
    .split('\n')
    .filter(Boolean);
  if (names.length) podman(['rmi', ...names]);
  return names;
}

/** CPU seconds of this process's children by command name (PostgreSQL, Temporal, sshd and what it runs), and of this process. */
function cpuByPart(): Record<string, number> {
  const parts: Record<string, number> = { platform: process.cpuUsage().user / 1e6 + process.cpuUsage().system / 1e6 };
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) !== process.pid) continue;
      const name = readFileSync(`/proc/${d}/comm`, 'utf8').trim();
      parts[name] = (parts[name] ?? 0) + cpuSeconds(Number(d));
    } catch {
      // gone meanwhile
    }
  }
  return parts;
}

/**
 * Waits until the platform is quiet (this process tree under a quarter of a core for a second), so
 * one measurement does not pay for the last one's leftovers: the job workflows trail the jobs.
 */
async function settle(maxMs = 180_000): Promise<number> {
  const started = Date.now();
  let before = cpuSeconds(process.pid);
  for (;;) {
    await sleep(1000);
    const now = cpuSeconds(process.pid);
    if (now - before < 0.25 || Date.now() - started > maxMs) return Date.now() - started;
    before = now;
  }
}

interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
  ms: number;
}

function gantry(args: string[], cwd: string, env: Record<string, string>): Promise<CliRun> {
  const started = performance.now();
  const childEnv: NodeJS.ProcessEnv = { ...process.env, ...env };
  // What would make the CLI read this machine's settings instead of the bench's.
  for (const name of ['GANTRY_PYTHON', 'GANTRY_MAX_ARTIFACT_BYTES', 'SOURCE_DATE_EPOCH']) delete childEnv[name];
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [gantryBin, ...args], {
      cwd,
      env: childEnv,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.once('error', reject);
    child.once('close', (code) => resolve({ code: code ?? 1, stdout, stderr, ms: performance.now() - started }));
  });
}

interface Deployed {
  url: string;
  endpointId: string;
  buildMs: number;
  uploadMs: number;
  releaseMs: number;
  /** The CLI process from spawn to exit: the three above plus its own start (tsx) and the app look-up. */
  cliMs: number;
  /** Deployment.createdAt -> finishedAt: the deploy workflow alone, without the CLI's 1 s polls. */
  workflowMs: number;
}

interface Run {
  load: string[];
  cold: FirstCall & Deployed;
  cached: FirstCall & Deployed;
  redeployIdle: Deployed;
  sleepy: Deployed;
  sleepyReadyMs: number;
  sleep10: Batch;
  sleep0: Batch;
  redeployRolling: Deployed;
}

interface FirstCall {
  firstCallMs: number;
  floorMs: number;
  /** Where the first call went, from the records and the container: ms from the job's creation. */
  split: Record<string, number>;
}

interface Batch {
  jobs: number;
  submitMs: number;
  /** First submit -> last completion. */
  wallMs: number;
  /** The worker's first take -> its last completion. */
  workerSpanMs: number;
  /** Sum of take -> done over the span: the share of its time the worker held a job. */
  busy: number;
  medianHeldMs: number;
  workerCpuMsPerJob: number;
  platformCpuMsPerJob: Record<string, number>;
  /** The same until the platform is quiet again: with the job workflows that trailed the jobs. */
  platformCpuMsPerJobWithCatchUp: Record<string, number>;
  /** After the last completion, until the platform is quiet again (job workflows catching up). */
  quietAfterMs: number;
}

async function oneRun(run: number): Promise<Run> {
  const root = mkdtempSync(path.join(tmpdir(), 'gantry-bench-apps-'));
  // The embedded PostgreSQL runs as the postgres user when this runs as root: it must reach the dir.
  chmodSync(root, 0o755);
  const load = [`start ${loadAverage()}`];
  let sshHost: SshTestHost | undefined;
  let platform: Platform | undefined;
  let hostId: string | undefined;
  try {
    sshHost = await startSshTestHost({ log: (m) => console.error(m) });
    const removed = removeRuntimeImages();
    console.error(`run ${run}: removed ${removed.length ? removed.join(', ') : 'no runtime image (none there)'}`);
    const adminKey = `gntr_bench_${Date.now()}_0123456789abcdef`;
    const started = await startEmbeddedPlatform(
      path.join(root, 'data'),
      adminKey,
      appsBenchSettings(path.join(root, 'host-cache')),
    );
    const p = started.platform;
    platform = p;
    const db = p.ctx.db;
    const base = started.base;
    const headers = { authorization: `Bearer ${adminKey}`, 'content-type': 'application/json' };
    const api = async (method: string, url: string, body?: unknown): Promise<{ status: number; body: Json }> => {
      const res = await fetch(url.startsWith('http') ? url : base + url, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await res.text();
      return { status: res.status, body: text ? JSON.parse(text) : undefined };
    };

    const host = await api('POST', '/v2/hosts', {
      name: 'bench-apps',
      address: sshHost.host,
      port: sshHost.port,
      privateKey: sshHost.privateKey,
      dataCenterId: 'local',
      labels: { 'gantry.io/cpu-overcommit': '32' },
    });
    if (host.body?.status !== 'READY') throw new Error(`host not READY: ${JSON.stringify(host.body)}`);
    hostId = host.body.id as string;

    const cliEnv = {
      HOME: path.join(root, 'home'),
      XDG_CONFIG_HOME: path.join(root, 'home', '.config'),
      SERVICE_API_KEY: adminKey,
      GANTRY_API_URL: base,
    };
    mkdirSync(cliEnv.HOME, { recursive: true });
    const cli = async (args: string[], cwd: string): Promise<CliRun> => {
      const r = await gantry(args, cwd, cliEnv);
      if (r.code !== 0) throw new Error(`gantry ${args.join(' ')} exited ${r.code}:\n${r.stderr}`);
      return r;
    };
    const deploy = async (dir: string, app: string): Promise<Deployed> => {
      const r = await cli(['deploy', '--json', '--app', app], dir);
      const out = JSON.parse(r.stdout) as Json;
      if (out.deployment.status !== 'SUCCEEDED') throw new Error(`deploy of ${app}: ${JSON.stringify(out.deployment)}`);
      const d = await db.deployment.findUniqueOrThrow({ where: { id: out.deployment.id } });
      return {
        url: out.deployment.endpoints[0].url,
        endpointId: out.deployment.endpoints[0].id,
        ...out.timings,
        cliMs: r.ms,
        workflowMs: d.finishedAt!.getTime() - d.createdAt.getTime(),
      };
    };

    // What the client sees: /run, then /status every 50 ms, as a user script would poll.
    const runAndPoll = async (url: string, input: unknown): Promise<{ id: string; ms: number; body: Json }> => {
      const started = performance.now();
      const submitted = await api('POST', `${url}/run`, { input });
      if (submitted.status !== 200)
        throw new Error(`/run answered ${submitted.status}: ${JSON.stringify(submitted.body)}`);
      const id = submitted.body.id as string;
      const body = await until(
        `job ${id}`,
        async () => {
          const s = await api('GET', `${url}/status/${id}`);
          if (['FAILED', 'CANCELLED', 'TIMED_OUT'].includes(s.body?.status))
            throw new Error(`job ${id}: ${JSON.stringify(s.body)}`);
          return s.body?.status === 'COMPLETED' ? s.body : undefined;
        },
        600_000,
        50,
      );
      return { id, ms: performance.now() - started, body };
    };

    /** The first call on a fresh endpoint, where its time went, and the warm floor right after. */
    const firstCall = async (d: Deployed): Promise<FirstCall & Deployed> => {
      const clientStart = Date.now();
      const first = await runAndPoll(d.url, { a: 1, b: 2 });
      if (first.body.output?.sum !== 3) throw new Error(`unexpected answer ${JSON.stringify(first.body)}`);
      const job = await db.job.findUniqueOrThrow({ where: { id: first.id } });
      const worker = await db.worker.findUniqueOrThrow({ where: { id: job.workerId! } });
      const t0 = job.createdAt.getTime();
      const split: Record<string, number> = {
        'client /run sent': clientStart - t0,
        'worker row (autoscaler)': worker.createdAt.getTime() - t0,
        'container start issued (after the image check or build)': worker.startedAt!.getTime() - t0,
      };
      // The container's own steps, from Podman's start time and the runtime's timestamped log lines.
      const name = containerNameOf(worker.id);
      split['container running'] =
        Math.round(Number(podman(['inspect', '--format', '{{.State.StartedAt.UnixNano}}', name]).trim()) / 1e6) - t0;
      const steps: Array<[RegExp, string]> = [
        [/^artifact \S+ downloaded/, 'artifact downloaded and extracted'],
        [/^imported /, 'function imported'],
        [/^worker \S+ serving/, 'job loop started'],
      ];
      for (const line of podman(['logs', '--timestamps', name]).split('\n')) {
        const m = /^(\S+) gantry: (.*)$/.exec(line);
        const step = m && steps.find(([re]) => re.test(m[2]!));
        if (m && step) split[step[1]] = Date.parse(m[1]!) - t0;
      }
      split['job taken'] = job.startedAt!.getTime() - t0;
      split['job done'] = job.completedAt!.getTime() - t0;
      split['client saw COMPLETED'] = Math.round(clientStart + first.ms - t0);

      const floor: number[] = [];
      for (let i = 0; i < FLOOR_CALLS; i++) {
        const started = performance.now();
        const r = await api('POST', `${d.url}/runsync`, { input: { a: 1, b: 2 } });
        if (r.body?.status !== 'COMPLETED') throw new Error(`warm /runsync: ${JSON.stringify(r.body)}`);
        floor.push(performance.now() - started);
      }
      return { ...d, firstCallMs: first.ms, floorMs: median(floor), split };
    };

    // ------------------------------------------------------------ 1. deploy to first answer
    await cli(['init', 'shop'], root);
    const shop = path.join(root, 'shop');
    rmSync(path.join(shop, 'gpu_worker.py'));
    rmSync(path.join(shop, 'lb_worker.py'));
    const cpuFile = path.join(shop, 'cpu_worker.py');
    const template = readFileSync(cpuFile, 'utf8');
    // Each case gets its own artifact (a comment differs), so every first call downloads one as a new deploy would.
    writeFileSync(cpuFile, `${template}\n# bench: cold image\n`);
    const cold = await firstCall(await deploy(shop, 'bench-cold'));
    load.push(`after cold ${loadAverage()}`);
    writeFileSync(cpuFile, `${template}\n# bench: cached image\n`);
    const cached = await firstCall(await deploy(shop, 'bench-cached'));
    load.push(`after cached ${loadAverage()}`);
    // A redeploy with nothing to replace: the endpoint's worker has gone idle and stopped.
    await until(
      'the cached endpoint to have no worker',
      async () => (await db.worker.count({ where: { endpointId: cached.endpointId, ...liveWorker } })) === 0,
      180_000,
      500,
    );
    writeFileSync(
      cpuFile,
      `${template.replace('return {"sum": a + b}', 'return {"sum": a + b, "version": 2}')}\n# bench: cached image\n`,
    );
    const redeployIdle = await deploy(shop, 'bench-cached');

    // ------------------------------------------------------------ 2. one worker's throughput
    await cli(['init', 'sleepy'], root);
    const sleepyDir = path.join(root, 'sleepy');
    for (const f of ['gpu_worker.py', 'lb_worker.py', 'cpu_worker.py']) rmSync(path.join(sleepyDir, f));
    const sleepySource = (answer: string): string =>
      [
        'import time',
        '',
        'from gantry import endpoint',
        '',
        '',
        '@endpoint(name="sleepy", cpu="cpu3c-2-4", workers=(1, 1))',
        'def sleepy(seconds: float = 0.01) -> dict:',
        '    """Sleeps (10 ms unless told), then answers a small dict."""',
        '    time.sleep(seconds)',
        `    return ${answer}`,
        '',
      ].join('\n');
    writeFileSync(path.join(sleepyDir, 'sleepy.py'), sleepySource('{"slept": seconds}'));
    const sleepy = await deploy(sleepyDir, 'bench-sleepy');
    const readyStarted = performance.now();
    await until(
      'the sleepy worker to answer',
      async () => (await api('POST', `${sleepy.url}/runsync`, { input: {} })).body?.status === 'COMPLETED',
      600_000,
      200,
    );
    const sleepyReadyMs = performance.now() - readyStarted;
    const sleepyWorker = await until('its worker', () =>
      db.worker.findFirst({
        where: { endpointId: sleepy.endpointId, ...liveWorker, status: { in: ['IDLE', 'RUNNING'] } },
      }),
    );
    const workerPid = Number(
      podman(['inspect', '--format', '{{.State.Pid}}', containerNameOf(sleepyWorker.id)]).trim(),
    );

    const batch = async (seconds: number): Promise<Batch> => {
      await settle();
      const cpuBefore = cpuByPart();
      const workerCpuBefore = cpuSeconds(workerPid);
      const started = Date.now();
      const ids: string[] = [];
      let next = 0;
      await Promise.all(
        Array.from({ length: IN_FLIGHT }, async () => {
          while (next < jobCount) {
            next++;
            const r = await api('POST', `${sleepy.url}/run`, { input: { seconds } });
            if (r.status !== 200) throw new Error(`/run answered ${r.status}: ${JSON.stringify(r.body)}`);
            ids.push(r.body.id as string);
          }
        }),
      );
      const submitMs = Date.now() - started;
      await until(
        `${jobCount} jobs`,
        async () => {
          // This batch's jobs are the endpoint's jobs made since it started: no 1,000-id lists in the polls.
          const mine = { endpointId: sleepy.endpointId, createdAt: { gte: new Date(started) } };
          const failed = await db.job.count({
            where: { ...mine, status: { notIn: ['IN_QUEUE', 'IN_PROGRESS', 'COMPLETED'] } },
          });
          if (failed) throw new Error(`${failed} jobs did not complete`);
          return (await db.job.count({ where: { ...mine, status: 'COMPLETED' } })) === ids.length;
        },
        600_000,
        200,
      );
      const cpuAfter = cpuByPart();
      const workerCpu = cpuSeconds(workerPid) - workerCpuBefore;
      const rows = await db.job.findMany({
        where: { id: { in: ids } },
        select: { startedAt: true, completedAt: true },
      });
      const lastDone = Math.max(...rows.map((r) => r.completedAt!.getTime()));
      const firstTake = Math.min(...rows.map((r) => r.startedAt!.getTime()));
      const held = rows.map((r) => r.completedAt!.getTime() - r.startedAt!.getTime());
      const quietStarted = Date.now();
      const quietAfterMs = (await settle()) + (quietStarted - lastDone);
      const perJob = (after: Record<string, number>): Record<string, number> =>
        Object.fromEntries(
          Object.entries(after)
            .map(([k, v]) => [k, ((v - (cpuBefore[k] ?? 0)) * 1000) / ids.length])
            .filter(([, v]) => (v as number) >= 0.05),
        );
      return {
        jobs: ids.length,
        submitMs,
        wallMs: lastDone - started,
        workerSpanMs: lastDone - firstTake,
        busy: held.reduce((a, b) => a + b, 0) / (lastDone - firstTake),
        medianHeldMs: median(held),
        workerCpuMsPerJob: (workerCpu * 1000) / ids.length,
        platformCpuMsPerJob: perJob(cpuAfter),
        platformCpuMsPerJobWithCatchUp: perJob(cpuByPart()),
        quietAfterMs,
      };
    };
    const sleep10 = await batch(0.01);
    load.push(`after 10 ms batch ${loadAverage()}`);
    const sleep0 = await batch(0);
    load.push(`after 0 ms batch ${loadAverage()}`);

    // A redeploy that must replace a live worker (workers=(1, 1)): a rolling release of one.
    writeFileSync(path.join(sleepyDir, 'sleepy.py'), sleepySource('{"slept": seconds, "version": 2}'));
    const redeployRolling = await deploy(sleepyDir, 'bench-sleepy');
    load.push(`end ${loadAverage()}`);
    return { load, cold, cached, redeployIdle, sleepy, sleepyReadyMs, sleep10, sleep0, redeployRolling };
  } finally {
    await platform?.stop();
    // Only this run's containers and volumes: they carry its host's id.
    if (hostId) {
      const ids = spawnSync('podman', ['ps', '--all', '--quiet', '--filter', `label=gantry.host=${hostId}`], {
        encoding: 'utf8',
      })
        .stdout.split('\n')
        .filter(Boolean);
      if (ids.length) spawnSync('podman', ['rm', '--force', '--time', '0', ...ids]);
      const volumes = spawnSync('podman', ['volume', 'ls', '--quiet'], { encoding: 'utf8' })
        .stdout.split('\n')
        .filter((v) => hostId && v.startsWith(podVolumePrefix(hostId)));
      if (volumes.length) spawnSync('podman', ['volume', 'rm', '--force', ...volumes]);
    }
    await sshHost?.stop();
    rmSync(root, { recursive: true, force: true });
  }
}

function describeDeploy(label: string, d: FirstCall & Deployed): string[] {
  const deployToAnswer = d.cliMs + d.firstCallMs;
  return [
    `${label}: deploy (CLI process) ${sec(d.cliMs)} = build ${sec(d.buildMs)} + upload ${sec(d.uploadMs)} + release ${sec(d.releaseMs)} (deploy workflow ${sec(d.workflowMs)}) + CLI start ${sec(d.cliMs - d.buildMs - d.uploadMs - d.releaseMs)}`,
    `${label}: first call ${sec(d.firstCallMs)} = ${(d.firstCallMs / d.floorMs).toFixed(0)}x the warm /runsync floor (median ${d.floorMs.toFixed(1)} ms of ${FLOOR_CALLS}); deploy to first answer ${sec(deployToAnswer)}`,
    `${label}: first call, ms from the job's creation: ${Object.entries(d.split)
      .map(([k, v]) => `${k} ${v}`)
      .join(', ')}`,
  ];
}

function describeBatch(label: string, b: Batch, ceilingPerSec?: number): string[] {
  const rate = (b.jobs * 1000) / b.wallMs;
  const workerRate = (b.jobs * 1000) / b.workerSpanMs;
  const ratio = ceilingPerSec
    ? ` (${(rate / ceilingPerSec).toFixed(2)}x the ${ceilingPerSec} jobs/s ceiling; worker span ${(workerRate / ceilingPerSec).toFixed(2)}x)`
    : '';
  const cpu = (parts: Record<string, number>): string =>
    `${Object.values(parts)
      .reduce((a, b) => a + b, 0)
      .toFixed(1)} (${Object.entries(parts)
      .map(([k, v]) => `${k} ${v.toFixed(1)}`)
      .join(', ')})`;
  return [
    `${label}: ${b.jobs} jobs, submitted in ${sec(b.submitMs)}, first submit -> last completion ${sec(b.wallMs)}: ${rate.toFixed(1)} jobs/s; worker's first take -> last completion ${workerRate.toFixed(1)} jobs/s (${(b.workerSpanMs / b.jobs).toFixed(1)} ms per job)${ratio}`,
    `${label}: worker held a job ${(b.busy * 100).toFixed(0)}% of its span (take -> done median ${b.medianHeldMs} ms); worker CPU ${b.workerCpuMsPerJob.toFixed(2)} ms/job; platform CPU ms/job ${cpu(b.platformCpuMsPerJob)} until the last job, ${cpu(b.platformCpuMsPerJobWithCatchUp)} until quiet again ${sec(b.quietAfterMs)} after it`,
  ];
}

await ensurePythonBaseImage('3.11', { log: (m) => console.error(m) });
const results: Run[] = [];
for (let i = 1; i <= runs; i++) {
  const r = await oneRun(i);
  results.push(r);
  console.log(`\n--- run ${i} (load average ${r.load.join('; ')})`);
  for (const line of [
    ...describeDeploy('runtime image not on the host', r.cold),
    ...describeDeploy('runtime image cached', r.cached),
    `redeploy, one-line change, no worker to replace: CLI ${sec(r.redeployIdle.cliMs)}, build ${sec(r.redeployIdle.buildMs)}, upload ${sec(r.redeployIdle.uploadMs)}, release ${sec(r.redeployIdle.releaseMs)} (workflow ${sec(r.redeployIdle.workflowMs)})`,
    `sleepy (workers 1..1): deploy ${sec(r.sleepy.cliMs)} (release ${sec(r.sleepy.releaseMs)}); then its first /runsync answered after ${Math.round(r.sleepyReadyMs)} ms`,
    ...describeBatch('10 ms function', r.sleep10, 100),
    ...describeBatch('0 ms function', r.sleep0),
    `redeploy, one-line change, one live worker rolled: CLI ${sec(r.redeployRolling.cliMs)}, release ${sec(r.redeployRolling.releaseMs)} (workflow ${sec(r.redeployRolling.workflowMs)})`,
  ])
    console.log(line);
}

// The summary: one column per run.
const rows: Array<[string, (r: Run) => string]> = [
  [
    'no image: build / upload / release',
    (r) => `${sec(r.cold.buildMs)} / ${sec(r.cold.uploadMs)} / ${sec(r.cold.releaseMs)}`,
  ],
  [
    'no image: first call (x warm floor)',
    (r) =>
      `${sec(r.cold.firstCallMs)} (${(r.cold.firstCallMs / r.cold.floorMs).toFixed(0)}x ${r.cold.floorMs.toFixed(1)} ms)`,
  ],
  ['no image: deploy to first answer', (r) => sec(r.cold.cliMs + r.cold.firstCallMs)],
  [
    'image cached: build / upload / release',
    (r) => `${sec(r.cached.buildMs)} / ${sec(r.cached.uploadMs)} / ${sec(r.cached.releaseMs)}`,
  ],
  [
    'image cached: first call (x warm floor)',
    (r) =>
      `${sec(r.cached.firstCallMs)} (${(r.cached.firstCallMs / r.cached.floorMs).toFixed(0)}x ${r.cached.floorMs.toFixed(1)} ms)`,
  ],
  ['image cached: deploy to first answer', (r) => sec(r.cached.cliMs + r.cached.firstCallMs)],
  [
    'redeploy (idle) release / rolling 1 worker',
    (r) => `${sec(r.redeployIdle.releaseMs)} / ${sec(r.redeployRolling.releaseMs)}`,
  ],
  [
    '10 ms function: jobs/s (x 100/s)',
    (r) =>
      `${((r.sleep10.jobs * 1000) / r.sleep10.wallMs).toFixed(1)} (${((r.sleep10.jobs * 10) / r.sleep10.wallMs).toFixed(2)}x)`,
  ],
  ['10 ms function: worker busy', (r) => `${(r.sleep10.busy * 100).toFixed(0)}%`],
  [
    '0 ms function: jobs/s, ms per job',
    (r) =>
      `${((r.sleep0.jobs * 1000) / r.sleep0.wallMs).toFixed(1)}, ${(r.sleep0.workerSpanMs / r.sleep0.jobs).toFixed(1)} ms`,
  ],
  [
    'CPU ms per job, worker / platform until quiet (10 ms; 0 ms)',
    (r) =>
      [r.sleep10, r.sleep0]
        .map(
          (b) =>
            `${b.workerCpuMsPerJob.toFixed(1)} / ${Object.values(b.platformCpuMsPerJobWithCatchUp)
              .reduce((x, y) => x + y, 0)
              .toFixed(1)}`,
        )
        .join('; '),
  ],
];
console.log('\n| figure | ' + results.map((_, i) => `run ${i + 1}`).join(' | ') + ' |');
console.log('|---|' + results.map(() => '---|').join(''));
for (const [label, fn] of rows) console.log(`| ${label} | ${results.map(fn).join(' | ')} |`);
process.exit(0);
