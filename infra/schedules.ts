/**
 * The platform's Temporal Schedules, made (or brought up to date) at start by every API process:
 * `purge-expired-outputs:<task queue>` starts purgeExpiredOutputsWorkflow every GANTRY_OUTPUT_PURGE_INTERVAL_MS,
 * `rollup-endpoint-metrics:<task queue>` starts rollupEndpointMetricsWorkflow every
 * GANTRY_METRICS_ROLLUP_INTERVAL_MS. Schedules and not background tasks (infra/background-tasks.ts):
 * the purge is rare and may take a while (blob deletions), the rollup must run once per minute
 * whichever processes are up, and their runs belong in the Temporal UI beside the other workflows.
 */
import { ScheduleAlreadyRunning, ScheduleOverlapPolicy, type Client, type ScheduleOptions } from '@temporalio/client';
import { metricsRollupScheduleId, purgeOutputsScheduleId } from '../contracts/workflows.ts';
import pRetry from 'p-retry';

/** How often each schedule starts its workflow. */
export interface ScheduleIntervals {
  /** GANTRY_OUTPUT_PURGE_INTERVAL_MS. */
  purgeOutputsMs: number;
  /** GANTRY_METRICS_ROLLUP_INTERVAL_MS. */
  metricsRollupMs: number;
}

/**
 * The schedules: their ids and the workflow types they start (registered in workflows/index.ts).
 * `offsetMs`: how far into each interval runs fall (intervals count from the Unix epoch): the rollup
 * runs 15 s into each minute, so a minute is rolled as soon as its 10 s lag has passed.
 */
const SCHEDULES = [
  { id: purgeOutputsScheduleId, workflowType: 'purgeExpiredOutputsWorkflow', every: 'purgeOutputsMs', offsetMs: 0 },
  {
    id: metricsRollupScheduleId,
    workflowType: 'rollupEndpointMetricsWorkflow',
    every: 'metricsRollupMs',
    offsetMs: 15_000,
  },
] as const;

/**
 * Reading or changing a schedule is a query or signal to its scheduler workflow, which a Temporal
 * server that has just started (the dev server of `npm start` on a busy machine) may not answer
 * before the call's deadline: such calls are tried again for up to `withinMs`.
 */
export async function ensureSchedules(
  temporal: Client,
  taskQueue: string,
  intervals: ScheduleIntervals,
  withinMs = 120_000,
): Promise<void> {
  const deadline = Date.now() + withinMs;
  for (const schedule of SCHEDULES) {
    await pRetry(() => ensureScheduleOnce(temporal, taskQueue, schedule, intervals[schedule.every]), {
      retries: Infinity,
      minTimeout: 500,
      maxTimeout: 5_000,
      maxRetryTime: Math.max(0, deadline - Date.now()),
      shouldRetry: ({ error }) => isTransient(error),
    });
  }
}

/** gRPC's status codes for a deadline passed and a server unavailable: worth another try. */
const DEADLINE_EXCEEDED = 4;
const UNAVAILABLE = 14;

function isTransient(err: unknown): boolean {
  const code =
    (err as { code?: unknown; cause?: { code?: unknown } } | undefined)?.cause?.code ??
    (err as { code?: unknown } | undefined)?.code;
  return code === DEADLINE_EXCEEDED || code === UNAVAILABLE;
}

async function ensureScheduleOnce(
  temporal: Client,
  taskQueue: string,
  schedule: (typeof SCHEDULES)[number],
  everyMs: number,
): Promise<void> {
  const scheduleId = schedule.id(taskQueue);
  const { workflowType } = schedule;
  const options: ScheduleOptions = {
    scheduleId,
    spec: { intervals: [{ every: everyMs, ...(schedule.offsetMs < everyMs ? { offset: schedule.offsetMs } : {}) }] },
    action: { type: 'startWorkflow', workflowType, taskQueue, args: [] },
    // A run still going when the next is due: the next is skipped (the running one takes its work).
    policies: { overlap: ScheduleOverlapPolicy.SKIP, catchupWindow: '1 minute' },
  };
  try {
    await temporal.schedule.create(options);
  } catch (err) {
    if (!(err instanceof ScheduleAlreadyRunning)) throw err;
    // Made by an earlier start (or another process): its interval and task queue follow this configuration.
    const handle = temporal.schedule.getHandle(scheduleId);
    await handle.update((previous) => ({
      ...previous,
      spec: options.spec,
      action: {
        type: 'startWorkflow',
        workflowType,
        taskQueue,
        args: [],
        workflowId: previous.action.workflowId,
      },
      policies: { ...previous.policies, ...options.policies },
    }));
  }
}
