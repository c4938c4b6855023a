/**
 * The worker protocol (docs/jobs.md) against real PostgreSQL and Temporal: credentials, long-poll
 * wake-ups, batches, results in every shape, streams, the stop channel, pings, and that no job is
 * handed out twice under concurrent takers.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jobRuntimeOf } from '../../domain/jobs/index.ts';
import { registerWorkerCredential } from '../../domain/workers/index.ts';
import { call, startTestPlatform, type TestPlatform } from '../support/platform.ts';
import {
  createQueueEndpoint,
  createWorker,
  eventually,
  startCompatWorker,
  workerCall,
  workerEnv,
  type TestWorker,
} from '../support/jobs.ts';

let p: TestPlatform;

beforeAll(async () => {
  process.env.GANTRY_JOB_TAKE_HOLD_MS = '3000';
  p = await startTestPlatform();
});
afterAll(async () => {
  await p?.stop();
});

const run = (ep: string, input: unknown, extra: Record<string, unknown> = {}) =>
  call(p.url, 'POST', `/v2/${ep}/run`, { key: p.adminKey, body: { input, ...extra } }).then((r) => r.body.id as string);
const status = (ep: string, id: string) =>
  call(p.url, 'GET', `/v2/${ep}/status/${id}`, { key: p.adminKey }).then((r) => r.body);
const take = (ep: string, w: TestWorker, extra = '') =>
  workerCall(p.url, 'GET', `/v2/${ep}/job-take/${w.id}?gpu=X&job_in_progress=0${extra}`, w.key);
const done = (ep: string, w: TestWorker, id: string, body: unknown, contentType?: string) =>
  workerCall(p.url, 'POST', `/v2/${ep}/job-done/${w.id}/${id}?gpu=X&isStream=false`, w.key, body, contentType);

describe('worker credentials', () => {
  it('accepts the key as sent by the SDK (no Bearer), and only for its own worker and endpoint', async () => {
    const ep = await createQueueEndpoint(p);
    const w = await createWorker(p, ep);
    const other = await createWorker(p, ep);
    const ep2 = await createQueueEndpoint(p);

    const id = await run(ep, { a: 1 });
    const t = await take(ep, w);
    expect(t.status).toBe(200);
    expect(t.body).toEqual({ id, input: { a: 1 } });

    expect((await workerCall(p.url, 'GET', `/v2/${ep}/job-take/${w.id}?gpu=X`, '')).status).toBe(401);
    expect((await workerCall(p.url, 'GET', `/v2/${ep}/job-take/${w.id}?gpu=X`, 'gntr_wk_not_a_real_key')).status).toBe(
      401,
    );
    // A client API key is not a worker credential.
    expect((await workerCall(p.url, 'GET', `/v2/${ep}/job-take/${w.id}?gpu=X`, p.adminKey)).status).toBe(401);
    expect((await workerCall(p.url, 'GET', `/v2/${ep}/job-take/${other.id}?gpu=X`, w.key)).status).toBe(403);
    expect((await workerCall(p.url, 'GET', `/v2/${ep2}/job-take/${w.id}?gpu=X`, w.key)).status).toBe(403);
    expect((await workerCall(p.url, 'GET', `/v2/${ep}/ping/${w.id}`, `Bearer ${w.key}`)).status).toBe(200);

    // A new credential replaces the old one.
    const fresh = await registerWorkerCredential(p.ctx.db, { workerId: other.id, endpointId: ep });
    expect((await workerCall(p.url, 'GET', `/v2/${ep}/ping/${other.id}`, other.key)).status).toBe(401);
    expect((await workerCall(p.url, 'GET', `/v2/${ep}/ping/${other.id}`, fresh)).status).toBe(200);
    const row = await p.ctx.db.worker.findUniqueOrThrow({ where: { id: other.id } });
    expect(row.credentialHash).toMatch(/^[0-9a-f]{64}$/);
    expect(row.credentialHash).not.toContain(fresh);
    await expect(registerWorkerCredential(p.ctx.db, { workerId: other.id, endpointId: ep2 })).rejects.toThrow(
      /another endpoint/,
    );
    await done(ep, w, id, { output: 1 });
  });
});

describe('job-take', () => {
  it('holds the long-poll and answers the moment a job is queued', async () => {
    const ep = await createQueueEndpoint(p);
    const w = await createWorker(p, ep);
    const started = Date.now();
    const empty = await take(ep, w);
    expect(empty.status).toBe(204);
    expect(Date.now() - started).toBeGreaterThanOrEqual(2_900);

    const waiting = take(ep, w).then((r) => ({ ...r, at: Date.now() }));
    await new Promise((r) => setTimeout(r, 300));
    const submittedAt = Date.now();
    const id = await run(ep, { wake: true });
    const got = await waiting;
    expect(got.status).toBe(200);
    expect(got.body.id).toBe(id);
    // Woken by the commit, not by the long-poll's 3 s timeout (the bound leaves room for a loaded
    // 2-core machine: 262 ms was seen at load average 19).
    expect(got.at - submittedAt).toBeLessThan(750);
    await done(ep, w, id, { output: 'ok' });
  });

  it('a worker thawed before its wake-up arrives takes at once: a remembered "takes no jobs" is read again', async () => {
    const ep = await createQueueEndpoint(p);
    const w = await createWorker(p, ep);
    const id = await run(ep, { thawed: true });
    await p.ctx.db.worker.update({ where: { id: w.id }, data: { status: 'STANDBY' } });
    // A ping while frozen leaves "takes no jobs" in the API's record cache (kept up to 1 s).
    expect((await workerCall(p.url, 'GET', `/v2/${ep}/ping/${w.id}`, w.key)).status).toBe(200);
    // Thawed, its wake-up not yet arrived: the row says IDLE, the cache still says STANDBY.
    await p.ctx.db.worker.update({ where: { id: w.id }, data: { status: 'IDLE' } });
    const asked = Date.now();
    const got = await take(ep, w);
    expect(got.body).toEqual({ id, input: { thawed: true } });
    expect(Date.now() - asked).toBeLessThan(1_500);
    await done(ep, w, id, { output: 'ok' });
  });

  it('wakes a long-poll waiting on another API process through LISTEN/NOTIFY', async () => {
    const ep = await createQueueEndpoint(p);
    const w = await createWorker(p, ep);
    // A second API process on the same database and Temporal.
    const second = await startTestPlatform({
      DATABASE_URL: p.databaseUrl,
      GANTRY_TASK_QUEUE: p.taskQueue,
      GANTRY_ADMIN_API_KEY: p.adminKey,
      GANTRY_ROLE: 'api',
    });
    try {
      const waiting = workerCall(second.url, 'GET', `/v2/${ep}/job-take/${w.id}?gpu=X`, w.key).then((r) => ({
        ...r,
        at: Date.now(),
      }));
      await new Promise((r) => setTimeout(r, 300));
      const submittedAt = Date.now();
      const id = await run(ep, { across: true });
      const got = await waiting;
      expect(got.body.id).toBe(id);
      expect(got.at - submittedAt).toBeLessThan(500);
      // The result posted to the second process reaches a runsync waiting on the first.
      const sync = call(p.url, 'POST', `/v2/${ep}/runsync`, { key: p.adminKey, body: { input: { s: 1 } } });
      const t2 = await workerCall(second.url, 'GET', `/v2/${ep}/job-take/${w.id}?gpu=X`, w.key);
      await workerCall(second.url, 'POST', `/v2/${ep}/job-done/${w.id}/${t2.body.id}?isStream=false`, w.key, {
        output: 'from the other process',
      });
      expect((await sync).body).toMatchObject({ status: 'COMPLETED', output: 'from the other process' });
      await done(ep, w, id, { output: 1 });
    } finally {
      await second.stop();
    }
  });

  it('hands out batches with job-take-batch, and several jobs to one worker at once', async () => {
    const ep = await createQueueEndpoint(p);
    const w = await createWorker(p, ep);
    const ids = [];
    for (let i = 0; i < 5; i++) ids.push(await run(ep, { i }));
    const batch = await workerCall(
      p.url,
      'GET',
      `/v2/${ep}/job-take-batch/${w.id}?gpu=X&job_in_progress=0&batch_size=3`,
      w.key,
    );
    expect(batch.status).toBe(200);
    expect(batch.body.map((j: { id: string }) => j.id)).toEqual(ids.slice(0, 3));
    expect(batch.body[0]).toEqual({ id: ids[0], input: { i: 0 } });
    // Still holding three, the worker asks for more (job_in_progress=1) and gets them.
    const more = await take(ep, w, '&job_in_progress=1');
    expect(more.body.id).toBe(ids[3]);
    const health = await call(p.url, 'GET', `/v2/${ep}/health`, { key: p.adminKey });
    expect(health.body.jobs).toMatchObject({ inProgress: 4, inQueue: 1 });
    for (const id of ids.slice(0, 4)) expect((await done(ep, w, id, { output: id })).status).toBe(200);
    const rest = await workerCall(p.url, 'GET', `/v2/${ep}/job-take-batch/${w.id}?gpu=X&batch_size=10`, w.key);
    expect(rest.body).toHaveLength(1);
    await done(ep, w, ids[4] as string, { output: 'last' });
  });

  it('never hands a job to two takers: 150 jobs, 10 concurrent workers', async () => {
    const ep = await createQueueEndpoint(p);
    const workers = await Promise.all(Array.from({ length: 10 }, () => createWorker(p, ep)));
    const submitted = new Set<string>();
    await Promise.all(Array.from({ length: 150 }, async (_, i) => submitted.add(await run(ep, { i }))));
    const seen: string[] = [];
    await Promise.all(
      workers.map(async (w) => {
        for (;;) {
          const t = await workerCall(p.url, 'GET', `/v2/${ep}/job-take-batch/${w.id}?gpu=X&batch_size=4`, w.key);
          if (t.status === 204) return;
          for (const job of t.body as Array<{ id: string }>) {
            seen.push(job.id);
            await done(ep, w, job.id, { output: w.id });
          }
        }
      }),
    );
    expect(seen).toHaveLength(150);
    expect(new Set(seen)).toEqual(submitted);
    const rows = await p.ctx.db.job.findMany({ where: { endpointId: ep } });
    expect(rows.every((r) => r.status === 'COMPLETED' && r.output === r.workerId)).toBe(true);
  }, 120_000);

  it('gives nothing to a worker that is draining or asked to stop', async () => {
    const ep = await createQueueEndpoint(p);
    const w = await createWorker(p, ep);
    await p.ctx.db.worker.update({ where: { id: w.id }, data: { status: 'DRAINING' } });
    const id = await run(ep, {});
    const t = await take(ep, w);
    expect(t.status).toBe(204);
    expect((await status(ep, id)).status).toBe('IN_QUEUE');
    await call(p.url, 'POST', `/v2/${ep}/cancel/${id}`, { key: p.adminKey });
  });
});

describe('job-done', () => {
  it('reads the raw body as JSON whatever the content type, and records every result shape', async () => {
    const ep = await createQueueEndpoint(p);
    const w = await createWorker(p, ep);
    const cases: Array<{ body: unknown; contentType: string; expect: Record<string, unknown> }> = [
      {
        body: { output: { text: 'hi' } },
        contentType: 'application/x-www-form-urlencoded',
        expect: { status: 'COMPLETED', output: { text: 'hi' } },
      },
      {
        body: { output: [1, 2, 3] },
        contentType: 'application/json',
        expect: { status: 'COMPLETED', output: [1, 2, 3] },
      },
      { body: { output: 'plain' }, contentType: 'text/plain', expect: { status: 'COMPLETED', output: 'plain' } },
      {
        body: { output: { partial: true }, error: 'half done' },
        contentType: 'application/x-www-form-urlencoded',
        expect: { status: 'FAILED', error: 'half done', output: { partial: true } },
      },
      {
        body: {
          error: JSON.stringify({
            error_type: 'ValueError',
            error_message: 'bad input',
            error_traceback: 'tb',
            hostname: 'h',
            worker_id: 'w',
          }),
        },
        contentType: 'application/x-www-form-urlencoded',
        expect: { status: 'FAILED', error: expect.stringContaining('"error_type":"ValueError"') },
      },
      {
        body: { error: { error_message: 'an object' } },
        contentType: 'application/json',
        expect: { status: 'FAILED', error: '{"error_message":"an object"}' },
      },
    ];
    for (const c of cases) {
      const id = await run(ep, {});
      expect((await take(ep, w)).body.id).toBe(id);
      const r = await done(ep, w, id, c.body, c.contentType);
      expect(r.status, JSON.stringify(c)).toBe(200);
      expect(await status(ep, id)).toMatchObject({ id, ...c.expect });
    }
    const id = await run(ep, {});
    await take(ep, w);
    expect((await done(ep, w, id, '{not json', 'application/x-www-form-urlencoded')).status).toBe(400);
    expect((await done(ep, w, id, '[1]', 'application/x-www-form-urlencoded')).status).toBe(400);
    expect((await status(ep, id)).status).toBe('IN_PROGRESS');
    await done(ep, w, id, { output: null });
    expect(await status(ep, id)).toEqual(expect.objectContaining({ status: 'COMPLETED' }));
  });

  it('takes progress updates without finishing the job', async () => {
    const ep = await createQueueEndpoint(p);
    const w = await createWorker(p, ep);
    const id = await run(ep, {});
    await take(ep, w);
    expect((await done(ep, w, id, { status: 'IN_PROGRESS', output: { step: 1, of: 3 } })).status).toBe(200);
    expect(await status(ep, id)).toMatchObject({ status: 'IN_PROGRESS', output: { step: 1, of: 3 } });
    await done(ep, w, id, { output: 'final' });
    expect(await status(ep, id)).toMatchObject({ status: 'COMPLETED', output: 'final' });
  });

  it('stops giving jobs to a worker that posted stopPod', async () => {
    const ep = await createQueueEndpoint(p);
    const w = await createWorker(p, ep);
    const id = await run(ep, {});
    await take(ep, w);
    await done(ep, w, id, { output: 'bye', stopPod: true });
    expect(await status(ep, id)).toMatchObject({ status: 'COMPLETED', output: 'bye' });
    const row = await p.ctx.db.worker.findUniqueOrThrow({ where: { id: w.id } });
    expect(row.desiredStatus).toBe('EXITED');
    const next = await run(ep, {});
    expect((await take(ep, w)).status).toBe(204);
    await call(p.url, 'POST', `/v2/${ep}/cancel/${next}`, { key: p.adminKey });
  });
});

describe('job-stream and /stream', () => {
  it('delivers each chunk once, in order, and the final output', async () => {
    const ep = await createQueueEndpoint(p);
    const w = await createWorker(p, ep);
    const id = await run(ep, { stream: true });
    await take(ep, w);
    const streamUrl = (n: number) => `/v2/${ep}/job-stream/${w.id}/${id}?gpu=X&isStream=true&n=${n}`;
    for (const [i, chunk] of ['Hel', 'lo', ', wor'].entries())
      expect((await workerCall(p.url, 'POST', streamUrl(i), w.key, { output: chunk })).status).toBe(200);

    const first = await call(p.url, 'GET', `/v2/${ep}/stream/${id}`, { key: p.adminKey });
    expect(first.body).toEqual({
      status: 'IN_PROGRESS',
      stream: [{ output: 'Hel' }, { output: 'lo' }, { output: ', wor' }],
    });

    // A caller waiting for more is answered when the next chunk arrives.
    const waiting = call(p.url, 'GET', `/v2/${ep}/stream/${id}`, { key: p.adminKey });
    await new Promise((r) => setTimeout(r, 200));
    await workerCall(p.url, 'POST', streamUrl(3), w.key, { output: 'ld' });
    expect((await waiting).body).toEqual({ status: 'IN_PROGRESS', stream: [{ output: 'ld' }] });

    await workerCall(p.url, 'POST', `/v2/${ep}/job-done/${w.id}/${id}?gpu=X&isStream=true`, w.key, {
      output: ['Hel', 'lo', ', wor', 'ld'],
    });
    const last = await call(p.url, 'GET', `/v2/${ep}/stream/${id}`, { key: p.adminKey });
    expect(last.body).toEqual({ status: 'COMPLETED', stream: [] });
    expect((await status(ep, id)).output).toEqual(['Hel', 'lo', ', wor', 'ld']);
    // Chunks for a finished job are refused.
    expect((await workerCall(p.url, 'POST', streamUrl(9), w.key, { output: 'late' })).status).toBe(409);
  });
});

describe('job-stop and ping', () => {
  it('tells the worker holding a cancelled job to stop it, once', async () => {
    const ep = await createQueueEndpoint(p);
    const w = await createWorker(p, ep);
    const id = await run(ep, {});
    await take(ep, w);
    const stopping = workerCall(p.url, 'GET', `/v2/${ep}/job-stop/${w.id}?gpu=X`, w.key);
    await new Promise((r) => setTimeout(r, 200));
    const t0 = Date.now();
    expect((await call(p.url, 'POST', `/v2/${ep}/cancel/${id}`, { key: p.adminKey })).body).toEqual({
      id,
      status: 'CANCELLED',
    });
    const stop = await stopping;
    expect(Date.now() - t0).toBeLessThan(1_000);
    expect(stop).toEqual({ status: 200, body: { jobsToStop: [id] } });
    expect((await workerCall(p.url, 'GET', `/v2/${ep}/job-stop/${w.id}?gpu=X`, w.key)).status).toBe(204);
    // A stopped job posts no result; a late one changes nothing.
    expect((await done(ep, w, id, { output: 'too late' })).status).toBe(200);
    expect(await status(ep, id)).toEqual({
      id,
      status: 'CANCELLED',
      workerId: w.id,
      delayTime: expect.any(Number),
      executionTime: expect.any(Number),
    });
  });

  it('records pings, the jobs they list, and a failed self-check', async () => {
    const ep = await createQueueEndpoint(p);
    const w = await createWorker(p, ep);
    const id = await run(ep, {});
    await take(ep, w);
    const r = await workerCall(
      p.url,
      'GET',
      `/v2/${ep}/ping/${w.id}?job_id=${id},someone-elses&runpod_version=1.7.0&retry_ping=0`,
      w.key,
    );
    expect(r.status).toBe(200);
    const job = await p.ctx.db.job.findUniqueOrThrow({ where: { id } });
    expect(job.lastSeenAt?.getTime()).toBeGreaterThan(Date.now() - 5_000);
    expect((await p.ctx.db.worker.findUniqueOrThrow({ where: { id: w.id } })).lastPingAt?.getTime()).toBeGreaterThan(
      Date.now() - 5_000,
    );

    const sick = await workerCall(
      p.url,
      'GET',
      `/v2/${ep}/ping/${w.id}?job_id=&status=unhealthy&check=cuda&reason=no+device`,
      w.key,
    );
    expect(sick.status).toBe(200);
    const row = await p.ctx.db.worker.findUniqueOrThrow({ where: { id: w.id } });
    expect(row).toMatchObject({ status: 'UNHEALTHY', statusReason: 'self-check failed (cuda): no device' });
    const queued = await run(ep, {});
    expect((await take(ep, w)).status).toBe(204);
    await done(ep, w, id, { output: 1 });
    await call(p.url, 'POST', `/v2/${ep}/cancel/${queued}`, { key: p.adminKey });
  });
});

describe('the compat worker (docs/jobs.md only) as a process', () => {
  it('serves run, runsync, failures, progress and streams end to end', async () => {
    const ep = await createQueueEndpoint(p);
    const w = await createWorker(p, ep);
    const proc = startCompatWorker(workerEnv(p.url, ep, w, { WORKER_CONCURRENCY: '2', RUNPOD_PING_INTERVAL: '500' }));
    try {
      await proc.waitFor((e) => e.event === 'worker-up');
      const sync = await call(p.url, 'POST', `/v2/${ep}/runsync`, {
        key: p.adminKey,
        body: { input: { op: 'echo', text: 'hello' } },
      });
      expect(sync.body).toMatchObject({ status: 'COMPLETED', output: { op: 'echo', text: 'hello' }, workerId: w.id });

      const failed = await call(p.url, 'POST', `/v2/${ep}/runsync`, {
        key: p.adminKey,
        body: { input: { op: 'fail', message: 'nope' } },
      });
      expect(failed.body.status).toBe('FAILED');
      expect(JSON.parse(failed.body.error)).toMatchObject({
        error_type: 'ValueError',
        error_message: 'nope',
        worker_id: w.id,
      });

      const slow = await run(ep, { op: 'progress', ms: 1500 });
      await eventually(async () => (await status(ep, slow)).output?.progress === 'half', 10_000, 'progress visible');
      await eventually(async () => (await status(ep, slow)).status === 'COMPLETED', 10_000, 'progress job done');

      const streamed = await run(ep, { op: 'stream', chunks: ['a', 'b', 'c'], ms: 100 });
      const got: unknown[] = [];
      for (;;) {
        const s = await call(p.url, 'GET', `/v2/${ep}/stream/${streamed}`, { key: p.adminKey });
        got.push(...s.body.stream.map((c: { output: unknown }) => c.output));
        if (s.body.status === 'COMPLETED') break;
      }
      expect(got).toEqual(['a', 'b', 'c']);

      // Two slots: two sleeping jobs run at once on the one worker.
      const a = await run(ep, { op: 'sleep', ms: 1200 });
      const b = await run(ep, { op: 'sleep', ms: 1200 });
      await eventually(
        async () => (await status(ep, a)).status === 'IN_PROGRESS' && (await status(ep, b)).status === 'IN_PROGRESS',
        5_000,
        'both running',
      );
      await eventually(
        async () => (await status(ep, a)).status === 'COMPLETED' && (await status(ep, b)).status === 'COMPLETED',
        10_000,
        'both done',
      );
    } finally {
      await proc.kill();
    }
  }, 90_000);
});

describe('runsync hand-off to a waiting take', () => {
  /** Counts the calls of a JobStore method while the test runs (the store itself still runs them). */
  function countCalls(store: object, method: 'take' | 'insert' | 'insertTaken'): { n: number; restore(): void } {
    const target = store as Record<string, (...args: unknown[]) => unknown>;
    const original = target[method]!;
    const counter = {
      n: 0,
      restore: () => {
        target[method] = original;
      },
    };
    target[method] = function (this: unknown, ...args: unknown[]) {
      counter.n++;
      return original.apply(this, args);
    };
    return counter;
  }
  const runsync = (ep: string, input: unknown, headers: Record<string, string> = {}) =>
    fetch(`${p.url}/v2/${ep}/runsync`, {
      method: 'POST',
      headers: { authorization: `Bearer ${p.adminKey}`, 'content-type': 'application/json', ...headers },
      body: JSON.stringify({ input }),
      // eslint-disable-next-line @typescript-eslint/no-explicit-any -- tests read arbitrary JSON
    }).then(async (r) => ({ status: r.status, body: (await r.json()) as any }));

  it('hands the job to the longest-waiting take in one statement, without the queue', async () => {
    const jobs = jobRuntimeOf(p.ctx);
    const ep = await createQueueEndpoint(p);
    const first = await createWorker(p, ep);
    const second = await createWorker(p, ep);
    const takeA = take(ep, first);
    await eventually(async () => jobs.offers.waiting === 1, 5_000, 'first take waiting');
    const takeB = take(ep, second);
    await eventually(async () => jobs.offers.waiting === 2, 5_000, 'second take waiting');

    const takes = countCalls(jobs.workerStore, 'take');
    const inserts = countCalls(jobs.store, 'insert');
    const handed = countCalls(jobs.store, 'insertTaken');
    try {
      const answer = runsync(ep, { handed: 1 });
      const got = await takeA;
      expect(got.status).toBe(200);
      expect(got.body.input).toEqual({ handed: 1 });
      // Taken by the first worker the moment it was inserted: never queued, never picked by a take.
      const row = await p.ctx.db.job.findUniqueOrThrow({ where: { id: got.body.id } });
      expect(row).toMatchObject({ status: 'IN_PROGRESS', workerId: first.id, sync: true });
      expect(row.startedAt).not.toBeNull();
      expect(jobs.offers.waiting).toBe(1);
      expect((await done(ep, first, got.body.id, { output: { ok: 1 } })).status).toBe(200);
      const final = await answer;
      expect(final.status).toBe(200);
      expect(final.body).toMatchObject({ id: got.body.id, status: 'COMPLETED', output: { ok: 1 } });

      // The next one goes to the take still waiting.
      const next = runsync(ep, { handed: 2 });
      const gotB = await takeB;
      expect(gotB.body.input).toEqual({ handed: 2 });
      await done(ep, second, gotB.body.id, { output: 2 });
      expect((await next).body.status).toBe('COMPLETED');
      expect([takes.n, inserts.n, handed.n]).toEqual([0, 0, 2]);
    } finally {
      takes.restore();
      inserts.restore();
      handed.restore();
    }
  });

  it('queues it as before when no take waits, when the call has an idempotency key, and for /run', async () => {
    const jobs = jobRuntimeOf(p.ctx);
    const ep = await createQueueEndpoint(p);
    const w = await createWorker(p, ep);
    const handed = countCalls(jobs.store, 'insertTaken');
    try {
      // No take waits: queued, then taken.
      const answer = runsync(ep, { queued: true });
      await eventually(async () => (await p.ctx.db.job.count({ where: { endpointId: ep } })) === 1, 5_000, 'queued');
      const got = await take(ep, w);
      expect(got.body.input).toEqual({ queued: true });
      await done(ep, w, got.body.id, { output: 'q' });
      expect((await answer).body.status).toBe('COMPLETED');

      // A take waits, but a keyed runsync and a /run job go through the queue (and wake it).
      for (const submit of [
        () => runsync(ep, { keyed: true }, { 'idempotency-key': `k-${Date.now()}` }),
        () => run(ep, { async: true }),
      ]) {
        const waiting = take(ep, w);
        await eventually(async () => jobs.offers.waiting === 1, 5_000, 'take waiting');
        const pending = submit();
        const t = await waiting;
        expect(t.status).toBe(200);
        await done(ep, w, t.body.id, { output: 'x' });
        await pending;
      }
      expect(handed.n).toBe(0);
    } finally {
      handed.restore();
    }
  });

  it('gives a take that hung up nothing: its job goes to a take that still waits', async () => {
    const jobs = jobRuntimeOf(p.ctx);
    const ep = await createQueueEndpoint(p);
    const gone = await createWorker(p, ep);
    const stays = await createWorker(p, ep);
    const hangUp = new AbortController();
    const abandoned = fetch(`${p.url}/v2/${ep}/job-take/${gone.id}?gpu=X`, {
      headers: { authorization: gone.key },
      signal: hangUp.signal,
    }).catch(() => 'hung up');
    await eventually(async () => jobs.offers.waiting === 1, 5_000, 'first take waiting');
    const waiting = take(ep, stays);
    await eventually(async () => jobs.offers.waiting === 2, 5_000, 'second take waiting');
    hangUp.abort();
    expect(await abandoned).toBe('hung up');
    await eventually(async () => jobs.offers.waiting === 1, 5_000, 'the hung-up take withdrawn');

    const answer = runsync(ep, { to: 'the one still there' });
    const got = await waiting;
    expect(got.body.input).toEqual({ to: 'the one still there' });
    const row = await p.ctx.db.job.findUniqueOrThrow({ where: { id: got.body.id } });
    expect(row.workerId).toBe(stays.id);
    await done(ep, stays, got.body.id, { output: 'ok' });
    expect((await answer).body.status).toBe('COMPLETED');
  });
});
