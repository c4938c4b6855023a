/**
 * Autoscaling math: how many workers an endpoint should have and which ones may go. Pure (no I/O,
 * no clock, no imports), because the endpoint workflow runs it in Temporal's deterministic sandbox.
 *
 * - QUEUE_DELAY (`value` seconds): workers are added while the oldest queued job has waited longer
 *   than `value`; one per queued job not already covered by a worker that is starting, and at most
 *   half the current count (at least one) per decision, so a burst grows the fleet quickly without
 *   overshooting on one sample.
 * - REQUEST_COUNT (`value` jobs per worker): desired = ceil((queued + in progress) / value).
 * Both: clamped to workers.min..max; a queued job at zero workers always starts one; low-priority
 * jobs never cause a scale-up; only idle workers are removed, and only after idleTimeout seconds
 * idle; no removal while a release rolls out (the rollout replaces workers itself).
 */

export type ScalerType = 'QUEUE_DELAY' | 'REQUEST_COUNT';

export interface QueueStats {
  /** Queued jobs that may cause a scale-up (lowPriority excluded). */
  queued: number;
  /** Queued low-priority jobs: served by the workers there are, never a reason for more. */
  queuedLowPriority: number;
  inProgress: number;
  /** Age of the oldest queued job that may cause a scale-up; null when there is none. */
  oldestQueuedAgeMs: number | null;
}

/** What the autoscaler needs to know of one worker. */
export interface ScalingWorker {
  id: string;
  /**
   * starting: placed or pending, not yet ready; idle/busy: ready; draining: on its way out;
   * standby: frozen on its host (FlashBoot), not live, thawed by the endpoint instead of a start.
   */
  state: 'starting' | 'idle' | 'busy' | 'draining' | 'standby';
  /** How long it has been idle (idle workers only). */
  idleForMs: number;
  releaseVersion: number;
}

export interface ScalingInput {
  scalerType: ScalerType;
  scalerValue: number;
  workersMin: number;
  workersMax: number;
  idleTimeoutSec: number;
  /** The release new workers get; idle workers of other releases are removed first. */
  releaseVersion: number;
  queue: QueueStats;
  workers: readonly ScalingWorker[];
  /** A release rollout is replacing workers: no removals meanwhile. */
  rolloutActive: boolean;
}

export interface ScalingDecision {
  /** Target count of live (not draining, not standing by) workers. */
  desired: number;
  /** Workers to start now (the endpoint thaws its standbys first, when it has any). */
  start: number;
  /** Idle workers to drain and remove now. */
  drain: string[];
  /** Why, in a few words (for logs and the Temporal UI). */
  reason: string;
}

const clamp = (n: number, lo: number, hi: number): number => Math.max(lo, Math.min(hi, n));

export function decideScaling(input: ScalingInput): ScalingDecision {
  const live = input.workers.filter((w) => w.state !== 'draining' && w.state !== 'standby');
  const starting = live.filter((w) => w.state === 'starting').length;
  const { queued, inProgress, oldestQueuedAgeMs } = input.queue;
  const min = input.workersMin;
  const max = Math.max(input.workersMin, input.workersMax);

  let wanted: number;
  let reason: string;
  if (input.scalerType === 'REQUEST_COUNT') {
    const value = Math.max(input.scalerValue, 0.5);
    wanted = Math.ceil((queued + inProgress) / value);
    reason = `request count: ${queued} queued + ${inProgress} in progress at ${value} per worker`;
  } else {
    const delayed = queued > 0 && oldestQueuedAgeMs !== null && oldestQueuedAgeMs > input.scalerValue * 1000;
    if (delayed && queued > starting) {
      const step = Math.min(queued - starting, Math.max(1, Math.ceil(live.length / 2)));
      wanted = live.length + step;
      reason = `queue delay: oldest job waited ${Math.round(oldestQueuedAgeMs / 100) / 10} s > ${input.scalerValue} s`;
    } else if (delayed) {
      wanted = live.length;
      reason = 'queue delay: workers already starting cover the queue';
    } else {
      // Without delay only the workers in use (or starting) are needed; idle ones leave once their
      // idle timeout has passed (below).
      wanted = live.filter((w) => w.state !== 'idle').length;
      reason = 'queue delay: no job waits too long';
    }
  }
  if (queued > 0 && wanted < 1) {
    wanted = 1;
    reason = 'a job is queued and no worker is live';
  }
  const desired = clamp(wanted, min, max);
  if (desired !== wanted) reason += `; clamped to ${min}..${max}`;

  const start = Math.max(0, desired - live.length);
  const drain: string[] = [];
  if (!input.rolloutActive && start === 0 && live.length > desired && queued === 0) {
    const expired = live
      .filter((w) => w.state === 'idle' && w.idleForMs >= input.idleTimeoutSec * 1000)
      // Workers of an older release go first, then the longest idle.
      .sort(
        (a, b) =>
          Number(a.releaseVersion === input.releaseVersion) - Number(b.releaseVersion === input.releaseVersion) ||
          b.idleForMs - a.idleForMs ||
          (a.id < b.id ? -1 : 1),
      );
    for (const w of expired.slice(0, live.length - desired)) drain.push(w.id);
    if (drain.length > 0) reason += `; ${drain.length} idle for ${input.idleTimeoutSec} s or more`;
  }
  return { desired, start, drain, reason };
}

/**
 * How long the autoscaler waits before looking again: quickly while anything moves, slowly at rest.
 * Standby workers are at rest (what ends them wakes the autoscaler).
 */
export function nextCheckMs(input: Pick<ScalingInput, 'queue' | 'workers'>, activeMs: number, restMs: number): number {
  const resting =
    input.workers.every((w) => w.state === 'standby') &&
    input.queue.queued === 0 &&
    input.queue.inProgress === 0 &&
    input.queue.queuedLowPriority === 0;
  return resting ? restMs : activeMs;
}
