/**
 * The load-balancing proxy against real parts: the platform (API, PostgreSQL, Temporal) in this
 * process, and real worker HTTP servers (test/fixtures/lb-worker) as separate processes registered
 * as Worker rows the way the orchestration leaves ready workers.
 */
import http from 'node:http';
import { type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { buildApp } from '../../api/server.ts';
import { issueApiKey } from '../../domain/accounts/index.ts';
import { newId } from '../../domain/shared/index.ts';
import { lbEndpointLoad } from '../../domain/load-balancing/index.ts';
import { REVOCATION_BOUND_MS } from '../../domain/shared/index.ts';
import { call, startTestPlatform, type TestPlatform } from '../support/platform.ts';
import {
  createLbEndpoint,
  createLoopbackHost,
  expectProblem,
  rawRequest,
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

  it("takes plain HTTP before Fastify and answers Fastify's own requests (inject) the same way, counted in the metrics either way", async () => {
    const { endpointId, base } = await endpointWithWorkers('hand-off', ['w-hand-off']);
    const auth = `Bearer ${p.adminKey}`;
    // Headers the client names in Connection describe its connection: the worker never sees them.
    const direct = await rawRequest(`${base}/any/path?q=1`, {
      headers: { authorization: auth, connection: 'keep-alive, x-hop', 'x-hop': 'secret', 'x-kept': 'yes' },
    });
    expect(direct.status).toBe(200);
    expect(direct.json()).toMatchObject({ worker: 'w-hand-off', method: 'GET', url: '/any/path?q=1' });
    expect(direct.json().headers['x-hop']).toBeUndefined();
    expect(direct.json().headers['x-kept']).toBe('yes');
    expect(direct.headers.ratelimit).toMatch(/^"minute";r=\d+;t=\d+, "hour";r=\d+;t=\d+, "day";r=\d+;t=\d+$/);
    expect(direct.headers['ratelimit-policy']).toMatch(
      /^"minute";q=\d+;w=60, "hour";q=\d+;w=3600, "day";q=\d+;w=86400$/,
    );

    // A body announced with Expect: 100-continue reaches the worker whole.
    const body = 'x'.repeat(70_000);
    const continued = await rawRequest(`${base}/upload`, {
      method: 'POST',
      headers: { authorization: auth, expect: '100-continue', 'content-type': 'text/plain' },
      body,
    });
    expect(continued.json()).toMatchObject({ method: 'POST', bodyBytes: body.length });

    // Through Fastify's routing (the server's hand-off is not in the way of inject): same checks, same answer.
    const injected = await p.app!.inject({
      method: 'GET',
      url: `/lb/${endpointId}/via/inject`,
      headers: { authorization: auth },
    });
    expect(injected.statusCode).toBe(200);
    expect(injected.json()).toMatchObject({ worker: 'w-hand-off', url: '/via/inject' });
    const refused = await p.app!.inject({ method: 'GET', url: `/lb/${endpointId}/via/inject` });
    expect(refused.statusCode).toBe(401);
    expect(refused.headers['content-type']).toMatch(/^application\/problem\+json/);
    // What cannot be an endpoint id is not looked up: 404, as an unknown one.
    const long = await rawRequest(`${p.url}/lb/${'a'.repeat(5_000)}/health`, { headers: { authorization: auth } });
    expect(long.status).toBe(404);
    expect(long.json().detail).toBe('endpoint not found');
    // A malformed Authorization header is a 401 problem, not a worker call.
    const malformed = await rawRequest(`${base}/health`, { headers: { authorization: 'Basic abc' } });
    expect(malformed.status).toBe(401);
    expect(malformed.json().detail).toMatch(/Bearer/);

    const metrics = await (await fetch(`${p.url}/metrics`)).text();
    const proxied =
      /gantry_http_request_duration_seconds_count\{method="GET",route="\/lb\/:endpointId\/\*",status="200"\} (\d+)/.exec(
        metrics,
      );
    expect(Number(proxied?.[1])).toBeGreaterThanOrEqual(2);
    expect(metrics).toMatch(/route="\/lb\/:endpointId\/\*",status="401"\}/);
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
