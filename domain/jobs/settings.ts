/** The job API's timings and limits (infra/config.ts reads them once; tests shorten them). */
import { DEFAULT_RETENTION, type Retention } from './rows.ts';

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
  /** How long finished jobs stay readable (docs/jobs.md: 30 min after /run, 1 min after /runsync). */
  retention: Retention;
  /** A final state not confirmed signalled after this long was left by a crash: its workflow re-reads it. */
  unsignalledGraceMs: number;
  /** Jobs one endpoint may hold IN_QUEUE; a submit beyond it is 429 (GANTRY_MAX_QUEUED_JOBS). */
  maxQueuedPerEndpoint: number;
  /**
   * Job workflow signals one API process may hold unsent (Temporal behind); past it, submissions
   * are 429 with Retry-After until it catches up (GANTRY_JOB_WORKFLOW_BACKLOG): back-pressure.
   */
  maxWorkflowBacklog: number;
}

/** The built-in timings; infra/config.ts reads the variables that override them (docs/configuration.md). */
export const DEFAULT_JOB_TIMINGS = {
  pingIntervalMs: 10_000,
  takeHoldMs: 30_000,
  signalDelayMs: 100,
  unsignalledGraceMs: 30_000,
  maxQueuedPerEndpoint: 10_000,
  maxWorkflowBacklog: 20_000,
  retention: DEFAULT_RETENTION,
} as const;

/**
 * The job settings from their variables: GANTRY_WORKER_PING_INTERVAL_MS sets the interval given to
 * workers and with it worker-loss detection (three intervals), GANTRY_JOB_SIGNAL_DELAY_MS the
 * coalescing window, GANTRY_JOB_TAKE_HOLD_MS the long-poll hold, GANTRY_JOB_RETENTION_MS and
 * GANTRY_JOB_SYNC_RETENTION_MS the retention of results (tests shorten them).
 */
export function jobSettings(values: Partial<Omit<JobSettings, 'lostAfterMs' | 'streamHoldMs'>> = {}): JobSettings {
  const v = { ...DEFAULT_JOB_TIMINGS, ...values };
  return {
    pingIntervalMs: v.pingIntervalMs,
    lostAfterMs: 3 * v.pingIntervalMs,
    takeHoldMs: v.takeHoldMs,
    streamHoldMs: 10_000,
    signalDelayMs: v.signalDelayMs,
    unsignalledGraceMs: v.unsignalledGraceMs,
    maxQueuedPerEndpoint: v.maxQueuedPerEndpoint,
    maxWorkflowBacklog: v.maxWorkflowBacklog,
    retention: { ...v.retention },
  };
}
