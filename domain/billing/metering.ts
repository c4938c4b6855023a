/**
 * Metering: a worker's running time as its one UsageRecord row, which billing (billing.ts) prices.
 */
import type { Db, Prisma } from '../shared/db.ts';

/** What metering needs of a worker row. */
const METERED_FIELDS = {
  id: true,
  startedAt: true,
  stoppedAt: true,
  standbySince: true,
  standbySeconds: true,
  endpointId: true,
  gpuUuids: true,
  gpuTypeId: true,
  cpuFlavorId: true,
  endpoint: { select: { accountId: true } },
  pod: { select: { accountId: true } },
} as const satisfies Prisma.WorkerSelect;
export type MeteredWorker = Prisma.WorkerGetPayload<{ select: typeof METERED_FIELDS }>;

/**
 * Meters a worker: its one usage row (id = the worker's id) runs from its container's start to its
 * stop, or to `now` while it runs, less the time it stood by frozen (FlashBoot standby is not billed). Written each time the worker is watched and when it ends, so
 * spend shows while a worker runs, and stays when the worker's row goes with its pod or endpoint.
 * Takes the worker's id, or its row when the caller has just read it.
 */
export async function meterWorker(
  db: Db | Prisma.TransactionClient,
  worker: string | MeteredWorker,
  now = new Date(),
): Promise<void> {
  const w =
    typeof worker === 'string' ? await db.worker.findUnique({ where: { id: worker }, select: METERED_FIELDS }) : worker;
  const accountId = w?.endpoint?.accountId ?? w?.pod?.accountId;
  if (!w?.startedAt || !accountId) return;
  const endedAt = w.stoppedAt ?? now;
  const standing = w.standbySince ? Math.max(0, (endedAt.getTime() - w.standbySince.getTime()) / 1000) : 0;
  const ran = (endedAt.getTime() - w.startedAt.getTime()) / 1000 - w.standbySeconds - standing;
  const usage = { endedAt, seconds: Math.max(0, ran) };
  await db.usageRecord.upsert({
    where: { id: w.id },
    create: {
      id: w.id,
      workerId: w.id,
      accountId,
      endpointId: w.endpointId,
      gpuTypeId: w.gpuTypeId,
      gpuCount: w.gpuUuids.length,
      cpuFlavorId: w.cpuFlavorId,
      startedAt: w.startedAt,
      ...usage,
    },
    update: usage,
  });
}
