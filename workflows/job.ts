import {
  ActivityFailure,
  allHandlersFinished,
  condition,
  continueAsNew,
  defineQuery,
  defineSignal,
  patched,
  proxyActivities,
  setHandler,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { JobActivities } from '../activities/jobs.ts';
import { GantryJobStatus } from './search-attributes.ts';

export type JobStatus = 'IN_QUEUE' | 'IN_PROGRESS' | 'COMPLETED' | 'FAILED' | 'CANCELLED' | 'TIMED_OUT';

/**
 * The state of one job at one `seq` (PostgreSQL bumps `seq` on every change). Times are epoch ms.
 * `GONE`: the job no longer exists (purged, expired, TTL removed it).
 */
export interface JobSnapshot {
  seq: number;
  status: JobStatus | 'GONE';
  /** Submission + TTL: a job still queued then is removed, a running one stopped. */
  ttlDeadline: number;
  startedAt: number | null;
  /** When its worker counts as lost unless a ping lists the job again. */
  livenessDeadline: number | null;
  executionDeadline: number | null;
  webhookPending: boolean;
}

export interface JobWorkflowInput {
  jobId: string;
  /** A worker is lost when no ping listed its job for this long. */
  lostAfterMs: number;
  /** Carried across continue-as-new. */
  snapshot?: JobSnapshot;
}

export const jobWorkflowId = (jobId: string): string => `job:${jobId}`;

/** A new state of the job, sent after PostgreSQL committed it. Older snapshots are ignored. */
export const jobChanged = defineSignal<[JobSnapshot]>('jobChanged');
/** Re-read the job from the database (sent by the sweeps that mend lost signals). */
export const recheckJob = defineSignal('recheckJob');
/** The snapshot the workflow holds (null until the first one arrives). */
export const jobState = defineQuery<JobSnapshot | null>('jobState');

const TERMINAL = new Set<JobSnapshot['status']>(['COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT']);

const { readJob, expireJob, superviseJob } = proxyActivities<JobActivities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '500 milliseconds', maximumInterval: '10 seconds' },
});
// compat.md: a non-2xx answer is retried twice, 10 s apart.
const { deliverWebhook } = proxyActivities<JobActivities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '10 seconds', backoffCoefficient: 1, maximumAttempts: 3 },
});

/** Never wait less than this for a deadline: clocks of PostgreSQL and the worker may differ a little. */
const MIN_WAIT_MS = 1_000;

/** Runs recorded before jobs carried search attributes never upsert their status (their histories have no such command). */
const STATUS_ATTRIBUTE_PATCH = 'job-status-search-attribute-v1';

/**
 * Keeps the `GantryJobStatus` search attribute equal to the job's status, in the workflow task that
 * learned of the change (an upsert is a command of that task, never a task or activity of its own).
 * A job whose start already carried its status costs nothing; otherwise one patch marker (once per
 * run) and one upsert per change of status.
 */
function showStatus(status: JobSnapshot['status']): void {
  if (workflowInfo().typedSearchAttributes.get(GantryJobStatus) === status) return;
  if (!patched(STATUS_ATTRIBUTE_PATCH)) return;
  upsertSearchAttributes([{ key: GantryJobStatus, value: status }]);
}

/**
 * One workflow per job (id `job:<jobId>`). PostgreSQL records every change of state (take,
 * completion, cancel, retry) the moment it happens; this workflow is told of each after the fact and
 * owns what takes time: the TTL while queued, the execution timeout and worker-loss detection while
 * running (a worker is lost when its pings stop listing the job), and webhook delivery at the end.
 * A fast job costs one workflow task: its states arrive coalesced into one signal-with-start.
 */
export async function jobWorkflow(input: JobWorkflowInput): Promise<void> {
  let snap: JobSnapshot | null = input.snapshot ?? null;
  let recheck = false;
  /** The seq whose webhook was already attempted by this run. */
  let webhookTriedSeq = -1;

  // What the database says wins over what was signalled at the same or an older seq.
  const adoptAuthoritative = (s: JobSnapshot): void => {
    if (!snap || s.seq >= snap.seq) snap = s;
  };
  setHandler(jobChanged, (s) => {
    if (!snap || s.seq > snap.seq) snap = s;
  });
  setHandler(recheckJob, () => {
    recheck = true;
  });
  setHandler(jobState, () => snap);

  for (;;) {
    await condition(() => snap !== null || recheck);
    if (workflowInfo().continueAsNewSuggested) {
      await condition(allHandlersFinished);
      await continueAsNew<typeof jobWorkflow>({ ...input, snapshot: snap ?? undefined });
    }
    if (recheck) {
      recheck = false;
      adoptAuthoritative(await readJob(input.jobId, input.lostAfterMs));
    }
    const s = snap as JobSnapshot;
    // GONE too: a queued job whose TTL passed, or a purged queue, leaves no row behind.
    showStatus(s.status);
    if (s.status === 'GONE') return;

    if (TERMINAL.has(s.status)) {
      if (s.webhookPending && webhookTriedSeq !== s.seq) {
        webhookTriedSeq = s.seq;
        try {
          await deliverWebhook(input.jobId, s.seq);
        } catch (err) {
          // Three attempts failed: the attempts are recorded on the job; its life goes on.
          if (!(err instanceof ActivityFailure)) throw err;
        }
      }
      // Done unless something newer (a retry) arrived meanwhile.
      if ((snap as JobSnapshot).seq === s.seq && !recheck) return;
      continue;
    }

    const deadline =
      s.status === 'IN_QUEUE'
        ? s.ttlDeadline
        : Math.min(s.executionDeadline ?? s.ttlDeadline, s.livenessDeadline ?? s.ttlDeadline, s.ttlDeadline);
    const changed = await condition(() => (snap as JobSnapshot).seq !== s.seq || recheck, Math.max(deadline - Date.now(), MIN_WAIT_MS));
    if (changed) continue;
    // A deadline passed: PostgreSQL decides what it means (the statements re-check every limit).
    adoptAuthoritative(s.status === 'IN_QUEUE' ? await expireJob(input.jobId, input.lostAfterMs) : await superviseJob(input.jobId, input.lostAfterMs));
  }
}
