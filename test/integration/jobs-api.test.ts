/**
 * The client job API (docs/jobs.md) against real PostgreSQL and Temporal: shapes, states, defaults,
 * validation, payload caps and authorization of every call.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issueApiKey } from '../../domain/accounts/index.ts';
import { newId } from '../../domain/shared/index.ts';
import { jobState, jobWorkflowId } from '../../contracts/workflows.ts';
import { call, startTestPlatform, type TestPlatform } from '../support/platform.ts';
import { createQueueEndpoint, createWorker, eventually, workerCall, type TestWorker } from '../support/jobs.ts';
import { rawRequest } from '../support/lb.ts';

const UUID_LIKE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}-[a-z0-9]+$/;

let p: TestPlatform;
let ep: string;
let w: TestWorker;

beforeAll(async () => {
  // A short long-poll hold keeps "no job" answers quick.
  process.env.GANTRY_JOB_TAKE_HOLD_MS = '1500';
  p = await startTestPlatform();
  ep = await createQueueEndpoint(p);
  w = await createWorker(p, ep);
});
afterAll(async () => {
  await p?.stop();
});

const run = (body: unknown, endpointId = ep, key = p.adminKey) =>
  call(p.url, 'POST', `/v2/${endpointId}/run`, { key, body });
const status = (id: string, endpointId = ep) =>
  call(p.url, 'GET', `/v2/${endpointId}/status/${id}`, { key: p.adminKey });
const take = (worker = w, endpointId = ep) =>
  workerCall(p.url, 'GET', `/v2/${endpointId}/job-take/${worker.id}?gpu=X&job_in_progress=0`, worker.key);
const done = (jobId: string, body: unknown, worker = w) =>
  workerCall(p.url, 'POST', `/v2/${ep}/job-done/${worker.id}/${jobId}?gpu=X&isStream=false`, worker.key, body);

/** Takes until the job `id` comes up (other tests' leftovers are finished on the way). */
async function takeJob(id: string, worker = w): Promise<{ id: string; input: unknown }> {
  for (let i = 0; i < 50; i++) {
    const t = await take(worker);
    if (t.status === 200 && t.body.id === id) return t.body;
    if (t.status === 200) await done(t.body.id, { output: 'drained' }, worker);
  }
  throw new Error(`job ${id} was never handed out`);
}

describe('POST /run and GET /status', () => {
  it('queues a job, hands it to a worker, and reports each state with times and worker', async () => {
    const submitted = await run({ input: { prompt: 'hello', n: 2 } });
    expect(submitted.status).toBe(200);
    expect(submitted.body).toEqual({ id: expect.stringMatching(UUID_LIKE), status: 'IN_QUEUE' });
    const id = submitted.body.id as string;

    expect((await status(id)).body).toEqual({ id, status: 'IN_QUEUE' });

    const taken = await takeJob(id);
    expect(taken).toEqual({ id, input: { prompt: 'hello', n: 2 } });
    const running = await status(id);
    expect(running.body).toMatchObject({ id, status: 'IN_PROGRESS', workerId: w.id, delayTime: expect.any(Number) });
    expect(running.body.executionTime).toBeUndefined();

    const posted = await done(id, { output: { text: 'hi there' } });
    expect(posted.status).toBe(200);
    const finished = await status(id);
    expect(finished.body).toEqual({
      id,
      status: 'COMPLETED',
      output: { text: 'hi there' },
      workerId: w.id,
      delayTime: expect.any(Number),
      executionTime: expect.any(Number),
    });
    expect(finished.body.delayTime).toBeGreaterThanOrEqual(0);

    // The job's workflow, readable by id, learned of the completion and finished.
    const handle = p.ctx.temporal.workflow.getHandle(jobWorkflowId(id));
    await eventually(
      async () => (await handle.describe()).status.name === 'COMPLETED',
      20_000,
      'job workflow completed',
    );
    expect((await handle.describe()).type).toBe('jobWorkflow');
  });

  it('records a result once: repeated posts change nothing, a post for a job not held is refused', async () => {
    const id = (await run({ input: { x: 1 } })).body.id as string;
    await takeJob(id);
    expect((await done(id, { output: 'first' })).status).toBe(200);
    const before = await p.ctx.db.job.findUniqueOrThrow({ where: { id } });
    // The SDK retries its post up to three times and ignores the answers.
    for (const body of [{ output: 'second' }, { error: 'late' }]) expect((await done(id, body)).status).toBe(200);
    const after = await p.ctx.db.job.findUniqueOrThrow({ where: { id } });
    expect(after).toMatchObject({ status: 'COMPLETED', output: 'first', error: null, seq: before.seq });
    expect(after.completedAt).toEqual(before.completedAt);

    const other = await createWorker(p, ep);
    expect((await done(id, { output: 'stolen' }, other)).status).toBe(409);
    expect((await done('no-such-job', { output: 1 })).status).toBe(404);
  });

  it('answers 404 for unknown jobs and for jobs of another endpoint', async () => {
    expect((await status('00000000-0000-0000-0000-000000000000-g1')).status).toBe(404);
    const id = (await run({ input: {} })).body.id as string;
    const ep2 = await createQueueEndpoint(p);
    const cross = await status(id, ep2);
    expect(cross.status).toBe(404);
    expect(cross.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    await call(p.url, 'POST', `/v2/${ep}/cancel/${id}`, { key: p.adminKey });
  });
});

describe('POST /runsync', () => {
  it('returns the finished job with a sync- id when a worker answers in time', async () => {
    let stop = false;
    const worker = await createWorker(p, ep);
    const loop = (async () => {
      while (!stop) {
        const t = await take(worker);
        if (t.status === 200) await done(t.body.id, { output: { echo: t.body.input } }, worker);
      }
    })();
    try {
      const r = await call(p.url, 'POST', `/v2/${ep}/runsync`, { key: p.adminKey, body: { input: { q: 'sync' } } });
      expect(r.status).toBe(200);
      expect(r.body).toMatchObject({
        id: expect.stringMatching(/^sync-/),
        status: 'COMPLETED',
        output: { echo: { q: 'sync' } },
        workerId: worker.id,
      });
      expect(r.body.delayTime).toEqual(expect.any(Number));
      expect(r.body.executionTime).toEqual(expect.any(Number));
      expect((await status(r.body.id)).body.status).toBe('COMPLETED');
      const row = await p.ctx.db.job.findUniqueOrThrow({ where: { id: r.body.id } });
      // Kept one minute after a runsync (30 min after a run).
      const kept = row.expiresAt.getTime() - (row.completedAt as Date).getTime();
      expect(kept).toBeGreaterThan(55_000);
      expect(kept).toBeLessThanOrEqual(61_000);
    } finally {
      stop = true;
      await loop;
    }
  });

  it('answers {id, status} when the wait runs out, and the client then polls', async () => {
    const ep2 = await createQueueEndpoint(p);
    const started = Date.now();
    const r = await call(p.url, 'POST', `/v2/${ep2}/runsync?wait=1000`, {
      key: p.adminKey,
      body: { input: { slow: true } },
    });
    const waited = Date.now() - started;
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ id: expect.stringMatching(/^sync-/), status: 'IN_QUEUE' });
    expect(waited).toBeGreaterThanOrEqual(950);
    expect(waited).toBeLessThan(5_000);

    const w2 = await createWorker(p, ep2);
    const t = await take(w2, ep2);
    expect(t.body.id).toBe(r.body.id);
    await workerCall(p.url, 'POST', `/v2/${ep2}/job-done/${w2.id}/${r.body.id}?isStream=false`, w2.key, {
      output: 'late',
    });
    expect((await status(r.body.id, ep2)).body).toMatchObject({ status: 'COMPLETED', output: 'late' });
  });

  it('validates wait: 1000..300000 ms', async () => {
    for (const wait of ['500', '300001', 'abc']) {
      const r = await call(p.url, 'POST', `/v2/${ep}/runsync?wait=${wait}`, { key: p.adminKey, body: { input: {} } });
      expect(r.status, wait).toBe(422);
      expect(r.body.errors.join(' ')).toMatch(/wait/);
    }
  });
});

describe('GET /status-sync', () => {
  it('waits for the job to finish, up to wait ms', async () => {
    const id = (await run({ input: { a: 1 } })).body.id as string;
    const waiting = call(p.url, 'GET', `/v2/${ep}/status-sync/${id}?wait=20000`, { key: p.adminKey });
    await takeJob(id);
    const t0 = Date.now();
    await done(id, { output: 'waited' });
    const r = await waiting;
    expect(Date.now() - t0).toBeLessThan(2_000);
    expect(r.body).toMatchObject({ id, status: 'COMPLETED', output: 'waited' });

    const queued = (await run({ input: {} })).body.id as string;
    const short = await call(p.url, 'GET', `/v2/${ep}/status-sync/${queued}?wait=1000`, { key: p.adminKey });
    expect(short.body).toEqual({ id: queued, status: 'IN_QUEUE' });
    await call(p.url, 'POST', `/v2/${ep}/cancel/${queued}`, { key: p.adminKey });
  });
});

describe('request rules', () => {
  it('requires the {input} wrapper with a clear 400', async () => {
    for (const body of [{ prompt: 'no wrapper' }, { input: null }, [1, 2], 'text']) {
      const r = await run(body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.body).toMatchObject({ title: 'Bad Request', status: 400 });
      expect(r.body.detail).toMatch(/"input"/);
    }
    const noBody = await call(p.url, 'POST', `/v2/${ep}/run`, { key: p.adminKey });
    expect(noBody.status).toBe(400);
    const malformed = await call(p.url, 'POST', `/v2/${ep}/run`, { key: p.adminKey, rawBody: '{"input": ' });
    expect(malformed.status).toBe(400);
    expect(await p.ctx.db.job.count({ where: { endpointId: ep, input: { equals: { prompt: 'no wrapper' } } } })).toBe(
      0,
    );
  });

  it('validates the policy and the webhook (422 with each failure)', async () => {
    const bad = await run({
      input: {},
      policy: { executionTimeout: 1000, ttl: 5000, lowPriority: 'yes', priority: 1 },
      webhook: 'ftp://example.test/x',
    });
    expect(bad.status).toBe(422);
    expect(bad.body.errors).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^\$\.policy\.executionTimeout: /),
        expect.stringMatching(/^\$\.policy\.ttl: /),
        expect.stringMatching(/^\$\.policy\.lowPriority: /),
        "$.policy: additional properties 'priority' not allowed",
        expect.stringMatching(/^\$\.webhook: /),
      ]),
    );
    const tooLong = await run({ input: {}, policy: { executionTimeout: 7 * 86_400_000 + 1 } });
    expect(tooLong.status).toBe(422);
  });

  it('applies the defaults: execution timeout from the endpoint, ttl one day', async () => {
    const ep2 = await createQueueEndpoint(p, undefined, { timeout: 123_000 });
    const a = (await run({ input: {} }, ep2)).body.id as string;
    const b = (await run({ input: {}, policy: { executionTimeout: 7_000, ttl: 20_000, lowPriority: true } }, ep2)).body
      .id as string;
    const rowA = await p.ctx.db.job.findUniqueOrThrow({ where: { id: a } });
    const rowB = await p.ctx.db.job.findUniqueOrThrow({ where: { id: b } });
    expect(rowA).toMatchObject({ executionTimeoutMs: 123_000, ttlMs: 86_400_000, lowPriority: false, sync: false });
    expect(rowB).toMatchObject({ executionTimeoutMs: 7_000, ttlMs: 20_000, lowPriority: true });
    expect(rowA.expiresAt.getTime() - rowA.createdAt.getTime()).toBe(86_400_000);
  });

  it('caps payloads: 10 MB for /run, 20 MB for /runsync (413)', async () => {
    const mb = (n: number) => JSON.stringify({ input: { blob: 'x'.repeat(n * 1024 * 1024) } });
    const big = await call(p.url, 'POST', `/v2/${ep}/run`, { key: p.adminKey, rawBody: mb(11) });
    expect(big.status).toBe(413);
    expect(big.body).toMatchObject({ status: 413, title: 'Payload Too Large' });
    const ep2 = await createQueueEndpoint(p);
    const syncOk = await call(p.url, 'POST', `/v2/${ep2}/runsync?wait=1000`, { key: p.adminKey, rawBody: mb(15) });
    expect(syncOk.status).toBe(200);
    expect(syncOk.body.status).toBe('IN_QUEUE');
    const syncBig = await call(p.url, 'POST', `/v2/${ep2}/runsync`, { key: p.adminKey, rawBody: mb(21) });
    expect(syncBig.status).toBe(413);
    await call(p.url, 'POST', `/v2/${ep2}/purge-queue`, { key: p.adminKey });
  });

  it('authorizes: 401 without a key, 403 without the run scope or for another endpoint, 404 for another account', async () => {
    const none = await call(p.url, 'POST', `/v2/${ep}/run`, { body: { input: {} } });
    expect(none.status).toBe(401);
    expect(none.body.detail).toBe('missing bearer token');

    const account = (await p.ctx.db.account.findFirstOrThrow({ where: { isAdmin: true } })).id;
    const readOnly = await issueApiKey(p.ctx.db, account, 'ro', ['READ']);
    expect((await run({ input: {} }, ep, readOnly.key)).status).toBe(403);
    const runOnly = await issueApiKey(p.ctx.db, account, 'run', ['RUN']);
    expect((await run({ input: {} }, ep, runOnly.key)).status).toBe(200);
    const elsewhere = await issueApiKey(p.ctx.db, account, 'scoped', ['RUN'], undefined, ['someotherendpoint']);
    expect((await run({ input: {} }, ep, elsewhere.key)).status).toBe(403);

    const other = await p.ctx.db.account.create({
      data: { id: newId(), email: `${newId()}@example.test`, name: 'other' },
    });
    const otherKey = await issueApiKey(p.ctx.db, other.id, 'other', ['RUN']);
    expect((await run({ input: {} }, ep, otherKey.key)).status).toBe(404);
    expect((await call(p.url, 'GET', `/v2/${ep}/health`, { key: otherKey.key })).status).toBe(404);
    expect((await run({ input: {} }, 'nosuchendpoint')).status).toBe(404);
  });

  it('accepts jobs only on queue-based endpoints', async () => {
    const lb = await createQueueEndpoint(p, undefined, { type: 'LOAD_BALANCING' });
    const r = await run({ input: {} }, lb);
    expect(r.status).toBe(400);
    expect(r.body.detail).toMatch(/load-balancing/);
  });
});

describe('cancel, retry, purge, health', () => {
  it('cancels a queued job: it is never handed out', async () => {
    const ep2 = await createQueueEndpoint(p);
    const w2 = await createWorker(p, ep2);
    const id = (await run({ input: {} }, ep2)).body.id as string;
    const c = await call(p.url, 'POST', `/v2/${ep2}/cancel/${id}`, { key: p.adminKey });
    expect(c.body).toEqual({ id, status: 'CANCELLED' });
    expect((await status(id, ep2)).body).toEqual({ id, status: 'CANCELLED' });
    expect((await take(w2, ep2)).status).toBe(204);
    // Cancelling again reports the state; a finished job stays finished.
    expect((await call(p.url, 'POST', `/v2/${ep2}/cancel/${id}`, { key: p.adminKey })).body).toEqual({
      id,
      status: 'CANCELLED',
    });
    expect((await call(p.url, 'POST', `/v2/${ep2}/cancel/nope`, { key: p.adminKey })).status).toBe(404);
    const wf = p.ctx.temporal.workflow.getHandle(jobWorkflowId(id));
    await eventually(
      async () => (await wf.describe()).status.name === 'COMPLETED',
      20_000,
      'cancelled job workflow completed',
    );
  });

  it('retries a FAILED job under the same id, and only FAILED or TIMED_OUT ones', async () => {
    const ep2 = await createQueueEndpoint(p);
    const w2 = await createWorker(p, ep2);
    const id = (await run({ input: { try: 1 } }, ep2)).body.id as string;
    expect((await take(w2, ep2)).body.id).toBe(id);
    await workerCall(p.url, 'POST', `/v2/${ep2}/job-done/${w2.id}/${id}?isStream=false`, w2.key, { error: 'boom' });
    expect((await status(id, ep2)).body).toMatchObject({ id, status: 'FAILED', error: 'boom' });

    const r = await call(p.url, 'POST', `/v2/${ep2}/retry/${id}`, { key: p.adminKey });
    expect(r.body).toEqual({ id, status: 'IN_QUEUE' });
    expect((await status(id, ep2)).body).toMatchObject({ id, status: 'IN_QUEUE', retries: 1 });
    const again = await take(w2, ep2);
    expect(again.body).toEqual({ id, input: { try: 1 } });
    await workerCall(p.url, 'POST', `/v2/${ep2}/job-done/${w2.id}/${id}?isStream=false`, w2.key, {
      output: 'second time lucky',
    });
    expect((await status(id, ep2)).body).toMatchObject({ status: 'COMPLETED', output: 'second time lucky' });

    const refused = await call(p.url, 'POST', `/v2/${ep2}/retry/${id}`, { key: p.adminKey });
    expect(refused.status).toBe(400);
    expect(refused.body.detail).toMatch(/only FAILED or TIMED_OUT/);
    const health = await call(p.url, 'GET', `/v2/${ep2}/health`, { key: p.adminKey });
    expect(health.body.jobs).toMatchObject({ completed: 1, retried: 1 });
    // The workflow of the retried job ends with the second completion.
    const wf = p.ctx.temporal.workflow.getHandle(jobWorkflowId(id));
    await eventually(
      async () =>
        (await wf.describe()).status.name === 'COMPLETED' &&
        (await p.ctx.db.job.findUniqueOrThrow({ where: { id } })).status === 'COMPLETED',
      20_000,
      'retried workflow done',
    );
  });

  it('purges queued jobs but not running ones, and counts everything in /health', async () => {
    const ep2 = await createQueueEndpoint(p);
    const w2 = await createWorker(p, ep2);
    const idle = await createWorker(p, ep2);
    await p.ctx.db.worker.create({ data: { id: `wk${newId()}`, endpointId: ep2, status: 'INITIALIZING' } });
    await p.ctx.db.worker.create({ data: { id: `wk${newId()}`, endpointId: ep2, status: 'UNHEALTHY' } });
    await p.ctx.db.worker.create({ data: { id: `wk${newId()}`, endpointId: ep2, status: 'PENDING' } });
    const first = (await run({ input: { n: 0 } }, ep2)).body.id as string;
    expect((await take(w2, ep2)).body.id).toBe(first);
    for (let i = 1; i <= 5; i++) await run({ input: { n: i } }, ep2);

    const h = await call(p.url, 'GET', `/v2/${ep2}/health`, { key: p.adminKey });
    expect(h.status).toBe(200);
    expect(h.body).toEqual({
      jobs: { completed: 0, failed: 0, inProgress: 1, inQueue: 5, retried: 0 },
      workers: { idle: 1, initializing: 1, ready: 2, running: 1, throttled: 1, unhealthy: 1 },
      workerProblem: null,
    });

    const purged = await call(p.url, 'POST', `/v2/${ep2}/purge-queue`, { key: p.adminKey });
    expect(purged.body).toEqual({ removed: 5, status: 'completed' });
    expect((await take(idle, ep2)).status).toBe(204);
    await workerCall(p.url, 'POST', `/v2/${ep2}/job-done/${w2.id}/${first}?isStream=false`, w2.key, {
      output: 'kept running',
    });
    const after = await call(p.url, 'GET', `/v2/${ep2}/health`, { key: p.adminKey });
    expect(after.body.jobs).toEqual({ completed: 1, failed: 0, inProgress: 0, inQueue: 0, retried: 0 });
  });

  it('hands out normal jobs before low-priority ones, oldest first', async () => {
    const ep2 = await createQueueEndpoint(p);
    const w2 = await createWorker(p, ep2);
    const low = (await run({ input: { n: 'low' }, policy: { lowPriority: true } }, ep2)).body.id as string;
    const a = (await run({ input: { n: 'a' } }, ep2)).body.id as string;
    const b = (await run({ input: { n: 'b' } }, ep2)).body.id as string;
    const order: string[] = [];
    for (let i = 0; i < 3; i++) {
      const t = await take(w2, ep2);
      order.push(t.body.id);
      await workerCall(p.url, 'POST', `/v2/${ep2}/job-done/${w2.id}/${t.body.id}?isStream=false`, w2.key, {
        output: i,
      });
    }
    expect(order).toEqual([a, b, low]);
  });

  it('keeps the job workflow informed: its state follows the job', async () => {
    const ep2 = await createQueueEndpoint(p);
    const id = (await run({ input: {}, policy: { ttl: 600_000 } }, ep2)).body.id as string;
    const wf = p.ctx.temporal.workflow.getHandle(jobWorkflowId(id));
    const state = await eventually(async () => (await wf.query(jobState)) ?? undefined, 20_000, 'workflow started');
    expect(state).toMatchObject({ status: 'IN_QUEUE', webhookPending: false, startedAt: null });
    const row = await p.ctx.db.job.findUniqueOrThrow({ where: { id } });
    expect(state.ttlDeadline).toBe(row.createdAt.getTime() + 600_000);
    await call(p.url, 'POST', `/v2/${ep2}/cancel/${id}`, { key: p.adminKey });
    await eventually(async () => (await wf.describe()).status.name === 'COMPLETED', 20_000, 'workflow completed');
  });
});

describe('empty JSON bodies', () => {
  /**
   * What the hosted service's Python client sends for cancel and purge-queue: `Content-Type:
   * application/json` and no body at all (Content-Length 0), straight over node:http.
   */
  const emptyJsonPost = (route: string) =>
    rawRequest(p.url + route, {
      method: 'POST',
      headers: { authorization: `Bearer ${p.adminKey}`, 'content-type': 'application/json', 'content-length': '0' },
    });

  it('mean no body: cancel stops a queued job, purge-queue empties the queue, the other POST calls answer as without a body', async () => {
    const ep2 = await createQueueEndpoint(p);
    const w2 = await createWorker(p, ep2);
    const id = (await run({ input: {} }, ep2)).body.id as string;
    const cancelled = await emptyJsonPost(`/v2/${ep2}/cancel/${id}`);
    expect(cancelled.status, cancelled.text).toBe(200);
    expect(cancelled.json()).toEqual({ id, status: 'CANCELLED' });
    expect((await status(id, ep2)).body).toEqual({ id, status: 'CANCELLED' });

    for (let i = 0; i < 3; i++) await run({ input: { n: i } }, ep2);
    const purged = await emptyJsonPost(`/v2/${ep2}/purge-queue`);
    expect(purged.status, purged.text).toBe(200);
    expect(purged.json()).toEqual({ removed: 3, status: 'completed' });
    expect((await take(w2, ep2)).status).toBe(204);

    // The rest reach their own rules: retry refuses a cancelled job, status-sync answers its state.
    const retried = await emptyJsonPost(`/v2/${ep2}/retry/${id}`);
    expect(retried.status).toBe(400);
    expect(retried.json().detail).toMatch(/only FAILED or TIMED_OUT/);
    const synced = await emptyJsonPost(`/v2/${ep2}/status-sync/${id}?wait=1000`);
    expect(synced.status, synced.text).toBe(200);
    expect(synced.json()).toEqual({ id, status: 'CANCELLED' });
  });

  it('leave the other refusals as they were: /run and /runsync still need {input}, a non-empty invalid body is a 400 problem', async () => {
    for (const action of ['run', 'runsync']) {
      const r = await emptyJsonPost(`/v2/${ep}/${action}`);
      expect(r.status, action).toBe(400);
      expect(r.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(r.json().detail).toMatch(/"input"/);
    }
    const id = (await run({ input: {} })).body.id as string;
    for (const body of ['{"oops', ' ', 'null x']) {
      const r = await rawRequest(`${p.url}/v2/${ep}/cancel/${id}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${p.adminKey}`, 'content-type': 'application/json' },
        body,
      });
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(r.json()).toMatchObject({
        title: 'Bad Request',
        status: 400,
        detail: expect.stringMatching(/not valid JSON/),
      });
    }
    // Prototype poisoning is refused as Fastify refuses it everywhere else.
    const poisoned = await rawRequest(`${p.url}/v2/${ep}/run`, {
      method: 'POST',
      headers: { authorization: `Bearer ${p.adminKey}`, 'content-type': 'application/json' },
      body: '{"input": {}, "__proto__": {"x": 1}}',
    });
    expect(poisoned.status).toBe(400);
    expect((await status(id)).body).toEqual({ id, status: 'IN_QUEUE' });
    await call(p.url, 'POST', `/v2/${ep}/cancel/${id}`, { key: p.adminKey });
  });
});
