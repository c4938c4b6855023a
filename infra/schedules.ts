/**
 * The platform's Temporal Schedules, made (or brought up to date) at start by every API process:
 * `purge-expired-outputs:<task queue>` starts purgeExpiredOutputsWorkflow every GANTRY_OUTPUT_PURGE_INTERVAL_MS.
 * A schedule and not a background task (infra/background-tasks.ts): the work is rare, may take a
 * while (blob deletions), and its runs belong in the Temporal UI beside the other workflows.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { ScheduleAlreadyRunning, ScheduleOverlapPolicy, type Client, type ScheduleOptions } from '@temporalio/client';
import { purgeOutputsScheduleId } from '../contracts/workflows.ts';

/** The workflow type the schedule starts (workflows/purge-outputs.ts, registered in workflows/index.ts). */
const PURGE_OUTPUTS_WORKFLOW = 'purgeExpiredOutputsWorkflow';

/**
 * Reading or changing a schedule is a query or signal to its scheduler workflow, which a Temporal
 * server that has just started (the dev server of `npm start` on a busy machine) may not answer
 * before the call's deadline: such calls are tried again for up to `withinMs`.
 */
export async function ensureSchedules(
  temporal: Client,
  taskQueue: string,
  purgeIntervalMs: number,
  withinMs = 120_000,
): Promise<void> {
  const deadline = Date.now() + withinMs;
  for (let attempt = 1; ; attempt++) {
    try {
      return await ensureSchedulesOnce(temporal, taskQueue, purgeIntervalMs);
    } catch (err) {
      if (!isTransient(err) || Date.now() >= deadline) throw err;
      await sleep(Math.min(5_000, 250 * 2 ** attempt));
    }
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

async function ensureSchedulesOnce(temporal: Client, taskQueue: string, purgeIntervalMs: number): Promise<void> {
  const scheduleId = purgeOutputsScheduleId(taskQueue);
  const options: ScheduleOptions = {
    scheduleId,
    spec: { intervals: [{ every: purgeIntervalMs }] },
    action: { type: 'startWorkflow', workflowType: PURGE_OUTPUTS_WORKFLOW, taskQueue, args: [] },
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
        workflowType: PURGE_OUTPUTS_WORKFLOW,
        taskQueue,
        args: [],
        workflowId: previous.action.workflowId,
      },
      policies: { ...previous.policies, ...options.policies },
    }));
  }
}
