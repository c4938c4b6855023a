import {
  allHandlersFinished,
  ApplicationFailure,
  condition,
  continueAsNew,
  defineQuery,
  defineSignal,
  defineUpdate,
  getExternalWorkflowHandle,
  patched,
  proxyActivities,
  proxyLocalActivities,
  setHandler,
  startChild,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { EndpointActivities } from '../activities/endpoints.ts';
import type { HostActivities, OrchestrationSettings } from '../activities/hosts.ts';
import type { EndpointScalingState, WorkerActivities } from '../activities/workers.ts';
import { decideScaling, nextCheckMs } from '../domain/scaling.ts';
import { cancelRollout, newWorkerId, rolloutFinished, rolloutWorkflow, rolloutWorkflowId, type RolloutResult } from './rollout.ts';
import { GantryAccountId, GantryKind, gantryMemo, gantrySearchAttributes, LABEL_OLD_RUNS_PATCH, memoName } from './search-attributes.ts';
import { specProblems, type EndpointSpec, type EndpointSpecPatch, type EndpointWorkflowInput } from './types.ts';
import { drainWorker, workerEvent, workerWorkflow, workflowNow } from './worker.ts';

const { loadEndpointSpec, removeEndpointRecord } = proxyActivities<EndpointActivities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '200 milliseconds', maximumInterval: '10 seconds' },
});
// Local activities: one marker event each in the history instead of three, for the loop's reads.
const { endpointScalingState, createWorkerRecords, closeOrphanWorkers } = proxyLocalActivities<WorkerActivities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '200 milliseconds', maximumInterval: '5 seconds' },
});
const { orchestrationSettings } = proxyLocalActivities<HostActivities>({ startToCloseTimeout: '10 seconds' });

/** Changes `workers`, `scaling` and `timeout` of the running endpoint; answers the new spec. */
export const updateSpec = defineUpdate<EndpointSpec, [EndpointSpecPatch]>('updateSpec');
/** The desired state the workflow holds; null until it has been loaded on first start. */
export const getSpec = defineQuery<EndpointSpec | null>('getSpec');
/** Asks the endpoint to drain and remove itself; the workflow completes once it has. */
export const deleteEndpoint = defineSignal('deleteEndpoint');
/**
 * Wakes the autoscaler at once. The job API sends it only when a job is queued for an endpoint
 * with no live worker (never once per job); otherwise the autoscaler's own look-ups find the queue.
 */
export const queueNonEmpty = defineSignal('queueNonEmpty');
/** What the autoscaler last decided and saw, for operators and tests. */
export const getScalingStatus = defineQuery<ScalingStatus | null>('getScalingStatus');

export interface ScalingStatus {
  desired: number;
  live: number;
  reason: string;
  queued: number;
  inProgress: number;
  rollout: { version: number; rollback: boolean } | null;
  backoffUntil: number;
}

/** Autoscaler state carried across continue-as-new. */
interface AutoscalerState {
  settings: OrchestrationSettings;
  /** The release the fleet converges on (a rollout has been started for it, or it was there at start). */
  rolledVersion: number;
  /** The last release that rolled out completely: where a halted release goes back to. */
  stableVersion?: number;
  rollout: { version: number; previousVersion: number; rollback: boolean; cancelSent: boolean } | null;
  /** Workers that failed before ever becoming ready, in a row: new starts back off. */
  startFailures: number;
  backoffUntil: number;
}

type EndpointRunInput = EndpointWorkflowInput & { autoscaler?: AutoscalerState };

/** How often PENDING workers are checked for a workflow that is gone. */
const ORPHAN_CHECK_MS = 60_000;

/** Histories recorded before the autoscaler existed replay through the first shape (see below). */
const AUTOSCALER_PATCH = 'endpoint-autoscaler-v1';

/**
 * One entity workflow per endpoint (id `endpoint:<endpointId>`): it holds the desired configuration,
 * takes changes as validated Updates, autoscales its workers (one `worker:<id>` workflow each), rolls
 * out releases (one `rollout:<endpointId>:<version>` workflow each), drains everything before the
 * endpoint is removed, and continues as new before its history grows large.
 */
export async function endpointWorkflow(input: EndpointRunInput): Promise<void> {
  let spec: EndpointSpec | undefined = input.spec;
  let deleting = false;
  let wake = false;
  let finishedRollout: RolloutResult | undefined;
  let state: AutoscalerState | undefined = input.autoscaler;
  let status: ScalingStatus | null = null;

  // Handlers come first: an Update may arrive in the very first workflow task.
  setHandler(getSpec, () => spec ?? null);
  setHandler(
    updateSpec,
    async (patch) => {
      await condition(() => spec !== undefined);
      const next = { ...(spec as EndpointSpec), ...patch };
      const problems = specProblems(next);
      if (problems.length > 0) throw ApplicationFailure.nonRetryable(problems.join('; '), 'InvalidEndpointSpec');
      spec = next;
      return spec;
    },
    {
      validator: (patch) => {
        if (!spec) return; // checked again by the handler once the spec is loaded
        const problems = specProblems({ ...spec, ...patch });
        if (problems.length > 0) throw new Error(problems.join('; '));
      },
    },
  );
  setHandler(deleteEndpoint, () => {
    deleting = true;
  });
  setHandler(queueNonEmpty, () => {
    wake = true;
  });
  setHandler(workerEvent, (event) => {
    wake = true;
    if (!state) return;
    if (event.event === 'ready') {
      state.startFailures = 0;
      state.backoffUntil = 0;
    } else if (event.event === 'failed' && !event.wasReady) {
      // A worker that cannot start (bad image, no GPU driver) must not be retried in a tight loop.
      state.startFailures++;
      state.backoffUntil = workflowNow() + Math.min(60_000, 1000 * 2 ** Math.min(state.startFailures - 1, 6));
    }
  });
  setHandler(rolloutFinished, (result) => {
    wake = true;
    finishedRollout = result;
  });
  setHandler(getScalingStatus, () => status);

  spec ??= await loadEndpointSpec(input.endpointId);

  if (!patched(AUTOSCALER_PATCH)) {
    // The first shape: hold the spec until deletion. Runs recorded in it upgrade at their next
    // continue-as-new, which any autoscaler signal brings about.
    await condition(() => deleting || workflowInfo().continueAsNewSuggested || wake);
    if (!deleting) {
      await condition(() => allHandlersFinished());
      await continueAsNew<typeof endpointWorkflow>({ endpointId: input.endpointId, spec });
      return;
    }
    await removeEndpointRecord(input.endpointId);
    return;
  }

  const endpointId = input.endpointId;
  // A run started before the search attributes existed labels itself once (continue-as-new keeps it).
  if (workflowInfo().typedSearchAttributes.get(GantryKind) === undefined && patched(LABEL_OLD_RUNS_PATCH)) {
    upsertSearchAttributes(gantrySearchAttributes('endpoint', { endpointId }));
  }
  state ??= { settings: await orchestrationSettings(), rolledVersion: spec.releaseVersion, stableVersion: spec.releaseVersion, rollout: null, startFailures: 0, backoffUntil: 0 };
  const s = state;
  const drainTimeoutMs = (): number => (spec as EndpointSpec).timeoutMs;
  // Workers and rollouts carry the endpoint's account and name on to their own search attributes and memo.
  const accountId = workflowInfo().typedSearchAttributes.get(GantryAccountId);
  const memo = gantryMemo({ endpointName: memoName(workflowInfo().memo, 'endpointName') });

  const drain = async (workerId: string, reason: string): Promise<void> => {
    await getExternalWorkflowHandle(`worker:${workerId}`)
      .signal(drainWorker, { reason })
      .catch(() => undefined);
  };

  const startWorkers = async (count: number, releaseVersion: number): Promise<void> => {
    const ids = Array.from({ length: count }, () => newWorkerId());
    await createWorkerRecords({ endpointId, releaseVersion, workerIds: ids });
    await Promise.all(
      ids.map((id) =>
        startChild(workerWorkflow, {
          workflowId: `worker:${id}`,
          // Workers outlive this run: the endpoint continues as new many times in a worker's life.
          parentClosePolicy: 'ABANDON',
          typedSearchAttributes: gantrySearchAttributes('worker', { endpointId, accountId, releaseVersion }),
          memo,
          args: [{ workerId: id, endpointId, releaseVersion, settings: s.settings, drainTimeoutMs: drainTimeoutMs(), recorded: true }],
        }),
      ),
    );
  };

  const startRollout = async (version: number, previousVersion: number, rollback: boolean): Promise<void> => {
    s.rollout = { version, previousVersion, rollback, cancelSent: false };
    await startChild(rolloutWorkflow, {
      workflowId: rolloutWorkflowId(endpointId, version),
      parentClosePolicy: 'ABANDON',
      typedSearchAttributes: gantrySearchAttributes('rollout', { endpointId, accountId, releaseVersion: version }),
      memo,
      args: [{ endpointId, version, previousVersion, rollback, settings: s.settings, drainTimeoutMs: drainTimeoutMs() }],
    });
  };

  let lastOrphanCheck = workflowNow();
  while (!deleting) {
    let current: EndpointSpec = spec;
    if (finishedRollout) {
      const result = finishedRollout;
      finishedRollout = undefined;
      if (s.rollout?.version === result.version) s.rollout = null;
      if (result.status === 'COMPLETED' && !result.rollback) s.stableVersion = result.version;
      if (result.status === 'HALTED' && !result.rollback) {
        // The release failed: the fleet goes back to the previous one (the rollout has recorded
        // that on the endpoint unless a newer release came meanwhile); workers of the failed
        // release are replaced below.
        s.rolledVersion = result.previousVersion;
        if (current.releaseVersion === result.version) {
          spec = { ...current, releaseVersion: result.previousVersion };
          current = spec;
        }
      }
    }
    if (s.rollout && s.rollout.version !== current.releaseVersion && !s.rollout.cancelSent) {
      s.rollout.cancelSent = true;
      await getExternalWorkflowHandle(rolloutWorkflowId(endpointId, s.rollout.version))
        .signal(cancelRollout)
        .catch(() => undefined);
    }

    const st: EndpointScalingState = await endpointScalingState(endpointId);
    if (!st.exists) break;
    if (st.workers.some((w) => w.status === 'PENDING') && workflowNow() - lastOrphanCheck > ORPHAN_CHECK_MS) {
      lastOrphanCheck = workflowNow();
      // Rows of workers whose workflow is gone would count as starting for ever.
      if ((await closeOrphanWorkers(endpointId)).length > 0) continue;
    }
    if (!s.rollout && current.releaseVersion !== s.rolledVersion) {
      // A release superseded half-way never proved itself: a halt goes back to the last complete one.
      const previous = s.stableVersion ?? s.rolledVersion;
      s.rolledVersion = current.releaseVersion;
      await startRollout(current.releaseVersion, previous, false);
    } else if (!s.rollout && st.workers.some((w) => w.state !== 'draining' && w.releaseVersion !== current.releaseVersion)) {
      // Workers of another version with no rollout under way (after a halt): converge on the current one.
      await startRollout(current.releaseVersion, current.releaseVersion, true);
    }

    const decision = decideScaling({
      scalerType: current.scalerType,
      scalerValue: current.scalerValue,
      workersMin: current.workersMin,
      workersMax: current.workersMax,
      idleTimeoutSec: current.idleTimeout,
      releaseVersion: current.releaseVersion,
      queue: st.queue,
      workers: st.workers,
      rolloutActive: s.rollout !== null,
    });
    const backingOff = workflowNow() < s.backoffUntil;
    status = {
      desired: decision.desired,
      live: st.workers.filter((w) => w.state !== 'draining').length,
      reason: backingOff && decision.start > 0 ? `${decision.reason}; backing off after ${s.startFailures} failed starts` : decision.reason,
      queued: st.queue.queued,
      inProgress: st.queue.inProgress,
      rollout: s.rollout ? { version: s.rollout.version, rollback: s.rollout.rollback } : null,
      backoffUntil: s.backoffUntil,
    };
    if (decision.start > 0 && !backingOff) await startWorkers(decision.start, current.releaseVersion);
    for (const id of decision.drain) await drain(id, 'idle past the idle timeout');

    wake = false;
    const seen = spec;
    let waitMs = nextCheckMs(st, s.settings.autoscaleActiveMs, s.settings.autoscaleRestMs);
    if (backingOff) waitMs = Math.min(waitMs, Math.max(1, s.backoffUntil - workflowNow()));
    await condition(() => wake || deleting || spec !== seen || finishedRollout !== undefined, waitMs);

    if (!deleting && workflowInfo().continueAsNewSuggested) {
      await condition(() => allHandlersFinished());
      await continueAsNew<typeof endpointWorkflow>({ endpointId, spec, autoscaler: s });
    }
  }

  // Deletion: no more starts; every worker drains (in-flight jobs finish), then the record goes.
  if (s.rollout && !s.rollout.cancelSent) {
    await getExternalWorkflowHandle(rolloutWorkflowId(endpointId, s.rollout.version))
      .signal(cancelRollout)
      .catch(() => undefined);
  }
  const asked = new Set<string>();
  for (;;) {
    const st = await endpointScalingState(endpointId);
    if (!st.exists || st.workers.length === 0) break;
    if (st.workers.some((w) => w.status === 'PENDING') && workflowNow() - lastOrphanCheck > ORPHAN_CHECK_MS) {
      lastOrphanCheck = workflowNow();
      await closeOrphanWorkers(endpointId);
    }
    for (const w of st.workers.filter((x) => !asked.has(x.id))) {
      asked.add(w.id);
      await drain(w.id, 'the endpoint is being deleted');
    }
    wake = false;
    await condition(() => wake, 1000);
  }
  await removeEndpointRecord(endpointId);
}
