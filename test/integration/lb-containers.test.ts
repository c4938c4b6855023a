/**
 * A load-balancing endpoint end to end on real containers: an OpenSSH test host in front of Podman,
 * the test worker (test/fixtures/lb-worker, with the `ws` package beside it) in a locally built
 * image, started by the platform's own workflows with PORT and PORT_HEALTH, found ready by its
 * health check, and called through the proxy.
 */
import { spawnSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { lbEndpointLoad } from '../../domain/load-balancing/index.ts';
import { call, type TestPlatform } from '../support/platform.ts';
import { ensureLbWorkerImage, LB_WORKER_IMAGE, until } from '../support/lb.ts';
import { type OneHostPlatform, startOneHostPlatform } from '../support/orchestration.ts';
import { liveWorker } from '../../domain/workers/index.ts';

const IMAGE = LB_WORKER_IMAGE;

let fixture: OneHostPlatform | undefined;
let p: TestPlatform;
let hostId: string;

beforeAll(async () => {
  ensureLbWorkerImage();
  process.env.GANTRY_LB_HEALTH = JSON.stringify({ intervalMs: 300 });
  fixture = await startOneHostPlatform('lb-box');
  ({ p, hostId } = fixture);
}, 600_000);

afterAll(async () => {
  await fixture?.stop();
}, 120_000);

/** A load-balancing endpoint of the test image (no GPU: the test host has none); its id and address. */
async function lbEndpoint(name: string, body: Record<string, unknown>): Promise<{ endpointId: string; base: string }> {
  const created = await call(p.url, 'POST', '/v2/serverless', {
    key: p.adminKey,
    body: { name, type: 'LOAD_BALANCING', image: IMAGE, ...body },
  });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  return { endpointId: created.body.id as string, base: created.body.requestUrls.base as string };
}

describe('a load-balancing endpoint on real containers', () => {
  it('starts a worker with PORT and PORT_HEALTH, finds it ready by its health check, and proxies HTTP and WebSocket to it', async () => {
    const { endpointId, base } = await lbEndpoint('lb-real', {
      workers: { min: 1, max: 1 },
      scaling: { type: 'REQUEST_COUNT', value: 4, idleTimeout: 60 },
    });
    expect(base).toBe(`${p.url}/lb/${endpointId}`);

    const w = await until(
      'a ready worker with a host port',
      async () => {
        const rows = await p.ctx.db.worker.findMany({ where: { endpointId, status: { in: ['IDLE', 'RUNNING'] } } });
        return rows[0]?.hostPort ? rows[0] : undefined;
      },
      120_000,
      250,
    );
    expect(w.hostId).toBe(hostId);

    const env = await call(base, 'GET', '/env', { key: p.adminKey });
    // On the bridge network the app keeps its own port (80: the endpoint declares no http port); the
    // worker's host port is published to it.
    expect(env).toMatchObject({
      status: 200,
      body: { worker: w.id, PORT: '80', PORT_HEALTH: '80', RUNPOD_ENDPOINT_ID: endpointId },
    });
    const inspect = JSON.parse(spawnSync('podman', ['inspect', `gantry-${w.id}`], { encoding: 'utf8' }).stdout)[0];
    expect(inspect.HostConfig.NetworkMode).toBe('bridge');
    expect(inspect.HostConfig.PortBindings['80/tcp']).toEqual([
      expect.objectContaining({ HostPort: String(w.hostPort) }),
    ]);

    const processed = await call(base, 'POST', '/process', { key: p.adminKey, body: { prompt: 'in a container' } });
    expect(processed).toMatchObject({ status: 200, body: { worker: w.id, output: { prompt: 'in a container' } } });
    expect(processed.body.headers.authorization).toBeUndefined();
    expect((await call(base, 'GET', '/health', { key: p.adminKey })).body).toEqual({ status: 'ok', worker: w.id });
    expect((await call(base, 'GET', '/health')).status).toBe(401);

    const ws = new WebSocket(`${base.replace('http', 'ws')}/ws`, {
      headers: { authorization: `Bearer ${p.adminKey}` },
    });
    const messages: string[] = [];
    ws.on('message', (d: Buffer) => messages.push(d.toString()));
    await new Promise((resolve, reject) => {
      ws.once('open', resolve);
      ws.once('error', reject);
    });
    ws.send('hello container');
    await until('the echo', () => messages.length >= 2);
    expect(JSON.parse(messages[0]!)).toMatchObject({ hello: w.id });
    expect(messages[1]).toBe('hello container');
    await until('the open socket counted', async () => (await lbEndpointLoad(p.ctx.db, endpointId)).inFlight === 1);
    ws.close();
  }, 180_000);

  it('rolls a release out under load without failing a request', async () => {
    const { endpointId, base } = await lbEndpoint('lb-release', {
      workers: { min: 1, max: 1 },
      env: { GANTRY_TEST_RELEASE: 'one' },
    });
    const first = await until(
      'the first worker ready',
      async () => (await p.ctx.db.worker.findFirst({ where: { endpointId, status: 'IDLE' } })) ?? undefined,
      120_000,
      250,
    );

    const results: Array<{ status: number; worker?: string; detail?: string }> = [];
    let stop = false;
    const loop = async (): Promise<void> => {
      for (let i = 0; !stop; i++) {
        const r = await call(base, 'POST', '/process', { key: p.adminKey, body: { i, sleepMs: 40 } });
        results.push({ status: r.status, worker: r.body?.worker, detail: r.body?.detail });
      }
    };
    const load = Promise.all(Array.from({ length: 4 }, loop));
    await new Promise((r) => setTimeout(r, 500));
    const patched = await call(p.url, 'PATCH', `/v2/serverless/${endpointId}`, {
      key: p.adminKey,
      body: { env: { GANTRY_TEST_RELEASE: 'two' } },
    });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    const second = await until(
      'the old worker replaced',
      async () => {
        const old = await p.ctx.db.worker.findUnique({ where: { id: first.id } });
        const next = await p.ctx.db.worker.findFirst({ where: { endpointId, releaseVersion: 2, status: 'IDLE' } });
        return old?.status === 'STOPPED' && next ? next : undefined;
      },
      120_000,
      250,
    );
    await new Promise((r) => setTimeout(r, 1000));
    stop = true;
    await load;

    expect(results.filter((r) => r.status !== 200)).toEqual([]);
    expect(results.some((r) => r.worker === first.id)).toBe(true);
    expect(results.some((r) => r.worker === second.id)).toBe(true);
  }, 240_000);

  it('replaces a worker whose health check keeps failing while its container runs, and keeps one whose failure passes', async () => {
    const { endpointId } = await lbEndpoint('lb-sick', {
      workers: { min: 1, max: 1 },
      scaling: { type: 'REQUEST_COUNT', value: 4, idleTimeout: 60 },
    });
    const ready = async (not?: string) => {
      const rows = await p.ctx.db.worker.findMany({
        where: { endpointId, status: 'IDLE', id: { not } },
        include: { host: true },
      });
      return rows[0]?.hostPort ? rows[0] : undefined;
    };
    const w = await until('a ready worker', () => ready(), 120_000, 250);
    const setPing = (status: number | null) =>
      fetch(`http://${w.host!.address}:${w.hostPort}/control/ping`, {
        method: 'POST',
        body: JSON.stringify({ status }),
      });
    const row = () => p.ctx.db.worker.findUniqueOrThrow({ where: { id: w.id } });

    // A failure that passes within lbUnhealthySec (3 s here): noticed, then forgotten.
    await setPing(503);
    await until('the failing health check noticed', async () => (await row()).healthFailingSince !== null, 20_000, 100);
    await setPing(null);
    await until('the passing health check noticed', async () => (await row()).healthFailingSince === null, 20_000, 100);
    expect((await row()).status).toBe('IDLE');

    // One that lasts: the worker is given up and the endpoint gets a new one.
    await setPing(503);
    const replacement = await until('a replacement worker', () => ready(w.id), 120_000, 250);
    const failed = await row();
    expect(failed.status).toBe('FAILED');
    expect(failed.statusReason).toMatch(/^its health check kept failing for \d+ s: the health check answered 503/);
    expect(replacement.id).not.toBe(w.id);
    await call(p.url, 'PATCH', `/v2/serverless/${endpointId}`, {
      key: p.adminKey,
      body: { workers: { min: 0, max: 0 } },
    });
  }, 240_000);

  it('scales on requests: from zero to a worker per request in flight (REQUEST_COUNT), and back to zero when idle', async () => {
    const { endpointId, base } = await lbEndpoint('lb-scale', {
      workers: { min: 0, max: 2 },
      scaling: { type: 'REQUEST_COUNT', value: 1, idleTimeout: 2 },
    });
    const live = () => p.ctx.db.worker.findMany({ where: { endpointId, ...liveWorker } });
    expect(await live()).toEqual([]);

    // Two long requests at zero workers: the first worker starts for the waiting ones; with both
    // under way on it, REQUEST_COUNT 1 asks for a second.
    const requests = [1, 2].map((i) => call(base, 'POST', '/process', { key: p.adminKey, body: { i, sleepMs: 6000 } }));
    await until(
      'two workers for two requests in flight',
      async () => ((await live()).length === 2 ? true : undefined),
      120_000,
      250,
    );
    const answers = await Promise.all(requests);
    expect(answers.map((a) => a.status)).toEqual([200, 200]);

    // Idle for idleTimeout (2 s): both go.
    await until(
      'no live worker after the idle timeout',
      async () => ((await live()).length === 0 ? true : undefined),
      60_000,
      250,
    );
    const stopped = await p.ctx.db.worker.findMany({ where: { endpointId } });
    expect(stopped.length).toBe(2);
    expect(stopped.every((w) => w.status === 'STOPPED')).toBe(true);

    // Each worker's running time is metered, from its container's start to its stop (the 6 s
    // requests ran on them), and the usage stays when the endpoint and its worker rows go.
    const usage = await p.ctx.db.usageRecord.findMany({ where: { endpointId } });
    expect(usage.map((u) => [u.workerId, u.startedAt, u.endedAt]).sort()).toEqual(
      stopped.map((w) => [w.id, w.startedAt, w.stoppedAt]).sort(),
    );
    for (const u of usage) expect(u.seconds).toBeCloseTo((u.endedAt.getTime() - u.startedAt.getTime()) / 1000, 3);
    expect(Math.min(...usage.map((u) => u.seconds))).toBeGreaterThan(6);
    expect((await call(p.url, 'DELETE', `/v2/serverless/${endpointId}`, { key: p.adminKey })).status).toBeLessThan(300);
    await until(
      'the endpoint gone',
      async () => (await p.ctx.db.endpoint.findUnique({ where: { id: endpointId } })) === null,
      60_000,
      250,
    );
    expect(await p.ctx.db.usageRecord.count({ where: { endpointId } })).toBe(2);
  }, 240_000);
});
