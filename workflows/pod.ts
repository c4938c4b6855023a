import {
  allHandlersFinished,
  condition,
  continueAsNew,
  defineQuery,
  defineSignal,
  getExternalWorkflowHandle,
  patched,
  proxyLocalActivities,
  setHandler,
  startChild,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { HostActivities, OrchestrationSettings } from '../activities/hosts.ts';
import type { PodActivities, PodState } from '../activities/workers.ts';
import { newWorkerId } from './rollout.ts';
import { GantryAccountId, GantryKind, gantryMemo, gantrySearchAttributes, LABEL_OLD_RUNS_PATCH, memoName } from './search-attributes.ts';
import { drainWorker, workerEvent, workerWorkflow, workflowNow } from './worker.ts';

// Short database reads and writes on the workflow's own path: local activities (one marker each).
const { podState, createPodWorker, removePodRecord } = proxyLocalActivities<PodActivities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '200 milliseconds', maximumInterval: '5 seconds' },
});
const { orchestrationSettings } = proxyLocalActivities<HostActivities>({ startToCloseTimeout: '10 seconds' });

export const podWorkflowId = (podId: string): string => `pod:${podId}`;

/** The pod's row changed (desired status, GPU count): read it again. Carries nothing: the row is the truth. */
export const podChanged = defineSignal('podChanged');
/** What the workflow last saw, for operators and tests. */
export const getPodStatus = defineQuery<PodWorkflowStatus | null>('getPodStatus');

export interface PodWorkflowStatus {
  desiredStatus: PodState['desiredStatus'];
  workerIds: string[];
  failures: number;
  backoffUntil: number;
}

export interface PodWorkflowInput {
  podId: string;
  /** Carried across continue-as-new. */
  settings?: OrchestrationSettings;
  failures?: number;
  backoffUntil?: number;
  /** When the current worker became ready (workflow time), by worker id. */
  readyAt?: Record<string, number>;
}

/** A worker that ran this long before it died counts as a fresh start, not as another failure in a row. */
const STABLE_AFTER_MS = 60_000;
const MAX_BACKOFF_MS = 5 * 60_000;
/** Safety net: the row is read again this often even without a signal (a lost one changes nothing for long). */
const RECHECK_MS = 60_000;
/** A drain asked for and not yet done is asked for again after this long. */
const REDRAIN_MS = 30_000;

/**
 * One workflow per pod (id `pod:<podId>`): while the pod's desired status is RUNNING it keeps one
 * worker (a `worker:<id>` workflow, the same machinery endpoints use) that runs the pod's
 * container, and replaces it when it dies, backing off while replacements keep dying soon. EXITED
 * drains the worker (the container goes, the pod stays); RUNNING again starts a new one.
 * TERMINATED drains it, removes the pod's row and ends.
 */
export async function podWorkflow(input: PodWorkflowInput): Promise<void> {
  const { podId } = input;
  let wake = false;
  let failures = input.failures ?? 0;
  let backoffUntil = input.backoffUntil ?? 0;
  let readyAt: Record<string, number> = input.readyAt ?? {};
  let status: PodWorkflowStatus | null = null;

  setHandler(podChanged, () => {
    wake = true;
  });
  setHandler(workerEvent, (event) => {
    wake = true;
    if (event.event === 'ready') {
      readyAt = { [event.workerId]: workflowNow() };
    } else if (event.event === 'failed') {
      const since = readyAt[event.workerId];
      failures = since !== undefined && workflowNow() - since >= STABLE_AFTER_MS ? 1 : failures + 1;
      backoffUntil = workflowNow() + Math.min(MAX_BACKOFF_MS, 1000 * 2 ** Math.min(failures - 1, 9));
    }
  });
  setHandler(getPodStatus, () => status);

  const settings = input.settings ?? (await orchestrationSettings());
  // A run started before the search attributes existed labels itself once (continue-as-new keeps it).
  if (workflowInfo().typedSearchAttributes.get(GantryKind) === undefined && patched(LABEL_OLD_RUNS_PATCH)) {
    upsertSearchAttributes(gantrySearchAttributes('pod', { podId }));
  }
  const asked = new Map<string, number>();

  for (;;) {
    // Cleared before the read: a signal that comes while this round runs wakes the next one.
    wake = false;
    const st = await podState(podId);
    if (!st.exists) return;
    status = { desiredStatus: st.desiredStatus, workerIds: st.workers.map((w) => w.id), failures, backoffUntil };
    let waitMs = RECHECK_MS;

    if (st.desiredStatus === 'RUNNING') {
      if (st.workers.length === 0) {
        if (workflowNow() >= backoffUntil) {
          const workerId = newWorkerId();
          if (!(await createPodWorker({ podId, workerId }))) return;
          await startChild(workerWorkflow, {
            workflowId: `worker:${workerId}`,
            // The worker outlives this run: the pod continues as new during a worker's life.
            parentClosePolicy: 'ABANDON',
            typedSearchAttributes: gantrySearchAttributes('worker', { podId, accountId: workflowInfo().typedSearchAttributes.get(GantryAccountId) }),
            memo: gantryMemo({ podName: memoName(workflowInfo().memo, 'podName') }),
            args: [{ workerId, endpointId: '', podId, releaseVersion: 1, settings, drainTimeoutMs: 0, recorded: true }],
          });
          continue;
        }
        waitMs = Math.max(1, backoffUntil - workflowNow());
      }
    } else {
      for (const w of st.workers) {
        const last = asked.get(w.id);
        if (last !== undefined && workflowNow() - last < REDRAIN_MS) continue;
        asked.set(w.id, workflowNow());
        await getExternalWorkflowHandle(`worker:${w.id}`)
          .signal(drainWorker, { reason: st.desiredStatus === 'TERMINATED' ? 'the pod is terminated' : 'the pod is stopped' })
          .catch(() => undefined);
      }
      if (st.workers.length > 0) waitMs = REDRAIN_MS;
      else if (st.desiredStatus === 'TERMINATED') {
        await removePodRecord(podId);
        return;
      } else {
        // A stopped pod that is resumed starts at once: the failures before the stop are history.
        failures = 0;
        backoffUntil = 0;
      }
    }

    await condition(() => wake, waitMs);
    if (workflowInfo().continueAsNewSuggested) {
      await condition(allHandlersFinished);
      await continueAsNew<typeof podWorkflow>({ podId, settings, failures, backoffUntil, readyAt });
    }
  }
}
