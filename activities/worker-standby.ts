/**
 * FlashBoot for the worker workflow (workflows/worker.ts): a worker its endpoint retires for
 * idleness stands by frozen on its host (the cgroup freezer: its process, its loaded model and its
 * GPU memory stay), and is thawed when its endpoint scales up again. Standbys are evicted by
 * placement (activities/worker-placement.ts) when another worker needs their room.
 *
 * Freeze and thaw take the placement lock: a standby is thawed or evicted, never both.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { JOB_CHANNEL } from '../domain/jobs/index.ts';
import { lbWorkerInFlight } from '../domain/load-balancing/index.ts';
import { meterWorker } from '../domain/billing/index.ts';
import type { Prisma } from '../generated/prisma/client.ts';
import { containerNameOf, pauseContainer, unpauseContainer } from '../hostctl/containers.ts';
import { hostHandle, type OrchestrationRuntime } from './orchestration-runtime.ts';
import { lockPlacement } from './worker-placement.ts';

export type FreezeResult =
  | {
      frozen: true;
      /** How long it may stand by; null: until evicted or ended (PRIORITY_FLASHBOOT). */ holdMs: number | null;
    }
  | { frozen: false; /** It took work meanwhile: it serves on. */ busy: boolean; reason: string };

export type ThawResult =
  { thawed: true } | { thawed: false; /** Evicted or ended before the thaw. */ evicted: boolean; reason: string };

/** How long a load-balancing worker marked for standby waits for the proxies to stop routing to it. */
const LB_LET_GO_MS = 10_000;

/** The reason a standby's row shows. */
export const STANDBY_REASON = 'standing by (FlashBoot): frozen on its host until its endpoint needs it';

/** Wakes the worker's waiting takes in every API process: they read its state again (worker-protocol.ts). */
const notifyWorkerChanged = (tx: Prisma.TransactionClient, workerId: string) =>
  tx.$executeRaw`select pg_notify(${JOB_CHANNEL}, ${`w:orchestration:${workerId}`})`;

export function createWorkerStandbyActivities(rt: OrchestrationRuntime) {
  const { db } = rt;

  const inFlight = async (workerId: string, loadBalancing: boolean): Promise<number> =>
    loadBalancing ? lbWorkerInFlight(db, workerId) : db.job.count({ where: { workerId, status: 'IN_PROGRESS' } });

  /** Back to serving (IDLE) after a freeze that could not be done or was overtaken by work. */
  const unfreeze = (workerId: string) =>
    db.$transaction(async (tx) => {
      const r = await tx.worker.updateMany({
        where: { id: workerId, status: 'STANDBY' },
        data: { status: 'IDLE', standbySince: null, statusReason: null },
      });
      if (r.count > 0) await notifyWorkerChanged(tx, workerId);
    });

  return {
    /**
     * Freezes an idle worker when its endpoint's FlashBoot allows: the endpoint's switch is on, the
     * worker is of the current release, holds no job, and its endpoint has fewer than workers.max
     * standbys. Marked STANDBY first (it takes no job from then on), then paused; a job taken in
     * the instant before the mark thaws it again (busy).
     */
    async freezeWorker(workerId: string): Promise<FreezeResult> {
      const decided = await db.$transaction(async (tx) => {
        await lockPlacement(tx);
        const w = await tx.worker.findUnique({ where: { id: workerId }, include: { endpoint: true, host: true } });
        const e = w?.endpoint;
        if (!w || !e || !w.hostId || !w.host) return { ok: false as const, reason: 'not an endpoint worker on a host' };
        const loadBalancing = e.type === 'LOAD_BALANCING';
        const mode = e.flashboot;
        // A retry after the mark was committed: finish the freeze.
        if (w.status === 'STANDBY') return { ok: true as const, hostId: w.hostId, loadBalancing, mode };
        if (mode === 'OFF') return { ok: false as const, reason: 'FlashBoot is off' };
        if (w.releaseVersion !== e.currentReleaseVersion)
          return { ok: false as const, reason: `release v${w.releaseVersion} is not the current one` };
        if (w.host.status !== 'READY') return { ok: false as const, reason: `host ${w.host.name} is ${w.host.status}` };
        if (w.status === 'RUNNING') return { ok: false as const, busy: true, reason: 'it is serving' };
        if (w.status !== 'IDLE') return { ok: false as const, reason: `it is ${w.status}` };
        const standing = await tx.worker.count({ where: { endpointId: e.id, status: 'STANDBY' } });
        if (standing >= e.workersMax)
          return { ok: false as const, reason: `its endpoint holds ${standing} standbys, its workers.max` };
        if (!loadBalancing && (await tx.job.count({ where: { workerId, status: 'IN_PROGRESS' } })) > 0)
          return { ok: false as const, busy: true, reason: 'it holds a job' };
        await tx.worker.update({
          where: { id: workerId },
          data: { status: 'STANDBY', standbySince: new Date(), statusReason: STANDBY_REASON },
        });
        await notifyWorkerChanged(tx, workerId);
        return { ok: true as const, hostId: w.hostId, loadBalancing, mode };
      });
      if (!decided.ok) return { frozen: false, busy: decided.busy ?? false, reason: decided.reason };

      // A load-balancing worker: the proxies drop it at their next look; what they sent it finishes.
      if (decided.loadBalancing) {
        const until = Date.now() + LB_LET_GO_MS;
        while ((await inFlight(workerId, true)) > 0 && Date.now() < until) await sleep(100);
        if ((await inFlight(workerId, true)) > 0) {
          await unfreeze(workerId);
          return { frozen: false, busy: true, reason: 'it kept serving requests' };
        }
      }
      const h = await hostHandle(rt, decided.hostId);
      try {
        await pauseContainer(rt.pool, h, containerNameOf(workerId));
      } catch (err) {
        await unfreeze(workerId);
        return {
          frozen: false,
          busy: false,
          reason: `could not freeze: ${err instanceof Error ? err.message : String(err)}`,
        };
      }
      // A job taken just before the mark: it serves on.
      if (!decided.loadBalancing && (await inFlight(workerId, false)) > 0) {
        await unpauseContainer(rt.pool, h, containerNameOf(workerId));
        await unfreeze(workerId);
        return { frozen: false, busy: true, reason: 'it took a job as it froze' };
      }
      // Its usage ends here; standby time is not billed (domain/billing/metering.ts).
      await meterWorker(db, workerId);
      return {
        frozen: true,
        holdMs: decided.mode === 'PRIORITY_FLASHBOOT' ? null : rt.settings.flashbootStandbySec * 1000,
      };
    },

    /**
     * Thaws a standby: IDLE again (its takes are woken to take at once; its idle time and pings count
     * from now), then unpaused. Not thawed when placement evicted it first.
     */
    async thawStandbyWorker(workerId: string): Promise<ThawResult> {
      const claimed = await db.$transaction(async (tx) => {
        await lockPlacement(tx);
        const w = await tx.worker.findUnique({
          where: { id: workerId },
          select: {
            status: true,
            statusReason: true,
            hostId: true,
            standbySince: true,
            readyAt: true,
            firstReadyAt: true,
          },
        });
        if (!w) return { ok: false as const, reason: 'the worker record is gone' };
        // A retry after the thaw was committed: make sure it runs.
        if ((w.status === 'IDLE' || w.status === 'RUNNING') && w.hostId) return { ok: true as const, hostId: w.hostId };
        if (w.status !== 'STANDBY' || !w.hostId)
          return { ok: false as const, reason: w.statusReason ?? `it is ${w.status}` };
        const now = new Date();
        const stood = w.standbySince ? Math.max(0, (now.getTime() - w.standbySince.getTime()) / 1000) : 0;
        await tx.worker.update({
          where: { id: workerId },
          data: {
            status: 'IDLE',
            desiredStatus: 'RUNNING',
            statusReason: null,
            readyAt: now,
            // The readiness this thaw replaces, kept at the first thaw: a thaw is no cold start
            // (domain/metrics/rollup.ts counts it apart).
            firstReadyAt: w.firstReadyAt ?? w.readyAt,
            lastPingAt: now,
            healthFailingSince: null,
            standbySince: null,
            standbySeconds: { increment: stood },
          },
        });
        await notifyWorkerChanged(tx, workerId);
        return { ok: true as const, hostId: w.hostId };
      });
      if (!claimed.ok) return { thawed: false, evicted: true, reason: claimed.reason };
      try {
        await unpauseContainer(rt.pool, await hostHandle(rt, claimed.hostId), containerNameOf(workerId));
      } catch (err) {
        return { thawed: false, evicted: false, reason: err instanceof Error ? err.message : String(err) };
      }
      return { thawed: true };
    },
  };
}
