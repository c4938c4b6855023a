/**
 * Orchestration timings on this machine, with the production loop settings:
 *   node --import tsx bench/orchestration.ts [coldRuns=5] [rolloutSizes=1,3,5]
 *
 * - cold start: a job queued for an endpoint at zero workers -> the worker's container start
 *   command issued (Worker.startedAt) -> the worker's first job take (Job.startedAt);
 * - autoscaler reaction: with one busy worker and REQUEST_COUNT 1, jobs queued -> the start command
 *   of the next worker (no wake-up signal: an endpoint with a live worker relies on its own look-ups);
 * - rollout: a release of an endpoint with N ready workers -> the release COMPLETED (all replaced).
 *
 * Brings up the platform on its embedded PostgreSQL and Temporal dev server (temporary data dir,
 * free ports), an SSH test host (sshd on loopback in front of this machine's Podman) and the local
 * test worker image; removes all of it at the end.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startSshTestHost } from '../test/support/ssh-test-host.ts';
import { ensureTestWorkerImage } from '../test/support/test-image.ts';
import { liveWorker } from '../domain/workers/index.ts';
import { startEmbeddedPlatform } from './support.ts';

const coldRuns = Number(process.argv[2] ?? 5);
const rolloutSizes = (process.argv[3] ?? '1,3,5').split(',').filter(Boolean).map(Number);
const IMAGE = 'localhost/gantry-orchestration-worker:1';
const appDir = path.join(path.dirname(fileURLToPath(import.meta.url)), '../test/fixtures/orchestration-worker');

async function until<T>(
  what: string,
  fn: () => Promise<T | undefined | null | false>,
  timeoutMs = 120_000,
  everyMs = 25,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

const stats = (xs: number[]): string => {
  const s = [...xs].sort((a, b) => a - b);
  const median = s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
  return `median ${Math.round(median)} ms (min ${Math.round(s[0]!)}, max ${Math.round(s[s.length - 1]!)}, n=${s.length})`;
};

const dataDir = mkdtempSync(path.join(tmpdir(), 'gantry-bench-'));
// The embedded PostgreSQL runs as the postgres user when this runs as root: it must reach the dir.
chmodSync(dataDir, 0o755);
const adminKey = `gntr_bench_${Date.now()}_0123456789`;
const sshHost = await startSshTestHost({ log: (m) => console.error(m) });
ensureTestWorkerImage(IMAGE, { appDir, log: (m) => console.error(m) });
const { platform, base } = await startEmbeddedPlatform(dataDir, adminKey);
const db = platform.ctx.db;

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- arbitrary JSON
async function api(method: string, route: string, body?: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(base + route, {
    method,
    headers: {
      authorization: `Bearer ${adminKey}`,
      ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
    },
    body: body !== undefined ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

let benchHostId: string | undefined;
const live = (endpointId: string) => db.worker.findMany({ where: { endpointId, ...liveWorker } });

try {
  // This machine stands for a host of many: CPU workers (2 vCPUs each) may reserve more than its CPUs.
  const host = await api('POST', '/v2/hosts', {
    name: 'bench-host',
    address: sshHost.host,
    port: sshHost.port,
    privateKey: sshHost.privateKey,
    dataCenterId: 'local',
    labels: { 'gantry.io/cpu-overcommit': '32' },
  });
  if (host.body?.status !== 'READY') throw new Error(`host not READY: ${JSON.stringify(host.body)}`);
  benchHostId = host.body.id as string;

  // ---------------------------------------------------------------- cold start at zero workers
  const cold = await api('POST', '/v2/serverless', {
    name: 'bench-cold',
    image: IMAGE,
    workers: { min: 0, max: 1 },
    scaling: { type: 'QUEUE_DELAY', value: 4, idleTimeout: 1 },
  });
  const toStart: number[] = [];
  const toTake: number[] = [];
  const toRecord: number[] = [];
  for (let i = 0; i < coldRuns; i++) {
    await until('zero workers', async () => (await live(cold.body.id)).length === 0, 120_000, 100);
    const run = await api('POST', `/v2/${cold.body.id}/run`, { input: { i } });
    const job = await until('the job to be taken', async () => {
      const j = await db.job.findUnique({ where: { id: run.body.id } });
      return j?.startedAt ? j : undefined;
    });
    const worker = await db.worker.findUniqueOrThrow({ where: { id: job.workerId! } });
    toRecord.push(worker.createdAt.getTime() - job.createdAt.getTime());
    toStart.push(worker.startedAt!.getTime() - job.createdAt.getTime());
    toTake.push(job.startedAt!.getTime() - job.createdAt.getTime());
    await until(
      'the job to finish',
      async () => (await db.job.findUnique({ where: { id: run.body.id } }))?.status === 'COMPLETED',
    );
  }
  console.log(`cold start, queued job -> worker record made by the autoscaler: ${stats(toRecord)}`);
  console.log(`cold start, queued job -> container start issued: ${stats(toStart)}`);
  console.log(`cold start, queued job -> first job take:         ${stats(toTake)}`);
  await api('PATCH', `/v2/serverless/${cold.body.id}`, { workers: { min: 0, max: 0 } });

  // ---------------------------------------------------------------- autoscaler reaction
  const rc = await api('POST', '/v2/serverless', {
    name: 'bench-react',
    image: IMAGE,
    workers: { min: 1, max: 2 },
    scaling: { type: 'REQUEST_COUNT', value: 1, idleTimeout: 1 },
  });
  const reaction: number[] = [];
  for (let i = 0; i < coldRuns; i++) {
    await until(
      'one idle worker',
      async () => {
        const ws = await live(rc.body.id);
        return ws.length === 1 && ws[0]!.status === 'IDLE';
      },
      120_000,
      100,
    );
    const busy = await api('POST', `/v2/${rc.body.id}/run`, { input: { sleepMs: 20_000 } });
    await until(
      'the first job to be taken',
      async () => (await db.job.findUnique({ where: { id: busy.body.id } }))?.status === 'IN_PROGRESS',
    );
    const before = new Set(
      (await db.worker.findMany({ where: { endpointId: rc.body.id }, select: { id: true } })).map((w) => w.id),
    );
    const queued = await api('POST', `/v2/${rc.body.id}/run`, { input: { n: i } });
    const job = await db.job.findUniqueOrThrow({ where: { id: queued.body.id } });
    const extra = await until('a second worker', async () =>
      (await db.worker.findMany({ where: { endpointId: rc.body.id, startedAt: { not: null } } })).find(
        (w) => !before.has(w.id),
      ),
    );
    reaction.push(extra.startedAt!.getTime() - job.createdAt.getTime());
    await until(
      'both jobs to finish',
      async () =>
        (await db.job.count({ where: { id: { in: [busy.body.id, queued.body.id] }, status: 'COMPLETED' } })) === 2,
      120_000,
      100,
    );
  }
  console.log(
    `autoscaler reaction (REQUEST_COUNT, a live worker busy), queued job -> next container start issued: ${stats(reaction)}`,
  );
  await api('PATCH', `/v2/serverless/${rc.body.id}`, { workers: { min: 0, max: 0 } });

  // ---------------------------------------------------------------- rollouts
  for (const n of rolloutSizes) {
    const ep = await api('POST', '/v2/serverless', {
      name: `bench-rollout-${n}`,
      image: IMAGE,
      env: { GANTRY_TEST_RELEASE: 'a' },
      workers: { min: n, max: n },
    });
    await until(
      `${n} ready workers`,
      async () => {
        const ws = await live(ep.body.id);
        return ws.length === n && ws.every((w) => w.status === 'IDLE');
      },
      300_000,
      100,
    );
    const started = Date.now();
    await api('PATCH', `/v2/serverless/${ep.body.id}`, { env: { GANTRY_TEST_RELEASE: 'b' } });
    const release = await until(
      'the release to complete',
      async () => db.release.findFirst({ where: { endpointId: ep.body.id, version: 2, status: 'COMPLETED' } }),
      600_000,
      50,
    );
    const firstReady = Math.min(
      ...(
        await db.worker.findMany({ where: { endpointId: ep.body.id, releaseVersion: 2, readyAt: { not: null } } })
      ).map((w) => w.readyAt!.getTime()),
    );
    console.log(
      `rollout of ${n} worker(s): PATCH -> release COMPLETED ${release.finishedAt!.getTime() - started} ms (first new worker ready after ${firstReady - started} ms)`,
    );
    await api('PATCH', `/v2/serverless/${ep.body.id}`, { workers: { min: 0, max: 0 } });
    await until('the workers to go', async () => (await live(ep.body.id)).length === 0, 120_000, 100);
  }
} finally {
  await platform.stop();
  // Only this run's containers: they carry its host's id.
  if (benchHostId) {
    const ids = spawnSync('podman', ['ps', '--all', '--quiet', '--filter', `label=gantry.host=${benchHostId}`], {
      encoding: 'utf8',
    })
      .stdout.split('\n')
      .filter(Boolean);
    if (ids.length) spawnSync('podman', ['rm', '--force', '--time', '0', ...ids]);
  }
  await sshHost.stop();
  rmSync(dataDir, { recursive: true, force: true });
}
