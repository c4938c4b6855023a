/**
 * "A worker was lost: its jobs go back to the queue, and fail after MAX_WORKER_LOSSES losses" has one
 * home (domain/jobs/queue.ts requeueLostJobs), and every caller keeps all of it: a job lost for the
 * third time FAILS with the reason and the retention of finished jobs, one lost for the first time
 * goes back to the queue, each job's seq moves on (its workflow adopts the change at its next look),
 * and the same statement NOTIFYs, so that the requests waiting on them in every API process wake:
 * a runsync waiting for the failed job answers it, a job-take long-poll of the endpoint gets the
 * requeued one. One scenario per caller: the job workflow's liveness check (JobStore.supervise
 * through the superviseJob activity), a worker's final state (finishWorker), and a host's reconcile
 * closing a worker whose workflow is gone (reconcileHostContainers).
 */
import { MockActivityEnvironment } from '@temporalio/testing';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHostActivities } from '../../activities/host.ts';
import type { OrchestrationRuntime } from '../../activities/orchestration-runtime.ts';
import { DEFAULT_ORCHESTRATION_SETTINGS } from '../../domain/shared/index.ts';
import { createJobActivities } from '../../activities/job.ts';
import { createWorkerActivities } from '../../activities/worker.ts';
import { randomString } from '../../domain/shared/index.ts';
import { JOB_CHANNEL, MAX_WORKER_LOSSES, pgConfig } from '../../domain/jobs/index.ts';
import { WORKER_LOST_ERROR } from '../../domain/jobs/index.ts';
import { jobSettings } from '../../domain/jobs/index.ts';
import { registerWorkerCredential } from '../../domain/workers/index.ts';
import { startSshTestHost, type SshTestHost } from '../support/ssh-test-host.ts';
import { call, startTestPlatform, type TestPlatform } from '../support/platform.ts';
import { createQueueEndpoint, createWorker, eventually, workerCall, type TestWorker } from '../support/jobs.ts';

let p: TestPlatform;
let sshHost: SshTestHost | undefined;
let listener: pg.Client;
const notifications: string[] = [];

beforeAll(async () => {
  p = await startTestPlatform();
  listener = new pg.Client(pgConfig(p.databaseUrl));
  await listener.connect();
  listener.on('notification', (m) => {
    if (m.channel === JOB_CHANNEL && m.payload) notifications.push(m.payload);
  });
  await listener.query(`LISTEN ${JOB_CHANNEL}`);
});

afterAll(async () => {
  await listener?.end();
  await p?.stop();
  await sshHost?.stop();
});

function orchestration(): OrchestrationRuntime {
  return {
    db: p.ctx.db,
    secrets: p.ctx.secrets,
    publicUrl: p.ctx.publicUrl,
    workerUrl: p.ctx.workerUrl ?? p.ctx.publicUrl,
    temporal: p.ctx.temporal,
    pool: p.ctx.ssh,
    signingKey: p.ctx.signingKey,
    settings: DEFAULT_ORCHESTRATION_SETTINGS,
    platform: p.ctx.settings,
  };
}

interface Scenario {
  endpointId: string;
  /** The worker that is lost, holding both jobs. */
  lost: TestWorker;
  /** A runsync job on its MAX_WORKER_LOSSES-th loss; the runsync call still waits for it. */
  lastLoss: { id: string; seq: number; answer: Promise<{ status: number; body: any }> }; // eslint-disable-line @typescript-eslint/no-explicit-any -- JSON answers
  /** A /run job on its first loss. */
  firstLoss: { id: string; seq: number };
  /** Another worker's job-take, long-polling when the worker is lost. */
  take: Promise<{ status: number; body: any }>; // eslint-disable-line @typescript-eslint/no-explicit-any -- JSON answers
}

/**
 * Two jobs held by one worker (one lost twice before), a runsync waiting on one, another worker
 * waiting for work; on a new endpoint unless the test made one (and the worker) itself.
 */
async function scenario(given?: { endpointId: string; lost: TestWorker }): Promise<Scenario> {
  const endpointId = given?.endpointId ?? (await createQueueEndpoint(p));
  const holder = given?.lost ?? (await createWorker(p, endpointId));
  const answer = call(p.url, 'POST', `/v2/${endpointId}/runsync?wait=60000`, {
    key: p.adminKey,
    body: { input: { n: 1 } },
  });
  await eventually(
    async () => (await p.ctx.db.job.count({ where: { endpointId } })) === 1,
    10_000,
    'runsync job queued',
  );
  const run = await call(p.url, 'POST', `/v2/${endpointId}/run`, { key: p.adminKey, body: { input: { n: 2 } } });
  expect(run.status, JSON.stringify(run.body)).toBe(200);
  const taken = await workerCall(
    p.url,
    'GET',
    `/v2/${endpointId}/job-take-batch/${holder.id}?gpu=T&batch_size=2`,
    holder.key,
  );
  expect(taken.status, JSON.stringify(taken.body)).toBe(200);
  expect(taken.body).toHaveLength(2);
  const syncId = (taken.body as Array<{ id: string }>).find((j) => j.id.startsWith('sync-'))!.id;
  // Lost twice before (the count the rule reads), and seen by a ping since its take.
  await p.ctx.db.job.update({ where: { id: syncId }, data: { retries: MAX_WORKER_LOSSES - 1 } });
  expect(
    (await workerCall(p.url, 'GET', `/v2/${endpointId}/ping/${holder.id}?job_id=${syncId},${run.body.id}`, holder.key))
      .status,
  ).toBe(200);
  const rows = await p.ctx.db.job.findMany({
    where: { endpointId },
    select: { id: true, seq: true, lastSeenAt: true },
  });
  expect(rows.every((r) => r.lastSeenAt !== null)).toBe(true);
  const seqOf = (id: string): number => rows.find((r) => r.id === id)!.seq;
  const other = await createWorker(p, endpointId);
  const take = workerCall(p.url, 'GET', `/v2/${endpointId}/job-take/${other.id}?gpu=T`, other.key);
  await new Promise((resolve) => setTimeout(resolve, 300)); // the take is waiting
  notifications.length = 0;
  return {
    endpointId,
    lost: holder,
    lastLoss: { id: syncId, seq: seqOf(syncId), answer },
    firstLoss: { id: run.body.id as string, seq: seqOf(run.body.id as string) },
    take,
  };
}

/** What every caller must leave behind. */
async function expectTheRule(s: Scenario, tag: RegExp): Promise<void> {
  const failed = await p.ctx.db.job.findUniqueOrThrow({ where: { id: s.lastLoss.id } });
  expect(failed).toMatchObject({
    status: 'FAILED',
    error: WORKER_LOST_ERROR,
    retries: MAX_WORKER_LOSSES,
    seq: s.lastLoss.seq + 1,
    workerId: s.lost.id,
  });
  expect(failed.completedAt).not.toBeNull();
  // Kept for the retention of finished runsync jobs (docs/jobs.md: 1 min), not /run's 30 min.
  const retention = jobSettings().retention.syncMs;
  expect(failed.expiresAt.getTime() - failed.completedAt!.getTime()).toBeLessThanOrEqual(retention + 1000);

  const requeued = await p.ctx.db.job.findUniqueOrThrow({ where: { id: s.firstLoss.id } });
  expect(requeued.retries).toBe(1);
  expect(requeued.seq).toBeGreaterThanOrEqual(s.firstLoss.seq + 1);
  expect(requeued.lastSeenAt).toBeNull();

  // The statement told every API process: the failed job's waiters and the endpoint's takers.
  expect(notifications).toContainEqual(expect.stringMatching(new RegExp(`^j:${tag.source}:${s.lastLoss.id}$`)));
  expect(notifications).toContainEqual(expect.stringMatching(new RegExp(`^q:${tag.source}:${s.endpointId}$`)));

  // ...and they woke: the runsync answers the failure, the other worker's long-poll gets the job.
  const sync = await s.lastLoss.answer;
  expect(sync.status, JSON.stringify(sync.body)).toBe(200);
  expect(sync.body).toMatchObject({ id: s.lastLoss.id, status: 'FAILED', error: WORKER_LOST_ERROR });
  const take = await s.take;
  expect(take.status, JSON.stringify(take.body)).toBe(200);
  expect(take.body.id).toBe(s.firstLoss.id);
}

describe('a lost worker: one rule, every caller (domain/jobs/queue.ts requeueLostJobs)', () => {
  it("the job workflow's liveness check (superviseJob -> JobStore.supervise)", async () => {
    const s = await scenario();
    const jobs = createJobActivities(p.ctx.db, p.ctx.settings);
    // No ping for longer than the loss time (0 here): the job's worker counts as lost.
    await jobs.superviseJob(s.lastLoss.id, 0);
    await jobs.superviseJob(s.firstLoss.id, 0);
    await expectTheRule(s, /a[A-Za-z0-9_-]+/);
  });

  it("a worker's final state (finishWorker)", async () => {
    const s = await scenario();
    const result = await createWorkerActivities(orchestration()).finishWorker(s.lost.id, {
      status: 'FAILED',
      reason: 'its container exited',
    });
    expect(result.requeued).toBe(2);
    await expectTheRule(s, /orchestration/);
  });

  it("a host's reconcile, closing a worker whose workflow is gone (reconcileHostContainers)", async () => {
    sshHost = await startSshTestHost();
    // A READY host row of its own, without a host workflow (whose own reconcile would race this one).
    const hostId = `h${randomString(10)}`;
    await p.ctx.db.host.create({
      data: {
        id: hostId,
        name: `loss-${hostId}`,
        address: sshHost.host,
        port: sshHost.port,
        user: sshHost.user,
        privateKey: new Uint8Array(p.ctx.secrets.seal(sshHost.privateKey)),
        dataCenterId: 'dc-1',
        status: 'READY',
        containerRuntime: 'podman',
      },
    });
    const endpointId = await createQueueEndpoint(p);
    // A worker placed on the host, live in the database, with neither a container nor a workflow.
    const id = `wk${randomString(10)}`;
    await p.ctx.db.worker.create({ data: { id, endpointId, hostId, status: 'RUNNING' } });
    const lost = { id, key: await registerWorkerCredential(p.ctx.db, { workerId: id, endpointId }) };
    const s = await scenario({ endpointId, lost });
    const { reconcileHostContainers } = createHostActivities(orchestration());
    const result = (await new MockActivityEnvironment().run(reconcileHostContainers, hostId)) as Awaited<
      ReturnType<typeof reconcileHostContainers>
    >;
    expect(result.closed).toEqual([id]);
    expect((await p.ctx.db.worker.findUniqueOrThrow({ where: { id } })).status).toBe('FAILED');
    await expectTheRule(s, /orchestration/);
  }, 120_000);
});
