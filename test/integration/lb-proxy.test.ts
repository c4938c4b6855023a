/**
 * The load-balancing proxy against real parts: the platform (API, PostgreSQL, Temporal) in this
 * process, and real worker HTTP servers (test/fixtures/lb-worker) as separate processes registered
 * as Worker rows the way the orchestration leaves ready workers.
 */
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { buildApp } from '../../api/server.ts';
import { issueApiKey } from '../../domain/accounts/index.ts';
import { newId } from '../../domain/shared/index.ts';
import { lbEndpointLoad, lbWorkerInFlight } from '../../domain/load-balancing/index.ts';
import { REVOCATION_BOUND_MS } from '../../domain/shared/index.ts';
import { endpointWorkflowId } from '../../contracts/workflows.ts';
import { call, startTestPlatform, type TestPlatform } from '../support/platform.ts';
import {
  createLbEndpoint,
  createLoopbackHost,
  rawRequest,
  registerWorker,
  startLbWorker,
  until,
  type LbWorkerProcess,
} from './lb-support.ts';

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

const stats = async (w: LbWorkerProcess): Promise<{ served: number; inFlight: number; maxInFlight: number }> =>
  (await fetch(`http://127.0.0.1:${w.port}/stats`)).json() as never;

function expectProblem(
  r: { status: number; headers: Headers | http.IncomingHttpHeaders; body?: unknown },
  status: number,
  detail: RegExp,
): void {
  const type = r.headers instanceof Headers ? r.headers.get('content-type') : r.headers['content-type'];
  expect(type).toMatch(/^application\/problem\+json/);
  expect(r.body).toMatchObject({ status, title: expect.any(String), detail: expect.stringMatching(detail) });
}

describe('HTTP through the proxy', () => {
  it('routes several paths of one endpoint to its worker with the body unchanged, without the bearer key', async () => {
    const { endpointId, base } = await endpointWithWorkers('routes', ['w-routes']);
    const view = await call(p.url, 'GET', `/v2/serverless/${endpointId}`, { key: p.adminKey });
    expect(view.body.requestUrls).toEqual({ base: `https://${endpointId}.${DOMAIN}` });

    const processed = await call(base, 'POST', '/process', {
      key: p.adminKey,
      body: { prompt: 'a cat', steps: [1, 2, 3] },
      headers: { 'x-client': 'yes' },
    });
    expect(processed.status).toBe(200);
    expect(processed.body).toMatchObject({ worker: 'w-routes', output: { prompt: 'a cat', steps: [1, 2, 3] } });
    const seen = processed.body.headers;
    expect(seen.authorization).toBeUndefined();
    expect(seen['x-client']).toBe('yes');
    expect(seen['x-forwarded-for']).toBe('127.0.0.1');
    expect(seen['x-forwarded-prefix']).toBe(`/lb/${endpointId}`);
    expect(seen['x-forwarded-host']).toBe(new URL(p.url).host);

    const health = await call(base, 'GET', '/health', { key: p.adminKey });
    expect(health).toMatchObject({ status: 200, body: { status: 'ok', worker: 'w-routes' } });

    // Paths and query strings arrive as sent; the bare base address is the worker's "/".
    const echoed = await call(base, 'GET', '/a/b%20c/?x=1&x=2&y=%2F+z', { key: p.adminKey });
    expect(echoed.body).toMatchObject({ method: 'GET', url: '/a/b%20c/?x=1&x=2&y=%2F+z' });
    const root = await call(p.url, 'GET', `/lb/${endpointId}`, { key: p.adminKey });
    expect(root.body).toMatchObject({ url: '/' });
    const put = await call(base, 'PUT', '/things/7', {
      key: p.adminKey,
      rawBody: 'plain text body',
      headers: { 'content-type': 'text/plain' },
    });
    expect(put.body).toMatchObject({ method: 'PUT', url: '/things/7', bodyBytes: 15 });

    // A redirect to a worker path stays under the endpoint's prefix.
    const redirect = await fetch(`${base}/redirect`, {
      headers: { authorization: `Bearer ${p.adminKey}` },
      redirect: 'manual',
    });
    expect(redirect.status).toBe(302);
    expect(redirect.headers.get('location')).toBe(`/lb/${endpointId}/health`);
  });

  it('answers platform errors as problem+json without reaching the worker, and passes worker errors through untouched', async () => {
    const { endpointId, base, procs } = await endpointWithWorkers('errors', ['w-errors']);
    const [w] = procs;
    const before = (await stats(w!)).served;

    expectProblem(await call(base, 'POST', '/process', { body: { a: 1 } }), 401, /missing bearer token/);
    expectProblem(
      await call(base, 'POST', '/process', { key: 'gntr_not_a_real_key_at_all', body: { a: 1 } }),
      401,
      /invalid bearer token/,
    );
    const readOnly = await issueApiKey(p.ctx.db, adminAccountId, 'read only', ['READ']);
    expectProblem(await call(base, 'GET', '/health', { key: readOnly.key }), 403, /run scope/);
    const elsewhere = await issueApiKey(p.ctx.db, adminAccountId, 'other endpoint', ['RUN'], undefined, [
      'someotherendpoint',
    ]);
    expectProblem(await call(base, 'GET', '/health', { key: elsewhere.key }), 403, /does not reach that endpoint/);
    const other = await p.ctx.db.account.create({
      data: { id: newId(), email: `other-${newId()}@test`, name: 'other' },
    });
    const otherKey = await issueApiKey(p.ctx.db, other.id, 'other account', ['RUN']);
    expectProblem(await call(base, 'GET', '/health', { key: otherKey.key }), 404, /endpoint not found/);
    expectProblem(
      await call(p.url, 'GET', '/lb/nosuchendpoint1/health', { key: p.adminKey }),
      404,
      /endpoint not found/,
    );
    const queue = await call(p.url, 'POST', '/v2/serverless', {
      key: p.adminKey,
      body: { name: 'a-queue', image: 'img:1', gpu: { pools: ['AMPERE_24'] } },
    });
    expectProblem(await call(p.url, 'GET', `/lb/${queue.body.id}/health`, { key: p.adminKey }), 400, /queue-based/);
    expect((await stats(w!)).served).toBe(before + 1); // only the /stats call itself

    // A RUN key limited to this endpoint works; once revoked, it stops working within the revocation bound.
    const scoped = await issueApiKey(p.ctx.db, adminAccountId, 'this endpoint', ['RUN'], undefined, [endpointId]);
    expect((await call(base, 'GET', '/health', { key: scoped.key })).status).toBe(200);
    await p.ctx.db.apiKey.update({ where: { id: scoped.id }, data: { revokedAt: new Date() } });
    await new Promise((r) => setTimeout(r, REVOCATION_BOUND_MS + 100));
    expectProblem(await call(base, 'GET', '/health', { key: scoped.key }), 401, /invalid bearer token/);

    // The worker's own error answers pass through as they are, and are not retried.
    const servedBefore = (await stats(w!)).served;
    const r = await fetch(`${base}/status/503`, { headers: { authorization: `Bearer ${p.adminKey}` } });
    expect(r.status).toBe(503);
    expect(r.headers.get('content-type')).toBe('text/plain');
    expect(r.headers.get('x-worker-header')).toBe('w-errors');
    expect(await r.text()).toBe('worker w-errors says 503');
    expect((await stats(w!)).served).toBe(servedBefore + 2);
    const teapot = await call(base, 'GET', '/status/418', { key: p.adminKey });
    expect(teapot).toMatchObject({ status: 418, body: 'worker w-errors says 418' });
  });

  it('answers 504 when the worker does not answer within the endpoint timeout', async () => {
    const { base } = await endpointWithWorkers('slow', ['w-slow'], { timeout: 1000 });
    const started = Date.now();
    const r = await call(base, 'GET', '/slow?ms=2500', { key: p.adminKey });
    expectProblem(r, 504, /did not answer within the endpoint's timeout of 1000 ms/);
    expect(Date.now() - started).toBeLessThan(2400);
  });

  it('drops the request to the worker when the client hangs up, so that the worker can stop working on it, and logs no warning for it', async () => {
    const { endpointId, procs } = await endpointWithWorkers('hangup', ['w-hangup']);
    const w = procs[0]!;
    // An API process of its own, whose log lines are kept: a hang-up is the client's choice, no fault.
    const lines: Array<{ level: number; msg: string }> = [];
    const app = buildApp(p.ctx, {
      logLevel: 'info',
      logStream: { write: (line) => lines.push(JSON.parse(line) as { level: number; msg: string }) },
    });
    await app.listen({ host: '127.0.0.1', port: 0 });
    try {
      const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/lb/${endpointId}`;
      const req = http.request(`${base}/slow?ms=6000`, { headers: { authorization: `Bearer ${p.adminKey}` } });
      req.on('error', () => {}); // the hang-up below
      req.end();
      await until('the worker to be working on the request', async () => (await stats(w)).inFlight === 1);
      const hungUp = Date.now();
      req.destroy();
      await until('the worker to see its connection close', async () => (await stats(w)).inFlight === 0, 5000);
      expect(Date.now() - hungUp).toBeLessThan(3000);
      await until('the hang-up logged', async () => lines.some((l) => l.msg.includes('client hung up')), 5000);
      expect(lines.filter((l) => l.level >= 40)).toEqual([]);
    } finally {
      await app.close();
    }
  });

  it('streams response and request bodies through without buffering them', async () => {
    const { endpointId, base } = await endpointWithWorkers('streams', ['w-stream']);
    const res = await fetch(`${base}/stream?chunks=3&gapMs=500`, {
      headers: { authorization: `Bearer ${p.adminKey}` },
    });
    const arrivals: number[] = [];
    let text = '';
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      arrivals.push(Date.now());
      text += Buffer.from(chunk).toString();
    }
    expect(text.split('\n').filter(Boolean)).toHaveLength(3);
    expect(arrivals.length).toBeGreaterThanOrEqual(3);
    expect(arrivals.at(-1)! - arrivals[0]!).toBeGreaterThan(800);

    // Full duplex: each chunk of the request comes back before the next one is sent, so neither
    // direction waits for the whole body.
    const u = new URL(`${p.url}/lb/${endpointId}/duplex`);
    const echoed = await new Promise<string>((resolve, reject) => {
      const req = http.request(u, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${p.adminKey}`,
          'content-type': 'application/octet-stream',
          'transfer-encoding': 'chunked',
        },
      });
      req.on('error', reject);
      req.on('response', (response) => {
        let got = '';
        const parts = ['two|', 'three|'];
        response.on('data', (c: Buffer) => {
          got += c.toString();
          const next = parts.shift();
          if (next) req.write(next);
          else if (got.endsWith('three|')) req.end();
        });
        response.on('end', () => resolve(got));
      });
      req.write('one|');
      req.flushHeaders();
      setTimeout(() => reject(new Error('the duplex echo stalled: a body was buffered')), 10_000).unref();
    });
    expect(echoed).toBe('one|two|three|');

    // A body larger than the API's own body limit streams through.
    const big = Buffer.alloc(24 * 1024 * 1024, 7);
    const upload = await call(base, 'POST', '/upload', {
      key: p.adminKey,
      rawBody: big as never,
      headers: { 'content-type': 'application/octet-stream' },
    });
    expect(upload.body).toMatchObject({ method: 'POST', bodyBytes: big.length });
  });
});

describe('WebSocket through the proxy', () => {
  it('echoes messages, forwards the handshake without the key, and counts the open connection as in flight', async () => {
    const { endpointId, ids } = await endpointWithWorkers('sockets', ['w-ws']);
    const url = `${p.url.replace('http', 'ws')}/lb/${endpointId}/ws?room=7`;
    const ws = new WebSocket(url, 'chat.v1', {
      headers: { authorization: `Bearer ${p.adminKey}`, 'x-client': 'ws-test' },
    });
    const messages: Array<{ data: Buffer; binary: boolean }> = [];
    ws.on('message', (data: Buffer, binary) => messages.push({ data, binary }));
    await new Promise((resolve, reject) => {
      ws.once('open', resolve);
      ws.once('error', reject);
    });
    await until('the hello message', () => messages.length >= 1);
    const hello = JSON.parse(messages[0]!.data.toString());
    expect(hello).toMatchObject({ hello: 'w-ws', url: '/ws?room=7', protocol: 'chat.v1' });
    expect(hello.headers.authorization).toBeUndefined();
    expect(hello.headers['x-client']).toBe('ws-test');
    expect(ws.protocol).toBe('chat.v1');

    ws.send('ping 1');
    ws.send(Buffer.from([1, 2, 3, 255]));
    await until('two echoes', () => messages.length >= 3);
    expect(messages[1]).toMatchObject({ binary: false });
    expect(messages[1]!.data.toString()).toBe('ping 1');
    expect(messages[2]!.binary).toBe(true);
    expect([...messages[2]!.data]).toEqual([1, 2, 3, 255]);

    await until(
      'the open socket counted in PostgreSQL',
      async () => (await lbEndpointLoad(p.ctx.db, endpointId)).workers[ids[0]!]?.inFlight === 1,
    );
    ws.close();
    await until(
      'the closed socket no longer counted',
      async () => (await lbEndpointLoad(p.ctx.db, endpointId)).inFlight === 0,
    );

    // Without a key the handshake is refused with the platform's 401.
    const refused = await new Promise<number>((resolve, reject) => {
      const bad = new WebSocket(url);
      bad.on('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
      bad.on('open', () => reject(new Error('a WebSocket without a key was accepted')));
      bad.on('error', () => undefined);
    });
    expect(refused).toBe(401);
  });
});

describe('routing by host name', () => {
  it('sends every path of <endpointId>.<GANTRY_LB_DOMAIN> to the worker, the API paths included', async () => {
    const { endpointId } = await endpointWithWorkers('by-host', ['w-host']);
    const auth = { authorization: `Bearer ${p.adminKey}` };
    const host = `${endpointId}.${DOMAIN}`;
    const processed = await rawRequest(`${p.url}/process`, {
      method: 'POST',
      headers: { ...auth, host, 'content-type': 'application/json' },
      body: '{"n":1}',
    });
    expect(processed.status).toBe(200);
    expect(processed.json()).toMatchObject({ worker: 'w-host', output: { n: 1 } });
    expect(processed.json().headers.authorization).toBeUndefined();
    expect(processed.json().headers['x-forwarded-host']).toBe(host);
    expect(processed.json().headers['x-forwarded-prefix']).toBeUndefined();

    for (const path of ['/v2/serverless', '/healthz', `/lb/${endpointId}/health`, '/']) {
      const r = await rawRequest(`${p.url}${path}`, { headers: { ...auth, host } });
      expect(r.status, path).toBe(200);
      expect(r.json(), path).toMatchObject({ worker: 'w-host' });
    }
    // Host names are case-insensitive and may carry a port.
    const upper = await rawRequest(`${p.url}/health`, {
      headers: { ...auth, host: `${endpointId.toUpperCase()}.LB.Gantry.Test:443` },
    });
    expect(upper.json()).toMatchObject({ status: 'ok', worker: 'w-host' });

    const noKey = await rawRequest(`${p.url}/health`, { headers: { host } });
    expect(noKey.status).toBe(401);
    expect(noKey.headers['content-type']).toMatch(/^application\/problem\+json/);
    const unknown = await rawRequest(`${p.url}/health`, { headers: { ...auth, host: `nosuchendpoint1.${DOMAIN}` } });
    expect(unknown.status).toBe(404);

    // The API's own host still reaches the API.
    const api = await rawRequest(`${p.url}/v2/serverless/${endpointId}`, { headers: auth });
    expect(api.json()).toMatchObject({ id: endpointId, type: 'LOAD_BALANCING' });

    const ws = new WebSocket(`${p.url.replace('http', 'ws')}/ws`, { headers: { ...auth, host } });
    const hello = await new Promise<{ hello: string; url: string }>((resolve, reject) => {
      ws.once('message', (d: Buffer) => resolve(JSON.parse(d.toString())));
      ws.once('error', reject);
    });
    expect(hello).toMatchObject({ hello: 'w-host', url: '/ws' });
    ws.close();
  });
});

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
