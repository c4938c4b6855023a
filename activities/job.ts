import { lookup } from 'node:dns';
import { ApplicationFailure } from '@temporalio/activity';
import { Agent, fetch } from 'undici';
import type { Db } from '../domain/shared/index.ts';
import { createJobPool, databaseUrlOf, GONE, snapshotOf } from '../domain/jobs/index.ts';
import { JobStore } from '../domain/jobs/index.ts';
import { jobView } from '../domain/jobs/index.ts';
import { randomString } from '../domain/shared/index.ts';
import { guardedLookup, webhookUrlProblem } from '../domain/jobs/index.ts';
import type { PlatformSettings } from '../domain/shared/index.ts';
import type { JobSnapshot } from '../contracts/workflows.ts';

/** How long one webhook POST may take before it counts as failed. */
const WEBHOOK_TIMEOUT_MS = 10_000;

/** Side effects of the job workflow: conditional SQL on the job row, and the webhook POST. */
export function createJobActivities(db: Db, settings: Pick<PlatformSettings, 'jobs' | 'webhookAllow'>) {
  let store: JobStore | undefined;
  // Created on first use: a worker process that never runs a job activity opens no connections.
  const jobs = (): JobStore =>
    (store ??= new JobStore(createJobPool(databaseUrlOf(db), 4), `a${randomString(7)}`, settings.jobs.retention));
  const snapshot = (row: Awaited<ReturnType<JobStore['snapshotRow']>>, lostAfterMs: number): JobSnapshot =>
    row ? snapshotOf(row, lostAfterMs) : GONE(Number.MAX_SAFE_INTEGER);

  // Every webhook connection resolves through the guard: only checked addresses are dialled.
  const webhookAgent = new Agent({
    connect: { lookup: guardedLookup(lookup as Parameters<typeof guardedLookup>[0], () => settings.webhookAllow) },
  });

  return {
    async readJob(jobId: string, lostAfterMs: number): Promise<JobSnapshot> {
      return snapshot(await jobs().snapshotRow(jobId), lostAfterMs);
    },

    /** The TTL passed while the job was queued (or running): remove or stop it. */
    async expireJob(jobId: string, lostAfterMs: number): Promise<JobSnapshot> {
      return snapshot(await jobs().expire(jobId), lostAfterMs);
    },

    /** A running job's execution deadline, liveness deadline or TTL passed: enforce whichever did. */
    async superviseJob(jobId: string, lostAfterMs: number): Promise<JobSnapshot> {
      const store = jobs();
      // Each statement re-checks its own limit against the database clock; those not reached change nothing.
      await store.expire(jobId);
      return snapshot(await store.supervise(jobId, lostAfterMs), lostAfterMs);
    },

    /** POSTs the final job to its webhook; a non-2xx answer or a network error fails the attempt. */
    async deliverWebhook(jobId: string, seq: number): Promise<void> {
      const store = jobs();
      const target = await store.webhookPayload(jobId, seq);
      if (!target) return; // delivered already, or the job moved on (retried, removed)
      // Checked when submitted; again now, as the operator's allow-list may have changed since.
      const refused = webhookUrlProblem(target.url, settings.webhookAllow);
      if (refused) {
        await store.webhookAttempted(jobId, seq, false);
        throw ApplicationFailure.nonRetryable(`webhook ${refused}`, 'WebhookRefused');
      }
      let status = 0;
      let failure = '';
      try {
        const res = await fetch(target.url, {
          dispatcher: webhookAgent,
          method: 'POST',
          headers: { 'content-type': 'application/json', 'user-agent': 'gantry-webhook' },
          body: JSON.stringify(jobView(target.row)),
          signal: AbortSignal.timeout(WEBHOOK_TIMEOUT_MS),
          redirect: 'manual',
        });
        status = res.status;
        await res.body?.cancel();
      } catch (err) {
        const cause = (err as { cause?: { code?: string; message?: string } }).cause;
        if (cause?.code === 'EWEBHOOKREFUSED') {
          await store.webhookAttempted(jobId, seq, false);
          throw ApplicationFailure.nonRetryable(cause.message ?? 'webhook target refused', 'WebhookRefused');
        }
        failure = err instanceof Error ? err.message : String(err);
      }
      const delivered = status >= 200 && status < 300;
      await store.webhookAttempted(jobId, seq, delivered);
      if (!delivered)
        throw ApplicationFailure.retryable(failure || `webhook answered ${status}`, 'WebhookNotDelivered');
    },
  };
}

export type JobActivities = ReturnType<typeof createJobActivities>;
