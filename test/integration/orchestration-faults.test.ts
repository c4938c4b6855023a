/**
 * Faults against real parts: a host whose SSH server dies (and comes back), a Gantry that stops in
 * the middle of a rollout and starts again, containers left behind by a crash. Two SSH test hosts
 * front this machine's Podman; the platform runs in this process and is restarted on the same
 * database and task queue.
 */
import { randomBytes } from 'node:crypto';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, renameSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { loadConfig } from '../../infra/config.ts';
import { startPlatform, type Platform } from '../../infra/platform.ts';
import { startSshTestHost, type SshTestHost } from '../support/ssh-test-host.ts';
import { ensureTestWorkerImage } from '../support/test-image.ts';
import { call, startTestPlatform, type TestPlatform } from '../support/platform.ts';
import {
  FAST_ORCHESTRATION,
  managedContainers,
  removeManagedContainers,
  TEST_HOST_LABELS,
  until,
} from '../support/orchestration.ts';
import { liveWorker } from '../../domain/workers/index.ts';
import { endpointWorkflowId } from '../../contracts/workflows.ts';

const IMAGE = 'localhost/gantry-orchestration-worker:1';
const appDir = path.join(path.dirname(fileURLToPath(import.meta.url)), '../fixtures/orchestration-worker');
const secretKey = randomBytes(32).toString('hex');

let hostA: SshTestHost;
let hostB: SshTestHost;
let p: TestPlatform;
/** The platform running now (the first one, or a restarted one on the same database and queue). */
let running: { platform: Platform; url: string };
const hostIds: string[] = [];
const restartedSshd: ChildProcess[] = [];

/**
 * Starts the platform again on the first one's database, task queue and port, as a restart would:
 * running workers keep the API address they were started with (their ping and job URLs).
 */
async function restartGantry(): Promise<void> {
  const port = Number(new URL(running.url).port);
  const platform = await startPlatform(
    loadConfig({
      PORT: String(port),
      // The worker-facing listener comes back on its address too.
      ...(running.platform.ctx.workerUrl ? { GANTRY_WORKER_PORT: new URL(running.platform.ctx.workerUrl).port } : {}),
      DATABASE_URL: p.databaseUrl,
      TEMPORAL_ADDRESS: inject('temporalAddress'),
      TEMPORAL_CLI_PATH: inject('temporalBinary'),
      GANTRY_TASK_QUEUE: p.taskQueue,
      GANTRY_ADMIN_API_KEY: p.adminKey,
      GANTRY_SECRET_KEY: secretKey,
      GANTRY_DATA_DIR: mkdtempSync(path.join(tmpdir(), 'gantry-data-')),
      LOG_LEVEL: 'warn',
    }),
    () => {},
  );
  running = { platform, url: `http://127.0.0.1:${port}` };
}

/** Pids whose parent is `pid` (sshd's per-connection processes). */
function childrenOf(pid: number): number[] {
  return readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d))
    .filter((d) => {
      try {
        const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
        return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === pid;
      } catch {
        return false;
      }
    })
    .map(Number);
}

/** Kills a test host's SSH server and its open sessions: to the platform, the host is down. */
function killSshd(h: SshTestHost): number {
  const pid = Number(readFileSync(path.join(h.dir, 'sshd.pid'), 'utf8').trim());
  for (const child of childrenOf(pid)) process.kill(child, 'SIGKILL');
  process.kill(pid, 'SIGKILL');
  return pid;
}

/** Starts the test host's SSH server again: same port, same host key. */
async function restartSshd(h: SshTestHost): Promise<void> {
  const child = spawn('/usr/sbin/sshd', ['-D', '-e', '-f', path.join(h.dir, 'sshd_config')], { stdio: 'ignore' });
  restartedSshd.push(child);
  await until('sshd to answer again', async () => {
    const r = spawnSync('ssh-keyscan', ['-p', String(h.port), '127.0.0.1'], { encoding: 'utf8', timeout: 2000 });
    return r.stdout.includes('ssh-ed25519');
  });
}

beforeAll(async () => {
  [hostA, hostB] = await Promise.all([startSshTestHost(), startSshTestHost()]);
  ensureTestWorkerImage(IMAGE, { appDir });
  process.env.GANTRY_ORCHESTRATION = JSON.stringify(FAST_ORCHESTRATION);
  p = await startTestPlatform({ GANTRY_SECRET_KEY: secretKey });
  running = { platform: p, url: p.url };
  for (const [name, h] of [
    ['host-a', hostA],
    ['host-b', hostB],
  ] as const) {
    const r = await call(p.url, 'POST', '/v2/hosts', {
      key: p.adminKey,
      body: {
        name,
        address: h.host,
        port: h.port,
        privateKey: h.privateKey,
        dataCenterId: 'dc-1',
        labels: TEST_HOST_LABELS,
      },
    });
    expect(r.body.status).toBe('READY');
    hostIds.push(r.body.id);
  }
}, 600_000);

afterAll(async () => {
  await running?.platform.stop();
  if (running?.platform !== p) await p?.stop().catch(() => undefined);
  removeManagedContainers(hostIds);
  for (const c of restartedSshd) c.kill('SIGKILL');
  await hostA?.stop();
  await hostB?.stop();
}, 120_000);

const db = () => running.platform.ctx.db;
const live = (endpointId: string) => db().worker.findMany({ where: { endpointId, ...liveWorker } });
const allContainers = () => hostIds.flatMap((id) => managedContainers(id).map((c) => ({ ...c, hostId: id })));

describe('faults', () => {
  it('replaces the workers of a host whose SSH server dies, and cleans up when it comes back', async () => {
    const [idA, idB] = hostIds as [string, string];
    const created = await call(running.url, 'POST', '/v2/serverless', {
      key: p.adminKey,
      body: { name: 'spread', image: IMAGE, workers: { min: 2, max: 2 } },
    });
    const endpointId = created.body.id as string;
    const ready = await until('two ready workers', async () => {
      const ws = await live(endpointId);
      return ws.length === 2 && ws.every((w) => w.status === 'IDLE') ? ws : undefined;
    });
    // Spread over both hosts.
    expect(ready.map((w) => w.hostId).sort()).toEqual([idA, idB].sort());
    const onA = ready.find((w) => w.hostId === idA)!;

    killSshd(hostA);
    const down = await until('host A UNREACHABLE', async () => {
      const h = await db().host.findUniqueOrThrow({ where: { id: idA } });
      return h.status === 'UNREACHABLE' ? h : undefined;
    });
    expect(down.statusReason).toMatch(/^unreachable: /);
    const lost = await until('the worker on A to be given up', async () => {
      const w = await db().worker.findUniqueOrThrow({ where: { id: onA.id } });
      return w.status === 'FAILED' ? w : undefined;
    });
    expect(lost.statusReason).toMatch(/UNREACHABLE/);
    const replaced = await until('a replacement on B', async () => {
      const ws = await live(endpointId);
      return ws.length === 2 && ws.every((w) => w.status === 'IDLE' && w.hostId === idB) ? ws : undefined;
    });
    expect(replaced.map((w) => w.id)).not.toContain(onA.id);
    // The container on A could not be removed while A was down: it is still there.
    expect(managedContainers(idA).map((c) => c.workerId)).toContain(onA.id);

    await restartSshd(hostA);
    await until(
      'host A READY again',
      async () => (await db().host.findUniqueOrThrow({ where: { id: idA } })).status === 'READY',
    );
    // Its leftover container is removed by the reconcile from labels.
    await until(
      'the leftover container on A to go',
      async () => !managedContainers(idA).some((c) => c.workerId === onA.id),
    );
    const final = await live(endpointId);
    expect(final).toHaveLength(2);
    expect(
      allContainers()
        .filter((c) => c.endpointId === endpointId)
        .map((c) => c.workerId)
        .sort(),
    ).toEqual(final.map((w) => w.id).sort());
    await call(running.url, 'PATCH', `/v2/serverless/${endpointId}`, {
      key: p.adminKey,
      body: { workers: { min: 0, max: 0 } },
    });
  }, 240_000);

  it('converges when Gantry stops in the middle of a rollout, and rebuilds state from container labels', async () => {
    const created = await call(running.url, 'POST', '/v2/serverless', {
      key: p.adminKey,
      body: {
        name: 'restart',
        image: IMAGE,
        env: { GANTRY_TEST_RELEASE: 'one' },
        workers: { min: 3, max: 3 },
        scaling: { type: 'QUEUE_DELAY', value: 60, idleTimeout: 300 },
      },
    });
    const endpointId = created.body.id as string;
    await until('three ready workers', async () => {
      const ws = await live(endpointId);
      return ws.length === 3 && ws.every((w) => w.status === 'IDLE') ? ws : undefined;
    });
    const patched = await call(running.url, 'PATCH', `/v2/serverless/${endpointId}`, {
      key: p.adminKey,
      body: { env: { GANTRY_TEST_RELEASE: 'two' } },
    });
    expect(patched.status).toBe(200);
    // Stop everything as soon as the rollout has started its first replacement.
    await until(
      'a worker of release 2',
      async () => (await db().worker.count({ where: { endpointId, releaseVersion: 2 } })) > 0,
      30_000,
      20,
    );
    await running.platform.stop();

    // While Gantry is down: a container that a crash left without a record.
    const ghost = `gantry-ghost${randomBytes(3).toString('hex')}`;
    const r = spawnSync(
      'podman',
      [
        'run',
        '--detach',
        '--name',
        ghost,
        '--label',
        `gantry.host=${hostIds[0]}`,
        '--label',
        'gantry.worker=ghost0000000000',
        '--label',
        `gantry.endpoint=${endpointId}`,
        IMAGE,
        'node',
        '-e',
        'setInterval(() => {}, 1000)',
      ],
      {
        encoding: 'utf8',
      },
    );
    expect(r.status, r.stderr).toBe(0);

    const t0 = Date.now();
    await restartGantry();
    console.info(`restarted in ${Date.now() - t0} ms`);
    await until(
      'release 2 to complete after the restart',
      async () =>
        (await db().release.findUnique({ where: { endpointId_version: { endpointId, version: 2 } } }))?.status ===
        'COMPLETED',
      120_000,
      200,
      async () => ({
        releases: await db().release.findMany({
          where: { endpointId },
          select: { version: true, status: true, statusReason: true },
        }),
        workers: await db().worker.findMany({
          where: { endpointId },
          select: { id: true, status: true, releaseVersion: true, statusReason: true, hostId: true },
        }),
        workflow: (await running.platform.ctx.temporal.workflow.getHandle(endpointWorkflowId(endpointId)).describe())
          .status.name,
      }),
    );
    console.info(`release 2 completed ${Date.now() - t0} ms after the restart`);
    await until(
      'the ghost container to be removed',
      async () => !allContainers().some((c) => c.name === ghost),
      120_000,
      500,
    );
    const final = await live(endpointId);
    expect(final).toHaveLength(3);
    expect(final.every((w) => w.releaseVersion === 2 && w.status === 'IDLE')).toBe(true);
    // No duplicates, no orphans: containers of the endpoint are exactly its live workers.
    await until('containers to match the live workers', async () => {
      const ids = allContainers()
        .filter((c) => c.endpointId === endpointId)
        .map((c) => c.workerId)
        .sort();
      return JSON.stringify(ids) === JSON.stringify(final.map((w) => w.id).sort());
    });
    // The API of the restarted platform answers for the same endpoint.
    const view = await call(running.url, 'GET', `/v2/serverless/${endpointId}`, { key: p.adminKey });
    expect(view.body.env).toEqual({ GANTRY_TEST_RELEASE: 'two' });
  }, 240_000);
  it('stops work on a host whose key changes: its workers move, until the operator accepts the new key', async () => {
    const [idA, idB] = hostIds as [string, string];
    const created = await call(running.url, 'POST', '/v2/serverless', {
      key: p.adminKey,
      body: { name: 'rekey', image: IMAGE, workers: { min: 2, max: 2 } },
    });
    const endpointId = created.body.id as string;
    const ready = await until('two ready workers on both hosts', async () => {
      const ws = await live(endpointId);
      return ws.length === 2 && ws.every((w) => w.status === 'IDLE') && new Set(ws.map((w) => w.hostId)).size === 2
        ? ws
        : undefined;
    });
    const onB = ready.find((w) => w.hostId === idB)!;

    // The host is "reinstalled": a new host key behind the same address. The key is made first so
    // that the SSH server is down only for its restart.
    const keyFile = path.join(hostB.dir, 'ssh_host_ed25519_key');
    const fresh = `${keyFile}.reinstalled`;
    expect(spawnSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'reinstalled', '-f', fresh]).status).toBe(0);
    const newKey = spawnSync('ssh-keygen', ['-lf', `${fresh}.pub`], { encoding: 'utf8' }).stdout.split(' ')[1]!;
    killSshd(hostB);
    renameSync(fresh, keyFile);
    renameSync(`${fresh}.pub`, `${keyFile}.pub`);
    await restartSshd(hostB);

    const mismatch = await until('host B HOST_KEY_MISMATCH', async () => {
      const h = await db().host.findUniqueOrThrow({ where: { id: idB } });
      return h.status === 'HOST_KEY_MISMATCH' ? h : undefined;
    });
    expect(mismatch.statusReason).toContain(`the host now presents ${newKey}`);
    const given = await until('the worker on B to be given up', async () => {
      const w = await db().worker.findUniqueOrThrow({ where: { id: onB.id } });
      return w.status === 'FAILED' ? w : undefined;
    });
    // Whichever the platform saw first gives it up: the refused connections of the restart
    // (UNREACHABLE) or the new key (HOST_KEY_MISMATCH); the host's own status is checked above.
    expect(given.statusReason).toMatch(/HOST_KEY_MISMATCH|UNREACHABLE/);
    await until('both workers on A', async () => {
      const ws = await live(endpointId);
      return ws.length === 2 && ws.every((w) => w.status === 'IDLE' && w.hostId === idA);
    });
    // Nothing goes to B while its key is not trusted.
    await new Promise((r) => setTimeout(r, 1500));
    expect((await db().host.findUniqueOrThrow({ where: { id: idB } })).status).toBe('HOST_KEY_MISMATCH');

    const accepted = await call(running.url, 'POST', `/v2/hosts/${idB}/probe`, {
      key: p.adminKey,
      body: { acceptHostKey: newKey },
    });
    expect(accepted.body).toMatchObject({ status: 'READY', hostKeySha256: newKey });
    // Its container from before the change is removed by the reconcile once B is trusted again.
    await until(
      'the container left on B to go',
      async () => !managedContainers(idB).some((c) => c.workerId === onB.id),
      120_000,
      500,
    );
    await call(running.url, 'PATCH', `/v2/serverless/${endpointId}`, {
      key: p.adminKey,
      body: { workers: { min: 0, max: 0 } },
    });
  }, 240_000);

  it('removes a host with workers: they drain and move, then the host goes', async () => {
    const [idA, idB] = hostIds as [string, string];
    const created = await call(running.url, 'POST', '/v2/serverless', {
      key: p.adminKey,
      body: { name: 'evict', image: IMAGE, workers: { min: 2, max: 2 } },
    });
    const endpointId = created.body.id as string;
    await until('workers on both hosts', async () => {
      const ws = await live(endpointId);
      return ws.length === 2 && ws.every((w) => w.status === 'IDLE') && new Set(ws.map((w) => w.hostId)).size === 2;
    });
    const removal = await call(running.url, 'DELETE', `/v2/hosts/${idA}`, { key: p.adminKey });
    expect(removal.status).toBe(202);
    expect(removal.body).toMatchObject({ id: idA, status: 'DISABLED' });
    await until('host A to be gone', async () => (await db().host.count({ where: { id: idA } })) === 0, 120_000, 500);
    const ws = await until('both workers on B', async () => {
      const x = await live(endpointId);
      return x.length === 2 && x.every((w) => w.status === 'IDLE' && w.hostId === idB) ? x : undefined;
    });
    expect(managedContainers(idA)).toEqual([]);
    expect(
      managedContainers(idB)
        .filter((c) => c.endpointId === endpointId)
        .map((c) => c.workerId)
        .sort(),
    ).toEqual(ws.map((w) => w.id).sort());
  }, 240_000);
});
