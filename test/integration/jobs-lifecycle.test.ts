/**
 * What each job's workflow owns, against real PostgreSQL, Temporal and worker processes: execution
 * timeouts, worker loss and retry, TTL expiry, cancel of a running job, webhook delivery with its
 * retries, and result retention. Intervals are shortened through the environment where docs/jobs.md
 * allows it (ping interval, retention); the policy limits are the real ones (5 s, 10 s, 10 s apart).
 */
import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jobState, jobWorkflowId } from '../../contracts/workflows.ts';
import { call, startTestPlatform, type TestPlatform } from '../support/platform.ts';
import {
  createQueueEndpoint,
  createWorker,
  eventually,
  startCompatWorker,
  workerCall,
  workerEnv,
} from '../support/jobs.ts';

let p: TestPlatform;
const PING_MS = 400;

beforeAll(async () => {
  // The webhook listeners here are on loopback, which webhooks may reach only when allowed.
  process.env.GANTRY_WEBHOOK_ALLOW = '127.0.0.1/32';
  process.env.GANTRY_JOB_TAKE_HOLD_MS = '2000';
  process.env.GANTRY_WORKER_PING_INTERVAL_MS = String(PING_MS);
  process.env.GANTRY_JOB_RETENTION_MS = '4000';
  process.env.GANTRY_JOB_SYNC_RETENTION_MS = '2000';
  p = await startTestPlatform();
});
afterAll(async () => {
  await p?.stop();
});

const run = (ep: string, input: unknown, extra: Record<string, unknown> = {}) =>
  call(p.url, 'POST', `/v2/${ep}/run`, { key: p.adminKey, body: { input, ...extra } }).then((r) => {
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    return r.body.id as string;
  });
const status = (ep: string, id: string) => call(p.url, 'GET', `/v2/${ep}/status/${id}`, { key: p.adminKey });
const workflowDone = (id: string) =>
  eventually(
    async () => (await p.ctx.temporal.workflow.getHandle(jobWorkflowId(id)).describe()).status.name === 'COMPLETED',
    30_000,
    `workflow job:${id} completed`,
  );

/** A webhook receiver that answers `codes` in turn (then 200) and records what it got. */
async function webhookReceiver(
  codes: number[] = [],
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- webhook bodies are arbitrary JSON
): Promise<{ url: string; hits: Array<{ at: number; body: any }>; server: Server }> {
  const hits: Array<{ at: number; body: unknown }> = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      hits.push({ at: Date.now(), body: JSON.parse(body) });
      res.writeHead(codes.shift() ?? 200).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}/hook`, hits, server };
}

describe('execution timeout', () => {
  it('times a job out after policy.executionTimeout, stops it on its worker and posts the webhook', async () => {
    const ep = await createQueueEndpoint(p);
    const w = await createWorker(p, ep);
    const hook = await webhookReceiver();
    const proc = startCompatWorker(workerEnv(p.url, ep, w, { RUNPOD_PING_INTERVAL: String(PING_MS) }));
    try {
      const id = await run(ep, { op: 'sleep', ms: 30_000 }, { policy: { executionTimeout: 5_000 }, webhook: hook.url });
      await proc.waitFor((e) => e.event === 'job-start' && e.job === id);
      const startedAt = Date.now();
      const stopped = await proc.waitFor((e) => e.event === 'job-stopped' && e.job === id, 20_000);
      expect(Number(stopped.t) - startedAt).toBeGreaterThanOrEqual(4_500);
      expect(Number(stopped.t) - startedAt).toBeLessThan(9_000);
      const s = await status(ep, id);
      expect(s.body).toMatchObject({ id, status: 'TIMED_OUT', error: 'execution timeout exceeded', workerId: w.id });
      await workflowDone(id);
      expect(hook.hits).toHaveLength(1);
      expect(hook.hits[0]?.body).toMatchObject({ id, status: 'TIMED_OUT', error: 'execution timeout exceeded' });
      // The stopped job posted no result.
      expect(proc.events.some((e) => e.event === 'job-done' && e.job === id)).toBe(false);
      // A timed-out job can be retried.
      expect((await call(p.url, 'POST', `/v2/${ep}/retry/${id}`, { key: p.adminKey })).body).toEqual({
        id,
        status: 'IN_QUEUE',
      });
      await call(p.url, 'POST', `/v2/${ep}/cancel/${id}`, { key: p.adminKey });
    } finally {
      await proc.kill();
      hook.server.close();
    }
  }, 60_000);
});

describe('worker loss', () => {
  it('puts the job of a worker whose pings stopped back in the queue, counted as retried, and another worker finishes it', async () => {
    const ep = await createQueueEndpoint(p);
    const w1 = await createWorker(p, ep);
    const w2 = await createWorker(p, ep);
    const doomed = startCompatWorker(
      workerEnv(p.url, ep, w1, { RUNPOD_PING_INTERVAL: String(PING_MS), WORKER_CRASH: '1' }),
    );
    const id = await run(ep, { op: 'crash-if-told', n: 7 });
    await doomed.waitFor((e) => e.event === 'crash' && e.job === id);
    await doomed.exited;
    expect((await status(ep, id)).body.status).toBe('IN_PROGRESS');
    const lostAt = Date.now();
    await eventually(async () => (await status(ep, id)).body.status === 'IN_QUEUE', 20_000, 'job requeued');
    expect(Date.now() - lostAt).toBeLessThan(15_000);
    expect((await status(ep, id)).body).toMatchObject({ status: 'IN_QUEUE', retries: 1 });
    expect((await call(p.url, 'GET', `/v2/${ep}/health`, { key: p.adminKey })).body.jobs).toMatchObject({
      inQueue: 1,
      retried: 1,
    });

    const rescuer = startCompatWorker(workerEnv(p.url, ep, w2, { RUNPOD_PING_INTERVAL: String(PING_MS) }));
    try {
      await eventually(
        async () => (await status(ep, id)).body.status === 'COMPLETED',
        20_000,
        'job finished by the second worker',
      );
      expect((await status(ep, id)).body).toMatchObject({
        status: 'COMPLETED',
        output: { op: 'crash-if-told', n: 7 },
        workerId: w2.id,
        retries: 1,
      });
      await workflowDone(id);
    } finally {
      await rescuer.kill();
    }
  }, 60_000);

  it('keeps a long job whose worker keeps pinging, and fails a job that loses its worker three times', async () => {
    const ep = await createQueueEndpoint(p);
    const w = await createWorker(p, ep);
    // Pinging: a job running for ten loss intervals is not taken away.
    const steady = startCompatWorker(workerEnv(p.url, ep, w, { RUNPOD_PING_INTERVAL: String(PING_MS) }));
    const long = await run(ep, { op: 'sleep', ms: 4_000 });
    try {
      await eventually(async () => (await status(ep, long)).body.status === 'COMPLETED', 20_000, 'long job done');
      expect((await status(ep, long)).body.retries).toBeUndefined();
    } finally {
      await steady.kill();
    }

    const id = await run(ep, { op: 'crash' });
    for (let i = 0; i < 3; i++) {
      const proc = startCompatWorker(workerEnv(p.url, ep, w, { RUNPOD_PING_INTERVAL: String(PING_MS) }));
      await proc.waitFor((e) => e.event === 'crash' && e.job === id);
      await proc.exited;
      await eventually(
        async () => ['IN_QUEUE', 'FAILED'].includes((await status(ep, id)).body.status),
        20_000,
        `loss ${i + 1} noticed`,
      );
    }
    expect((await status(ep, id)).body).toMatchObject({
      status: 'FAILED',
      error: 'worker lost while running the job (3 times)',
      retries: 3,
    });
    await workflowDone(id);
  }, 90_000);
});

describe('TTL', () => {
  it('removes a job still queued at its TTL, and stops one still running', async () => {
    const ep = await createQueueEndpoint(p);
    const w = await createWorker(p, ep);
    const queued = await run(ep, {}, { policy: { ttl: 10_000 } });
    // A second endpoint has a worker, so that a job there is running when its TTL passes.
    const ep2 = await createQueueEndpoint(p);
    const w2 = await createWorker(p, ep2);
    const proc = startCompatWorker(workerEnv(p.url, ep2, w2, { RUNPOD_PING_INTERVAL: String(PING_MS) }));
    try {
      const running = await run(
        ep2,
        { op: 'sleep', ms: 30_000 },
        { policy: { ttl: 10_000, executionTimeout: 60_000 } },
      );
      await proc.waitFor((e) => e.event === 'job-start' && e.job === running);
      expect((await status(ep, queued)).body.status).toBe('IN_QUEUE');
      await eventually(async () => (await status(ep, queued)).status === 404, 25_000, 'queued job gone at its TTL');
      await workflowDone(queued);
      expect(await p.ctx.db.job.findUnique({ where: { id: queued } })).toBeNull();
      // Nothing is handed out after the TTL.
      expect((await workerCall(p.url, 'GET', `/v2/${ep}/job-take/${w.id}?gpu=X`, w.key)).status).toBe(204);

      await proc.waitFor((e) => e.event === 'job-stopped' && e.job === running, 25_000);
      expect((await status(ep2, running)).status).toBe(404);
      await workflowDone(running);
    } finally {
      await proc.kill();
    }
  }, 60_000);
});

describe('endpoint deletion', () => {
  it("cancels the endpoint's queued jobs and ends their workflows at once", async () => {
    const ep = await createQueueEndpoint(p);
    const ids = [await run(ep, { n: 1 }), await run(ep, { n: 2 }), await run(ep, { n: 3 })];
    // Their workflows are running, waiting for the jobs' 24 h TTL.
    await eventually(
      async () =>
        (await Promise.all(ids.map((id) => p.ctx.temporal.workflow.getHandle(jobWorkflowId(id)).describe()))).every(
          (d) => d.status.name === 'RUNNING',
        ),
      10_000,
      'job workflows running',
    );
    expect((await call(p.url, 'DELETE', `/v2/serverless/${ep}`, { key: p.adminKey })).status).toBeLessThan(300);
    for (const id of ids) {
      const handle = p.ctx.temporal.workflow.getHandle(jobWorkflowId(id));
      await eventually(async () => (await handle.describe()).status.name === 'COMPLETED', 30_000, `job:${id} ended`);
      expect(await handle.query(jobState)).toMatchObject({ status: 'CANCELLED' });
    }
    expect(await p.ctx.db.endpoint.count({ where: { id: ep } })).toBe(0);
    expect(await p.ctx.db.job.count({ where: { endpointId: ep } })).toBe(0);
  }, 60_000);
});

describe('cancel of a running job', () => {
  it('stops it on its worker, which posts no result', async () => {
    const ep = await createQueueEndpoint(p);
    const w = await createWorker(p, ep);
    const hook = await webhookReceiver();
    const proc = startCompatWorker(workerEnv(p.url, ep, w, { RUNPOD_PING_INTERVAL: String(PING_MS) }));
    try {
      const id = await run(ep, { op: 'sleep', ms: 30_000 }, { webhook: hook.url });
      await proc.waitFor((e) => e.event === 'job-start' && e.job === id);
      const c = await call(p.url, 'POST', `/v2/${ep}/cancel/${id}`, { key: p.adminKey });
      expect(c.body).toEqual({ id, status: 'CANCELLED' });
      const stopped = await proc.waitFor((e) => e.event === 'job-stopped' && e.job === id, 5_000);
      expect(Number(stopped.t) - Date.now()).toBeLessThan(5_000);
      await workflowDone(id);
      expect(hook.hits.map((h) => h.body)).toEqual([expect.objectContaining({ id, status: 'CANCELLED' })]);
      expect((await status(ep, id)).body.status).toBe('CANCELLED');
      expect(proc.events.some((e) => e.event === 'job-done' && e.job === id)).toBe(false);
      // The worker is free again.
      const next = await call(p.url, 'POST', `/v2/${ep}/runsync`, {
        key: p.adminKey,
        body: { input: { op: 'echo', after: 'cancel' } },
      });
      expect(next.body).toMatchObject({ status: 'COMPLETED', output: { after: 'cancel' } });
    } finally {
      await proc.kill();
      hook.server.close();
    }
  }, 60_000);
});

describe('webhooks', () => {
  it('POSTs the final job once on success; retries a non-2xx answer twice, 10 s apart, then gives up', async () => {
    const ep = await createQueueEndpoint(p);
    const w = await createWorker(p, ep);
    const ok = await webhookReceiver();
    const flaky = await webhookReceiver([500, 503]);
    const down = await webhookReceiver([500, 500, 500, 500]);
    const proc = startCompatWorker(
      workerEnv(p.url, ep, w, { RUNPOD_PING_INTERVAL: String(PING_MS), WORKER_CONCURRENCY: '3' }),
    );
    try {
      const a = await run(ep, { op: 'echo', hook: 'ok' }, { webhook: ok.url });
      const b = await run(ep, { op: 'echo', hook: 'flaky' }, { webhook: flaky.url });
      const c = await run(ep, { op: 'fail', message: 'broken' }, { webhook: down.url });
      await eventually(async () => ok.hits.length === 1, 20_000, 'webhook delivered');
      expect(ok.hits[0]?.body).toEqual({
        id: a,
        status: 'COMPLETED',
        output: { op: 'echo', hook: 'ok' },
        workerId: w.id,
        delayTime: expect.any(Number),
        executionTime: expect.any(Number),
      });

      await eventually(async () => flaky.hits.length === 3 && down.hits.length === 3, 40_000, 'three attempts each');
      const gaps = (hits: Array<{ at: number }>) => hits.slice(1).map((h, i) => h.at - (hits[i] as { at: number }).at);
      for (const gap of [...gaps(flaky.hits), ...gaps(down.hits)]) {
        expect(gap).toBeGreaterThanOrEqual(9_500);
        expect(gap).toBeLessThan(16_000);
      }
      expect(flaky.hits.every((h) => h.body.id === b && h.body.status === 'COMPLETED')).toBe(true);
      expect(down.hits.every((h) => h.body.id === c && h.body.status === 'FAILED')).toBe(true);
      await Promise.all([a, b, c].map(workflowDone));
      const rows = await p.ctx.db.job.findMany({ where: { id: { in: [a, b, c] } }, orderBy: { createdAt: 'asc' } });
      const byId = new Map(rows.map((r) => [r.id, r]));
      expect(byId.get(a)).toMatchObject({ webhookAttempts: 1, webhookDeliveredAt: expect.any(Date) });
      expect(byId.get(b)).toMatchObject({ webhookAttempts: 3, webhookDeliveredAt: expect.any(Date) });
      expect(byId.get(c)).toMatchObject({ webhookAttempts: 3, webhookDeliveredAt: null });
      // No fourth attempt.
      await new Promise((r) => setTimeout(r, 1_000));
      expect(down.hits).toHaveLength(3);
    } finally {
      await proc.kill();
      for (const h of [ok, flaky, down]) h.server.close();
    }
  }, 90_000);
});

describe('retention', () => {
  it('keeps results for the retention time after completion, then answers 404', async () => {
    const ep = await createQueueEndpoint(p);
    const w = await createWorker(p, ep);
    const proc = startCompatWorker(workerEnv(p.url, ep, w, { RUNPOD_PING_INTERVAL: String(PING_MS) }));
    try {
      const sync = await call(p.url, 'POST', `/v2/${ep}/runsync`, { key: p.adminKey, body: { input: { op: 'echo' } } });
      expect(sync.body.status).toBe('COMPLETED');
      const async = await run(ep, { op: 'echo' });
      await eventually(async () => (await status(ep, async)).body.status === 'COMPLETED', 10_000, 'async done');
      const syncDone = Date.now();
      expect((await status(ep, sync.body.id)).status).toBe(200);
      await eventually(async () => (await status(ep, sync.body.id)).status === 404, 10_000, 'sync result expired');
      expect(Date.now() - syncDone).toBeGreaterThan(1_000);
      expect((await status(ep, async)).status).toBe(200);
      await eventually(async () => (await status(ep, async)).status === 404, 10_000, 'async result expired');
      // The workflow state of a finished job is readable for as long as Temporal keeps it.
      const state = await p.ctx.temporal.workflow.getHandle(jobWorkflowId(async)).query(jobState);
      expect(state?.status).toBe('COMPLETED');
    } finally {
      await proc.kill();
    }
  }, 60_000);

  it("keeps /health's counts through expiry and the retention sweep: they never go down", async () => {
    const ep = await createQueueEndpoint(p);
    const w = await createWorker(p, ep);
    const proc = startCompatWorker(workerEnv(p.url, ep, w, { RUNPOD_PING_INTERVAL: String(PING_MS) }));
    const health = async () => (await call(p.url, 'GET', `/v2/${ep}/health`, { key: p.adminKey })).body.jobs;
    try {
      for (const n of [1, 2, 3]) {
        const r = await call(p.url, 'POST', `/v2/${ep}/runsync`, {
          key: p.adminKey,
          body: { input: { op: 'echo', n } },
        });
        expect(r.body.status).toBe('COMPLETED');
      }
      expect(await health()).toMatchObject({ completed: 3, failed: 0 });
      // Past their retention (2 s for runsync results): unreadable, still counted.
      await eventually(
        async () => (await p.ctx.db.job.count({ where: { endpointId: ep, expiresAt: { gt: new Date() } } })) === 0,
        10_000,
        'results expired',
      );
      expect(await health()).toMatchObject({ completed: 3 });
      // The sweep deletes rows a minute past their expiry once the metrics rollup has counted them, and
      // 15 minutes past it whatever the rollup did: moved there, then swept by the very task the
      // platform runs in the background.
      await p.ctx.db.job.updateMany({
        where: { endpointId: ep },
        data: { expiresAt: new Date(Date.now() - 20 * 60_000) },
      });
      await p.ctx.jobs!.deleteExpiredJobs();
      expect(await p.ctx.db.job.count({ where: { endpointId: ep } })).toBe(0);
      expect(await health()).toMatchObject({ completed: 3, failed: 0, inQueue: 0, inProgress: 0 });
      // New jobs add to the totals.
      const r = await call(p.url, 'POST', `/v2/${ep}/runsync`, {
        key: p.adminKey,
        body: { input: { op: 'echo', n: 4 } },
      });
      expect(r.body.status).toBe('COMPLETED');
      expect(await health()).toMatchObject({ completed: 4 });
    } finally {
      await proc.kill();
    }
  }, 60_000);
});
