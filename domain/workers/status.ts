import type { WorkerStatus } from '../../generated/prisma/client.ts';

/**
 * Which worker states hold (or wait for) a place: everything but the two final ones. The one home
 * of that rule for queries (`liveWorker`), lists and checks.
 */
export const FINAL_WORKER_STATUSES = ['STOPPED', 'FAILED'] as const satisfies readonly WorkerStatus[];
export const LIVE_WORKER_STATUSES = [
  'PENDING',
  'INITIALIZING',
  'IDLE',
  'RUNNING',
  'UNHEALTHY',
  'DRAINING',
  'STANDBY',
] as const satisfies readonly WorkerStatus[];

export const isLiveWorker = (status: WorkerStatus | string): boolean =>
  (LIVE_WORKER_STATUSES as readonly string[]).includes(status);

/** Prisma `where` fragment: the worker is live. */
export const liveWorker: { status: { in: WorkerStatus[] } } = { status: { in: [...LIVE_WORKER_STATUSES] } };

/** The final states as a SQL list (`'STOPPED', 'FAILED'`), for raw queries: `status NOT IN (...)` is a live worker. */
export const FINAL_WORKER_STATUSES_SQL = FINAL_WORKER_STATUSES.map((s) => `'${s}'`).join(', ');

/**
 * Live workers that can serve: every live state but DRAINING (a draining worker takes no new work)
 * and STANDBY (frozen until its endpoint thaws it). An endpoint with none of these has nothing to
 * serve its next job: the job wakes its autoscaler, which thaws a standby or starts a worker.
 */
export const SERVING_WORKER_STATUSES = LIVE_WORKER_STATUSES.filter((s) => s !== 'DRAINING' && s !== 'STANDBY');

/** Worker states that take no job: on the way out, gone, unwell, or frozen (FlashBoot standby). */
export const NO_JOB_WORKER_STATUSES = [
  'DRAINING',
  'STOPPED',
  'FAILED',
  'UNHEALTHY',
  'STANDBY',
] as const satisfies readonly WorkerStatus[];

/** Prisma `where` fragment: the worker is live and not draining. */
export const servingWorker: { status: { in: WorkerStatus[] } } = { status: { in: [...SERVING_WORKER_STATUSES] } };
