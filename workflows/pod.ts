import {
  allHandlersFinished,
  condition,
  continueAsNew,
  getExternalWorkflowHandle,
  patched,
  proxyLocalActivities,
  setHandler,
  startChild,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { HostActivities, OrchestrationSettings } from '../activities/host.ts';
import type { PodActivities } from '../activities/pod.ts';
import { continueAsNewDue, type RunTestOptions } from './continue-as-new.ts';
import {
  drainWorker,
  getPodStatus,
  podChanged,
  workerEvent,
  workerWorkflowId,
  type PodWorkflowInput,
  type PodWorkflowStatus,
} from '../contracts/workflows.ts';
import { newWorkerId } from './rollout.ts';
import {
  GantryAccountId,
  GantryKind,
  gantryMemo,
  gantrySearchAttributes,
  LABEL_OLD_RUNS_PATCH,
  memoName,
} from '../contracts/search-attributes.ts';
import { workerWorkflow, workflowNow } from './worker.ts';

// Short database reads and writes on the workflow's own path: local activities (one marker each).
const { podState, createPodWorker, removePodRecord } = proxyLocalActivities<PodActivities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '200 milliseconds', maximumInterval: '5 seconds' },
});
const { orchestrationSettings } = proxyLocalActivities<HostActivities>({ startToCloseTimeout: '10 seconds' });

/** The pod's whole run state: the handlers write it, continue-as-new hands it to the next run. */
interface PodRunState {
  settings?: OrchestrationSettings;
  /** `podChanged` or a worker event arrived since the last read of the row. */
  wake: boolean;
  /** Replacements that died soon after their start, in a row. */
  failures: number;
  backoffUntil: number;
  /** When the current worker became ready (workflow time), by worker id. */
  readyAt: Record<string, number>;
  /** When a drain was last asked of a worker (workflow time), by worker id. */
  drainAsked: Record<string, number>;
  status: PodWorkflowStatus | null;
}

export type PodRunInput = PodWorkflowInput & {
  /** Carried across continue-as-new. */
  state?: PodRunState;
  /** What runs continued by earlier code carry instead of `state`. */
  settings?: OrchestrationSettings;
  failures?: number;
  backoffUntil?: number;
  readyAt?: Record<string, number>;
  test?: RunTestOptions;
};

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
export async function podWorkflow(input: PodRunInput): Promise<void> {
  const { podId } = input;
  const state: PodRunState = input.state ?? {
    settings: input.settings,
    wake: false,
    failures: input.failures ?? 0,
    backoffUntil: input.backoffUntil ?? 0,
    readyAt: input.readyAt ?? {},
    drainAsked: {},
    status: null,
  };

  setHandler(podChanged, () => {
    state.wake = true;
  });
  setHandler(workerEvent, (event) => {
    state.wake = true;
    if (event.event === 'ready') {
      state.readyAt = { [event.workerId]: workflowNow() };
    } else if (event.event === 'failed') {
      const since = state.readyAt[event.workerId];
      state.failures = since !== undefined && workflowNow() - since >= STABLE_AFTER_MS ? 1 : state.failures + 1;
      state.backoffUntil = workflowNow() + Math.min(MAX_BACKOFF_MS, 1000 * 2 ** Math.min(state.failures - 1, 9));
    }
  });
  setHandler(getPodStatus, () => state.status);

  state.settings ??= await orchestrationSettings();
  const settings = state.settings;
  // A run started before the search attributes existed labels itself once (continue-as-new keeps it).
  if (workflowInfo().typedSearchAttributes.get(GantryKind) === undefined && patched(LABEL_OLD_RUNS_PATCH)) {
    upsertSearchAttributes(gantrySearchAttributes('pod', { podId }));
  }

  for (;;) {
    // Cleared before the read: a signal that comes while this round runs wakes the next one.
    state.wake = false;
    const st = await podState(podId);
    if (!st.exists) return;
    state.status = {
      desiredStatus: st.desiredStatus,
      workerIds: st.workers.map((w) => w.id),
      failures: state.failures,
      backoffUntil: state.backoffUntil,
    };
    let waitMs = RECHECK_MS;

    if (st.desiredStatus === 'RUNNING') {
      if (st.workers.length === 0) {
        if (workflowNow() >= state.backoffUntil) {
          const workerId = newWorkerId();
          if (!(await createPodWorker({ podId, workerId }))) return;
          await startChild(workerWorkflow, {
            workflowId: workerWorkflowId(workerId),
            // The worker outlives this run: the pod continues as new during a worker's life.
            parentClosePolicy: 'ABANDON',
            typedSearchAttributes: gantrySearchAttributes('worker', {
              podId,
              accountId: workflowInfo().typedSearchAttributes.get(GantryAccountId),
            }),
            memo: gantryMemo({ podName: memoName(workflowInfo().memo, 'podName') }),
            args: [{ workerId, endpointId: '', podId, releaseVersion: 1, settings, drainTimeoutMs: 0, recorded: true }],
          });
          continue;
        }
        waitMs = Math.max(1, state.backoffUntil - workflowNow());
      }
    } else {
      for (const w of st.workers) {
        const last = state.drainAsked[w.id];
        if (last !== undefined && workflowNow() - last < REDRAIN_MS) continue;
        state.drainAsked[w.id] = workflowNow();
        await getExternalWorkflowHandle(workerWorkflowId(w.id))
          .signal(drainWorker, {
            reason: st.desiredStatus === 'TERMINATED' ? 'the pod is terminated' : 'the pod is stopped',
          })
          .catch(() => undefined);
      }
      // Only the workers still there are remembered, so that the state stays small.
      const live = new Set(st.workers.map((w) => w.id));
      for (const id of Object.keys(state.drainAsked)) if (!live.has(id)) delete state.drainAsked[id];
      if (st.workers.length > 0) waitMs = REDRAIN_MS;
      else if (st.desiredStatus === 'TERMINATED') {
        await removePodRecord(podId);
        return;
      } else {
        // A stopped pod that is resumed starts at once: the failures before the stop are history.
        state.failures = 0;
        state.backoffUntil = 0;
      }
    }

    await condition(() => state.wake, waitMs);
    if (continueAsNewDue(input.test)) {
      await condition(allHandlersFinished);
      await continueAsNew<typeof podWorkflow>({ podId, state, test: input.test });
    }
  }
}
