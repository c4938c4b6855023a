import {
  ActivityFailure,
  ApplicationFailure,
  allHandlersFinished,
  condition,
  continueAsNew,
  getExternalWorkflowHandle,
  patched,
  proxyActivities,
  proxyLocalActivities,
  setHandler,
  sleep,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { OrchestrationSettings } from '../activities/host.ts';
import type { EndpointActivities } from '../activities/endpoint.ts';
import type { WorkerActivities } from '../activities/worker.ts';
import { continueAsNewDue, type RunTestOptions } from './continue-as-new.ts';
import {
  drainWorker,
  endpointWorkflowId,
  getWorkerPhase,
  podWorkflowId,
  thawWorker,
  workerEvent,
  type WorkerEvent,
  type WorkerPhase,
} from '../contracts/workflows.ts';
import { GantryHostId } from '../contracts/search-attributes.ts';

const quick = {
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '500 milliseconds', maximumInterval: '10 seconds', maximumAttempts: 10 },
} as const;
const { createWorkerRecords, markWorkerReady, beginDrain, workerJobsInFlight, finishWorker } = proxyActivities<
  EndpointActivities & WorkerActivities
>(quick);
// Placement is a short database transaction on the way to a cold start: a local activity saves a round trip.
const { placeWorker } = proxyLocalActivities<WorkerActivities>({
  startToCloseTimeout: '45 seconds',
  retry: { initialInterval: '500 milliseconds', maximumInterval: '5 seconds', maximumAttempts: 5 },
});
// FlashBoot. A thaw is the whole of a warm start's latency: local, no round trip through the server.
const { freezeWorker, thawStandbyWorker } = proxyLocalActivities<WorkerActivities>({
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '500 milliseconds', maximumInterval: '5 seconds', maximumAttempts: 3 },
});
// These heartbeat (activities/worker.ts): one whose Temporal worker died is retried after 30 s, not after its whole timeout.
const { checkWorkerReady, inspectWorker } = proxyActivities<WorkerActivities>({
  startToCloseTimeout: '2 minutes',
  heartbeatTimeout: '30 seconds',
  retry: { initialInterval: '1 second', maximumInterval: '10 seconds', maximumAttempts: 3 },
});
const { startWorkerContainer, removeWorkerContainer } = proxyActivities<WorkerActivities>({
  startToCloseTimeout: '5 minutes',
  heartbeatTimeout: '30 seconds',
  retry: { initialInterval: '1 second', maximumInterval: '20 seconds', maximumAttempts: 5 },
});

/**
 * Workflow time: inside a workflow the SDK's Date is deterministic (the time of the current workflow
 * task, the same on replay). Used for deadlines and back-off that span many timers.
 */
export const workflowNow = (): number => new Date().getTime();

export interface WorkerWorkflowInput {
  workerId: string;
  /** The endpoint the worker serves; empty for a pod's worker. */
  endpointId: string;
  /** The pod whose container the worker runs (workflows/pod.ts): its life events go to `pod:<podId>`. */
  podId?: string;
  releaseVersion: number;
  settings: OrchestrationSettings;
  /** The endpoint's per-request timeout: the longest a drain waits for in-flight jobs. */
  drainTimeoutMs: number;
  /** Carried across continue-as-new: the worker is already ready and watched. */
  resumeWatching?: boolean;
  /** The starter made the Worker row already (saves a round trip on the way to the first job). */
  recorded?: boolean;
  /** Carried across continue-as-new. */
  state?: WorkerRunState;
  test?: RunTestOptions;
}

/** The worker's whole run state: the handlers write it, continue-as-new hands it to the next run. */
interface WorkerRunState {
  /** `drainWorker` arrived: the first request's reason. */
  drain?: { reason: string; standby?: boolean };
  phase: WorkerPhase;
  /** The worker became ready at some point (a failure afterwards is a crash, not a failed start). */
  wasReady: boolean;
  /** FlashBoot: `thawWorker` arrived while it stood by. */
  thaw?: boolean;
}

/** Runs recorded before workers carried search attributes never upsert their host. */
const HOST_ATTRIBUTE_PATCH = 'worker-host-search-attribute-v1';
/** FlashBoot: a worker retired for idleness may stand by frozen; only drains that allow it take this path. */
const FLASHBOOT_PATCH = 'worker-flashboot-v1';

/** Failures of activities that mean "this worker cannot start", with the reason for its record. */
function failureReason(err: unknown): string {
  if (err instanceof ActivityFailure && err.cause instanceof ApplicationFailure) return err.cause.message;
  if (err instanceof ActivityFailure && err.cause) return err.cause.message;
  return err instanceof Error ? err.message : String(err);
}

/**
 * One workflow per worker (id `worker:<workerId>`): placement (PENDING while nothing fits), image
 * pull and container start on its host, readiness, watching (container state over SSH, pings,
 * host status), and drain and stop. A dead or silent worker ends FAILED with its jobs back in the
 * queue; its endpoint's autoscaler starts a replacement. A pod's worker (with `podId`) has the same
 * life, is always started with its row made, and reports to the pod's workflow instead.
 */
export async function workerWorkflow(input: WorkerWorkflowInput): Promise<void> {
  const run = workerRun(input);
  if (!input.resumeWatching) {
    if (!input.recorded)
      await createWorkerRecords({
        endpointId: input.endpointId,
        releaseVersion: input.releaseVersion,
        workerIds: [input.workerId],
      });
    if ((await place(run)) === 'ended' || (await start(run)) === 'ended' || (await becomeReady(run)) === 'ended')
      return;
  }
  // Watching until asked to drain or found dead (a thawed standby watches again).
  for (;;) {
    if ((await watch(run)) === 'ended') return;
    if (!run.state.drain?.standby || input.podId || !patched(FLASHBOOT_PATCH)) break;
    const next = await standBy(run);
    if (next === 'ended') return;
    if (next === 'drain') break;
    // Busy again before it froze, or thawed: it serves on.
    run.state.drain = undefined;
  }
  await drain(run);
}

/** A phase's outcome: `ended` when the worker's run is over (finished, or its container gone). */
type PhaseEnd = 'ended' | 'next';

/** One run of workerWorkflow: its input, its state (which the handlers write) and what every phase does. */
interface WorkerRun {
  input: WorkerWorkflowInput;
  state: WorkerRunState;
  draining: () => boolean;
  /** Tells the worker's endpoint (or pod) of a life event; a gone endpoint is no error. */
  tellEndpoint: (event: WorkerEvent['event'], reason?: string) => Promise<void>;
  /** Removes the container, records the end and tells the endpoint. */
  finish: (status: 'STOPPED' | 'FAILED', reason: string) => Promise<'ended'>;
}

/** The run's state (carried across continue-as-new, or new) and its signal and query handlers. */
function workerRun(input: WorkerWorkflowInput): WorkerRun {
  const { workerId, endpointId, releaseVersion } = input;
  const state: WorkerRunState = input.state ?? {
    phase: input.resumeWatching ? 'ready' : 'placing',
    wasReady: input.resumeWatching ?? false,
  };
  setHandler(drainWorker, (request) => {
    // A standby is idle already: another retirement for idleness (sent before its freeze showed) means nothing.
    if (state.phase === 'standby' && request.standby) return;
    // The first request wins, except that one which lets it stand by (idleness) yields to one that does not.
    if (!state.drain || (state.drain.standby && !request.standby))
      state.drain = { reason: request.reason, ...(request.standby ? { standby: true } : {}) };
  });
  setHandler(getWorkerPhase, () => state.phase);
  // Kept from the freeze on (standBy clears it before freezing): a thaw may arrive while the freeze
  // still finishes, as soon as the row says STANDBY.
  setHandler(thawWorker, () => {
    state.thaw = true;
  });
  const tellEndpoint = async (event: WorkerEvent['event'], reason?: string): Promise<void> => {
    await getExternalWorkflowHandle(input.podId ? podWorkflowId(input.podId) : endpointWorkflowId(endpointId))
      .signal(workerEvent, { workerId, event, releaseVersion, wasReady: state.wasReady, ...(reason ? { reason } : {}) })
      .catch(() => undefined);
  };
  return {
    input,
    state,
    draining: () => state.drain !== undefined,
    tellEndpoint,
    finish: async (status, reason) => {
      state.phase = 'done';
      await removeWorkerContainer(workerId).catch(() => false);
      await finishWorker(workerId, { status, reason });
      await tellEndpoint(status === 'STOPPED' ? 'stopped' : 'failed', reason);
      return 'ended';
    },
  };
}

/** Placement: retried with backoff while nothing fits; the row says why. */
async function place({ input, state, draining, finish }: WorkerRun): Promise<PhaseEnd> {
  let wait = 500;
  for (;;) {
    const placed = await placeWorker(input.workerId, {}).catch((err: unknown) => ({
      placed: false,
      reason: failureReason(err),
      fatal: true,
    }));
    if ('fatal' in placed) return finish('FAILED', placed.reason ?? 'placement failed');
    if (placed.placed) {
      // `GantryHostId`: operators find the workers of a host; a command of the task that goes on to start the container.
      if (
        placed.hostId &&
        workflowInfo().typedSearchAttributes.get(GantryHostId) !== placed.hostId &&
        patched(HOST_ATTRIBUTE_PATCH)
      ) {
        upsertSearchAttributes([{ key: GantryHostId, value: placed.hostId }]);
      }
      return 'next';
    }
    if (await condition(draining, wait))
      return finish('STOPPED', `removed before it was placed: ${state.drain!.reason}`);
    wait = Math.min(wait * 2, input.settings.placementRetryMaxMs);
  }
}

/** The image on the host, then the container. */
async function start({ input, state, finish }: WorkerRun): Promise<PhaseEnd> {
  state.phase = 'starting';
  const { prepareWorkerImage } = proxyActivities<WorkerActivities>({
    startToCloseTimeout: `${input.settings.pullTimeoutSec + 60} seconds`,
    heartbeatTimeout: '1 minute',
    retry: { initialInterval: '2 seconds', maximumInterval: '30 seconds', maximumAttempts: 3 },
  });
  try {
    await prepareWorkerImage(input.workerId);
    if (state.drain) return finish('STOPPED', `removed before it started: ${state.drain.reason}`);
    await startWorkerContainer(input.workerId);
  } catch (err) {
    return finish('FAILED', `could not start: ${failureReason(err)}`);
  }
  return 'next';
}

/** Polls the worker's readiness until it is ready, failed, out of time or drained. */
async function becomeReady({ input, state, draining, tellEndpoint, finish }: WorkerRun): Promise<PhaseEnd> {
  const { workerId, settings } = input;
  state.phase = 'waiting-ready';
  const deadline = workflowNow() + settings.readyTimeoutSec * 1000;
  for (;;) {
    const check = await checkWorkerReady(workerId).catch((err: unknown) => ({
      state: 'waiting' as const,
      reason: failureReason(err),
    }));
    if (check.state === 'ready') break;
    if (check.state === 'failed') return finish('FAILED', check.reason);
    if (workflowNow() >= deadline) return finish('FAILED', `not ready within ${settings.readyTimeoutSec} s`);
    if (await condition(draining, settings.readyPollMs))
      return finish('STOPPED', `removed before it was ready: ${state.drain!.reason}`);
  }
  await markWorkerReady(workerId);
  state.wasReady = true;
  state.phase = 'ready';
  await tellEndpoint('ready');
  return 'next';
}

/** Watches the container until a drain is asked for (`next`) or it ends; continues as new when the history is long. */
async function watch({ input, state, draining, finish }: WorkerRun): Promise<PhaseEnd> {
  while (!state.drain) {
    if (await condition(draining, input.settings.watchIntervalSec * 1000)) break;
    const health = await inspectWorker(input.workerId).catch((err: unknown) => ({
      state: 'unknown' as const,
      reason: failureReason(err),
    }));
    if (health.state === 'gone') {
      state.phase = 'done';
      return 'ended';
    }
    if (health.state === 'failed') return finish('FAILED', health.reason);
    if (health.state === 'stopped') return finish('STOPPED', health.reason);
    if (continueAsNewDue(input.test)) {
      await condition(allHandlersFinished);
      // A drain asked for meanwhile is done by this run (the loop ends); otherwise the next run watches on.
      if (!state.drain) await continueAsNew<typeof workerWorkflow>({ ...input, resumeWatching: true, state });
    }
  }
  return 'next';
}

/**
 * FlashBoot: retired for idleness, the worker stands by frozen on its host until its endpoint
 * thaws it (then it watches again), or something ends it: a drain (eviction, a new release,
 * FlashBoot off, the endpoint's deletion) or, for FLASHBOOT, the standby's expiry.
 */
async function standBy({
  input,
  state,
  draining,
  tellEndpoint,
  finish,
}: WorkerRun): Promise<'watch' | 'drain' | 'ended'> {
  const { workerId } = input;
  state.thaw = false;
  const frozen = await freezeWorker(workerId).catch((err: unknown) => ({
    frozen: false as const,
    busy: false,
    reason: failureReason(err),
  }));
  if (!frozen.frozen) return frozen.busy ? 'watch' : 'drain';
  const idleReason = state.drain?.reason ?? 'idle';
  state.phase = 'standby';
  state.drain = undefined;
  const woken = () => state.thaw === true || draining();
  let expired = false;
  if (frozen.holdMs === null) await condition(woken);
  else expired = !(await condition(woken, frozen.holdMs));
  // Read through a function: the handlers set it while the condition waits, which TypeScript cannot see.
  const drainReason = (): string | undefined => state.drain?.reason;
  const ended = drainReason();
  if (expired || ended !== undefined)
    return finish(
      'STOPPED',
      ended ?? `its FlashBoot standby expired after ${Math.round((frozen.holdMs ?? 0) / 1000)} s (${idleReason})`,
    );
  const thawed = await thawStandbyWorker(workerId).catch((err: unknown) => ({
    thawed: false as const,
    evicted: false,
    reason: failureReason(err),
  }));
  state.thaw = false;
  if (!thawed.thawed)
    return finish(
      thawed.evicted ? 'STOPPED' : 'FAILED',
      thawed.evicted ? thawed.reason : `could not thaw: ${thawed.reason}`,
    );
  state.phase = 'ready';
  await tellEndpoint('ready');
  return 'watch';
}

/** Drain: no new jobs; in-flight ones get up to the endpoint timeout, then go back to the queue. */
async function drain({ input, state, finish }: WorkerRun): Promise<void> {
  state.phase = 'draining';
  const reason = state.drain?.reason ?? 'asked to stop';
  await beginDrain(input.workerId, `draining: ${reason}`);
  const drainDeadline = workflowNow() + input.drainTimeoutMs;
  let poll = 500;
  while (workflowNow() < drainDeadline) {
    if ((await workerJobsInFlight(input.workerId)) === 0) break;
    await sleep(Math.min(poll, Math.max(1, drainDeadline - workflowNow())));
    poll = Math.min(poll * 2, 5000);
  }
  await finish('STOPPED', reason);
}
