/**
 * GET /v2/serverless/{id}/jobs and /jobs/{jobId} (domain/jobs/list.ts, docs/jobs.md) through
 * `app.inject` on a fresh database, with job rows made by hand: order and paging (ties of createdAt
 * too), the status filter, expiry, the query's bounds (422 problem+json), who may read (404 for
 * another account, 403 without RUN or outside the key's endpoints), the management quota, and the
 * caps on one job's input, output and error.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issueApiKey, type Scope } from '../../domain/accounts/index.ts';
import { PAYLOAD_CAP_BYTES } from '../../domain/jobs/index.ts';
import { newId } from '../../domain/shared/index.ts';
import type { JobStatus } from '../../generated/prisma/client.ts';
import { startTestApp, type Answer, type TestApp } from '../support/app.ts';

function expectProblem(r: Answer, status: number, text?: RegExp): void {
  expect(r.status, JSON.stringify(r.body)).toBe(status);
  expect(r.headers.get('content-type')).toMatch(/^application\/problem\+json/);
  if (text) expect(JSON.stringify(r.body)).toMatch(text);
}

/** Fixed windows reset on the minute: a sequence that must stay in one window starts well inside it. */
async function awayFromMinuteEdge(): Promise<void> {
  const intoMinute = Date.now() % 60_000;
  if (intoMinute > 45_000) await new Promise((r) => setTimeout(r, 60_000 - intoMinute + 500));
}

describe('the recent jobs of an endpoint', () => {
  let t: TestApp;
  let accountA: string;
  let ep: string;
  let ep2: string;
  const keys: Record<string, string> = {};
  /** Ids of ep's live jobs, newest first (by createdAt, then id). */
  let newestFirst: string[] = [];
  const T0 = Date.now() - 20 * 60_000;
  const big = 'é'.repeat(PAYLOAD_CAP_BYTES); // 2 bytes a character: twice the cap

  const account = (name: string, extra: { rateLimitPerMinute?: number } = {}) =>
    t.ctx.db.account.create({ data: { id: newId(), email: `${newId()}@example.test`, name, ...extra } });
  const key = async (accountId: string, scopes: Scope[], endpointIds: string[] = []) =>
    (await issueApiKey(t.ctx.db, accountId, `k-${newId()}`, scopes, undefined, endpointIds)).key;
  const job = (
    endpointId: string,
    status: JobStatus,
    at: number,
    extra: { id?: string; input?: object; output?: object; error?: string; expired?: boolean } = {},
  ) =>
    t.ctx.db.job.create({
      data: {
        id: extra.id ?? newId(),
        endpointId,
        accountId: accountA,
        status,
        input: extra.input ?? { n: at },
        ...(extra.output ? { output: extra.output } : {}),
        error: extra.error ?? null,
        createdAt: new Date(at),
        startedAt: status === 'IN_QUEUE' ? null : new Date(at + 250),
        completedAt: ['IN_QUEUE', 'IN_PROGRESS'].includes(status) ? null : new Date(at + 1250),
        expiresAt: new Date(extra.expired ? Date.now() - 1000 : Date.now() + 3_600_000),
      },
    });

  beforeAll(async () => {
    t = await startTestApp();
    accountA = (await account('jobs-a')).id;
    const accountB = (await account('jobs-b')).id;
    const endpoint = (name: string) =>
      t.ctx.db.endpoint.create({ data: { id: newId(), accountId: accountA, name, image: 'localhost/app:1' } });
    ep = (await endpoint('jobs-1')).id;
    ep2 = (await endpoint('jobs-2')).id;
    keys.a = await key(accountA, ['READ', 'WRITE', 'RUN']);
    keys.aNoRun = await key(accountA, ['READ', 'WRITE']);
    keys.aOnlyEp2 = await key(accountA, ['RUN'], [ep2]);
    keys.b = await key(accountB, ['READ', 'WRITE', 'RUN']);

    const statuses: JobStatus[] = ['COMPLETED', 'FAILED', 'IN_QUEUE', 'COMPLETED', 'IN_PROGRESS', 'TIMED_OUT'];
    const made: Array<{ id: string; at: number }> = [];
    for (const [i, s] of statuses.entries()) made.push({ id: (await job(ep, s, T0 + i * 1000)).id, at: T0 + i * 1000 });
    // Two jobs submitted in the same millisecond: the id orders them, and paging must not lose one.
    const tie = T0 + 10_000;
    for (const id of ['tie-a', 'tie-b']) made.push({ id: (await job(ep, 'CANCELLED', tie, { id })).id, at: tie });
    newestFirst = made.sort((x, y) => y.at - x.at || (y.id < x.id ? -1 : 1)).map((j) => j.id);
    // Neither listed: expired, and another endpoint's.
    await job(ep, 'COMPLETED', T0 + 20_000, { id: 'expired-1', expired: true });
    await job(ep2, 'COMPLETED', T0 + 30_000, { id: 'other-endpoint-1' });
  });
  afterAll(async () => {
    await t?.stop();
  });

  const list = (q = '', k = keys.a) => t.call('GET', `/v2/serverless/${ep}/jobs${q}`, { key: k });

  it('lists live jobs newest first with their times, and pages back by job id without losing ties', async () => {
    const all = await list();
    expect(all.status, JSON.stringify(all.body)).toBe(200);
    expect(all.body.jobs.map((j: { id: string }) => j.id)).toEqual(newestFirst);
    expect(all.body.nextBefore).toBeNull();
    expect(all.body.jobs.map((j: { id: string }) => j.id)).not.toContain('expired-1');
    const first = all.body.jobs.find((j: { id: string }) => j.id === newestFirst.at(-1));
    expect(first).toEqual({
      id: newestFirst.at(-1),
      status: 'COMPLETED',
      createdAt: new Date(T0).toISOString(),
      startedAt: new Date(T0 + 250).toISOString(),
      completedAt: new Date(T0 + 1250).toISOString(),
      expiresAt: expect.any(String),
      delayTime: 250,
      executionTime: 1000,
      workerId: null,
      retries: 0,
      error: null,
      errorTruncated: false,
    });
    const queued = all.body.jobs.find((j: { status: string }) => j.status === 'IN_QUEUE');
    expect(queued).toMatchObject({ startedAt: null, completedAt: null, delayTime: null, executionTime: null });
    expect(all.body.jobs.some((j: object) => 'input' in j || 'output' in j)).toBe(false);

    // Pages of 3, then of 1 across the tie.
    for (const size of [3, 1]) {
      const seen: string[] = [];
      let before: string | null = null;
      let pages = 0;
      do {
        const page: Answer = await list(`?limit=${size}${before ? `&before=${before}` : ''}`);
        expect(page.status, JSON.stringify(page.body)).toBe(200);
        expect(page.body.jobs.length).toBeLessThanOrEqual(size);
        seen.push(...page.body.jobs.map((j: { id: string }) => j.id));
        before = page.body.nextBefore;
        pages++;
      } while (before && pages < 20);
      expect(seen).toEqual(newestFirst);
      expect(pages).toBe(Math.ceil(newestFirst.length / size));
    }
  });

  it('filters by status', async () => {
    const completed = await list('?status=COMPLETED');
    expect(completed.status).toBe(200);
    expect(completed.body.jobs).toHaveLength(2);
    expect(completed.body.jobs.every((j: { status: string }) => j.status === 'COMPLETED')).toBe(true);
    const cancelled = await list('?status=CANCELLED&limit=1');
    expect(cancelled.body.jobs.map((j: { id: string }) => j.id)).toEqual(['tie-b']);
    const next = await list(`?status=CANCELLED&limit=1&before=${cancelled.body.nextBefore}`);
    expect(next.body).toEqual({ jobs: [expect.objectContaining({ id: 'tie-a' })], nextBefore: null });
  });

  it('refuses limits outside 1..100, unknown statuses, cursors and parameters with 422', async () => {
    for (const q of ['?limit=0', '?limit=101', '?limit=-1', '?limit=abc', '?limit=1000000'])
      expectProblem(await list(q), 422, /limit/);
    expect((await list('?limit=1')).body.jobs).toHaveLength(1);
    expect((await list('?limit=100')).status).toBe(200);
    expectProblem(await list('?status=BOGUS'), 422, /status/);
    expectProblem(await list('?before=no-such-job'), 422, /before/);
    // A job of another endpoint is no cursor here.
    expectProblem(await list('?before=other-endpoint-1'), 422, /before/);
    expectProblem(await list('?bogus=1'), 422);
  });

  it('answers only the owner: 404 for another account, 403 without RUN or outside the key’s endpoints, 401 without a key', async () => {
    const firstId = newestFirst[0]!;
    expectProblem(await list('', keys.b), 404, /endpoint not found/);
    expectProblem(
      await t.call('GET', `/v2/serverless/${ep}/jobs/${firstId}`, { key: keys.b }),
      404,
      /endpoint not found/,
    );
    expectProblem(await list('', keys.aNoRun), 403, /run scope/);
    expectProblem(await t.call('GET', `/v2/serverless/${ep}/jobs/${firstId}`, { key: keys.aNoRun }), 403);
    expectProblem(await list('', keys.aOnlyEp2), 403, /does not reach/);
    expect((await t.call('GET', `/v2/serverless/${ep2}/jobs`, { key: keys.aOnlyEp2 })).body.jobs).toHaveLength(1);
    expectProblem(await t.call('GET', `/v2/serverless/${ep}/jobs`), 401);
    expectProblem(await t.call('GET', `/v2/serverless/nope/jobs`, { key: keys.a }), 404);
    // A job of another endpoint, an expired one and an unknown one are all 404.
    for (const id of ['other-endpoint-1', 'expired-1', 'never'])
      expectProblem(await t.call('GET', `/v2/serverless/${ep}/jobs/${id}`, { key: keys.a }), 404, /job not found/);
  });

  it('counts against the account’s management quota, with RateLimit headers', async () => {
    const limited = (await account('jobs-limited', { rateLimitPerMinute: 2 })).id;
    const endpointId = (
      await t.ctx.db.endpoint.create({ data: { id: newId(), accountId: limited, name: 'l', image: 'localhost/app:1' } })
    ).id;
    const k = await key(limited, ['RUN']);
    await awayFromMinuteEdge();
    const answers = [];
    for (let i = 0; i < 3; i++) answers.push(await t.call('GET', `/v2/serverless/${endpointId}/jobs`, { key: k }));
    expect(answers.map((a) => a.status)).toEqual([200, 200, 429]);
    expect(answers[0]!.headers.get('ratelimit')).toMatch(/"minute";r=1/);
    expect(answers[2]!.headers.get('retry-after')).toMatch(/^\d+$/);
  });

  it('reads one job with its input and output, each cut at 64 KiB of JSON text, and its error whole', async () => {
    const small = await job(ep, 'COMPLETED', T0 + 40_000, {
      input: { prompt: '<b>hi</b>', n: [1, 2] },
      output: { text: 'ok' },
    });
    const large = await job(ep, 'FAILED', T0 + 41_000, {
      input: { text: big },
      output: { text: big, more: 1 },
      error: 'x'.repeat(3000),
    });
    const detail = (id: string) => t.call('GET', `/v2/serverless/${ep}/jobs/${id}`, { key: keys.a });

    const s = await detail(small.id);
    expect(s.status, JSON.stringify(s.body)).toBe(200);
    expect(s.body).toMatchObject({
      id: small.id,
      status: 'COMPLETED',
      input: { prompt: '<b>hi</b>', n: [1, 2] },
      inputTruncated: false,
      output: { text: 'ok' },
      outputTruncated: false,
      error: null,
    });
    expect(s.body.inputBytes).toBe(Buffer.byteLength('{"n": [1, 2], "prompt": "<b>hi</b>"}'));
    expect(s.body).not.toHaveProperty('inputPreview');

    const l = await detail(large.id);
    expect(l.status, JSON.stringify(l.body).slice(0, 300)).toBe(200);
    for (const what of ['input', 'output']) {
      expect(l.body[`${what}Truncated`], what).toBe(true);
      expect(l.body, what).not.toHaveProperty(what);
      expect(l.body[`${what}Bytes`], what).toBeGreaterThan(2 * PAYLOAD_CAP_BYTES);
      const preview: string = l.body[`${what}Preview`];
      const bytes = Buffer.byteLength(preview);
      // Whole characters only, as close to the cap as a 2-byte character allows.
      expect(bytes, what).toBeLessThanOrEqual(PAYLOAD_CAP_BYTES);
      expect(bytes, what).toBeGreaterThan(PAYLOAD_CAP_BYTES - 2);
      expect(preview, what).not.toContain('\ufffd');
      expect(preview, what).toMatch(/^\{"(text|more)": /);
    }
    expect(l.body.error).toBe('x'.repeat(3000));
    expect(l.body.errorTruncated).toBe(false);
    // The list cuts errors shorter.
    const row = (await list('?status=FAILED')).body.jobs.find((j: { id: string }) => j.id === large.id);
    expect(row.error).toBe('x'.repeat(1024));
    expect(row.errorTruncated).toBe(true);

    // A queued job: no output yet.
    const q = (await list('?status=IN_QUEUE')).body.jobs[0];
    const qd = await detail(q.id);
    expect(qd.body).toMatchObject({ outputBytes: null, outputTruncated: false, inputTruncated: false });
    expect(qd.body).not.toHaveProperty('output');
  });

  it('is described in the OpenAPI document with its scope', async () => {
    const doc = (await t.call('GET', '/v2/openapi.json')).body;
    const listOp = doc.paths['/v2/serverless/{id}/jobs']?.get;
    const oneOp = doc.paths['/v2/serverless/{id}/jobs/{jobId}']?.get;
    expect(listOp).toMatchObject({ operationId: 'listEndpointJobs', 'x-required-scope': 'RUN' });
    expect(oneOp).toMatchObject({ operationId: 'getEndpointJob', 'x-required-scope': 'RUN' });
    expect(listOp.parameters.map((p: { name: string }) => p.name)).toEqual(
      expect.arrayContaining(['id', 'limit', 'status', 'before']),
    );
  });
});
