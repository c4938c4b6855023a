import {
  allHandlersFinished,
  condition,
  continueAsNew,
  getExternalWorkflowHandle,
  patched,
  proxyActivities,
  proxyLocalActivities,
  setHandler,
  sleep,
  startChild,
  uuid4,
  workflowInfo,
} from '@temporalio/workflow';
import type { OrchestrationSettings } from '../activities/host.ts';
import type { EndpointActivities, EndpointScalingState } from '../activities/endpoint.ts';
import type { RolloutActivities } from '../activities/rollout.ts';
import { continueAsNewDue, type RunTestOptions } from './continue-as-new.ts';
import {
  cancelRollout,
  drainWorker,
  endpointWorkflowId,
  getRolloutProgress,
  rolloutFinished,
  workerWorkflowId,
  type RolloutResult,
} from '../contracts/workflows.ts';
import { GantryAccountId, gantryMemo, gantrySearchAttributes, memoName } from '../contracts/search-attributes.ts';
import { workerWorkflow, workflowNow } from './worker.ts';

const { endpointScalingState } = proxyLocalActivities<EndpointActivities>({
  startToCloseTimeout: '30 seconds',
  retry: { maximumInterval: '5 seconds' },
});
const { createWorkerRecords, finishRelease } = proxyActivities<EndpointActivities & RolloutActivities>({
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '500 milliseconds', maximumInterval: '10 seconds' },
});

export interface RolloutInput {
  endpointId: string;
  version: number;
  /** The version to roll back to if this one halts. */
  previousVersion: number;
  /**
   * Converging the fleet on a version that is already current (after a halt, or workers of an
   * unexpected version): never halts and leaves release records alone.
   */
  rollback: boolean;
  settings: OrchestrationSettings;
  drainTimeoutMs: number;
  /** Carried across continue-as-new. */
  state?: RolloutState;
  test?: RunTestOptions;
}

interface Pair {
  oldId: string;
  newId: string;
  startedAt: number;
  /** The old worker was let go before its replacement was ready (no room for both). */
  oldReleased: boolean;
}

/** The rollout's whole run state: the handlers write it, continue-as-new hands it to the next run. */
interface RolloutState {
  pairs: Pair[];
  failures: number;
  readyCount: number;
  startedAt: number;
  firstReplacementAt: number | null;
  failureReasons: string[];
  /** Old workers already asked to drain (their status says so a moment later). */
  released: string[];
  /** `cancelRollout` arrived (absent in the state of runs continued by earlier code: false). */
  cancelled?: boolean;
}

export const newWorkerId = (): string => uuid4().replace(/-/g, '').slice(0, 14);

/** Runs recorded before a busy old worker could be let go to make room never do it. */
const MAKE_ROOM_WHEN_BUSY_PATCH = 'rollout-make-room-when-busy-v1';
/** Runs recorded before a failed replacement of a let-go worker was tried again simply lost it. */
const RETRY_REPLACEMENT_PATCH = 'rollout-retry-replacement-of-released-v1';
/** Runs recorded before a replacement no host had room for was left to the autoscaler waited on it for ever. */
const LEAVE_UNPLACED_REPLACEMENT_PATCH = 'rollout-leave-unplaced-replacement-v1';

/**
 * One release rollout (id `rollout:<endpointId>:<version>`). Every worker of another version gets a
 * replacement of this version at once (idle and busy alike); the old worker is drained only when
 * its replacement is ready, so a busy one finishes its jobs first and capacity never dips. A
 * release whose new workers fail to become ready (releaseMaxFailures failures, or none ready within
 * releaseReadyDeadlineSec) is HALTED: the endpoint returns to the previous release.
 */
export async function rolloutWorkflow(input: RolloutInput): Promise<RolloutResult> {
  const { endpointId, version, settings } = input;
  const state = input.state ?? initialRolloutState();
  registerHandlers(state);
  const run: RolloutRun = { input, state };

  for (;;) {
    if (state.cancelled)
      return end(run, 'SUPERSEDED', 'a newer release or the endpoint deletion replaced this rollout');
    const st = await endpointScalingState(endpointId);
    if (!st.exists) return end(run, 'SUPERSEDED', 'the endpoint is gone');
    const byId = new Map(st.workers.map((w) => [w.id, w]));
    const now = workflowNow();

    const retry = await settlePairs(run, byId, now);
    if (!input.rollback) {
      const why = haltReason(run, now);
      if (why !== undefined) return halt(run, why);
    }
    const outdated = await replaceOutdated(run, st.workers, byId, retry);
    // Done when every worker of another version is gone (drained ones included).
    if (outdated.length === 0 && state.pairs.length === 0 && !st.workers.some((w) => w.releaseVersion !== version))
      return end(run, 'COMPLETED');

    await condition(() => state.cancelled === true, settings.rolloutPollMs);
    if (continueAsNewDue(input.test)) {
      await condition(allHandlersFinished);
      await continueAsNew<typeof rolloutWorkflow>({ ...input, state });
    }
  }
}

/** What the rollout's steps share. */
interface RolloutRun {
  input: RolloutInput;
  state: RolloutState;
}

type ScalingWorker = EndpointScalingState['workers'][number];

function initialRolloutState(): RolloutState {
  return {
    pairs: [],
    failures: 0,
    readyCount: 0,
    startedAt: workflowNow(),
    firstReplacementAt: null,
    failureReasons: [],
    released: [],
    cancelled: false,
  };
}

function registerHandlers(state: RolloutState): void {
  setHandler(cancelRollout, () => {
    state.cancelled = true;
  });
  setHandler(getRolloutProgress, () => ({
    replaced: state.readyCount,
    pending: state.pairs.length,
    failures: state.failures,
  }));
}

/**
 * Looks at every pair of an old worker and its replacement: a ready replacement lets the old worker
 * go, a failed one counts against the release, and an old worker is let go early to make room.
 * Returns the old workers, already let go, whose replacement failed: each gets another (after the
 * halt check).
 */
async function settlePairs(run: RolloutRun, byId: Map<string, ScalingWorker>, now: number): Promise<string[]> {
  const { input, state } = run;
  const { version, settings } = input;
  const retry: string[] = [];
  for (const pair of [...state.pairs]) {
    const fresh = byId.get(pair.newId);
    const old = byId.get(pair.oldId);
    if (fresh?.ready) {
      if (!pair.oldReleased) await release(state, pair.oldId, `replaced by release v${version}`);
      state.readyCount++;
      state.pairs = state.pairs.filter((p) => p !== pair);
    } else if (!fresh || fresh.state === 'draining') {
      // The replacement ended without becoming ready.
      state.failures++;
      state.failureReasons = [...state.failureReasons.slice(-4), `worker ${pair.newId} did not become ready`];
      state.pairs = state.pairs.filter((p) => p !== pair);
      // An old worker still serving is paired again below. One already let go (or gone, or
      // draining) is not outdated any more: without a fresh try here the release would count as
      // done with none of its workers ready. A rollback leaves the shortfall to the autoscaler
      // (it never halts, so it must not loop here).
      const oldServing = old && old.state !== 'draining' && !pair.oldReleased;
      if (!oldServing && !input.rollback && patched(RETRY_REPLACEMENT_PATCH)) retry.push(pair.oldId);
    } else if (
      pair.oldReleased &&
      !old &&
      fresh.status === 'PENDING' &&
      state.readyCount > 0 &&
      now - pair.startedAt > 4 * settings.surgeWaitSec * 1000 &&
      patched(LEAVE_UNPLACED_REPLACEMENT_PATCH)
    ) {
      // Its old worker is gone, this release's workers are known to start, and the room the old
      // one left went to another worker (hosts at capacity): nothing outdated is left for this
      // pair. The new worker stays, waiting for room as the autoscaler's; waiting on it here
      // would hold the release for as long as the hosts stay full.
      state.pairs = state.pairs.filter((p) => p !== pair);
    } else if (
      !pair.oldReleased &&
      fresh.status === 'PENDING' &&
      now - pair.startedAt > settings.surgeWaitSec * 1000 &&
      old &&
      old.state !== 'draining' &&
      (old.state === 'idle' || makesRoomWhenBusy(settings, now - pair.startedAt))
    ) {
      // No room for old and new side by side: let the old one go first; an idle one after the
      // surge wait, a busy one (it finishes what it has) after twice that: a worker that is never
      // idle (steady traffic on a load-balancing endpoint) would otherwise hold the release forever.
      await release(state, pair.oldId, `making room for release v${version}`);
      pair.oldReleased = true;
    }
  }
  return retry;
}

/** Time first: the patch marker is recorded only by a run that lets a busy worker go. */
const makesRoomWhenBusy = (settings: OrchestrationSettings, waitedMs: number): boolean =>
  waitedMs > 2 * settings.surgeWaitSec * 1000 && patched(MAKE_ROOM_WHEN_BUSY_PATCH);

async function release(state: RolloutState, workerId: string, reason: string): Promise<void> {
  state.released = [...state.released.filter((id) => id !== workerId), workerId];
  await drain(workerId, reason);
}

async function drain(workerId: string, reason: string): Promise<void> {
  await getExternalWorkflowHandle(workerWorkflowId(workerId))
    .signal(drainWorker, { reason })
    .catch(() => undefined);
}

/** Why the release halts (too many failures, or none ready by the deadline); undefined while it goes on. */
function haltReason({ input, state }: RolloutRun, now: number): string | undefined {
  const { version, settings } = input;
  const deadlinePassed =
    state.readyCount === 0 &&
    state.firstReplacementAt !== null &&
    now - state.firstReplacementAt > settings.releaseReadyDeadlineSec * 1000;
  if (state.failures >= settings.releaseMaxFailures || deadlinePassed) {
    return deadlinePassed
      ? `no worker of release v${version} became ready within ${settings.releaseReadyDeadlineSec} s`
      : `${state.failures} workers of release v${version} failed to become ready`;
  }
  return undefined;
}

/**
 * Halts the release. New workers that are still trying are stopped (and gone before the endpoint
 * hears of the halt, so that it does not take them for workers to roll back); ready ones are
 * replaced by the rollback.
 */
async function halt(run: RolloutRun, why: string): Promise<RolloutResult> {
  const { input, state } = run;
  const { endpointId, version, settings } = input;
  const trying = state.pairs.map((p) => p.newId);
  for (const id of trying) await drain(id, `release v${version} halted`);
  for (;;) {
    const now = await endpointScalingState(endpointId);
    if (!now.workers.some((w) => trying.includes(w.id))) break;
    await sleep(settings.rolloutPollMs);
  }
  return end(run, 'HALTED', `${why}; rolled back to v${input.previousVersion}`);
}

/**
 * Starts a replacement for every outdated worker not paired yet, and another for each old worker in
 * `retry`. Returns the outdated workers (of another version, neither draining nor a standby nor let go).
 */
async function replaceOutdated(
  { input, state }: RolloutRun,
  workers: ScalingWorker[],
  byId: Map<string, ScalingWorker>,
  retry: string[],
): Promise<ScalingWorker[]> {
  const { version } = input;
  const paired = new Set(state.pairs.map((p) => p.oldId));
  const released = new Set(state.released);
  // Forget released workers once they are gone, so that the state stays small.
  state.released = state.released.filter((id) => byId.has(id));
  // A standby (FlashBoot) of an older release is not replaced: its endpoint ends it.
  const outdated = workers.filter(
    (w) => w.releaseVersion !== version && w.state !== 'draining' && w.state !== 'standby' && !released.has(w.id),
  );
  const unpaired = outdated.filter((w) => !paired.has(w.id));
  const replace = [
    ...unpaired.map((w) => ({ oldId: w.id, oldReleased: false })),
    ...retry.map((oldId) => ({ oldId, oldReleased: true })),
  ];
  if (replace.length > 0) {
    const ids = replace.map(() => newWorkerId());
    await startWorkers(input, ids);
    replace.forEach((r, i) => state.pairs.push({ ...r, newId: ids[i]!, startedAt: workflowNow() }));
    state.firstReplacementAt ??= workflowNow();
  }
  return outdated;
}

async function startWorkers(input: RolloutInput, ids: string[]): Promise<void> {
  const { endpointId, version, settings } = input;
  await createWorkerRecords({ endpointId, releaseVersion: version, workerIds: ids });
  await Promise.all(
    ids.map((id) =>
      startChild(workerWorkflow, {
        workflowId: workerWorkflowId(id),
        parentClosePolicy: 'ABANDON',
        typedSearchAttributes: gantrySearchAttributes('worker', {
          endpointId,
          accountId: workflowInfo().typedSearchAttributes.get(GantryAccountId),
          releaseVersion: version,
        }),
        memo: gantryMemo({ endpointName: memoName(workflowInfo().memo, 'endpointName') }),
        args: [
          {
            workerId: id,
            endpointId,
            releaseVersion: version,
            settings,
            drainTimeoutMs: input.drainTimeoutMs,
            recorded: true,
          },
        ],
      }),
    ),
  );
}

/** Records the outcome on the release (not for a rollback) and tells the endpoint. */
async function end({ input }: RolloutRun, status: RolloutResult['status'], reason?: string): Promise<RolloutResult> {
  const { endpointId, version } = input;
  if (!input.rollback)
    await finishRelease({
      endpointId,
      version,
      previousVersion: input.previousVersion,
      outcome: status,
      ...(reason ? { reason } : {}),
    });
  const result: RolloutResult = {
    version,
    previousVersion: input.previousVersion,
    rollback: input.rollback,
    status,
    ...(reason ? { reason } : {}),
  };
  await getExternalWorkflowHandle(endpointWorkflowId(endpointId))
    .signal(rolloutFinished, result)
    .catch(() => undefined);
  return result;
}
