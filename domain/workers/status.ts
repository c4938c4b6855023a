import type { WorkerStatus } from '../../generated/prisma/client.ts';

/**
 * Which worker states hold (or wait for) a place: everything but the two final ones. The one home
 * of that rule for queries (`liveWorker`), lists and checks.
 */
export const FINAL_WORKER_STATUSES = ['STOPPED', 'FAILED'] as const satisfies readonly WorkerStatus[];
export const LIVE_WORKER_STATUSES = ['PENDING', 'INITIALIZING', 'IDLE', 'RUNNING', 'UNHEALTHY', 'DRAINING'] as const satisfies readonly WorkerStatus[];

export const isLiveWorker = (status: WorkerStatus | string): boolean => (LIVE_WORKER_STATUSES as readonly string[]).includes(status);

/** Prisma `where` fragment: the worker is live. */
export const liveWorker: { status: { in: WorkerStatus[] } } = { status: { in: [...LIVE_WORKER_STATUSES] } };
