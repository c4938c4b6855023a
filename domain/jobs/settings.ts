/** The job API's timings and limits, read from the environment once per runtime (tests shorten them). */
import { DEFAULT_RETENTION, type Retention } from '../job-queue.ts';

export interface JobSettings {
  /** Interval the platform gives workers (RUNPOD_PING_INTERVAL). */
  pingIntervalMs: number;
  /** A worker is lost when no ping listed its job for this long (three intervals). */
  lostAfterMs: number;
  /** Longest a job-take or job-stop long-poll is held open. */
  takeHoldMs: number;
  /** Longest a /stream call waits for a chunk. */
  streamHoldMs: number;
  /** How long a non-final state waits for a successor before its workflow is signalled. */
  signalDelayMs: number;
  /** How long finished jobs stay readable (compat.md: 30 min after /run, 1 min after /runsync). */
  retention: Retention;
  /** A final state not confirmed signalled after this long was left by a crash: its workflow re-reads it. */
  unsignalledGraceMs: number;
  /** Jobs one endpoint may hold IN_QUEUE; a submit beyond it is 429 (GANTRY_MAX_QUEUED_JOBS). */
  maxQueuedPerEndpoint: number;
}

function envInt(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const v = env[name];
  if (v === undefined || v === '') return fallback;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) throw new Error(`${name} must be a non-negative integer, got "${v}"`);
  return n;
}

/**
 * GANTRY_WORKER_PING_INTERVAL_MS (default 10000, the SDK's own default) sets the interval and with
 * it worker-loss detection; GANTRY_JOB_SIGNAL_DELAY_MS (default 100) the coalescing window;
 * GANTRY_JOB_TAKE_HOLD_MS (default 30000) the long-poll hold; GANTRY_JOB_RETENTION_MS and
 * GANTRY_JOB_SYNC_RETENTION_MS the retention of results (tests shorten them).
 */
export function jobSettings(env: NodeJS.ProcessEnv = process.env): JobSettings {
  const pingIntervalMs = envInt(env, 'GANTRY_WORKER_PING_INTERVAL_MS', 10_000);
  return {
    pingIntervalMs,
    lostAfterMs: 3 * pingIntervalMs,
    takeHoldMs: envInt(env, 'GANTRY_JOB_TAKE_HOLD_MS', 30_000),
    streamHoldMs: 10_000,
    signalDelayMs: envInt(env, 'GANTRY_JOB_SIGNAL_DELAY_MS', 100),
    unsignalledGraceMs: envInt(env, 'GANTRY_JOB_UNSIGNALLED_GRACE_MS', 30_000),
    maxQueuedPerEndpoint: envInt(env, 'GANTRY_MAX_QUEUED_JOBS', 10_000),
    retention: {
      runMs: envInt(env, 'GANTRY_JOB_RETENTION_MS', DEFAULT_RETENTION.runMs),
      syncMs: envInt(env, 'GANTRY_JOB_SYNC_RETENTION_MS', DEFAULT_RETENTION.syncMs),
    },
  };
}
