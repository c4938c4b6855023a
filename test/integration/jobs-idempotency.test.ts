/**
 * Idempotent submits (docs/jobs.md): `/run` and `/runsync` with an `Idempotency-Key` header create
 * one job per key, account and endpoint; a repeat answers that job (`Idempotent-Replayed: true`),
 * the same key with another request is 422, and a malformed key is 400. Against real PostgreSQL
 * and Temporal; the kill -9 case is in jobs-restart.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issueApiKey } from '../../domain/accounts/index.ts';
import { newId, randomString } from '../../domain/shared/index.ts';
import { purgeOutputsScheduleId } from '../../contracts/workflows.ts';
import { call, startTestPlatform, type TestPlatform } from '../support/platform.ts';
import { createQueueEndpoint, createWorker, workerCall, type TestWorker } from '../support/jobs.ts';

let p: TestPlatform;
let ep: string;
let w: TestWorker;

beforeAll(async () => {
  process.env.GANTRY_JOB_TAKE_HOLD_MS = '1500';
  p = await startTestPlatform();
  ep = await createQueueEndpoint(p);
  w = await createWorker(p, ep);
});
afterAll(async () => {
  await p?.ctx.temporal.schedule
    .getHandle(purgeOutputsScheduleId(p.taskQueue))
    .delete()
    .catch(() => undefined);
  await p?.stop();
});

const submit = (
  path: 'run' | 'runsync',
  body: unknown,
  idempotencyKey: string | undefined,
  opts: { target?: string; key?: string; query?: string } = {},
) =>
  call(p.url, 'POST', `/v2/${opts.target ?? ep}/${path}${opts.query ?? ''}`, {
    key: opts.key ?? p.adminKey,
    body,
    headers: idempotencyKey === undefined ? {} : { 'idempotency-key': idempotencyKey },
  });

/** The jobs stored under an idempotency key, whatever account or endpoint. */
const rowsUnder = (key: string) =>
  p.ctx.db.job.findMany({ where: { idempotencyKey: key }, select: { id: true, accountId: true } });

const take = () => workerCall(p.url, 'GET', `/v2/${ep}/job-take/${w.id}?gpu=X&job_in_progress=0`, w.key);
const done = (jobId: string, body: unknown) =>
  workerCall(p.url, 'POST', `/v2/${ep}/job-done/${w.id}/${jobId}?gpu=X&isStream=false`, w.key, body);

/** Takes until the job `id` comes up (other tests' queued jobs are finished on the way). */
async function takeJob(id: string): Promise<void> {
  for (let i = 0; i < 50; i++) {
    const t = await take();
    if (t.status === 200 && t.body.id === id) return;
    if (t.status === 200) await done(t.body.id, { output: 'drained' });
  }
  throw new Error(`job ${id} was never handed out`);
}

describe('POST /run with an Idempotency-Key', () => {
  it('a repeat answers the first job (one row, Idempotent-Replayed: true); without a key, each submit is a job', async () => {
    const key = `order-${randomString(12)}`;
    const body = { input: { prompt: 'once', n: 1 }, policy: { ttl: 600_000 } };
    const first = await submit('run', body, key);
    expect(first.status).toBe(200);
    expect(first.body).toEqual({ id: expect.any(String), status: 'IN_QUEUE' });
    expect(first.headers.get('idempotent-replayed')).toBeNull();

    // The same body written in another key order, and the key as a Structured Field string: the same request.
    const again = await submit('run', { policy: { ttl: 600_000 }, input: { n: 1, prompt: 'once' } }, `"${key}"`);
    expect(again.status).toBe(200);
    expect(again.body).toEqual({ id: first.body.id, status: 'IN_QUEUE' });
    expect(again.headers.get('idempotent-replayed')).toBe('true');

    // The repeat answers the job as it stands now.
    await takeJob(first.body.id);
    const running = await submit('run', body, key);
    expect(running.body).toEqual({ id: first.body.id, status: 'IN_PROGRESS' });
    await done(first.body.id, { output: { ok: true } });
    expect((await submit('run', body, key)).body).toEqual({ id: first.body.id, status: 'COMPLETED' });

    expect(await rowsUnder(key)).toEqual([{ id: first.body.id, accountId: expect.any(String) }]);

    // Without a key nothing changes: the same body twice is two jobs.
    const plain = { input: { prompt: `no key ${randomString(6)}` } };
    const a = await submit('run', plain, undefined);
    const b = await submit('run', plain, undefined);
    expect(a.body.id).not.toBe(b.body.id);
    expect(b.headers.get('idempotent-replayed')).toBeNull();
  });

  it('concurrent submits under one key create one job', async () => {
    const key = `burst-${randomString(12)}`;
    const answers = await Promise.all(Array.from({ length: 12 }, () => submit('run', { input: { burst: 1 } }, key)));
    expect(answers.map((a) => a.status)).toEqual(answers.map(() => 200));
    expect(new Set(answers.map((a) => a.body.id)).size).toBe(1);
    expect(answers.filter((a) => a.headers.get('idempotent-replayed') === 'true')).toHaveLength(11);
    expect(await rowsUnder(key)).toHaveLength(1);
  });

  it('the same key with another request is 422 problem+json, and creates nothing', async () => {
    const key = `reuse-${randomString(12)}`;
    const first = await submit('run', { input: { v: 1 } }, key);
    expect(first.status).toBe(200);
    for (const other of [
      () => submit('run', { input: { v: 2 } }, key),
      () => submit('run', { input: { v: 1 }, policy: { lowPriority: true } }, key),
      // Another call under the key: a /runsync is not a repeat of a /run.
      () => submit('runsync', { input: { v: 1 } }, key, { query: '?wait=1000' }),
    ]) {
      const r = await other();
      expect(r.status).toBe(422);
      expect(r.headers.get('content-type')).toContain('application/problem+json');
      expect(r.body).toMatchObject({ status: 422, detail: expect.stringContaining('Idempotency-Key') });
    }
    expect(await rowsUnder(key)).toEqual([{ id: first.body.id, accountId: expect.any(String) }]);
  });

  it('a malformed key is 400 problem+json naming the header, and creates nothing', async () => {
    const before = await p.ctx.db.job.count({ where: { endpointId: ep } });
    for (const bad of ['', 'x'.repeat(256), 'caf\u00e9', 'tab\there', '"unterminated\\"', '"a"b"']) {
      for (const path of ['run', 'runsync'] as const) {
        const r = await submit(path, { input: { bad: true } }, bad);
        expect(r.status, JSON.stringify(bad)).toBe(400);
        expect(r.headers.get('content-type')).toContain('application/problem+json');
        expect(r.body.detail).toContain('Idempotency-Key');
        // The key is not echoed back.
        if (bad.length > 3) expect(JSON.stringify(r.body)).not.toContain(bad);
      }
    }
    expect(await p.ctx.db.job.count({ where: { endpointId: ep } })).toBe(before);
    // The longest key there may be is one.
    expect((await submit('run', { input: { longest: true } }, 'k'.repeat(255))).status).toBe(200);
  });
});

describe('POST /runsync with an Idempotency-Key', () => {
  it("a repeat waits for the first job and answers its output, as the first runsync's answer would", async () => {
    const key = `sync-${randomString(12)}`;
    const body = { input: { prompt: 'sync once' } };
    // Nothing takes it within the wait: the first answer is the id to poll.
    const first = await submit('runsync', body, key, { query: '?wait=1000' });
    expect(first.status).toBe(200);
    expect(first.body).toEqual({ id: expect.stringMatching(/^sync-/), status: 'IN_QUEUE' });
    const id = first.body.id as string;

    // A repeat that waits while the job runs is answered with its result.
    await takeJob(id);
    const waiting = submit('runsync', body, key, { query: '?wait=20000' });
    await new Promise((r) => setTimeout(r, 300));
    await done(id, { output: { text: 'the result' } });
    const repeat = await waiting;
    expect(repeat.status).toBe(200);
    expect(repeat.headers.get('idempotent-replayed')).toBe('true');
    expect(repeat.body).toMatchObject({ id, status: 'COMPLETED', output: { text: 'the result' } });

    // And one after the end answers at once.
    const late = await submit('runsync', body, key);
    expect(late.body).toMatchObject({ id, status: 'COMPLETED', output: { text: 'the result' } });
    expect(await rowsUnder(key)).toHaveLength(1);
  });
});

describe('keys are scoped to the account', () => {
  it("another account's identical key on the same public model is another job", async () => {
    const modelId = `idem-${randomString(6)
      .toLowerCase()
      .replace(/[^a-z0-9]/g, 'x')}-1`;
    const published = await call(p.url, 'POST', '/v2/public-endpoints', {
      key: p.adminKey,
      body: {
        id: modelId,
        endpointId: ep,
        name: 'Idempotency test model',
        outputKind: 'json',
        inputSchema: { type: 'object' },
        price: { amount: 0, unit: 'call' },
      },
    });
    expect(published.status, JSON.stringify(published.body)).toBe(201);
    const otherAccount = (
      await p.ctx.db.account.create({ data: { id: newId(), email: `${newId()}@other.test`, name: 'other' } })
    ).id;
    const otherKey = (await issueApiKey(p.ctx.db, otherAccount, 'other', ['RUN'])).key;

    const key = `shared-${randomString(12)}`;
    const body = { input: { prompt: 'same words' } };
    const mine = await submit('run', body, key, { target: modelId });
    const theirs = await submit('run', body, key, { target: modelId, key: otherKey });
    expect(mine.status).toBe(200);
    expect(theirs.status).toBe(200);
    expect(theirs.body.id).not.toBe(mine.body.id);
    expect(theirs.headers.get('idempotent-replayed')).toBeNull();

    // Each repeat answers its own account's job.
    expect((await submit('run', body, key, { target: modelId })).body.id).toBe(mine.body.id);
    expect((await submit('run', body, key, { target: modelId, key: otherKey })).body.id).toBe(theirs.body.id);
    const rows = await rowsUnder(key);
    expect(rows).toHaveLength(2);
    expect(new Set(rows.map((r) => r.accountId)).size).toBe(2);
    expect(rows.find((r) => r.accountId === otherAccount)?.id).toBe(theirs.body.id);
  });
});
