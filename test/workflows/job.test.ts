/**
 * The job workflow (workflows/job.ts) on Temporal's time-skipping test server with fake activities:
 * TTLs, liveness checks and execution timeouts that take minutes or hours of workflow time run in
 * moments, and so does the same with a continue-as-new at every step.
 */
import type { Client } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { jobChanged, jobState, jobWorkflowId, recheckJob, type JobSnapshot } from '../../contracts/workflows.ts';
import type { RunTestOptions } from '../../workflows/continue-as-new.ts';
import type { JobRunInput } from '../../workflows/job.ts';
import { runAfter, TestBed, tookStartIn, wallUntil } from './support.ts';

// A wedged workflow task is reported within 20 s of wedging (support.ts); a loaded machine takes up to 30 s for a scenario.
vi.setConfig({ testTimeout: 90_000 });

let bed: TestBed;
beforeAll(async () => {
  bed = await TestBed.start();
}, 180_000);
afterAll(async () => {
  await bed?.teardown();
});

const MINUTE = 60_000;

/** Starts the job's workflow as domain/jobs.ts does: signal-with-start carrying the committed state. */
async function startJob(
  client: Client,
  taskQueue: string,
  jobId: string,
  snapshot: JobSnapshot,
  test?: RunTestOptions,
) {
  const input: JobRunInput = { jobId, lostAfterMs: MINUTE, ...(test ? { test } : {}) };
  await client.workflow.signalWithStart('jobWorkflow', {
    workflowId: jobWorkflowId(jobId),
    taskQueue,
    args: [input],
    signal: jobChanged,
    signalArgs: [snapshot],
  });
  return client.workflow.getHandle(jobWorkflowId(jobId));
}

const queued = (now: number, ttlMs: number): JobSnapshot => ({
  seq: 1,
  status: 'IN_QUEUE',
  ttlDeadline: now + ttlMs,
  startedAt: null,
  livenessDeadline: null,
  executionDeadline: null,
  webhookPending: false,
});

describe.each([
  ['', undefined],
  [' (continue-as-new at every step)', { continueAsNewEvery: 'step' } as const],
])('job workflow%s', (_name, test: RunTestOptions | undefined) => {
  it('removes a job still queued at its TTL, and not before', async () => {
    await bed.scenario(async ({ env, world, taskQueue }) => {
      const now = await env.currentTimeMs();
      const job = world.addJob('ttl', queued(now, 24 * 60 * MINUTE));
      const handle = await startJob(env.client, taskQueue, 'ttl', job.snapshot, test);
      // Awaiting the result skips time: a day passes in moments.
      await handle.result();
      expect(job.expired).toHaveLength(1);
      expect(job.expired[0]).toBeGreaterThanOrEqual(job.snapshot.ttlDeadline);
      expect(job.snapshot.status).toBe('GONE');
    });
  });

  it('checks a running job at every liveness deadline, stops it at its execution timeout and delivers its webhook once', async () => {
    await bed.scenario(async ({ env, world, taskQueue }) => {
      const now = await env.currentTimeMs();
      const executionDeadline = now + 10 * MINUTE;
      const running: JobSnapshot = {
        seq: 2,
        status: 'IN_PROGRESS',
        ttlDeadline: now + 24 * 60 * MINUTE,
        startedAt: now,
        livenessDeadline: now + MINUTE,
        executionDeadline,
        webhookPending: false,
      };
      const job = world.addJob('timeout', running, {
        // The worker keeps pinging (a later liveness deadline) until the execution timeout stops the job.
        onSupervise: (s, at) =>
          at >= executionDeadline
            ? { ...s, seq: s.seq + 1, status: 'TIMED_OUT', livenessDeadline: null, webhookPending: true }
            : { ...s, livenessDeadline: at + MINUTE },
      });
      const handle = await startJob(env.client, taskQueue, 'timeout', running, test);
      await handle.result();
      expect(job.snapshot.status).toBe('TIMED_OUT');
      // One check a minute, the last at the execution deadline.
      expect(job.supervised).toHaveLength(10);
      job.supervised.forEach((at, i) => expect(at).toBeGreaterThanOrEqual(now + (i + 1) * MINUTE));
      expect(job.supervised.at(-1)).toBeLessThan(executionDeadline + MINUTE);
      expect(job.webhooks).toHaveLength(1);
    });
  });
});

describe('job workflow started late by a held-back state', () => {
  it('a run started by a stale queued state after the job finished looks at the job within its first look, not at the TTL', async () => {
    await bed.scenario(async ({ env, world, taskQueue }) => {
      const now = await env.currentTimeMs();
      // PostgreSQL: the job is complete (seq 3); another process's signal of that already ended the
      // job's first run. This process's state (seq 1, queued) arrives after and starts a second run.
      const done: JobSnapshot = {
        seq: 3,
        status: 'COMPLETED',
        ttlDeadline: now + 24 * 60 * MINUTE,
        startedAt: now,
        livenessDeadline: null,
        executionDeadline: null,
        webhookPending: false,
      };
      const job = world.addJob('late', done);
      const handle = await startJob(env.client, taskQueue, 'late', queued(now, 24 * 60 * MINUTE));
      await handle.result();
      const d = await handle.describe();
      expect(d.closeTime!.getTime() - d.startTime.getTime()).toBeLessThan(2 * MINUTE);
      expect(job.expired).toEqual([]);
      expect(await handle.query(jobState)).toMatchObject({ seq: 3, status: 'COMPLETED' });
    });
  });
});

describe('continue-as-new keeps everything (continueAsNewEvery: step)', () => {
  it('job: a recheck that arrives while the webhook is delivered survives the continue-as-new that follows; the webhook goes once', async () => {
    await bed.scenario(async ({ env, world, taskQueue }) => {
      const now = await env.currentTimeMs();
      const done: JobSnapshot = {
        seq: 3,
        status: 'COMPLETED',
        ttlDeadline: now + 60 * MINUTE,
        startedAt: now,
        livenessDeadline: null,
        executionDeadline: null,
        webhookPending: true,
      };
      let rechecks = 0;
      const job = world.addJob('webhook', done, {
        // A sweep that mends lost signals asks for a re-read while the webhook is on its way.
        onWebhook: async () => {
          if (rechecks++ === 0) await env.client.workflow.getHandle(jobWorkflowId('webhook')).signal(recheckJob);
        },
      });
      const handle = await startJob(env.client, taskQueue, 'webhook', done, { continueAsNewEvery: 'step' });
      await handle.result();
      expect(job.webhooks).toHaveLength(1);
      expect(rechecks).toBe(1);
    });
  });

  it('job: the snapshot it holds survives continue-as-new', async () => {
    await bed.scenario(async ({ env, world, taskQueue }) => {
      const now = await env.currentTimeMs();
      const job = world.addJob('held', queued(now, 60 * MINUTE));
      const handle = await startJob(env.client, taskQueue, 'held', job.snapshot, { continueAsNewEvery: 'step' });
      const taken: JobSnapshot = {
        ...job.snapshot,
        seq: 2,
        status: 'IN_PROGRESS',
        startedAt: now,
        livenessDeadline: now + 30 * MINUTE,
        executionDeadline: now + 30 * MINUTE,
      };
      // The start is taken in first: the job taken is then a step of its own, which continues as new.
      await wallUntil('the start taken in', () => tookStartIn(handle));
      const first = (await handle.describe()).runId;
      await handle.signal(jobChanged, taken);
      // An older snapshot that arrives late is ignored, in the next run too. That run waits for its
      // deadlines (half an hour) and continues as new only at the next change, so it can be asked.
      const next = env.client.workflow.getHandle(
        jobWorkflowId('held'),
        await runAfter(env.client, jobWorkflowId('held'), first),
      );
      await next.signal(jobChanged, job.snapshot);
      expect(await next.query(jobState)).toMatchObject({ seq: 2, status: 'IN_PROGRESS' });
      job.snapshot = { ...taken, seq: 3, status: 'COMPLETED', livenessDeadline: null };
      await next.signal(jobChanged, job.snapshot);
      await handle.result();
      expect(job.expired).toHaveLength(0);
    });
  });
});
