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
  drain?: { reason: string };
  phase: WorkerPhase;
  /** The worker became ready at some point (a failure afterwards is a crash, not a failed start). */
  wasReady: boolean;
}

/** Runs recorded before workers carried search attributes never upsert their host. */
const HOST_ATTRIBUTE_PATCH = 'worker-host-search-attribute-v1';

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
  const { workerId, endpointId, releaseVersion, settings } = input;
  const state: WorkerRunState = input.state ?? {
    phase: input.resumeWatching ? 'ready' : 'placing',
    wasReady: input.resumeWatching ?? false,
  };
  setHandler(drainWorker, (request) => {
    state.drain ??= { reason: request.reason };
  });
  setHandler(getWorkerPhase, () => state.phase);
  const draining = (): boolean => state.drain !== undefined;

  const tellEndpoint = async (event: WorkerEvent['event'], reason?: string): Promise<void> => {
    await getExternalWorkflowHandle(input.podId ? podWorkflowId(input.podId) : endpointWorkflowId(endpointId))
      .signal(workerEvent, { workerId, event, releaseVersion, wasReady: state.wasReady, ...(reason ? { reason } : {}) })
      .catch(() => undefined);
  };

  const finish = async (status: 'STOPPED' | 'FAILED', reason: string): Promise<void> => {
    state.phase = 'done';
    await removeWorkerContainer(workerId).catch(() => false);
    await finishWorker(workerId, { status, reason });
    await tellEndpoint(status === 'STOPPED' ? 'stopped' : 'failed', reason);
  };

  if (!input.resumeWatching) {
    if (!input.recorded) await createWorkerRecords({ endpointId, releaseVersion, workerIds: [workerId] });

    // Placement: retried with backoff while nothing fits; the row says why.
    let wait = 500;
    for (;;) {
      const placed = await placeWorker(workerId, {}).catch((err: unknown) => ({
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
        break;
      }
      if (await condition(draining, wait))
        return finish('STOPPED', `removed before it was placed: ${state.drain!.reason}`);
      wait = Math.min(wait * 2, settings.placementRetryMaxMs);
    }

    state.phase = 'starting';
    const { prepareWorkerImage } = proxyActivities<WorkerActivities>({
      startToCloseTimeout: `${settings.pullTimeoutSec + 60} seconds`,
      heartbeatTimeout: '1 minute',
      retry: { initialInterval: '2 seconds', maximumInterval: '30 seconds', maximumAttempts: 3 },
    });
    try {
      await prepareWorkerImage(workerId);
      if (state.drain) return finish('STOPPED', `removed before it started: ${state.drain.reason}`);
      await startWorkerContainer(workerId);
    } catch (err) {
      return finish('FAILED', `could not start: ${failureReason(err)}`);
    }

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
  }

  // Watching until asked to drain or found dead.
  while (!state.drain) {
    if (await condition(draining, settings.watchIntervalSec * 1000)) break;
    const health = await inspectWorker(workerId).catch((err: unknown) => ({
      state: 'unknown' as const,
      reason: failureReason(err),
    }));
    if (health.state === 'gone') {
      state.phase = 'done';
      return;
    }
    if (health.state === 'failed') return finish('FAILED', health.reason);
    if (health.state === 'stopped') return finish('STOPPED', health.reason);
    if (continueAsNewDue(input.test)) {
      await condition(allHandlersFinished);
      // A drain asked for meanwhile is done by this run (the loop ends); otherwise the next run watches on.
      if (!state.drain) await continueAsNew<typeof workerWorkflow>({ ...input, resumeWatching: true, state });
    }
  }

  // Drain: no new jobs; in-flight ones get up to the endpoint timeout, then go back to the queue.
  state.phase = 'draining';
  const reason = state.drain?.reason ?? 'asked to stop';
  await beginDrain(workerId, `draining: ${reason}`);
  const drainDeadline = workflowNow() + input.drainTimeoutMs;
  let poll = 500;
  while (workflowNow() < drainDeadline) {
    if ((await workerJobsInFlight(workerId)) === 0) break;
    await sleep(Math.min(poll, Math.max(1, drainDeadline - workflowNow())));
    poll = Math.min(poll * 2, 5000);
  }
  await finish('STOPPED', reason);
}
