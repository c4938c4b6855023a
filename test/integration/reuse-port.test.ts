/**
 * Several API processes behind one address (GANTRY_REUSE_PORT): two platforms listening on the same
 * port, the kernel spreading connections between them, both proxying the same load-balancing
 * endpoint, and a revoked key refused on every connection, whichever process holds it, within the
 * revocation bound. Two platforms in one test process share nothing but the database and Temporal,
 * as two processes do.
 */
import { Agent, fetch as undiciFetch } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../support/ports.ts';
import { call, startTestPlatform, type TestPlatform } from '../support/platform.ts';
import {
  createLbEndpoint,
  createLoopbackHost,
  registerWorker,
  startLbWorker,
  stats,
  type LbWorkerProcess,
} from '../support/lb.ts';

let port: number;
let base: string;
let first: TestPlatform;
let second: TestPlatform;
let worker: LbWorkerProcess;
let endpointId: string;

/** The settings of an API process joining `first` on its port. */
const joining = (reusePort: boolean): Record<string, string> => ({
  PORT: String(port),
  DATABASE_URL: first.databaseUrl,
  GANTRY_TASK_QUEUE: first.taskQueue,
  GANTRY_ADMIN_API_KEY: first.adminKey,
  GANTRY_ROLE: 'api',
  ...(reusePort ? { GANTRY_REUSE_PORT: 'true' } : {}),
});

beforeAll(async () => {
  port = await freePort();
  base = `http://127.0.0.1:${port}`;
  first = await startTestPlatform({ PORT: String(port), GANTRY_REUSE_PORT: 'true' });
  second = await startTestPlatform(joining(true));
  worker = await startLbWorker('w-shared');
  endpointId = await createLbEndpoint({ ...first, url: base }, 'reuse-port');
  await registerWorker(first.ctx.db, { endpointId, hostId: await createLoopbackHost(first.ctx.db), port: worker.port });
}, 300_000);

afterAll(async () => {
  await worker?.stop();
  await second?.stop();
  await first?.stop();
});

/** `n` connections of their own to the shared port, each asked `route` once and kept open. */
async function onFreshConnections(
  n: number,
  route: string,
  key: string,
): Promise<{ statuses: number[]; close: () => Promise<void> }> {
  const agents = Array.from({ length: n }, () => new Agent({ connections: 1, keepAliveTimeout: 30_000 }));
  const statuses = await Promise.all(
    agents.map(async (dispatcher) => {
      const res = await undiciFetch(base + route, { headers: { authorization: `Bearer ${key}` }, dispatcher });
      await res.arrayBuffer();
      return res.status;
    }),
  );
  return { statuses, close: async () => void (await Promise.all(agents.map((a) => a.close()))) };
}

const connectionsOf = (p: TestPlatform): Promise<number> =>
  new Promise((resolve, reject) => p.app!.server.getConnections((err, n) => (err ? reject(err) : resolve(n))));

describe('two API processes on one port (GANTRY_REUSE_PORT)', () => {
  it('is refused without the setting: the port is taken', async () => {
    await expect(startTestPlatform(joining(false))).rejects.toThrow(/EADDRINUSE/);
  });

  it('spreads connections over both, and each proxies the endpoint to its worker', async () => {
    const before = (await stats(worker)).served;
    const { statuses, close } = await onFreshConnections(24, `/lb/${endpointId}/health`, first.adminKey);
    try {
      expect(statuses).toEqual(Array(24).fill(200));
      // Both listeners took some of them (24 connections all hashed to one socket: about 2^-23).
      expect(await connectionsOf(first)).toBeGreaterThan(0);
      expect(await connectionsOf(second)).toBeGreaterThan(0);
      // Every request reached the worker (its health probes count too).
      expect((await stats(worker)).served - before).toBeGreaterThanOrEqual(24);
    } finally {
      await close();
    }
  });

  it('refuses a revoked key on every connection within the revocation bound', async () => {
    const created = await call(base, 'POST', '/v2/keys', {
      key: first.adminKey,
      body: { name: 'shared-port', scopes: ['RUN'] },
    });
    expect(created.status).toBe(201);
    const { key, id } = created.body as { key: string; id: string };
    const warm = await onFreshConnections(16, `/lb/${endpointId}/health`, key);
    expect(warm.statuses).toEqual(Array(16).fill(200));
    await warm.close();
    const revoked = await call(base, 'DELETE', `/v2/keys/${id}`, { key: first.adminKey });
    expect(revoked.status).toBe(204);
    // The revocation bound (docs/security.md): 1 s after the revocation, no process takes the key.
    await new Promise((r) => setTimeout(r, 1_000));
    const after = await onFreshConnections(16, `/lb/${endpointId}/health`, key);
    try {
      expect(after.statuses).toEqual(Array(16).fill(401));
      expect(await connectionsOf(first)).toBeGreaterThan(0);
      expect(await connectionsOf(second)).toBeGreaterThan(0);
    } finally {
      await after.close();
    }
  });
});
