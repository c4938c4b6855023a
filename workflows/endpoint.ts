import {
  allHandlersFinished,
  ApplicationFailure,
  condition,
  continueAsNew,
  getExternalWorkflowHandle,
  patched,
  proxyActivities,
  proxyLocalActivities,
  setHandler,
  startChild,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { EndpointActivities, EndpointScalingState } from '../activities/endpoint.ts';
import type { HostActivities, OrchestrationSettings } from '../activities/host.ts';
import { decideScaling, nextCheckMs } from '../domain/endpoints/scaling.ts';
import { continueAsNewDue, type RunTestOptions } from './continue-as-new.ts';
import {
  cancelRollout,
  deleteEndpoint,
  drainWorker,
  endpointChanged,
  getScalingStatus,
  getSpec,
  queueNonEmpty,
  rolloutFinished,
  rolloutWorkflowId,
  specProblems,
  thawWorker,
  updateSpec,
  workerEvent,
  workerWorkflowId,
  type EndpointSpec,
  type EndpointWorkflowInput,
  type RolloutResult,
  type ScalingStatus,
} from '../contracts/workflows.ts';
import { newWorkerId, rolloutWorkflow } from './rollout.ts';
import {
  GantryAccountId,
  GantryKind,
  gantryMemo,
  gantrySearchAttributes,
  LABEL_OLD_RUNS_PATCH,
  memoName,
} from '../contracts/search-attributes.ts';
import { workerWorkflow, workflowNow } from './worker.ts';

const { loadEndpointSpec, removeEndpointRecord } = proxyActivities<EndpointActivities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '200 milliseconds', maximumInterval: '10 seconds' },
});
// Local activities: one marker event each in the history instead of three, for the loop's reads.
const { endpointScalingState, createWorkerRecords, closeOrphanWorkers } = proxyLocalActivities<EndpointActivities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '200 milliseconds', maximumInterval: '5 seconds' },
});
const { readEndpointSpec } = proxyLocalActivities<EndpointActivities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '200 milliseconds', maximumInterval: '5 seconds' },
});
const { orchestrationSettings } = proxyLocalActivities<HostActivities>({ startToCloseTimeout: '10 seconds' });

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

/**
 * Everything a run knows, in one object: the handlers write it, the loop reads it, and
 * continue-as-new hands it whole to the next run (pending signals included).
 */
export interface EndpointRunState {
  /** The desired state as last read from the row; undefined until the first read. */
  spec?: EndpointSpec;
  /** `endpointChanged` arrived since the last read: read the row again. */
  specStale: boolean;
  deleting: boolean;
  /** Something happened that the autoscaler should look at now. */
  wake: boolean;
  /** Rollouts that ended and that the loop has not taken in yet. */
  finishedRollouts: RolloutResult[];
  autoscaler?: AutoscalerState;
  /** Workflow time of the last look for orphaned PENDING workers. */
  lastOrphanCheck?: number;
  status: ScalingStatus | null;
  /** FlashBoot: standbys asked to thaw (workflow time of the ask) whose rows do not say so yet. */
  thawing?: Record<string, number>;
  /** FlashBoot: standbys asked to go (their release was replaced, or FlashBoot turned off). */
  endingStandbys?: string[];
}

export type EndpointRunInput = EndpointWorkflowInput & {
  /** Carried across continue-as-new. */
  state?: EndpointRunState;
  /** What runs continued by earlier code carry instead of `state`. */
  spec?: EndpointSpec;
  autoscaler?: AutoscalerState;
  test?: RunTestOptions;
};

/** How often PENDING workers are checked for a workflow that is gone. */
const ORPHAN_CHECK_MS = 60_000;

/**
 * FlashBoot: a scale-up thaws standbys of the current release before it starts any worker, and
 * standbys of a replaced release, or of an endpoint whose FlashBoot was turned off, are ended.
 * Only runs that see a standby take this path.
 */
const FLASHBOOT_PATCH = 'endpoint-flashboot-v1';
/** How long a thaw asked for counts as a starting worker while the standby's row does not show it yet. */
const THAW_GRACE_MS = 30_000;

/** Histories recorded before the autoscaler existed replay through the first shape (see below). */
const AUTOSCALER_PATCH = 'endpoint-autoscaler-v1';

/**
 * `endpointChanged` is acted on under this patch: a run that received it while its worker ran code
 * without a handler for it (an upgrade) replays that signal as ignored, as it was, and takes the
 * change in at its next live step.
 */
const REREAD_ON_CHANGE_PATCH = 'endpoint-reread-on-change-v1';

/**
 * One entity workflow per endpoint (id `endpoint:<endpointId>`): the executor of the endpoint's row.
 * It reads the desired state from the row (again on every `endpointChanged`), autoscales its
 * workers (one `worker:<id>` workflow each), rolls out releases (one `rollout:<endpointId>:<version>`
 * workflow each), drains everything before the endpoint is removed, and continues as new before
 * its history grows large, handing its whole run state (pending signals included) to the next run.
 */
export async function endpointWorkflow(input: EndpointRunInput): Promise<void> {
  const { endpointId } = input;
  const state = initialRunState(input);
  // Handlers come first: a signal or Update may arrive in the very first workflow task.
  registerHandlers(state);

  if (!state.spec) {
    // Cleared first: this read sees every change committed before it.
    state.specStale = false;
    state.spec = await loadEndpointSpec(endpointId);
  }

  if (!patched(AUTOSCALER_PATCH)) {
    await holdSpecUntilDeleted(endpointId, state);
    return;
  }

  const run = await startAutoscaler(input, state);
  await autoscaleUntilDeleted(run);
  await drainAndRemove(run);
}

/** The run state a fresh run starts from, or the one a continued run was handed. */
function initialRunState(input: EndpointRunInput): EndpointRunState {
  return (
    input.state ?? {
      spec: input.spec,
      specStale: false,
      deleting: false,
      wake: false,
      finishedRollouts: [],
      autoscaler: input.autoscaler,
      status: null,
    }
  );
}

/** Signals, queries and the Update: each writes or reads the run state. */
function registerHandlers(state: EndpointRunState): void {
  setHandler(endpointChanged, () => {
    state.specStale = true;
    if (patched(REREAD_ON_CHANGE_PATCH)) state.wake = true;
  });
  setHandler(getSpec, () => state.spec ?? null);
  setHandler(
    updateSpec,
    async (patch) => {
      await condition(() => state.spec !== undefined);
      const next = { ...(state.spec as EndpointSpec), ...patch };
      const problems = specProblems(next);
      if (problems.length > 0) throw ApplicationFailure.nonRetryable(problems.join('; '), 'InvalidEndpointSpec');
      state.spec = next;
      return next;
    },
    {
      validator: (patch) => {
        if (!state.spec) return; // checked again by the handler once the spec is loaded
        const problems = specProblems({ ...state.spec, ...patch });
        if (problems.length > 0) throw new Error(problems.join('; '));
      },
    },
  );
  setHandler(deleteEndpoint, () => {
    state.deleting = true;
  });
  setHandler(queueNonEmpty, () => {
    state.wake = true;
  });
  setHandler(workerEvent, (event) => {
    state.wake = true;
    const a = state.autoscaler;
    if (!a) return;
    if (event.event === 'ready') {
      a.startFailures = 0;
      a.backoffUntil = 0;
    } else if (event.event === 'failed' && !event.wasReady) {
      // A worker that cannot start (bad image, no GPU driver) must not be retried in a tight loop.
      a.startFailures++;
      a.backoffUntil = workflowNow() + Math.min(60_000, 1000 * 2 ** Math.min(a.startFailures - 1, 6));
    }
  });
  setHandler(rolloutFinished, (result) => {
    state.wake = true;
    state.finishedRollouts.push(result);
  });
  setHandler(getScalingStatus, () => state.status);
}

/**
 * The first shape: hold the spec until deletion. Runs recorded in it upgrade at their next
 * continue-as-new, which any autoscaler signal brings about.
 */
async function holdSpecUntilDeleted(endpointId: string, state: EndpointRunState): Promise<void> {
  await condition(() => state.deleting || workflowInfo().continueAsNewSuggested || state.wake);
  if (!state.deleting) {
    await condition(() => allHandlersFinished());
    await continueAsNew<typeof endpointWorkflow>({ endpointId, state });
    return;
  }
  await removeEndpointRecord(endpointId);
}

/** What the autoscaler's steps share: the run state and what this run carries on to its children. */
interface AutoscalerRun {
  endpointId: string;
  state: EndpointRunState;
  /** `state.autoscaler`, set. */
  s: AutoscalerState;
  test?: RunTestOptions;
  /** Workers and rollouts carry the endpoint's account and name on to their own search attributes and memo. */
  accountId: string | undefined;
  memo: ReturnType<typeof gantryMemo>;
}

/** Labels an old run, sets up the autoscaler's state (settings read on the first run), and the orphan clock. */
async function startAutoscaler(input: EndpointRunInput, state: EndpointRunState): Promise<AutoscalerRun> {
  const { endpointId } = input;
  // A run started before the search attributes existed labels itself once (continue-as-new keeps it).
  if (workflowInfo().typedSearchAttributes.get(GantryKind) === undefined && patched(LABEL_OLD_RUNS_PATCH)) {
    upsertSearchAttributes(gantrySearchAttributes('endpoint', { endpointId }));
  }
  const first = state.spec as EndpointSpec;
  state.autoscaler ??= {
    settings: await orchestrationSettings(),
    rolledVersion: first.releaseVersion,
    stableVersion: first.releaseVersion,
    rollout: null,
    startFailures: 0,
    backoffUntil: 0,
  };
  const run: AutoscalerRun = {
    endpointId,
    state,
    s: state.autoscaler,
    test: input.test,
    accountId: workflowInfo().typedSearchAttributes.get(GantryAccountId),
    memo: gantryMemo({ endpointName: memoName(workflowInfo().memo, 'endpointName') }),
  };
  state.lastOrphanCheck ??= workflowNow();
  return run;
}

/** The autoscaler's loop: one step per wake-up (a signal, a change, or the next check's time). */
async function autoscaleUntilDeleted(run: AutoscalerRun): Promise<void> {
  const { endpointId, state } = run;
  while (!state.deleting) {
    if (!(await rereadSpecIfChanged(run))) break; // the row is gone: nothing left to keep running
    const current = takeInFinishedRollouts(run);
    await cancelSupersededRollout(run, current);

    const st: EndpointScalingState = await endpointScalingState(endpointId);
    if (!st.exists) break;
    if (await closeOrphansIfDue(run, st)) continue;
    await startRolloutIfDue(run, current, st);

    const { workers, thawable, flashboot } = await sortStandbys(run, current, st);
    const { decision, backingOff } = decide(run, current, st, workers);
    await scale(run, current, decision, thawable, backingOff, flashboot);

    await waitForNextStep(run, st, workers, backingOff);

    if (!state.deleting && continueAsNewDue(run.test)) {
      await condition(() => allHandlersFinished());
      await continueAsNew<typeof endpointWorkflow>({ endpointId, state, test: run.test });
    }
  }
}

/** Sleeps until something to look at happens, or until the next check is due. */
async function waitForNextStep(
  { state, s }: AutoscalerRun,
  st: EndpointScalingState,
  workers: EndpointScalingState['workers'],
  backingOff: boolean,
): Promise<void> {
  state.wake = false;
  const seen = state.spec;
  let waitMs = nextCheckMs({ queue: st.queue, workers }, s.settings.autoscaleActiveMs, s.settings.autoscaleRestMs);
  if (backingOff) waitMs = Math.min(waitMs, Math.max(1, s.backoffUntil - workflowNow()));
  await condition(
    () => state.wake || state.deleting || state.spec !== seen || state.finishedRollouts.length > 0,
    waitMs,
  );
}

/** Reads the row again after `endpointChanged`; false when the row is gone. */
async function rereadSpecIfChanged({ endpointId, state }: AutoscalerRun): Promise<boolean> {
  if (state.specStale && patched(REREAD_ON_CHANGE_PATCH)) {
    // Cleared before the read: a change committed while it runs is read by the next step.
    state.specStale = false;
    const fresh = await readEndpointSpec(endpointId);
    if (!fresh) return false;
    state.spec = fresh;
  }
  return true;
}

/** Takes in the rollouts that ended; returns the spec to converge on (a halted release's previous one). */
function takeInFinishedRollouts({ state, s }: AutoscalerRun): EndpointSpec {
  let current = state.spec as EndpointSpec;
  for (let result = state.finishedRollouts.shift(); result; result = state.finishedRollouts.shift()) {
    if (s.rollout?.version === result.version) s.rollout = null;
    if (result.status === 'COMPLETED' && !result.rollback) s.stableVersion = result.version;
    if (result.status === 'HALTED' && !result.rollback) {
      // The release failed: the fleet goes back to the previous one (the rollout has recorded
      // that on the endpoint unless a newer release came meanwhile); workers of the failed
      // release are replaced below.
      s.rolledVersion = result.previousVersion;
      if (current.releaseVersion === result.version) {
        current = { ...current, releaseVersion: result.previousVersion };
        state.spec = current;
      }
    }
  }
  return current;
}

/** A rollout of a release that is no longer the current one is told to stop (once). */
async function cancelSupersededRollout({ endpointId, s }: AutoscalerRun, current: EndpointSpec): Promise<void> {
  if (s.rollout && s.rollout.version !== current.releaseVersion && !s.rollout.cancelSent) {
    s.rollout.cancelSent = true;
    await signalCancelRollout(endpointId, s.rollout.version);
  }
}

async function signalCancelRollout(endpointId: string, version: number): Promise<void> {
  await getExternalWorkflowHandle(rolloutWorkflowId(endpointId, version))
    .signal(cancelRollout)
    .catch(() => undefined);
}

/**
 * Rows of workers whose workflow is gone would count as starting for ever: while some are PENDING,
 * they are looked for once a minute. True when some were closed.
 */
async function closeOrphansIfDue({ endpointId, state }: AutoscalerRun, st: EndpointScalingState): Promise<boolean> {
  if (st.workers.some((w) => w.status === 'PENDING') && workflowNow() - state.lastOrphanCheck! > ORPHAN_CHECK_MS) {
    state.lastOrphanCheck = workflowNow();
    return (await closeOrphanWorkers(endpointId)).length > 0;
  }
  return false;
}

/** Starts a rollout for a new release, or one converging the fleet after a halt. */
async function startRolloutIfDue(run: AutoscalerRun, current: EndpointSpec, st: EndpointScalingState): Promise<void> {
  const { s } = run;
  if (!s.rollout && current.releaseVersion !== s.rolledVersion) {
    // A release superseded half-way never proved itself: a halt goes back to the last complete one.
    const previous = s.stableVersion ?? s.rolledVersion;
    s.rolledVersion = current.releaseVersion;
    await startRollout(run, current.releaseVersion, previous, false);
  } else if (
    !s.rollout &&
    st.workers.some(
      (w) => w.state !== 'draining' && w.state !== 'standby' && w.releaseVersion !== current.releaseVersion,
    )
  ) {
    // Workers of another version with no rollout under way (after a halt): converge on the current one.
    await startRollout(run, current.releaseVersion, current.releaseVersion, true);
  }
}

async function startRollout(
  { endpointId, state, s, accountId, memo }: AutoscalerRun,
  version: number,
  previousVersion: number,
  rollback: boolean,
): Promise<void> {
  s.rollout = { version, previousVersion, rollback, cancelSent: false };
  await startChild(rolloutWorkflow, {
    workflowId: rolloutWorkflowId(endpointId, version),
    parentClosePolicy: 'ABANDON',
    typedSearchAttributes: gantrySearchAttributes('rollout', { endpointId, accountId, releaseVersion: version }),
    memo,
    args: [
      {
        endpointId,
        version,
        previousVersion,
        rollback,
        settings: s.settings,
        drainTimeoutMs: drainTimeoutMs(state),
      },
    ],
  });
}

const drainTimeoutMs = (state: EndpointRunState): number => (state.spec as EndpointSpec).timeoutMs;

/**
 * FlashBoot: which standbys may be thawed, and which must go (those are asked to drain now).
 * `workers` counts a thaw asked for as a starting worker until the row shows it.
 */
async function sortStandbys(
  { state }: AutoscalerRun,
  current: EndpointSpec,
  st: EndpointScalingState,
): Promise<{ workers: EndpointScalingState['workers']; thawable: string[]; flashboot: boolean }> {
  let workers = st.workers;
  const thawable: string[] = [];
  const flashboot = current.flashboot !== undefined && current.flashboot !== 'OFF';
  if (
    (st.workers.some((w) => w.state === 'standby') || Object.keys(state.thawing ?? {}).length > 0) &&
    patched(FLASHBOOT_PATCH)
  ) {
    const thawing = (state.thawing ??= {});
    for (const [id, at] of Object.entries(thawing)) {
      const w = st.workers.find((x) => x.id === id);
      if (!w || w.state !== 'standby' || workflowNow() - at > THAW_GRACE_MS) delete thawing[id];
    }
    // A thaw asked for counts as a starting worker until the row shows it.
    workers = st.workers.map((w) =>
      w.state === 'standby' && thawing[w.id] !== undefined ? { ...w, state: 'starting' as const } : w,
    );
    const ending = new Set(state.endingStandbys ?? []);
    for (const w of workers) {
      if (w.state !== 'standby') continue;
      if (flashboot && w.releaseVersion === current.releaseVersion) thawable.push(w.id);
      else if (!ending.has(w.id)) {
        ending.add(w.id);
        await drain(
          w.id,
          flashboot
            ? `its release v${w.releaseVersion} was replaced by v${current.releaseVersion}`
            : 'FlashBoot was turned off',
        );
      }
    }
    state.endingStandbys = [...ending].filter((id) => st.workers.some((w) => w.id === id));
  }
  return { workers, thawable, flashboot };
}

/** The scaling decision for this step, published as the scaling status. */
function decide(
  { state, s }: AutoscalerRun,
  current: EndpointSpec,
  st: EndpointScalingState,
  workers: EndpointScalingState['workers'],
): { decision: ReturnType<typeof decideScaling>; backingOff: boolean } {
  const decision = decideScaling({
    scalerType: current.scalerType,
    scalerValue: current.scalerValue,
    workersMin: current.workersMin,
    workersMax: current.workersMax,
    idleTimeoutSec: current.idleTimeout,
    releaseVersion: current.releaseVersion,
    queue: st.queue,
    workers,
    rolloutActive: s.rollout !== null,
  });
  const backingOff = workflowNow() < s.backoffUntil;
  state.status = {
    desired: decision.desired,
    live: workers.filter((w) => w.state !== 'draining' && w.state !== 'standby').length,
    reason:
      backingOff && decision.start > 0
        ? `${decision.reason}; backing off after ${s.startFailures} failed starts`
        : decision.reason,
    queued: st.queue.queued,
    inProgress: st.queue.inProgress,
    rollout: s.rollout ? { version: s.rollout.version, rollback: s.rollout.rollback } : null,
    backoffUntil: s.backoffUntil,
  };
  return { decision, backingOff };
}

/** Carries the decision out: thaws standbys, starts workers (unless backing off), drains idle ones. */
async function scale(
  run: AutoscalerRun,
  current: EndpointSpec,
  decision: ReturnType<typeof decideScaling>,
  thawable: string[],
  backingOff: boolean,
  flashboot: boolean,
): Promise<void> {
  const { state } = run;
  // Standbys first: a thaw takes milliseconds where a start takes the image's whole start-up.
  const thaw = thawable.slice(0, decision.start);
  for (const id of thaw) state.thawing![id] = workflowNow();
  await Promise.all(
    thaw.map((id) =>
      getExternalWorkflowHandle(workerWorkflowId(id))
        .signal(thawWorker)
        .catch(() => undefined),
    ),
  );
  const start = decision.start - thaw.length;
  if (start > 0 && !backingOff) await startWorkers(run, start, current.releaseVersion);
  for (const id of decision.drain) await drain(id, 'idle past the idle timeout', flashboot);
}

async function startWorkers(
  { endpointId, state, s, accountId, memo }: AutoscalerRun,
  count: number,
  releaseVersion: number,
): Promise<void> {
  const ids = Array.from({ length: count }, () => newWorkerId());
  await createWorkerRecords({ endpointId, releaseVersion, workerIds: ids });
  await Promise.all(
    ids.map((id) =>
      startChild(workerWorkflow, {
        workflowId: workerWorkflowId(id),
        // Workers outlive this run: the endpoint continues as new many times in a worker's life.
        parentClosePolicy: 'ABANDON',
        typedSearchAttributes: gantrySearchAttributes('worker', { endpointId, accountId, releaseVersion }),
        memo,
        args: [
          {
            workerId: id,
            endpointId,
            releaseVersion,
            settings: s.settings,
            drainTimeoutMs: drainTimeoutMs(state),
            recorded: true,
          },
        ],
      }),
    ),
  );
}

async function drain(workerId: string, reason: string, standby = false): Promise<void> {
  await getExternalWorkflowHandle(workerWorkflowId(workerId))
    .signal(drainWorker, { reason, ...(standby ? { standby } : {}) })
    .catch(() => undefined);
}

/** Deletion: no more starts; every worker drains (in-flight jobs finish), then the record goes. */
async function drainAndRemove(run: AutoscalerRun): Promise<void> {
  const { endpointId, state, s } = run;
  if (s.rollout && !s.rollout.cancelSent) await signalCancelRollout(endpointId, s.rollout.version);
  const asked = new Set<string>();
  for (;;) {
    const st = await endpointScalingState(endpointId);
    if (!st.exists || st.workers.length === 0) break;
    await closeOrphansIfDue(run, st);
    for (const w of st.workers.filter((x) => !asked.has(x.id))) {
      asked.add(w.id);
      await drain(w.id, 'the endpoint is being deleted');
    }
    state.wake = false;
    await condition(() => state.wake, 1000);
  }
  await removeEndpointRecord(endpointId);
}
