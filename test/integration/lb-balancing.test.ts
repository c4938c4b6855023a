/**
 * The load-balancing proxy choosing among workers: fewest outstanding requests, waiting for a
 * worker at zero, health checks, rolling releases. Real parts as in lb-proxy.test.ts: the platform
 * in this process, real worker HTTP servers (test/fixtures/lb-worker) as separate processes.
 */
import net, { type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../api/server.ts';
import { issueApiKey } from '../../domain/accounts/index.ts';
import { lbEndpointLoad, lbWorkerInFlight } from '../../domain/load-balancing/index.ts';
import { endpointWorkflowId } from '../../contracts/workflows.ts';
import { call, startTestPlatform, type TestPlatform } from '../support/platform.ts';
import {
  createLbEndpoint,
  createLoopbackHost,
  expectProblem,
  registerWorker,
  startLbWorker,
  stats,
  until,
  type LbWorkerProcess,
} from '../support/lb.ts';

const DOMAIN = 'lb.gantry.test';
process.env.GANTRY_LB_DOMAIN = DOMAIN;
process.env.GANTRY_LB_HEALTH = JSON.stringify({ intervalMs: 200, failuresToRemove: 2, timeoutMs: 1000 });

let p: TestPlatform;
let hostId: string;
let adminAccountId: string;
const workers: LbWorkerProcess[] = [];

beforeAll(async () => {
  p = await startTestPlatform();
  hostId = await createLoopbackHost(p.ctx.db);
  adminAccountId = (await p.ctx.db.account.findFirstOrThrow({ where: { isAdmin: true } })).id;
});

afterAll(async () => {
  await Promise.all(workers.map((w) => w.stop()));
  await p?.stop();
});

async function worker(name: string, env: Record<string, string> = {}): Promise<LbWorkerProcess> {
  const w = await startLbWorker(name, env);
  workers.push(w);
  return w;
}

async function endpointWithWorkers(name: string, names: string[], extra: Record<string, unknown> = {}) {
  const endpointId = await createLbEndpoint(p, name, extra);
  const procs: LbWorkerProcess[] = [];
  const ids: string[] = [];
  for (const n of names) {
    const w = await worker(n);
    procs.push(w);
    ids.push(await registerWorker(p.ctx.db, { endpointId, hostId, port: w.port }));
  }
  return { endpointId, base: `${p.url}/lb/${endpointId}`, procs, ids };
}

describe('choosing workers', () => {
  it('leaves no count behind for a client that hangs up before a worker is chosen', async () => {
    const { endpointId, procs, ids } = await endpointWithWorkers('hung-up-early', ['w-hung-up-early']);
    const port = Number(new URL(p.url).port);
    // Each with a key of its own, so that the key is read from the database: the client is gone
    // while that read runs, before the proxy chose the worker.
    for (let i = 0; i < 20; i++) {
      const { key } = await issueApiKey(p.ctx.db, adminAccountId, `gone-${i}`, ['RUN']);
      const socket = net.connect(port, '127.0.0.1');
      await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
      socket.end(`GET /lb/${endpointId}/health HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${key}\r\n\r\n`);
      socket.destroy();
    }
    await new Promise((r) => setTimeout(r, 1_500));
    const load = await lbEndpointLoad(p.ctx.db, endpointId);
    expect(load.inFlight).toBe(0);
    expect(await lbWorkerInFlight(p.ctx.db, ids[0]!)).toBeLessThanOrEqual(1); // routable, nothing in flight
    expect((await stats(procs[0]!)).inFlight).toBe(0);
  });

  it('sends each request to the worker with the fewest outstanding requests, and publishes the counts in PostgreSQL', async () => {
    const { endpointId, base, procs, ids } = await endpointWithWorkers('least', ['w-a', 'w-b']);
    const names = new Map(procs.map((w, i) => [w.name, ids[i]!]));
    const auth = { authorization: `Bearer ${p.adminKey}` };
    const long = fetch(`${base}/slow?ms=2500`, { headers: auth }).then((r) => r.json() as Promise<{ worker: string }>);
    const load = await until('the long request published', async () => {
      const l = await lbEndpointLoad(p.ctx.db, endpointId);
      return l.inFlight === 1 ? l : undefined;
    });
    const busyId = Object.entries(load.workers).find(([, w]) => w.inFlight === 1)![0];
    // While one worker holds a request, every short request goes to the other one (not round-robin).
    const shortOnes: string[] = [];
    for (let i = 0; i < 6; i++)
      shortOnes.push(((await (await fetch(`${base}/health`, { headers: auth })).json()) as { worker: string }).worker);
    const otherName = procs.map((w) => w.name).find((n) => names.get(n) !== busyId)!;
    expect(shortOnes).toEqual(Array(6).fill(otherName));
    expect(names.get((await long).worker)).toBe(busyId);

    // Concurrent requests spread evenly.
    const burst = await Promise.all(
      Array.from({ length: 8 }, () =>
        fetch(`${base}/slow?ms=600`, { headers: auth }).then((r) => r.json() as Promise<{ worker: string }>),
      ),
    );
    const counts = burst.reduce<Record<string, number>>(
      (acc, r) => ({ ...acc, [r.worker]: (acc[r.worker] ?? 0) + 1 }),
      {},
    );
    expect(counts).toEqual({ 'w-a': 4, 'w-b': 4 });
    await until('all counts back to zero', async () => (await lbEndpointLoad(p.ctx.db, endpointId)).inFlight === 0);
    const after = await lbEndpointLoad(p.ctx.db, endpointId);
    for (const id of ids) expect(after.workers[id]!.idleForMs).toBeLessThan(10_000);
  });

  it('adds up the in-flight requests of several API processes and balances across them', async () => {
    const { endpointId, procs, ids } = await endpointWithWorkers('two-apis', ['w-x', 'w-y']);
    const second = buildApp(p.ctx, { logLevel: 'warn' });
    await second.listen({ host: '127.0.0.1', port: 0 });
    try {
      const secondUrl = `http://127.0.0.1:${(second.server.address() as AddressInfo).port}`;
      const auth = { authorization: `Bearer ${p.adminKey}` };
      const one = fetch(`${p.url}/lb/${endpointId}/slow?ms=3000`, { headers: auth });
      await until(
        'the first process published its request',
        async () => (await lbEndpointLoad(p.ctx.db, endpointId)).inFlight === 1,
      );
      const two = fetch(`${secondUrl}/lb/${endpointId}/slow?ms=3000`, { headers: auth });
      const load = await until('both processes published', async () => {
        const l = await lbEndpointLoad(p.ctx.db, endpointId);
        return l.inFlight === 2 ? l : undefined;
      });
      // The second process saw the first one's request and chose the other worker; both route to both.
      expect(Object.keys(load.workers).sort()).toEqual([...ids].sort());
      expect(Object.values(load.workers).map((w) => w.inFlight)).toEqual([1, 1]);
      expect(Object.values(load.workers).map((w) => w.routedBy)).toEqual([2, 2]);
      const answers = await Promise.all(
        [one, two].map(async (r) => ((await (await r).json()) as { worker: string }).worker),
      );
      expect(answers.sort()).toEqual(procs.map((w) => w.name).sort());
    } finally {
      await second.close();
    }
  });
});

describe('waiting for a worker', () => {
  it('holds requests at zero workers until one is ready, waking the autoscaler once', async () => {
    const endpointId = await createLbEndpoint(p, 'cold', { timeout: 30_000, workers: { min: 0, max: 2 } });
    const base = `${p.url}/lb/${endpointId}`;
    const settled: number[] = [];
    const pending = Array.from({ length: 3 }, (_, i) =>
      call(base, 'POST', '/process', { key: p.adminKey, body: { i } }).then((r) => {
        settled.push(i);
        return r;
      }),
    );
    const load = await until('three waiting requests published', async () => {
      const l = await lbEndpointLoad(p.ctx.db, endpointId);
      return l.waiting === 3 ? l : undefined;
    });
    expect(load.oldestWaitMs).toBeGreaterThanOrEqual(0);
    expect(load.inFlight).toBe(0);

    const signals = async (): Promise<number> => {
      const history = await p.ctx.temporal.workflow.getHandle(endpointWorkflowId(endpointId)).fetchHistory();
      return (history.events ?? []).filter(
        (e) => e.workflowExecutionSignaledEventAttributes?.signalName === 'queueNonEmpty',
      ).length;
    };
    await until('the autoscaler woken', async () => (await signals()) >= 1);

    // A starting worker is not ready: the requests keep waiting.
    const w = await worker('w-cold');
    const workerId = await registerWorker(p.ctx.db, { endpointId, hostId, port: w.port, status: 'INITIALIZING' });
    await new Promise((r) => setTimeout(r, 800));
    expect(settled).toEqual([]);

    await p.ctx.db.worker.update({ where: { id: workerId }, data: { status: 'IDLE', readyAt: new Date() } });
    const answers = await Promise.all(pending);
    for (const [i, r] of answers.entries())
      expect(r).toMatchObject({ status: 200, body: { worker: 'w-cold', output: { i } } });
    expect(await signals()).toBe(1);
    await until('no request waits any more', async () => (await lbEndpointLoad(p.ctx.db, endpointId)).waiting === 0);
  });

  it('answers 503 when no worker is ready within the endpoint timeout, and at once when workers.max is 0', async () => {
    const endpointId = await createLbEndpoint(p, 'never', { timeout: 1500 });
    const started = Date.now();
    const r = await call(p.url, 'POST', `/lb/${endpointId}/process`, { key: p.adminKey, body: {} });
    expectProblem(r, 503, /no worker of endpoint .* was ready within \d+ ms \(the endpoint's timeout is 1500 ms\)/);
    expect(r.headers.get('retry-after')).toBe('5');
    expect(Date.now() - started).toBeGreaterThanOrEqual(1400);

    const off = await createLbEndpoint(p, 'switched-off', { workers: { min: 0, max: 0 } });
    const quick = Date.now();
    expectProblem(await call(p.url, 'GET', `/lb/${off}/health`, { key: p.adminKey }), 503, /workers\.max 0/);
    expect(Date.now() - quick).toBeLessThan(1000);
  });
});

describe('worker health', () => {
  it('takes a worker whose health check fails out of rotation and brings it back when it passes', async () => {
    const { base, procs } = await endpointWithWorkers('health', ['w-sick', 'w-well']);
    const [sick] = procs;
    const auth = { authorization: `Bearer ${p.adminKey}` };
    const who = async (): Promise<string> =>
      ((await (await fetch(`${base}/slow?ms=1`, { headers: auth })).json()) as { worker: string }).worker;
    const first = new Set([await who(), await who()]);
    expect(first).toEqual(new Set(['w-sick', 'w-well']));
    await call(`http://127.0.0.1:${sick!.port}`, 'POST', '/control/ping', { body: { status: 503 } });
    // Equal workers alternate: two answers in a row from the healthy one mean the sick one is out.
    await until(
      'the sick worker out of rotation',
      async () => (await who()) === 'w-well' && (await who()) === 'w-well',
      10_000,
    );
    const during = [];
    for (let i = 0; i < 8; i++) during.push(await who());
    expect(during).toEqual(Array(8).fill('w-well'));

    await call(`http://127.0.0.1:${sick!.port}`, 'POST', '/control/ping', { body: { status: null } });
    await until('the sick worker back in rotation', async () => (await who()) === 'w-sick', 5000);
  });

  it('tries another worker when one cannot be reached, and answers 502 when none can', async () => {
    const { endpointId, base, procs } = await endpointWithWorkers('dying', ['w-dies', 'w-lives']);
    const auth = { authorization: `Bearer ${p.adminKey}` };
    await procs[0]!.stop('SIGKILL');
    const answers = await Promise.all(
      Array.from({ length: 6 }, () =>
        fetch(`${base}/health`, { headers: auth }).then(async (r) => ({
          status: r.status,
          body: (await r.json()) as { worker: string },
        })),
      ),
    );
    for (const a of answers) expect(a).toMatchObject({ status: 200, body: { worker: 'w-lives' } });

    // A worker row whose process is gone, alone: requests with a body are not replayed.
    const lonely = await createLbEndpoint(p, 'gone');
    const deadPort = procs[0]!.port;
    await registerWorker(p.ctx.db, { endpointId: lonely, hostId, port: deadPort });
    expectProblem(
      await call(p.url, 'POST', `/lb/${lonely}/process`, { key: p.adminKey, body: { a: 1 } }),
      502,
      /could not be reached \(ECONNREFUSED\)/,
    );
    await until('no request left in flight', async () => (await lbEndpointLoad(p.ctx.db, endpointId)).inFlight === 0);
  });
});

describe('rolling release', () => {
  it('switches workers under load without failing a request: new requests go to the ready worker, in-flight ones finish', async () => {
    const { endpointId, base, procs, ids } = await endpointWithWorkers('release', ['w-old']);
    const [oldProc] = procs;
    const oldId = ids[0]!;
    const auth = { authorization: `Bearer ${p.adminKey}`, 'content-type': 'application/json' };
    const results: Array<{ status: number; worker?: string; at: number; error?: string }> = [];
    // Bounded: the load ends 1.5 s after the switch, or after 30 s whatever happens.
    let stopAt = Date.now() + 30_000;
    let seq = 0;
    const loop = async (): Promise<void> => {
      while (Date.now() < stopAt) {
        const i = seq++;
        try {
          const r = await fetch(`${base}/process`, {
            method: 'POST',
            headers: auth,
            body: JSON.stringify({ i, sleepMs: 40 }),
          });
          const body = (await r.json()) as { worker?: string };
          results.push({ status: r.status, worker: body.worker, at: Date.now() });
        } catch (err) {
          results.push({ status: 0, error: String(err), at: Date.now() });
        }
      }
    };
    const load = Promise.all(Array.from({ length: 6 }, loop));

    await new Promise((r) => setTimeout(r, 1000));
    // The release: a new worker becomes ready, the old one drains the way the orchestration does it.
    const next = await worker('w-new');
    await registerWorker(p.ctx.db, { endpointId, hostId, port: next.port, releaseVersion: 1 });
    await new Promise((r) => setTimeout(r, 500));
    await p.ctx.db.worker.update({ where: { id: oldId }, data: { status: 'DRAINING' } });
    // Right after the status change the old worker still has routes or requests: a drain waits.
    expect(await lbWorkerInFlight(p.ctx.db, oldId)).toBeGreaterThan(0);
    await until(
      'the old worker free of routes and requests',
      async () => (await lbWorkerInFlight(p.ctx.db, oldId)) === 0,
      10_000,
    );
    const drainedAt = Date.now();
    expect(await oldProc!.stop('SIGTERM')).toBe(0);
    await p.ctx.db.worker.update({ where: { id: oldId }, data: { status: 'STOPPED', stoppedAt: new Date() } });
    stopAt = Date.now() + 1500;
    await load;

    const failed = results.filter((r) => r.status !== 200);
    expect(failed).toEqual([]);
    expect(results.filter((r) => r.worker === 'w-old').length).toBeGreaterThan(10);
    const late = results.filter((r) => r.at > drainedAt + 100);
    expect(late.length).toBeGreaterThan(10);
    expect(late.every((r) => r.worker === 'w-new')).toBe(true);
  });
});
