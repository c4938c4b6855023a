/**
 * Cheap requests that used to hurt every tenant: one GraphQL document stalling the event loop,
 * surfaces without a rate limit, unlimited queues, floods of bad keys, stack traces and keys in
 * logs. One platform with tight limits; the failed-authentication flood runs last, as it locks this
 * client's address out for the rest of the minute.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../api/server.ts';
import { ensureAdmin } from '../../domain/accounts/index.ts';
import { createQueueEndpoint, createWorker, workerCall } from '../support/jobs.ts';
import { call, startTestPlatform, type TestPlatform } from '../support/platform.ts';

const LIMITS = {
  GANTRY_RATE_LIMITS: 'minute=40',
  GANTRY_JOB_RATE_LIMITS: 'minute=5',
  GANTRY_PROXY_RATE_LIMITS: 'minute=2',
  GANTRY_AUTH_FAILURES_PER_MINUTE: '5',
  GANTRY_MAX_QUEUED_JOBS: '3',
};

/** Fixed windows: a test that counts up to a quota does not start in the last seconds of a minute. */
async function awayFromMinuteEdge(): Promise<void> {
  const s = new Date().getUTCSeconds();
  if (s >= 45) await sleep((61 - s) * 1000);
}

/** The longest a `/healthz` took while `during` ran: the event loop's stall, as a client sees it. */
async function healthzStall(url: string, during: Promise<unknown>): Promise<number> {
  let done = false;
  let worst = 0;
  const probe = (async () => {
    while (!done) {
      const t = performance.now();
      await fetch(`${url}/healthz`).then((r) => r.arrayBuffer());
      worst = Math.max(worst, performance.now() - t);
      await sleep(10);
    }
  })();
  await during;
  done = true;
  await probe;
  return worst;
}

/**
 * The machine's own pace right now: the median of a few `/healthz` round trips. Time bounds below
 * add a multiple of it, so that they hold on a machine busy with other work (a loaded CI run) and
 * still fail when the refused request does the work it must not do (seconds, not milliseconds).
 */
async function floorMs(url: string): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < 5; i++) {
    const t = performance.now();
    await fetch(`${url}/healthz`).then((r) => r.arrayBuffer());
    times.push(performance.now() - t);
  }
  return times.sort((a, b) => a - b)[2]!;
}

describe('abuse limits on every surface', () => {
  let p: TestPlatform;
  const savedNodeEnv = process.env.NODE_ENV;

  beforeAll(async () => {
    // `npm start` sets no NODE_ENV: that is the environment whose errors must carry no stack trace.
    delete process.env.NODE_ENV;
    p = await startTestPlatform(LIMITS);
  });
  afterAll(async () => {
    process.env.NODE_ENV = savedNodeEnv;
    await p?.stop();
  });

  const gql = (body: unknown, key = p.adminKey) => call(p.url, 'POST', '/graphql', { key, body });

  it('GraphQL: a document of thousands of tokens is refused while parsing, and the event loop stays free', async () => {
    const vars = Array.from({ length: 15_000 }, (_, i) => `$v${i}: Int`).join(', ');
    const query = `query Q(${vars}) { myself { id } }`;
    expect(query.length).toBeLessThan(256 * 1024);
    let answer: Awaited<ReturnType<typeof gql>> | undefined;
    const floor = await floorMs(p.url);
    const started = performance.now();
    const stall = await healthzStall(
      p.url,
      gql({ query }).then((r) => (answer = r)),
    );
    expect(answer!.status).toBe(400);
    expect(answer!.body.errors[0].message).toMatch(/Document contains more tha[nt] 5000 tokens/);
    expect(performance.now() - started).toBeLessThan(1_000 + 20 * floor);
    expect(stall).toBeLessThan(250 + 20 * floor);
  });

  it('GraphQL: a body over 256 KiB is 413 before it is read, directives are bounded, errors carry no stack trace', async () => {
    const vars = Array.from({ length: 200_000 }, (_, i) => `$v${i}: Int`).join(', ');
    const big = await gql({ query: `query Q(${vars}) { myself { id } }` });
    expect(big.status).toBe(413);

    const directives = Array.from({ length: 60 }, () => '@include(if: true)').join(' ');
    const many = await gql({ query: `{ myself ${directives} { id } }` });
    expect(JSON.stringify(many.body.errors)).toMatch(/directives/i);

    const syntax = await gql({ query: '{ myself { id ' });
    expect(syntax.status).toBe(400);
    const text = JSON.stringify(syntax.body);
    expect(syntax.body.errors[0].extensions.stacktrace).toBeUndefined();
    expect(text).not.toMatch(/\.(ts|js):\d+|node_modules|\/work\//);
  });

  it('GraphQL counts against the account quota of the management API, with the RateLimit headers', async () => {
    await awayFromMinuteEdge();
    const statuses: number[] = [];
    let limited: Awaited<ReturnType<typeof gql>> | undefined;
    for (let i = 0; i < 60 && !limited; i++) {
      const r = await gql({ query: '{ myself { id } }' });
      statuses.push(r.status);
      if (r.status === 429) limited = r;
    }
    expect(limited, `statuses: ${statuses.join(',')}`).toBeDefined();
    expect(limited!.body.errors[0].extensions.code).toBe('RATE_LIMITED');
    expect(limited!.headers.get('retry-after')).toMatch(/^\d+$/);
    expect(limited!.headers.get('ratelimit-policy')).toContain('"minute";q=40;w=60');
    // REST management shares the quota: the same account is refused there too.
    expect((await call(p.url, 'GET', '/v2/serverless', { key: p.adminKey })).status).toBe(429);
    // Back to normal for the next tests: the quota is the test's, not the account's business.
    await p.ctx.db.account.updateMany({ where: { isAdmin: true }, data: { rateLimitPerMinute: 1_000_000 } });
  });

  it('the job API has its own quota per account and endpoint, with the RateLimit headers', async () => {
    const [a, b] = [await createQueueEndpoint(p), await createQueueEndpoint(p)];
    await awayFromMinuteEdge();
    const answers = [];
    for (let i = 0; i < 6; i++)
      answers.push(await call(p.url, 'GET', `/v2/${a}/status/nosuchjob${i}`, { key: p.adminKey }));
    expect(answers.slice(0, 5).map((r) => r.status)).toEqual([404, 404, 404, 404, 404]);
    expect(answers[0]!.headers.get('ratelimit')).toContain('"minute";r=4');
    expect(answers[5]!.status).toBe(429);
    expect(answers[5]!.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(answers[5]!.headers.get('retry-after')).toMatch(/^\d+$/);
    // Another endpoint of the same account has its own counter.
    expect((await call(p.url, 'GET', `/v2/${b}/status/nosuchjob`, { key: p.adminKey })).status).toBe(404);
  });

  it('an endpoint holds at most GANTRY_MAX_QUEUED_JOBS queued jobs', async () => {
    const ep = await createQueueEndpoint(p);
    await awayFromMinuteEdge();
    const runs = [];
    for (let i = 0; i < 4; i++)
      runs.push(await call(p.url, 'POST', `/v2/${ep}/run`, { key: p.adminKey, body: { input: { i } } }));
    expect(runs.slice(0, 3).map((r) => r.status)).toEqual([200, 200, 200]);
    expect(runs[3]!.status).toBe(429);
    expect(runs[3]!.body.detail).toMatch(/already holds 3 queued jobs/);
    expect(await p.ctx.db.job.count({ where: { endpointId: ep } })).toBe(3);
  });

  it('the load-balancing proxy has its own quota per account and endpoint', async () => {
    const created = await call(p.url, 'POST', '/v2/serverless', {
      key: p.adminKey,
      body: {
        name: 'lb-quota',
        type: 'LOAD_BALANCING',
        image: 'localhost/lb-test:1',
        gpu: { pools: ['AMPERE_24'] },
        workers: { min: 0, max: 0 },
        timeout: 1000,
      },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    await awayFromMinuteEdge();
    // No worker: the first two wait out the endpoint's 1 s timeout (503); the third is refused at once.
    const first = await call(p.url, 'GET', `/lb/${created.body.id}/x`, { key: p.adminKey });
    const second = await call(p.url, 'GET', `/lb/${created.body.id}/x`, { key: p.adminKey });
    expect([first.status, second.status]).toEqual([503, 503]);
    expect(first.headers.get('ratelimit')).toContain('"minute";r=1');
    const floor = await floorMs(p.url);
    const t = performance.now();
    const third = await call(p.url, 'GET', `/lb/${created.body.id}/x`, { key: p.adminKey });
    expect(third.status).toBe(429);
    // At once, not after the endpoint's 1 s wait for a worker.
    expect(performance.now() - t).toBeLessThan(Math.min(950, 500 + 20 * floor));
  });

  it('keys in query strings never reach a log line, and a configured admin key is never returned for printing', async () => {
    const lines: string[] = [];
    // Its own context object: the job runtime is per context, and this app's must not replace the platform's.
    const app = buildApp(
      { ...p.ctx },
      { logLevel: 'info', logStream: { write: (line: string) => void lines.push(line) } },
    );
    await app.ready();
    try {
      const secret = 'gntr_thisisaverysecretkeyvalue1234567890';
      await app.inject({ method: 'POST', url: `/graphql?api_key=${secret}`, payload: { query: '{ myself { id } }' } });
      await app.inject({ method: 'GET', url: `/graphql?query=%7Bmyself%7Bid%7D%7D&api_key=${secret}&x=1` });
      await app.inject({ method: 'GET', url: `/v2/nosuchroute/at/all?api_key=${secret}` });
      await app.inject({ method: 'GET', url: `/v2/serverless?api_key=${secret}` });
      // The signature of a signed artifact URL is a credential too.
      const sig = 'SiGnAtUrEsIgNaTuReSiGnAtUrEsIgNaTuReSiGnAtU';
      await app.inject({ method: 'GET', url: `/v2/artifacts/somebuild?expires=4102444800&sig=${sig}` });
      // Every spelling the query parser decodes to api_key authenticates, so every one is redacted;
      // a matrix parameter (`;api_key=`) is read by no route and echoed by none.
      for (const name of ['api%5Fkey', 'api%5fkey', '%61pi_key', 'api_k%65y', 'API_KEY']) {
        await app.inject({
          method: 'POST',
          url: `/graphql?${name}=${secret}`,
          payload: { query: '{ myself { id } }' },
        });
      }
      const matrix = await app.inject({ method: 'GET', url: `/graphql;api_key=${secret}` });
      expect(matrix.statusCode).toBe(404);
      expect(matrix.body).not.toContain(secret);
      const log = lines.join('');
      expect(log).toContain('api%5Fkey=[redacted]');
      expect(log).toContain('%61pi_key=[redacted]');
      expect(log).toContain('/graphql;[redacted]');
      expect(log).toContain('sig=[redacted]');
      expect(log).not.toContain(sig);
      expect(lines.length).toBeGreaterThan(4);
      expect(log).toContain('api_key=[redacted]');
      expect(log).not.toContain(secret);
    } finally {
      await app.close();
    }
    const configured = `gntr_configured_${'x'.repeat(24)}`;
    expect((await ensureAdmin(p.ctx.db, configured)).newKey).toBeUndefined();
    expect((await call(p.url, 'GET', '/v2/serverless', { key: configured })).status).toBe(200);
  });

  it('failed authentication is throttled per address on every surface, before any key is looked up', async () => {
    const ep = await createQueueEndpoint(p);
    const worker = await createWorker(p, ep);
    await awayFromMinuteEdge();
    // Earlier tests of this file made a few failures of their own in this window: at most five in
    // all are answered, the next is refused.
    const bad: number[] = [];
    for (let i = 0; i < 6 && bad.at(-1) !== 429; i++)
      bad.push((await call(p.url, 'GET', '/v2/serverless', { key: `gntr_wrong_${'k'.repeat(20)}${i}` })).status);
    expect(bad.at(-1), bad.join(',')).toBe(429);
    expect(
      bad.slice(0, -1).every((s) => s === 401),
      bad.join(','),
    ).toBe(true);
    // The address is refused for the rest of the window, whatever it presents and wherever.
    const refused = await call(p.url, 'GET', '/v2/serverless', { key: p.adminKey });
    expect(refused.status).toBe(429);
    expect(refused.body.detail).toMatch(/too many failed authentications/);
    expect((await call(p.url, 'POST', `/v2/${ep}/run`, { key: p.adminKey, body: { input: {} } })).status).toBe(429);
    expect((await gql({ query: '{ myself { id } }' })).status).toBe(429);
    expect((await workerCall(p.url, 'GET', `/v2/${ep}/ping/${worker.id}`, worker.key)).status).toBe(429);
  });
});
