import {
  ActivityFailure,
  allHandlersFinished,
  condition,
  continueAsNew,
  patched,
  proxyActivities,
  setHandler,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { JobActivities } from '../activities/job.ts';
import { continueAsNewDue, type RunTestOptions } from './continue-as-new.ts';
import { jobChanged, jobState, recheckJob, type JobSnapshot, type JobWorkflowInput } from '../contracts/workflows.ts';
import { GantryJobStatus } from '../contracts/search-attributes.ts';

/** The job's whole run state: the handlers write it, continue-as-new hands it to the next run. */
interface JobRunState {
  /** The newest snapshot (null until the first one arrives). */
  snap: JobSnapshot | null;
  /** `recheckJob` arrived: read the job from the database. */
  recheck: boolean;
  /** The seq whose webhook was already attempted. */
  webhookTriedSeq: number;
}

export type JobRunInput = JobWorkflowInput & {
  /** Carried across continue-as-new. */
  state?: JobRunState;
  /** What runs continued by earlier code carry instead of `state`. */
  snapshot?: JobSnapshot;
  test?: RunTestOptions;
};

const TERMINAL = new Set<JobSnapshot['status']>(['COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT']);

const { readJob, expireJob, superviseJob } = proxyActivities<JobActivities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '500 milliseconds', maximumInterval: '10 seconds' },
});
// docs/jobs.md: a non-2xx answer is retried twice, 10 s apart.
const { deliverWebhook } = proxyActivities<JobActivities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '10 seconds', backoffCoefficient: 1, maximumAttempts: 3 },
});

/** Never wait less than this for a deadline: clocks of PostgreSQL and the worker may differ a little. */
const MIN_WAIT_MS = 1_000;

/**
 * The first wait of a job's first run lasts at most this long: a run started by a state that is not
 * final may be a second run, started by a signal another API process held back to coalesce, after
 * the job's workflow had already ended with the final state. It looks at the job then (a job whose
 * final state arrives in time costs nothing more: the wait's timer is started anyway).
 */
const FIRST_LOOK_MS = 30_000;
/** Runs recorded before the first wait was cut short: their first timer was the deadline's. */
const FIRST_LOOK_PATCH = 'job-first-look-v1';

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
export async function jobWorkflow(input: JobRunInput): Promise<void> {
  const state: JobRunState = input.state ?? { snap: input.snapshot ?? null, recheck: false, webhookTriedSeq: -1 };
  const current = (): JobSnapshot => state.snap as JobSnapshot;
  /** This run's first wait is still to come, and the run was not continued from another. */
  let firstWait = input.state === undefined && input.snapshot === undefined;

  // What the database says wins over what was signalled at the same or an older seq.
  const adoptAuthoritative = (s: JobSnapshot): void => {
    if (!state.snap || s.seq >= state.snap.seq) state.snap = s;
  };
  setHandler(jobChanged, (s) => {
    if (!state.snap || s.seq > state.snap.seq) state.snap = s;
  });
  setHandler(recheckJob, () => {
    state.recheck = true;
  });
  setHandler(jobState, () => state.snap);

  for (let steps = 0; ; steps++) {
    await condition(() => state.snap !== null || state.recheck);
    if (continueAsNewDue(input.test, steps)) {
      await condition(allHandlersFinished);
      await continueAsNew<typeof jobWorkflow>({
        jobId: input.jobId,
        lostAfterMs: input.lostAfterMs,
        state,
        test: input.test,
      });
    }
    if (state.recheck) {
      state.recheck = false;
      adoptAuthoritative(await readJob(input.jobId, input.lostAfterMs));
    }
    const s = current();
    // GONE too: a queued job whose TTL passed, or a purged queue, leaves no row behind.
    showStatus(s.status);
    if (s.status === 'GONE') return;

    if (TERMINAL.has(s.status)) {
      if (s.webhookPending && state.webhookTriedSeq !== s.seq) {
        state.webhookTriedSeq = s.seq;
        try {
          await deliverWebhook(input.jobId, s.seq);
        } catch (err) {
          // Three attempts failed: the attempts are recorded on the job; its life goes on.
          if (!(err instanceof ActivityFailure)) throw err;
        }
      }
      // Done unless something newer (a retry) arrived meanwhile.
      if (current().seq === s.seq && !state.recheck) return;
      continue;
    }

    const deadline =
      s.status === 'IN_QUEUE'
        ? s.ttlDeadline
        : Math.min(s.executionDeadline ?? s.ttlDeadline, s.livenessDeadline ?? s.ttlDeadline, s.ttlDeadline);
    const wait = Math.max(deadline - Date.now(), MIN_WAIT_MS);
    const early = firstWait && wait > FIRST_LOOK_MS;
    firstWait = false;
    const changed = await condition(() => current().seq !== s.seq || state.recheck, early ? FIRST_LOOK_MS : wait);
    if (changed) continue;
    // Replaying a run recorded before the first look: its timer was the deadline's (below).
    if (early && patched(FIRST_LOOK_PATCH)) {
      adoptAuthoritative(await readJob(input.jobId, input.lostAfterMs));
      continue;
    }
    // A deadline passed: PostgreSQL decides what it means (the statements re-check every limit).
    adoptAuthoritative(
      s.status === 'IN_QUEUE'
        ? await expireJob(input.jobId, input.lostAfterMs)
        : await superviseJob(input.jobId, input.lostAfterMs),
    );
  }
}
