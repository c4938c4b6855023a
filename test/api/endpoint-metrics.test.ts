/**
 * Endpoint metrics (domain/metrics, docs/metrics.md) on a fresh database of the suite: job and worker
 * rows made by hand at chosen minutes, the rollup run as its activity runs it (with the time it takes
 * as now given), then what it stored, GET /v2/serverless/{id}/metrics and the admin's /metrics.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { metricsRollupScheduleId, purgeOutputsScheduleId } from '../../contracts/workflows.ts';
import { issueApiKey } from '../../domain/accounts/index.ts';
import { rollupEndpointMetrics } from '../../domain/metrics/index.ts';
import { newId } from '../../domain/shared/index.ts';
import type { JobStatus, WorkerStatus } from '../../generated/prisma/client.ts';
import { ensureSchedules } from '../../infra/schedules.ts';
import { startTestApp, type Answer, type TestApp } from '../support/app.ts';

const MIN = 60_000;
const SEC = 1000;
/** Within the histogram's error (±12 %). */
const near = (got: number | null, want: number) => {
  expect(got).not.toBeNull();
  expect(Math.abs(got! - want) / want, `${got} vs ${want}`).toBeLessThanOrEqual(0.12);
};

function expectProblem(r: Answer, status: number, detail: RegExp): void {
  expect(r.status, JSON.stringify(r.body)).toBe(status);
  expect(r.headers.get('content-type')).toMatch(/^application\/problem\+json/);
  expect(r.body.detail).toMatch(detail);
}

describe('endpoint metrics', () => {
  let t: TestApp;
  let accountId: string;
  let ep: string;
  /** The start of the minute the scenario calls "now" (the rollup is told the time). */
  const N0 = Math.floor(Date.now() / MIN) * MIN;
  const M1 = N0 - 4 * MIN;
  const M2 = N0 - 3 * MIN;

  const job = (status: JobStatus, at: { created: number; started?: number; completed: number }, endpointId = ep) =>
    t.ctx.db.job.create({
      data: {
        id: newId(),
        endpointId,
        accountId,
        status,
        input: {},
        createdAt: new Date(at.created),
        startedAt: at.started === undefined ? null : new Date(at.started),
        completedAt: new Date(at.completed),
        expiresAt: new Date(at.completed + 3_600_000),
      },
    });
  const worker = (status: WorkerStatus, at: { created: number; ready?: number; firstReady?: number }) =>
    t.ctx.db.worker.create({
      data: {
        id: newId(),
        endpointId: ep,
        status,
        createdAt: new Date(at.created),
        readyAt: at.ready === undefined ? null : new Date(at.ready),
        firstReadyAt: at.firstReady === undefined ? null : new Date(at.firstReady),
      },
    });
  const minuteRow = (minute: number, endpointId = ep) =>
    t.ctx.db.endpointMetricMinute.findUnique({
      where: { endpointId_minute: { endpointId, minute: new Date(minute) } },
    });
  const rollup = (at: number) => rollupEndpointMetrics(t.ctx, { now: new Date(at) });

  beforeAll(async () => {
    t = await startTestApp();
    accountId = (
      await t.ctx.db.account.create({ data: { id: newId(), email: `${newId()}@example.test`, name: 'metrics' } })
    ).id;
    ep = (
      await t.ctx.db.endpoint.create({
        data: { id: newId(), accountId, name: `ep-${newId()}`, image: 'localhost/app:1' },
      })
    ).id;
  });
  afterAll(async () => {
    await t?.stop();
  });

  it('rolls each minute once: counts, percentiles, cold starts apart from thaws, and purges past 7 days', async () => {
    // Minute M1: ten completed jobs of 100..1000 ms after 50 ms in the queue, two failed after 5 s,
    // one timed out after a minute, one cancelled before it started.
    for (let i = 1; i <= 10; i++)
      await job('COMPLETED', {
        created: M1 + i * SEC - 50 - i * 100,
        started: M1 + i * SEC - i * 100,
        completed: M1 + i * SEC,
      });
    for (const end of [M1 + 20 * SEC, M1 + 21 * SEC])
      await job('FAILED', { created: end - 5050, started: end - 5000, completed: end });
    await job('TIMED_OUT', { created: M1 - 30 * SEC - 50, started: M1 - 30 * SEC, completed: M1 + 30 * SEC });
    await job('CANCELLED', { created: M1 + 5 * SEC, completed: M1 + 40 * SEC });
    // Minute M2: five completed jobs of 2 s after 400 ms in the queue.
    for (let i = 0; i < 5; i++)
      await job('COMPLETED', {
        created: M2 + 3000 + i * SEC - 2400,
        started: M2 + 3000 + i * SEC - 2000,
        completed: M2 + 3000 + i * SEC,
      });
    // In the minute "now": not rolled until its lag has passed.
    await job('COMPLETED', { created: N0 + 1000, started: N0 + 1500, completed: N0 + 2000 });
    // Another endpoint's job counts there, not here.
    const other = await t.ctx.db.endpoint.create({
      data: { id: newId(), accountId, name: `ep-${newId()}`, image: 'localhost/app:1' },
    });
    await job('COMPLETED', { created: M1, started: M1 + 10, completed: M1 + 20 }, other.id);

    // Workers: a cold start of 50 s ending in M1; one ready in M1, frozen and thawed in M2 before any
    // rollup ran (its first readiness kept by the thaw); an old one thawed in M2; a cold start of 5 s
    // in M2; one still pending.
    await worker('IDLE', { created: M1 - 30 * SEC, ready: M1 + 20 * SEC });
    await worker('RUNNING', { created: M1 - 10 * SEC, firstReady: M1 + 5 * SEC, ready: M2 + 30 * SEC });
    await worker('IDLE', { created: M1 - 60 * MIN, firstReady: M1 - 59 * MIN, ready: M2 + 10 * SEC });
    await worker('RUNNING', { created: M2, ready: M2 + 5 * SEC });
    await worker('PENDING', { created: M2 });
    // A minute from 8 days ago: the rollup deletes it.
    await t.ctx.db.endpointMetricMinute.create({
      data: { endpointId: ep, minute: new Date(N0 - 8 * 24 * 60 * MIN), completed: 3 },
    });

    const first = await rollup(N0 + 15 * SEC);
    expect(first).toMatchObject({
      from: new Date(N0 - 10 * MIN).toISOString(),
      to: new Date(N0).toISOString(),
      jobs: 14 + 5 + 1,
      coldStarts: 3,
      thaws: 2,
      sampledSeconds: 0,
    });
    expect(first.purged).toBeGreaterThanOrEqual(1);
    expect(
      await t.ctx.db.endpointMetricMinute.count({ where: { minute: { lt: new Date(N0 - 7 * 24 * 60 * MIN) } } }),
    ).toBe(0);

    const m1 = (await minuteRow(M1))!;
    expect(m1).toMatchObject({
      completed: 10,
      failed: 2,
      timedOut: 1,
      cancelled: 1,
      executionCount: 13,
      delayCount: 13,
    });
    expect(m1.executionSumMs).toBeCloseTo(5500 + 2 * 5000 + 60_000, 3);
    expect(m1.executionHist).toHaveLength(76);
    expect(m1.executionHist.reduce((a, b) => a + b, 0)).toBe(13);
    // Cold starts: 50 s and (the frozen and thawed one) 15 s; the thaws are in M2.
    expect(m1).toMatchObject({ coldStarts: 2, coldStartSumMs: 65_000, coldStartMaxMs: 50_000, thaws: 0 });
    const m2 = (await minuteRow(M2))!;
    expect(m2).toMatchObject({ completed: 5, executionCount: 5, executionSumMs: 10_000, delaySumMs: 2000 });
    expect(m2).toMatchObject({ coldStarts: 1, coldStartSumMs: 5000, thaws: 2 });
    expect(await minuteRow(M1, other.id)).toMatchObject({ completed: 1 });
    expect(await minuteRow(N0)).toBeNull();

    // A second run with nothing due adds nothing (each minute is rolled once); its sample of the
    // workers' states is worth the 30 s since the first, all in minute N0.
    const again = await rollup(N0 + 45 * SEC);
    expect(again).toMatchObject({ jobs: 0, coldStarts: 0, thaws: 0, sampledSeconds: 30 });
    expect(await minuteRow(M1)).toEqual(m1);
    expect(await minuteRow(N0)).toMatchObject({
      completed: 0,
      idleSeconds: 2 * 30,
      runningSeconds: 2 * 30,
      pendingSeconds: 30,
      standbySeconds: 0,
    });

    // Two processes at once: the state row's lock lets one roll minute N0, the other finds it done.
    const both = await Promise.all([rollup(N0 + 75 * SEC), rollup(N0 + 75 * SEC)]);
    expect(both.map((r) => r.jobs).sort()).toEqual([0, 1]);
    // 15 s more of minute N0 from the first of them, none from the second (no time passed).
    expect(await minuteRow(N0)).toMatchObject({ completed: 1, idleSeconds: 2 * 45, pendingSeconds: 45 });
    expect(await minuteRow(N0 + MIN)).toMatchObject({ idleSeconds: 2 * 15, pendingSeconds: 15 });

    // A stall of ten minutes: the next sample is worth at most 60 s.
    const late = await rollup(N0 + 11 * MIN + 15 * SEC);
    expect(late.sampledSeconds).toBe(60);
    expect(late.from).toBe(new Date(N0 + MIN).toISOString());

    // An endpoint's minutes go with it.
    await t.ctx.db.endpoint.delete({ where: { id: other.id } });
    expect(await minuteRow(M1, other.id)).toBeNull();
  });

  it('answers points for any window and step, every step present, to the owner only', async () => {
    const state = await t.ctx.db.metricRollupState.findUnique({ where: { id: 1 } });
    const to = state!.rolledUntil.getTime();
    const { key } = await issueApiKey(t.ctx.db, accountId, 'read', ['READ']);
    const r = await t.call('GET', `/v2/serverless/${ep}/metrics`, { key });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body).toMatchObject({
      endpointId: ep,
      window: '1h',
      step: '1m',
      from: new Date(to - 60 * MIN).toISOString(),
      to: new Date(to).toISOString(),
    });
    expect(r.body.points).toHaveLength(60);
    const at = (time: number) => r.body.points.find((p: { time: string }) => p.time === new Date(time).toISOString());
    const p1 = at(M1);
    expect(p1.jobs).toEqual({ completed: 10, failed: 2, timedOut: 1, cancelled: 1 });
    // Sorted: 100..1000, 5000, 5000, 60000: the 7th is 700 ms, the 12th 5 s.
    near(p1.executionMs.p50, 700);
    near(p1.executionMs.p90, 5000);
    expect(p1.executionMs.avg).toBeCloseTo(75_500 / 13, 1);
    near(p1.delayMs.p50, 50);
    expect(p1.coldStarts).toEqual({ count: 2, avgMs: 32_500, maxMs: 50_000 });
    expect(p1.thaws).toBe(0);
    // A quiet minute: zeros and nulls.
    expect(at(M1 - 20 * MIN)).toEqual({
      time: new Date(M1 - 20 * MIN).toISOString(),
      jobs: { completed: 0, failed: 0, timedOut: 0, cancelled: 0 },
      executionMs: { p50: null, p90: null, avg: null },
      delayMs: { p50: null, p90: null, avg: null },
      coldStarts: { count: 0, avgMs: null, maxMs: null },
      thaws: 0,
      workers: { pending: 0, initializing: 0, idle: 0, running: 0, unhealthy: 0, standby: 0 },
    });
    // Minute N0 was sampled for 45 s of its 60: 2 idle workers → 1.5 on average.
    expect(at(N0).workers).toEqual({
      pending: 0.75,
      initializing: 0,
      idle: 1.5,
      running: 1.5,
      unhealthy: 0,
      standby: 0,
    });

    // A coarser step merges its minutes: the step holding M1, M2 and N0 holds all their jobs.
    const coarse = await t.call('GET', `/v2/serverless/${ep}/metrics?window=6h&step=15m`, { key });
    expect(coarse.status).toBe(200);
    expect(coarse.body.points).toHaveLength(24);
    const holding = coarse.body.points.filter((p: { jobs: { completed: number } }) => p.jobs.completed > 0);
    const jobs = holding.reduce((n: number, p: { jobs: { completed: number } }) => n + p.jobs.completed, 0);
    expect(jobs).toBe(16);
    // The last step, [N0 - 4 min, N0 + 11 min): 13 + 5 + 1 started jobs, the 10th of 19 is 900 ms, the 18th 5 s.
    expect(holding).toHaveLength(1);
    near(holding[0].executionMs.p50, 900);
    near(holding[0].executionMs.p90, 5000);
    expect(holding[0].coldStarts).toMatchObject({ count: 3, maxMs: 50_000 });
    expect(holding[0].thaws).toBe(2);
    const week = await t.call('GET', `/v2/serverless/${ep}/metrics?window=7d&step=1h`, { key });
    expect(week.body.points).toHaveLength(168);
    expect(week.body.points.reduce((n: number, p: { jobs: { completed: number } }) => n + p.jobs.completed, 0)).toBe(
      16,
    );

    expectProblem(await t.call('GET', `/v2/serverless/${ep}/metrics?window=2d`, { key }), 400, /window must be one of/);
    expectProblem(await t.call('GET', `/v2/serverless/${ep}/metrics?step=30s`, { key }), 400, /step must be one of/);
    expectProblem(
      await t.call('GET', `/v2/serverless/${ep}/metrics?window=7d&step=5m`, { key }),
      400,
      /2016 points; at most 1440/,
    );
    // Another account's endpoint, and one that does not exist, are 404 alike.
    const stranger = await t.ctx.db.account.create({
      data: { id: newId(), email: `${newId()}@example.test`, name: 'stranger' },
    });
    const { key: strangerKey } = await issueApiKey(t.ctx.db, stranger.id, 'read', ['READ']);
    expectProblem(await t.call('GET', `/v2/serverless/${ep}/metrics`, { key: strangerKey }), 404, /not found/);
    expectProblem(await t.call('GET', `/v2/serverless/nosuchendpoint/metrics`, { key }), 404, /not found/);
    expect((await t.call('GET', `/v2/serverless/${ep}/metrics`)).status).toBe(401);
    // In the OpenAPI document.
    const doc = (await t.call('GET', '/v2/openapi.json')).body;
    expect(doc.paths['/v2/serverless/{id}/metrics'].get.operationId).toBe('getEndpointMetrics');
  });

  it("shows every endpoint's last minute on /metrics to the admin's key only", async () => {
    const state = await t.ctx.db.metricRollupState.findUnique({ where: { id: 1 } });
    const last = state!.rolledUntil.getTime() - MIN;
    await t.ctx.db.endpointMetricMinute.upsert({
      where: { endpointId_minute: { endpointId: ep, minute: new Date(last) } },
      create: { endpointId: ep, minute: new Date(last), completed: 7, failed: 1, idleSeconds: 120 },
      update: { completed: 7, failed: 1, idleSeconds: 120 },
    });
    const { key: readKey } = await issueApiKey(t.ctx.db, accountId, 'read', ['READ']);
    for (const key of [undefined, readKey, 'not-a-key-at-all-0123456789']) {
      const r = await t.call('GET', '/metrics', { key, remoteAddress: '10.78.0.1' });
      expect(r.status).toBe(200);
      expect(r.body).toContain('gantry_http_request_duration_seconds');
      expect(r.body).not.toContain('endpoint_id');
    }
    const admin = await t.call('GET', '/metrics', { key: t.adminKey });
    expect(admin.status).toBe(200);
    expect(admin.body).toContain('# TYPE gantry_endpoint_jobs gauge');
    expect(admin.body).toContain(`gantry_endpoint_jobs{endpoint_id="${ep}",status="completed"} 7`);
    expect(admin.body).toContain(`gantry_endpoint_jobs{endpoint_id="${ep}",status="failed"} 1`);
    expect(admin.body).toContain(`gantry_endpoint_workers{endpoint_id="${ep}",state="idle"} 2`);
    expect(admin.body).toContain(`gantry_endpoint_metrics_minute_timestamp_seconds ${last / 1000}`);
  });

  it('keeps a finished job until the rollup has counted its minute', async () => {
    const fresh = await startTestApp();
    try {
      const db = fresh.ctx.db;
      const acc = await db.account.create({ data: { id: newId(), email: `${newId()}@example.test`, name: 'g' } });
      const e = await db.endpoint.create({
        data: { id: newId(), accountId: acc.id, name: 'g', image: 'localhost/app:1' },
      });
      const now = Date.now();
      const expired = (completed: number, expires: number) =>
        db.job.create({
          data: {
            id: newId(),
            endpointId: e.id,
            accountId: acc.id,
            status: 'COMPLETED',
            input: {},
            createdAt: new Date(completed - 1000),
            startedAt: new Date(completed - 500),
            completedAt: new Date(completed),
            expiresAt: new Date(expires),
          },
        });
      await rollupEndpointMetrics(fresh.ctx);
      const recent = await expired(now - 2 * SEC, now - 2 * MIN);
      const long = await expired(now - 30 * MIN, now - 20 * MIN);
      await fresh.ctx.jobs!.deleteExpiredJobs();
      // Not rolled yet: kept; 15 minutes past its expiry: gone whatever the rollup did.
      expect(await db.job.findUnique({ where: { id: recent.id } })).not.toBeNull();
      expect(await db.job.findUnique({ where: { id: long.id } })).toBeNull();
      const rolled = await rollupEndpointMetrics(fresh.ctx, { now: new Date(now + 75 * SEC) });
      expect(rolled.jobs).toBe(1);
      await fresh.ctx.jobs!.deleteExpiredJobs();
      expect(await db.job.findUnique({ where: { id: recent.id } })).toBeNull();
    } finally {
      await fresh.stop();
    }
  });

  it('makes the rollup schedule: every minute, 15 s into it', async () => {
    await ensureSchedules(t.ctx.temporal, t.ctx.taskQueue, { purgeOutputsMs: 3_600_000, metricsRollupMs: 60_000 });
    try {
      const schedule = await t.ctx.temporal.schedule.getHandle(metricsRollupScheduleId(t.ctx.taskQueue)).describe();
      expect(schedule.spec.intervals?.[0]).toMatchObject({ every: 60_000, offset: 15_000 });
      expect(schedule.action).toMatchObject({
        type: 'startWorkflow',
        workflowType: 'rollupEndpointMetricsWorkflow',
        taskQueue: t.ctx.taskQueue,
      });
    } finally {
      for (const id of [metricsRollupScheduleId, purgeOutputsScheduleId])
        await t.ctx.temporal.schedule
          .getHandle(id(t.ctx.taskQueue))
          .delete()
          .catch(() => undefined);
    }
  });
});
