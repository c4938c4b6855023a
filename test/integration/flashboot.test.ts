/**
 * FlashBoot for real (docs/endpoints.md, "FlashBoot"): with OFF an idle worker is removed; with
 * FLASHBOOT it is frozen on its host (podman pause) and thawed by the next job, the same process
 * answering with its model loaded once. A release, OFF and the endpoint's deletion end standbys; a
 * worker of another account that needs the room evicts them; another account's endpoint never
 * thaws them; a restart of Gantry keeps them.
 *
 * The worker: Gantry's Python runtime (the example worker's image) with a start command that loads
 * a "model" for 3 s (a 64 MB buffer) before it takes jobs, and answers with its process id, a token
 * made at its start, and how many times it loaded.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exampleWorkerImage } from '../../domain/apps/index.ts';
import { call, startTestPlatform } from '../support/platform.ts';
import { graphql } from '../support/pods.ts';
import { ensureFlashBaseImage } from '../support/flash-base-image.ts';
import { ensurePythonBaseImage } from '../support/python-base-image.ts';
import {
  containerState,
  removeManagedContainers,
  startOneHostPlatform,
  until,
  type OneHostPlatform,
} from '../support/orchestration.ts';

/** Loads for 3 s, then serves: `{pid, boot, loads, echo}`. */
const SLOW_WORKER = [
  'import os, time, uuid',
  'from gantry._runtime_queue import QueueWorker',
  'from gantry._runtime_stop import Stopper',
  'time.sleep(3)',
  'MODEL = bytearray(64 * 1024 * 1024)',
  'BOOT = uuid.uuid4().hex',
  'LOADS = 1',
  'def handler(**inp):',
  '    return {"pid": os.getpid(), "boot": BOOT, "loads": LOADS, "echo": inp}',
  's = Stopper()',
  's.install()',
  'QueueWorker(handler, os.environ, s).run()',
].join('\n');
const SLOW_WORKER_ARGS = `python3 -c '${SLOW_WORKER}'`;

/** The same on the hosted service's worker SDK (`runpod`, as flash's base carries it). */
const SLOW_SDK_WORKER = [
  'import os, time, uuid',
  'import runpod',
  'time.sleep(3)',
  'MODEL = bytearray(64 * 1024 * 1024)',
  'BOOT = uuid.uuid4().hex',
  'def handler(job):',
  '    return {"pid": os.getpid(), "boot": BOOT, "loads": 1, "echo": job["input"]}',
  'runpod.serverless.start({"handler": handler})',
].join('\n');

describe('FlashBoot standby workers', () => {
  let f: OneHostPlatform;
  let otherKey: string;
  const api = (method: string, route: string, body?: unknown, key?: string) =>
    call(f.p.url, method, route, { key: key ?? f.p.adminKey, body });
  const workers = async (id: string, key?: string) =>
    (await api('GET', `/v2/serverless/${id}/workers`, undefined, key)).body as {
      workers: Array<{ id: string; status: string; statusReason: string | null }>;
      summary: Record<string, number>;
    };
  const create = async (name: string, flashboot: string, key?: string, extra: Record<string, unknown> = {}) => {
    const r = await api(
      'POST',
      '/v2/serverless',
      {
        name,
        image: exampleWorkerImage(),
        args: SLOW_WORKER_ARGS,
        workers: { min: 0, max: 1 },
        scaling: { type: 'QUEUE_DELAY', value: 1, idleTimeout: 1 },
        flashboot,
        ...extra,
      },
      key,
    );
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    return r.body.id as string;
  };
  const runsync = async (id: string, input: unknown, key?: string) => {
    const started = Date.now();
    const r = await api('POST', `/v2/${id}/runsync?wait=120000`, { input }, key);
    expect(r.body, JSON.stringify(r.body)).toMatchObject({ status: 'COMPLETED' });
    return { output: r.body.output as { pid: number; boot: string; loads: number }, ms: Date.now() - started };
  };
  /** The endpoint's one worker once it stands by, its container paused. */
  const standby = async (id: string, key?: string) =>
    until(
      `a standby worker of ${id}`,
      async () => {
        const w = (await workers(id, key)).workers.find((x) => x.status === 'STANDBY');
        return w && containerState(w.id) === 'paused' ? w : undefined;
      },
      60_000,
      300,
      () => workers(id, key),
    );

  /**
   * Resets every connection of the worker-facing listener, as a platform restart or an idle timeout
   * would close them while a worker is frozen: the thawed worker's runtime must open new ones.
   */
  const breakWorkerConnections = (): void => {
    const port = new URL(f.p.ctx.workerUrl ?? f.p.url).port;
    const r = spawnSync('ss', ['-K', 'state', 'established', '(', 'sport', '=', `:${port}`, ')'], { encoding: 'utf8' });
    expect(r.stdout, r.stderr).toContain(`:${port}`);
  };

  beforeAll(async () => {
    await ensurePythonBaseImage('3.11');
    delete process.env.GANTRY_RUNTIME_BASE_IMAGE;
    // One sealing key for the platform and its restart (the host's SSH key is stored sealed).
    process.env.GANTRY_SECRET_KEY = randomBytes(32).toString('hex');
    f = await startOneHostPlatform('flashboot-host');
    const other = await api('POST', '/v2/accounts', { email: 'other@example.test', name: 'Other' });
    otherKey = (
      await api('POST', '/v2/keys', { name: 'other', scopes: ['READ', 'WRITE', 'RUN'], accountId: other.body.id })
    ).body.key;
  }, 600_000);
  afterAll(async () => {
    await f?.stop();
    delete process.env.GANTRY_SECRET_KEY;
  }, 120_000);

  it('OFF removes an idle worker; FLASHBOOT freezes it and the next job thaws the same process, its model loaded once', async () => {
    const off = await create('fb-off', 'OFF');
    const first = await runsync(off, { n: 1 });
    await until('the OFF worker removed', async () => (await workers(off)).workers.length === 0, 60_000);

    const on = await create('fb-on', 'FLASHBOOT');
    const cold = await runsync(on, { n: 1 });
    expect(cold.ms).toBeGreaterThan(3000);
    const w = await standby(on);
    expect(w.statusReason).toMatch(/FlashBoot/);
    const health = await api('GET', `/v2/${on}/health`);
    expect(health.body.workers).toMatchObject({ idle: 1, running: 0 });
    expect((await workers(on)).summary).toMatchObject({ standby: 1, idle: 0, total: 1 });
    const gql = await graphql(
      f.p,
      `
        {
          myself {
            endpoints {
              id
              pods {
                id
                workerStatus
              }
            }
          }
        }
      `,
    );
    expect(gql.data.myself.endpoints.find((e: { id: string }) => e.id === on).pods).toEqual([
      { id: w.id, workerStatus: 'STANDBY' },
    ]);
    // No job reaches a frozen worker: it is thawed first.
    const warm = await runsync(on, { n: 2 });
    expect(warm.output).toMatchObject({ pid: cold.output.pid, boot: cold.output.boot, loads: 1, echo: { n: 2 } });
    expect(warm.ms).toBeLessThan(3000);
    expect((await workers(on)).workers.map((x) => x.id)).toEqual([w.id]);
    expect(first.output.boot).not.toBe(cold.output.boot);
    // It stands by again once idle, and thaws again, its connections broken meanwhile.
    await standby(on);
    breakWorkerConnections();
    const again = await runsync(on, { n: 3 });
    expect(again.output.boot).toBe(cold.output.boot);
  }, 300_000);

  it('the hosted service’s worker SDK serves again after a thaw, re-opening what the freeze broke', async () => {
    const image = await ensureFlashBaseImage('3.11');
    const id = await create('fb-sdk', 'FLASHBOOT', undefined, { image, args: `python3 -c '${SLOW_SDK_WORKER}'` });
    const cold = await runsync(id, { n: 1 });
    expect(cold.ms).toBeGreaterThan(3000);
    await standby(id);
    breakWorkerConnections();
    const warm = await runsync(id, { n: 2 });
    expect(warm.output).toMatchObject({ pid: cold.output.pid, boot: cold.output.boot, echo: { n: 2 } });
    // The same process (pid and boot above), so no reload; and no 5 s hold of a worker that takes no
    // jobs. About 0.5 s on an idle machine; 3.3 s once with the rest of the suite at load average 14.
    expect(warm.ms, `warm call ${warm.ms} ms after a cold start of ${cold.ms} ms`).toBeLessThan(4500);
  }, 300_000);

  it('a new release, OFF and the deletion of the endpoint each end its standby', async () => {
    const id = await create('fb-life', 'FLASHBOOT');
    const gone = (workerId: string, why: RegExp) =>
      until(
        `standby ${workerId} ended`,
        async () => {
          const row = await f.p.ctx.db.worker.findUnique({ where: { id: workerId } });
          return (
            (!row || row.status === 'STOPPED') &&
            containerState(workerId) === 'gone' &&
            (!row || why.test(row.statusReason ?? ''))
          );
        },
        60_000,
        300,
        () => f.p.ctx.db.worker.findUnique({ where: { id: workerId } }),
      );

    await runsync(id, { n: 1 });
    const v1 = await standby(id);
    const patched = await api('PATCH', `/v2/serverless/${id}`, { env: { RELEASE: '2' } });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    await gone(v1.id, /release v1 was replaced by v2/);
    // The next job starts a worker of release 2 (a cold start), which stands by in turn.
    const r2 = await runsync(id, { n: 2 });
    expect(r2.ms).toBeGreaterThan(3000);
    const v2 = await standby(id);
    expect(v2.id).not.toBe(v1.id);

    expect((await api('PATCH', `/v2/serverless/${id}`, { flashboot: 'OFF' })).status).toBe(200);
    await gone(v2.id, /FlashBoot was turned off/);

    expect((await api('PATCH', `/v2/serverless/${id}`, { flashboot: 'PRIORITY_FLASHBOOT' })).status).toBe(200);
    await runsync(id, { n: 3 });
    const v3 = await standby(id);
    expect((await api('DELETE', `/v2/serverless/${id}`)).status).toBeLessThan(300);
    await gone(v3.id, /deleted/);
  }, 300_000);

  it('another account never thaws a standby; a worker of another account that needs its room evicts it', async () => {
    const mine = await create('fb-mine', 'FLASHBOOT');
    const mineRun = await runsync(mine, { n: 1 });
    const held = await standby(mine);

    // Another account's endpoint of the same image and command: its job starts its own worker.
    const theirs = await create('fb-theirs', 'OFF', otherKey);
    const theirRun = await runsync(theirs, { n: 1 }, otherKey);
    expect(theirRun.output.boot).not.toBe(mineRun.output.boot);
    expect(theirRun.ms).toBeGreaterThan(3000);
    expect((await workers(mine)).workers).toEqual([expect.objectContaining({ id: held.id, status: 'STANDBY' })]);
    expect(containerState(held.id)).toBe('paused');
    await until('their worker removed', async () => (await workers(theirs, otherKey)).workers.length === 0, 60_000);

    // A host with room for one worker: the standby holds it, and their next job needs it.
    expect((await api('PATCH', `/v2/hosts/${f.hostId}`, { maxWorkers: 1 })).status).toBe(200);
    try {
      const evicting = await runsync(theirs, { n: 2 }, otherKey);
      expect(evicting.output.boot).not.toBe(mineRun.output.boot);
      const row = await f.p.ctx.db.worker.findUniqueOrThrow({ where: { id: held.id } });
      expect(row.status).toBe('STOPPED');
      expect(row.statusReason).toMatch(/^evicted/);
      expect(containerState(held.id)).toBe('gone');
      // What their account sees names no one else's worker.
      expect(JSON.stringify(await workers(theirs, otherKey))).not.toContain(held.id);
    } finally {
      expect((await api('PATCH', `/v2/hosts/${f.hostId}`, { maxWorkers: null })).status).toBe(200);
    }
  }, 300_000);

  it('a restart of Gantry keeps its standbys: the host reconcile adopts the frozen container and a job thaws it', async () => {
    const id = await create('fb-restart', 'PRIORITY_FLASHBOOT');
    const before = await runsync(id, { n: 1 });
    const held = await standby(id);

    const port = new URL(f.p.url).port;
    const workerPort = new URL(f.p.ctx.workerUrl ?? f.p.url).port;
    const { databaseUrl, taskQueue, adminKey } = f.p;
    await f.p.stop();
    const p = await startTestPlatform({
      DATABASE_URL: databaseUrl,
      GANTRY_TASK_QUEUE: taskQueue,
      GANTRY_ADMIN_API_KEY: adminKey,
      PORT: port,
      GANTRY_WORKER_PORT: workerPort,
    });
    const { hostId, sshHost } = f;
    f = {
      ...f,
      p: { ...p, url: f.p.url, adminKey, taskQueue },
      stop: async () => {
        await p.stop();
        removeManagedContainers([hostId]);
        await sshHost.stop();
      },
    };
    // The host's reconcile after the start found the container of a live worker: adopted, still frozen.
    await new Promise((r) => setTimeout(r, 3000));
    expect(containerState(held.id)).toBe('paused');
    expect((await workers(id)).workers).toEqual([expect.objectContaining({ id: held.id, status: 'STANDBY' })]);
    const after = await runsync(id, { n: 2 });
    expect(after.output).toMatchObject({ pid: before.output.pid, boot: before.output.boot, loads: 1 });
  }, 300_000);
});
