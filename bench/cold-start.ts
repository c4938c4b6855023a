/**
 * Cold starts against FlashBoot: the time to the answer of one call to an endpoint at zero workers
 * whose worker takes 3 s to become ready (imports, then a "model" load that fills 1 GiB of memory:
 * bench/cold-start/queue_worker.py and lb_worker.py). Run by hand:
 *   node tooling/bootstrap.mjs node --import tsx bench/cold-start.ts [rounds=20] [pulledRounds=rounds]
 * (Ctrl-C: the rounds end after the call under way, and what was measured is reported.)
 *
 * For a queue endpoint (one `/runsync`) and a load-balancing one (one `POST /process` through the
 * proxy), each round times, one after the other:
 * - warm: the endpoint's kept worker (workers.min 1), ready: the floor;
 * - OFF, image on the host: an endpoint at zero workers (each round waits until its last worker and
 *   container are gone), so the call starts a worker;
 * - OFF, image pulled at the call: the same with the image removed from the host before the call
 *   (`pulledRounds` rounds), so the worker's start pulls it whole from a registry on loopback;
 * - FLASHBOOT: the endpoint's one worker stands by (STANDBY, its container paused) before the call,
 *   which thaws it.
 * The image: Gantry's example worker image (its Python runtime) with the two workers added, squashed
 * to one layer with a random file in it, pushed to the test registry (test/support/image-registry.ts,
 * distribution with a login, plain HTTP on loopback) and pulled from there by every worker with the
 * account's registry credential, as a tenant's image would be. Two such images: the one every case
 * but "pulled" runs, always on the host, and the one "pulled" runs, removed before each of its calls
 * (a paused standby holds its image, so one image cannot be both). GANTRY_PREPULL_HOSTS=0.
 *
 * The platform runs in this process (API and Temporal worker, production loop settings, as `npm
 * start`), on its embedded PostgreSQL and Temporal dev server, with an SSH test host in front of this
 * machine's Podman. CPU per call is read over the call only: this process (Gantry, plus the bench's
 * client), and from /proc its PostgreSQL, Temporal server, and sshd with the host commands it runs.
 * At the end, a thaw's floor: `podman unpause` of a paused container of the image (not Gantry's),
 * run directly and over an open SSH connection to the test host as Gantry sends it, and `true` over it.
 */
import { execFile } from 'node:child_process';
import { chmodSync, copyFileSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir, totalmem } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { endpointWorkflowId, workerWorkflowId } from '../contracts/workflows.ts';
import { exampleWorkerImage } from '../domain/apps/index.ts';
import { liveWorker } from '../domain/workers/index.ts';
import { containerNameOf } from '../hostctl/containers.ts';
import { shellJoin, SshPool } from '../hostctl/ssh.ts';
import { REGISTRY_PASSWORD, REGISTRY_USER, startImageRegistry } from '../test/support/image-registry.ts';
import { ensurePythonBaseImage, PODMAN_FLAGS } from '../test/support/python-base-image.ts';
import { startSshTestHost } from '../test/support/ssh-test-host.ts';
import { cpuSeconds, loadAverage } from './proc.ts';
import { startEmbeddedPlatform } from './support.ts';

const rounds = Number(process.argv[2] ?? 20);
const pulledRounds = Number(process.argv[3] ?? rounds);
const fixtureDir = path.join(path.dirname(fileURLToPath(import.meta.url)), 'cold-start');
const benchStarted = Date.now();
const execFileAsync = promisify(execFile);

type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any -- the API's JSON, read loosely
type Kind = 'queue' | 'lb';
type Variant = 'warm' | 'off-host' | 'off-pulled' | 'flashboot';
const VARIANTS: Variant[] = ['warm', 'off-host', 'off-pulled', 'flashboot'];
const LABEL: Record<Variant, string> = {
  warm: 'warm worker (floor)',
  'off-host': '`OFF`, image on the host',
  'off-pulled': '`OFF`, image pulled at the call',
  flashboot: '`FLASHBOOT`',
};

interface Sample {
  round: number;
  ms: number;
  /** CPU ms over the call: this process, PostgreSQL, the Temporal server, sshd and the host commands. */
  cpu: { gantry: number; postgres: number; temporal: number; host: number };
  /** The answering process: a new one (cold start) or the one that answered before (a thaw, or warm). */
  same: boolean;
  /** ms from the call to each step the records and the workflows' histories show (STEPS). */
  steps: Record<string, number>;
  /** ms from the answer until the endpoint was back at zero: its worker gone (OFF), frozen (FLASHBOOT). */
  backMs?: number;
}

/** The steps of a cold start and of a thaw; `ready` is the load-balancing worker's health check seen 200, `job taken` the queue's. */
const STEPS: Record<'off' | 'flashboot', string[]> = {
  off: ['worker row', 'pull begun', 'container start issued', 'container started', 'ready', 'job taken'],
  flashboot: ['wake-up signal', 'thaw signal', 'thaw committed', 'unpaused', 'job taken'],
};

interface Case {
  kind: Kind;
  variant: Variant;
  id: string;
  base: string;
  image: string;
  samples: Sample[];
  failures: string[];
  lastBoot?: string;
  /** Its workers whose containers are known gone. */
  gone: Set<string>;
}

const sorted = (xs: number[]): number[] => [...xs].sort((a, b) => a - b);
/** Nearest-rank percentile. */
const pct = (xs: number[], p: number): number => sorted(xs)[Math.max(0, Math.ceil((p / 100) * xs.length) - 1)] ?? NaN;
const ms = (v: number): string =>
  Number.isNaN(v) ? '-' : v >= 10_000 ? `${(v / 1000).toFixed(1)} s` : `${Math.round(v)} ms`;
const ratio = (a: number, b: number): string =>
  Number.isNaN(a / b) ? '-' : `${(a / b).toFixed(a / b >= 10 ? 0 : 1)}x`;

async function until<T>(
  what: string,
  fn: () => Promise<T | undefined | null | false> | T | undefined | null | false,
  timeoutMs = 180_000,
  everyMs = 100,
  state?: () => Promise<unknown>,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) {
      const s = state ? `; state: ${JSON.stringify(await state().catch((e: unknown) => String(e)))}` : '';
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${s}`);
    }
    await sleep(everyMs);
  }
}

/** Podman, never blocking: the platform runs on this process's event loop. Its stdout; '' on a failure allowed. */
async function podman(args: string[], allowFail = false): Promise<string> {
  try {
    return (await execFileAsync('podman', args, { encoding: 'utf8', maxBuffer: 256 * 1024 * 1024 })).stdout;
  } catch (err) {
    if (allowFail) return '';
    throw new Error(`podman ${args.join(' ')}: ${String((err as { stderr?: string }).stderr ?? err).trim()}`);
  }
}
const containerState = async (workerId: string): Promise<string> =>
  (
    await podman(['inspect', '--type', 'container', '--format', '{{.State.Status}}', containerNameOf(workerId)], true)
  ).trim() || 'gone';
type PodmanEvent = { Status: string; Name: string; Time: string };
/** Podman's events since `since` (ms): its own record of pulls, starts and unpauses. */
async function podmanEvents(since: number): Promise<PodmanEvent[]> {
  const since$ = new Date(since - 1000).toISOString();
  const out = await podman(['events', '--stream=false', '--since', since$, '--format', 'json'], true);
  return out.split('\n').flatMap((l) => (l ? [JSON.parse(l) as PodmanEvent] : []));
}
const imageOnHost = (ref: string): Promise<boolean> =>
  execFileAsync('podman', ['image', 'exists', ref])
    .then(() => true)
    .catch(() => false);

/** CPU seconds of this process's children's trees by command name, and of this process. */
function cpuNow(): { gantry: number; postgres: number; temporal: number; host: number } {
  const u = process.cpuUsage();
  const out = { gantry: (u.user + u.system) / 1e6, postgres: 0, temporal: 0, host: 0 };
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) !== process.pid) continue;
      const name = readFileSync(`/proc/${d}/comm`, 'utf8').trim();
      const part = name === 'sshd' ? 'host' : (['postgres', 'temporal'] as const).find((p) => name.startsWith(p));
      if (part) out[part] += cpuSeconds(Number(d));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

// ------------------------------------------------------------------ the platform, the host, the images
delete process.env.GANTRY_RUNTIME_BASE_IMAGE; // as test/integration/flashboot.test.ts: the example worker's usual build
await ensurePythonBaseImage('3.11');
const registry = await startImageRegistry();
const sshHost = await startSshTestHost({ sessionEnv: { CONTAINERS_REGISTRIES_CONF: registry.registriesConf } });
const dataDir = mkdtempSync(path.join(tmpdir(), 'gantry-bench-cold-'));
chmodSync(dataDir, 0o755); // the embedded PostgreSQL runs as the postgres user when this runs as root
const adminKey = `gntr_bench_${Date.now()}_0123456789`;
const { platform, base } = await startEmbeddedPlatform(dataDir, adminKey, { GANTRY_PREPULL_HOSTS: '0' });
const db = platform.ctx.db;
let hostId: string | undefined;
const images: string[] = [];

async function api(
  method: string,
  route: string,
  body?: unknown,
  signal?: AbortSignal,
): Promise<{ status: number; body: Json }> {
  const res = await fetch(route.startsWith('http') ? route : base + route, {
    method,
    headers: {
      authorization: `Bearer ${adminKey}`,
      ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
    },
    body: body !== undefined ? JSON.stringify(body) : undefined,
    signal,
  });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    // not JSON
  }
  return { status: res.status, body: parsed };
}
const workersOf = (endpointId: string) =>
  db.worker.findMany({ where: { endpointId, ...liveWorker }, orderBy: { createdAt: 'asc' } });
const describe = (c: Case) => async () =>
  Promise.all(
    (await workersOf(c.id)).map(async (w) => ({
      id: w.id,
      status: w.status,
      reason: w.statusReason,
      container: await containerState(w.id),
    })),
  );

/** One image of the example worker plus the bench's workers, one layer with a random file: pushed, then dropped here. */
async function buildImage(tag: string): Promise<string> {
  const ctx = mkdtempSync(path.join(tmpdir(), 'gantry-cold-start-image-'));
  try {
    for (const f of ['Containerfile', 'queue_worker.py', 'lb_worker.py'])
      copyFileSync(path.join(fixtureDir, f), path.join(ctx, f));
    writeFileSync(path.join(ctx, 'nonce'), `${tag} ${Date.now()} ${Math.random()}\n`);
    const local = `localhost/gantry-cold-start-build:${tag}`;
    const squashed = ['--squash-all', '--build-arg', `BASE=${exampleWorkerImage()}`];
    await podman([...PODMAN_FLAGS, 'build', '--quiet', ...squashed, '--tag', local, ctx]);
    // As registry.push does, without blocking.
    const name = `${registry.host}/cold-start/worker:${tag}`;
    await podman([
      'push',
      '--quiet',
      '--tls-verify=false',
      '--creds',
      `${REGISTRY_USER}:${REGISTRY_PASSWORD}`,
      local,
      name,
    ]);
    await podman(['rmi', local]);
    images.push(name);
    return name;
  } finally {
    rmSync(ctx, { recursive: true, force: true });
  }
}

/** The times of a workflow's events at or after `after`, with their signal's name. */
async function historyAfter(workflowId: string, after: number): Promise<Array<{ at: number; signal?: string }>> {
  const h = await platform.ctx.temporal.workflow.getHandle(workflowId).fetchHistory();
  return (h.events ?? [])
    .map((e) => ({
      at: Number(e.eventTime?.seconds ?? 0) * 1000 + Math.round((e.eventTime?.nanos ?? 0) / 1e6),
      signal: e.workflowExecutionSignaledEventAttributes?.signalName ?? undefined,
    }))
    .filter((e) => e.at >= after);
}

const cases: Case[] = [];
/** The 1-minute load average at the start of each round. */
const loads: string[] = [];
/** Ctrl-C ends the rounds after the call under way: what was measured is reported, and all is removed. */
let interrupted = false;
process.once('SIGINT', () => {
  interrupted = true;
  console.error('interrupted: finishing this call, then the report');
});
try {
  const host = await api('POST', '/v2/hosts', {
    name: 'bench-host',
    address: sshHost.host,
    port: sshHost.port,
    privateKey: sshHost.privateKey,
    dataCenterId: 'local',
    labels: { 'gantry.io/cpu-overcommit': '32' },
  });
  if (host.body?.status !== 'READY') throw new Error(`host not READY: ${JSON.stringify(host.body)}`);
  hostId = host.body.id as string;

  // The example worker's image, as this Gantry builds it (the host builds it when its recipe changed).
  const prime = await api('POST', '/v2/serverless', {
    name: 'prime',
    image: exampleWorkerImage(),
    workers: { min: 1, max: 1 },
  });
  await until(
    'the example worker ready',
    async () => (await workersOf(prime.body.id)).some((w) => w.status === 'IDLE'),
    600_000,
    250,
  );
  await api('DELETE', `/v2/serverless/${prime.body.id}`);
  const imageStarted = Date.now();
  const onHostImage = await buildImage('on-host');
  const pulledImage = await buildImage('pulled');
  const imageBytes = Number((await podman(['image', 'inspect', '--format', '{{.Size}}', exampleWorkerImage()])).trim());
  console.error(
    `images built and pushed in ${ms(Date.now() - imageStarted)} (${Math.round(imageBytes / 1e6)} MB each)`,
  );
  const cred = await api('POST', '/v2/registries', {
    name: 'bench',
    username: REGISTRY_USER,
    password: REGISTRY_PASSWORD,
    registry: registry.host,
  });
  if (cred.status !== 201) throw new Error(`registry credential: ${JSON.stringify(cred.body)}`);

  for (const kind of ['queue', 'lb'] as const)
    for (const variant of VARIANTS) {
      const r = await api('POST', '/v2/serverless', {
        name: `${kind}-${variant}`,
        ...(kind === 'lb' ? { type: 'LOAD_BALANCING' } : {}),
        image: variant === 'off-pulled' ? pulledImage : onHostImage,
        registry: cred.body.id,
        args: `python3 /cold-start/${kind === 'lb' ? 'lb' : 'queue'}_worker.py`,
        workers: { min: variant === 'warm' ? 1 : 0, max: 1 },
        scaling:
          kind === 'lb'
            ? { type: 'REQUEST_COUNT', value: 4, idleTimeout: 1 }
            : { type: 'QUEUE_DELAY', value: 1, idleTimeout: 1 },
        flashboot: variant === 'flashboot' ? 'FLASHBOOT' : 'OFF',
      });
      if (r.status !== 201) throw new Error(`endpoint ${kind}-${variant}: ${JSON.stringify(r.body)}`);
      const c: Case = {
        kind,
        variant,
        id: r.body.id,
        base: r.body.requestUrls.base ?? '',
        image: r.body.image,
        samples: [],
        failures: [],
        gone: new Set(),
      };
      cases.push(c);
      if (variant === 'warm') console.error(`CPU instance of the workers: ${JSON.stringify(r.body.cpu)}`);
    }

  /** One call, its answer's process token. */
  const callOnce = async (c: Case, n: number): Promise<{ boot: string; jobId?: string }> => {
    const signal = AbortSignal.timeout(600_000);
    if (c.kind === 'queue') {
      const r = await api('POST', `/v2/${c.id}/runsync?wait=300000`, { input: { n } }, signal);
      if (r.body?.status !== 'COMPLETED') throw new Error(`runsync answered ${r.status}: ${JSON.stringify(r.body)}`);
      return { boot: r.body.output.boot, jobId: r.body.id };
    }
    const r = await api('POST', `${c.base}/process`, { n }, signal);
    if (r.status !== 200 || !r.body?.boot) throw new Error(`the proxy answered ${r.status}: ${JSON.stringify(r.body)}`);
    return { boot: r.body.boot };
  };

  /** Back where the next call of the case starts: its worker gone (OFF), standing by frozen (FLASHBOOT). */
  const reset = async (c: Case): Promise<void> => {
    if (c.variant === 'warm') return;
    if (c.variant === 'flashboot') {
      await until(
        `${c.kind} FLASHBOOT: its worker standing by, paused`,
        async () => {
          const ws = await workersOf(c.id);
          if (ws.length === 0 || ws.some((w) => w.status !== 'STANDBY')) return false;
          return (await Promise.all(ws.map((w) => containerState(w.id)))).every((st) => st === 'paused');
        },
        180_000,
        200,
        describe(c),
      );
      return;
    }
    const ids = (await db.worker.findMany({ where: { endpointId: c.id }, select: { id: true } }))
      .map((w) => w.id)
      .filter((id) => !c.gone.has(id));
    await until(
      `${c.kind} ${c.variant}: no worker, no container`,
      async () => {
        if ((await workersOf(c.id)).length > 0) return false;
        for (const id of ids) if (!c.gone.has(id) && (await containerState(id)) === 'gone') c.gone.add(id);
        return ids.every((id) => c.gone.has(id));
      },
      180_000,
      200,
      describe(c),
    );
    if (c.variant === 'off-pulled' && (await imageOnHost(c.image))) await podman(['rmi', c.image]);
  };

  const measure = async (c: Case, n: number): Promise<void> => {
    const before = c.variant === 'flashboot' ? await workersOf(c.id) : [];
    if (c.variant === 'off-pulled' && (await imageOnHost(c.image)))
      throw new Error(`${c.image} is on the host before the call`);
    const cpu0 = cpuNow();
    const t0 = Date.now();
    const answer = await callOnce(c, n);
    const t1 = Date.now();
    const cpu1 = cpuNow();
    const steps: Sample['steps'] = {};
    const at = (name: string, d: Date | number | null | undefined) => {
      const v = d instanceof Date ? d.getTime() : d;
      if (v !== null && v !== undefined && v >= t0) steps[name] = v - t0;
    };
    if (c.variant !== 'warm') {
      const job = answer.jobId ? await db.job.findUnique({ where: { id: answer.jobId } }) : null;
      const w = job?.workerId
        ? await db.worker.findUnique({ where: { id: job.workerId } })
        : await db.worker.findFirst({ where: { endpointId: c.id }, orderBy: { createdAt: 'desc' } });
      at('job taken', job?.startedAt);
      const events = w ? await podmanEvents(t0) : [];
      const event = (status: string, name: string) =>
        events.filter((e) => e.Status === status && e.Name === name).map((e) => Date.parse(e.Time))[0];
      if (w && c.variant !== 'flashboot') {
        at('worker row', w.createdAt);
        at('pull begun', event('pull', c.image)); // Podman 4.3 stamps its pull event when the pull begins
        at('container start issued', w.startedAt);
        at('container started', event('start', containerNameOf(w.id)));
        if (c.kind === 'lb') at('ready', w.readyAt);
      }
      if (c.variant === 'flashboot' && w) {
        if (!before.some((b) => b.id === w.id))
          c.failures.push(
            `round ${n}: answered by worker ${w.id}, not the standby ${before.map((b) => b.id).join(',')}`,
          );
        at('thaw committed', w.readyAt); // the thaw sets readyAt when it marks the worker IDLE, before the unpause
        const endpointEvents = await historyAfter(endpointWorkflowId(c.id), t0);
        at('wake-up signal', endpointEvents.find((e) => e.signal)?.at);
        at('thaw signal', (await historyAfter(workerWorkflowId(w.id), t0)).find((e) => e.signal === 'thawWorker')?.at);
        at('unpaused', event('unpause', containerNameOf(w.id)));
      }
    }
    const d = (k: keyof Sample['cpu']) => (cpu1[k] - cpu0[k]) * 1000;
    const sample: Sample = {
      round: n,
      ms: t1 - t0,
      cpu: { gantry: d('gantry'), postgres: d('postgres'), temporal: d('temporal'), host: d('host') },
      same: answer.boot === c.lastBoot,
      steps,
    };
    c.samples.push(sample);
    c.lastBoot = answer.boot;
    await reset(c);
    sample.backMs = Date.now() - t1;
  };

  // ------------------------------------------------------------------ ready to start
  for (const c of cases) {
    if (c.variant === 'warm' || c.variant === 'flashboot') await callOnce(c, 0).then((a) => (c.lastBoot = a.boot));
    await reset(c);
  }
  const warmWorkers = (await Promise.all(cases.filter((c) => c.variant === 'warm').map((c) => workersOf(c.id)))).flat();
  for (const w of warmWorkers)
    console.error(
      `warm worker ${w.id} memory: ${(await podman(['stats', '--no-stream', '--format', '{{.MemUsage}}', containerNameOf(w.id)], true)).trim() || 'unknown (podman stats failed)'}`,
    );
  const idle0 = cpuNow().gantry;
  await sleep(5000);
  const idleRate = ((cpuNow().gantry - idle0) / 5) * 1000;
  console.error(`at rest, this process used ${idleRate.toFixed(1)} ms CPU per second`);

  for (let n = 1; n <= rounds && !interrupted; n++) {
    const roundStarted = Date.now();
    loads.push(loadAverage().split(' ')[0]!);
    for (const c of cases) {
      if (c.variant === 'off-pulled' && n > pulledRounds) continue;
      if (c.failures.length >= 3 || interrupted) continue;
      try {
        await measure(c, n);
      } catch (err) {
        const msg = err instanceof Error ? err.message : String(err);
        c.failures.push(`round ${n}: ${msg}; workers: ${JSON.stringify(await describe(c)())}`);
        console.error(`${c.kind} ${c.variant} round ${n} FAILED: ${msg}`);
        await reset(c).catch((e: unknown) => console.error(`  and no reset: ${String(e)}`));
      }
    }
    const last = cases.map((c) => `${c.kind}/${c.variant} ${ms(c.samples.at(-1)?.ms ?? NaN)}`).join(', ');
    console.error(`round ${n}/${rounds} in ${ms(Date.now() - roundStarted)} (load ${loadAverage()}): ${last}`);
  }

  // What a thaw cannot go below here: `podman unpause` of a paused container of the same image, run
  // directly (no SSH, no Gantry), the container not Gantry's.
  const probe = `gantry-cold-start-probe-${process.pid}`;
  const floor = { direct: [] as number[], ssh: [] as number[], sshTrue: [] as number[] };
  const pool = new SshPool();
  const target = { host: sshHost.host, port: sshHost.port, user: sshHost.user, privateKey: sshHost.privateKey };
  const sleeper = ['python3', '-c', 'import time; time.sleep(3600)'];
  await podman([...PODMAN_FLAGS, 'run', '-d', '--rm', '--name', probe, onHostImage, ...sleeper]);
  try {
    await pool.execOk(target, 'true'); // connected, as Gantry's pool is
    for (let i = 0; i < 20; i++) {
      let t = performance.now();
      await pool.execOk(target, 'true');
      floor.sshTrue.push(performance.now() - t);
      await podman(['pause', probe]);
      t = performance.now();
      await pool.execOk(target, shellJoin(['podman', 'unpause', '--', probe]));
      floor.ssh.push(performance.now() - t);
      await podman(['pause', probe]);
      t = performance.now();
      await podman(['unpause', probe]);
      floor.direct.push(performance.now() - t);
    }
  } finally {
    await podman(['rm', '--force', '--time', '0', probe], true);
    await pool.close();
  }

  // ------------------------------------------------------------------ the report
  const med = (xs: number[]) => pct(xs, 50);
  console.log(
    `\n# bench/cold-start.ts ${new Date().toISOString()}: ${cpus().length} cores (${cpus()[0]?.model}), ${(totalmem() / 2 ** 30).toFixed(0)} GiB, Node ${process.version}, load average at the end ${loadAverage()}, ${rounds} rounds (${pulledRounds} pulled), ${ms(Date.now() - benchStarted)} in all`,
  );
  console.log(`this process at rest: ${idleRate.toFixed(1)} ms CPU per second`);
  const p5090 = (xs: number[]) => `p50 ${ms(pct(xs, 50))}, p90 ${ms(pct(xs, 90))}`;
  console.log(
    `a thaw's floor here, n=20 each: \`podman unpause\` run directly ${p5090(floor.direct)}; over an open SSH connection, as Gantry sends it, ${p5090(floor.ssh)}; \`true\` over it ${p5090(floor.sshTrue)}\n`,
  );
  for (const kind of ['queue', 'lb'] as const) {
    const of = (v: Variant) => cases.find((c) => c.kind === kind && c.variant === v)!;
    const warm = of('warm').samples.map((s) => s.ms);
    console.log(
      `${kind === 'queue' ? 'queue endpoint, one `/runsync`' : 'load-balancing endpoint, one `POST /process` through the proxy'}:\n`,
    );
    console.log(
      '| case | n | p50 | p90 | p50 / warm p50 | p90 / warm p90 | Gantry CPU per call (above its rate at rest) | PostgreSQL / Temporal / host CPU per call | answered by |',
    );
    console.log('|---|---|---|---|---|---|---|---|---|');
    for (const v of VARIANTS) {
      const c = of(v);
      const xs = c.samples.map((s) => s.ms);
      const cpu = (k: keyof Sample['cpu']) => Math.round(med(c.samples.map((s) => s.cpu[k])));
      const aboveRest = Math.round(med(c.samples.map((s) => s.cpu.gantry - (idleRate * s.ms) / 1000)));
      const same = c.samples.filter((s) => s.same).length;
      const who =
        v === 'flashboot'
          ? `the thawed process ${same}/${xs.length}`
          : v === 'warm'
            ? `the kept process ${same}/${xs.length}`
            : `a new process ${xs.length - same}/${xs.length}`;
      console.log(
        `| ${LABEL[v]} | ${xs.length} | ${ms(pct(xs, 50))} | ${ms(pct(xs, 90))} | ${v === 'warm' ? '1x' : ratio(pct(xs, 50), pct(warm, 50))} | ${v === 'warm' ? '1x' : ratio(pct(xs, 90), pct(warm, 90))} | ${cpu('gantry')} ms (${aboveRest} ms) | ${cpu('postgres')} / ${cpu('temporal')} / ${cpu('host')} ms | ${who} |`,
      );
    }
    const fb = of('flashboot').samples.map((s) => s.ms);
    for (const v of ['off-host', 'off-pulled'] as const) {
      const off = of(v).samples.map((s) => s.ms);
      // Within each round (the same load): the ratio of the two calls, its median over the rounds.
      const byRound = of(v).samples.flatMap((o) => {
        const f = of('flashboot').samples.find((x) => x.round === o.round);
        return f ? [o.ms / f.ms] : [];
      });
      console.log(
        `\n${LABEL[v]} / FLASHBOOT: p50 ${ratio(pct(off, 50), pct(fb, 50))}, p90 ${ratio(pct(off, 90), pct(fb, 90))}; round by round, median ${ratio(pct(byRound, 50), 1)} (lowest ${ratio(Math.min(...byRound), 1)})`,
      );
    }
    const p50 = pct(fb, 50);
    const faster =
      pct(
        of('off-host').samples.map((s) => s.ms),
        50,
      ) / p50;
    console.log(
      `target (FLASHBOOT p50 <= 300 ms and >= 10x faster than OFF on the host): ${p50 <= 300 && faster >= 10 ? 'met' : 'NOT met'} (${ms(p50)}, ${faster.toFixed(1)}x)`,
    );
    console.log(
      '\nwhere the time went, median ms from the call; then from the answer to back at zero (OFF: worker and container gone; FLASHBOOT: frozen again):',
    );
    for (const v of ['off-host', 'off-pulled', 'flashboot'] as const) {
      const s = of(v).samples;
      const step = (k: string) => ms(med(s.map((x) => x.steps[k]).filter((x): x is number => x !== undefined)));
      const names = STEPS[v === 'flashboot' ? 'flashboot' : 'off'].filter(
        (k) => k !== (kind === 'lb' ? 'job taken' : 'ready'),
      );
      const back = s.map((x) => x.backMs).filter((x): x is number => x !== undefined);
      console.log(
        `- ${LABEL[v]}: ${names.map((k) => `${k} ${step(k)}`).join(', ')}, answer ${ms(med(s.map((x) => x.ms)))}; back at zero ${ms(med(back))} later`,
      );
    }
    console.log('');
  }
  for (const c of cases) for (const f of c.failures) console.log(`FAILURE ${c.kind} ${c.variant}: ${f}`);
  console.log(`raw load average (1 min) at each round's start: ${loads.join(' ')}`);
  for (const c of cases) console.log(`raw ${c.kind} ${c.variant}: ${c.samples.map((s) => s.ms).join(' ')}`);
} finally {
  await platform.stop();
  // Only this run's containers: they carry its host's id.
  if (hostId) {
    const ids = (await podman(['ps', '--all', '--quiet', '--filter', `label=gantry.host=${hostId}`], true))
      .split('\n')
      .filter(Boolean);
    if (ids.length) await podman(['rm', '--force', '--time', '0', ...ids], true);
  }
  for (const image of images) if (await imageOnHost(image)) await podman(['rmi', '--force', image], true);
  await sshHost.stop();
  await registry.stop();
  rmSync(dataDir, { recursive: true, force: true });
}
