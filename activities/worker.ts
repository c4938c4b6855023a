/**
 * Called by the worker workflow (workflows/worker.ts), which runs every endpoint worker and every
 * pod's worker. Worker side effects: placement (activities/worker-placement.ts), image pulls and
 * container start (activities/worker-start.ts), and here the checks that decide readiness and
 * health, draining, the container's stop, and the worker's final state.
 */
import { ApplicationFailure } from '@temporalio/activity';
import { meterWorker } from '../domain/billing/index.ts';
import { prismaSql, requeueLostJobs } from '../domain/jobs/index.ts';
import { lbWorkerInFlight, probeLbWorker } from '../domain/load-balancing/index.ts';
import { FINAL_WORKER_STATUSES, liveWorker } from '../domain/workers/index.ts';
import { containerLogTail, containerNameOf, inspectContainer, removeContainer } from '../hostctl/containers.ts';
import { heartbeating, hostHandle, sshTrouble, type OrchestrationRuntime } from './orchestration-runtime.ts';
import { createWorkerPlacementActivities } from './worker-placement.ts';
import { createWorkerStartActivities } from './worker-start.ts';
import { createWorkerStandbyActivities } from './worker-standby.ts';

export { POD_LABEL } from './worker-start.ts';
export type { PlacementResult } from './worker-placement.ts';

export type ReadyCheck =
  { state: 'ready' } | { state: 'waiting'; reason?: string } | { state: 'failed'; reason: string };
export type WatchResult =
  | { state: 'ok' }
  | { state: 'unknown'; reason: string }
  | { state: 'failed'; reason: string }
  | { state: 'stopped'; reason: string }
  | { state: 'gone' };

/** The container's last lines a failure reason carries, and at most how many characters of them (the newest kept). */
const EXIT_LOG_LINES = 10;
const EXIT_LOG_CHARS = 1500;

/** What the usual exit codes of a container's main process mean. */
const EXIT_CODE_MEANING: Record<number, string> = {
  125: 'the container runtime could not run it',
  126: 'its command could not be executed',
  127: 'its command was not found',
  137: 'killed: out of memory, or SIGKILL',
  139: 'segmentation fault',
  143: 'stopped by SIGTERM',
};

/**
 * Why a worker whose container exited failed: the exit code (with what it usually means) and the
 * container's last lines, bounded (EXIT_LOG_LINES, EXIT_LOG_CHARS) so the reason stays readable
 * wherever it is shown (the workers route, a job's status, GraphQL).
 */
export function exitReason(exitCode: number, when: string, tail: string): string {
  const meaning = EXIT_CODE_MEANING[exitCode];
  const lines = tail.split('\n').slice(-EXIT_LOG_LINES).join('\n').trim();
  const last = lines.length > EXIT_LOG_CHARS ? `…${lines.slice(-(EXIT_LOG_CHARS - 1))}` : lines;
  return (
    `the container exited with code ${exitCode}${meaning ? ` (${meaning})` : ''}${when ? ` ${when}` : ''}` +
    (last ? `; last output:\n${last}` : '')
  );
}

export function createWorkerActivities(rt: OrchestrationRuntime) {
  const { db } = rt;

  /**
   * A ready load-balancing worker's health check: the API processes only take a failing worker out
   * of their rotation; one that keeps failing for lbUnhealthySec (an app that hangs while its
   * container runs) is replaced here. 204 (initializing) counts as alive.
   */
  async function watchLbHealth(
    workerId: string,
    host: string,
    port: number,
    failingSince: Date | null,
  ): Promise<WatchResult> {
    const probe = await probeLbWorker(host, port);
    if (probe.state !== 'unhealthy') {
      if (failingSince) await db.worker.update({ where: { id: workerId }, data: { healthFailingSince: null } });
      return { state: 'ok' };
    }
    if (!failingSince) {
      await db.worker.update({ where: { id: workerId }, data: { healthFailingSince: new Date() } });
      return { state: 'ok' };
    }
    const failingSec = Math.round((Date.now() - failingSince.getTime()) / 1000);
    if (failingSec < rt.settings.lbUnhealthySec) return { state: 'ok' };
    return { state: 'failed', reason: `its health check kept failing for ${failingSec} s: ${probe.reason}` };
  }

  /** When each watched worker's disk was last measured (a throttle only: a restart measures sooner). */
  const diskCheckedAt = new Map<string, number>();
  function diskCheckDue(workerId: string): boolean {
    const last = diskCheckedAt.get(workerId) ?? 0;
    if (Date.now() - last < rt.settings.diskCheckIntervalSec * 1000) return false;
    if (diskCheckedAt.size > 100_000) diskCheckedAt.clear();
    diskCheckedAt.set(workerId, Date.now());
    return true;
  }

  /** The container disk (GB) a worker was started with: its release's for an endpoint worker, its pod's for a pod. */
  async function workerDiskGb(w: {
    endpointId: string | null;
    podId: string | null;
    releaseVersion: number;
  }): Promise<number> {
    if (w.podId)
      return (
        (await db.pod.findUnique({ where: { id: w.podId }, select: { containerDiskInGb: true } }))?.containerDiskInGb ??
        Infinity
      );
    const release = await db.release.findUnique({
      where: { endpointId_version: { endpointId: w.endpointId!, version: w.releaseVersion } },
      select: { disk: true },
    });
    return (
      release?.disk ??
      (await db.endpoint.findUnique({ where: { id: w.endpointId! }, select: { disk: true } }))?.disk ??
      Infinity
    );
  }

  const activities = {
    ...createWorkerPlacementActivities(rt),
    ...createWorkerStartActivities(rt),
    ...createWorkerStandbyActivities(rt),

    /**
     * Ready: a queue worker has spoken the worker protocol since its container started (the job API
     * moved it to IDLE or RUNNING, or it pinged, or it took a job); a load-balancing worker answers
     * 200 on its health path. Ready workers are IDLE; a pod's worker is RUNNING once its container
     * runs. A container that exited is a failure.
     */
    async checkWorkerReady(workerId: string): Promise<ReadyCheck> {
      const w = await db.worker.findUnique({
        where: { id: workerId },
        include: { endpoint: { select: { type: true } }, host: true },
      });
      if (!w) return { state: 'failed', reason: 'the worker record is gone' };
      if (w.status === 'IDLE' || w.status === 'RUNNING') return { state: 'ready' };
      if (w.status === 'UNHEALTHY')
        return { state: 'failed', reason: w.statusReason ?? 'the worker reported itself unhealthy' };
      const spoke =
        (w.lastPingAt && w.startedAt && w.lastPingAt >= w.startedAt) ||
        (await db.job.count({ where: { workerId }, take: 1 })) > 0;
      if (spoke && w.endpoint?.type !== 'LOAD_BALANCING') {
        await db.worker.updateMany({
          where: { id: workerId, status: 'INITIALIZING' },
          data: { status: 'IDLE', readyAt: new Date(), statusReason: null },
        });
        return { state: 'ready' };
      }
      if (!w.hostId || !w.host) return { state: 'failed', reason: 'the worker lost its host' };
      if (w.host.status === 'UNREACHABLE' || w.host.status === 'HOST_KEY_MISMATCH')
        return { state: 'failed', reason: `host ${w.host.name} is ${w.host.status}: ${w.host.statusReason ?? ''}` };
      // The container first: a health answer on its port counts only while the container runs (the
      // port could be another program's if the app failed to bind it).
      try {
        const h = await hostHandle(rt, w.hostId);
        const state = await inspectContainer(rt.pool, h, containerNameOf(workerId));
        if (!state) return { state: 'failed', reason: 'the container disappeared before the worker was ready' };
        if (!state.running) {
          const tail = await containerLogTail(rt.pool, h, containerNameOf(workerId), EXIT_LOG_LINES).catch(() => '');
          return { state: 'failed', reason: exitReason(state.exitCode, 'before the worker was ready', tail) };
        }
      } catch (err) {
        const ssh = await sshTrouble(db, w.hostId, err);
        if (ssh) return { state: 'waiting', reason: ssh };
        throw err;
      }
      // A pod is what its container runs: ready (RUNNING) once the container is.
      if (w.podId) {
        await db.worker.updateMany({
          where: { id: workerId, status: 'INITIALIZING' },
          data: { status: 'RUNNING', readyAt: new Date(), statusReason: null },
        });
        return { state: 'ready' };
      }
      if (
        w.endpoint?.type === 'LOAD_BALANCING' &&
        w.hostPort &&
        (await probeLbWorker(w.host.address, w.hostPort)).state === 'healthy'
      ) {
        await db.worker.updateMany({
          where: { id: workerId, status: 'INITIALIZING' },
          data: { status: 'IDLE', readyAt: new Date(), statusReason: null },
        });
        return { state: 'ready' };
      }
      return { state: 'waiting' };
    },

    async markWorkerReady(workerId: string): Promise<void> {
      await db.worker.updateMany({
        where: { id: workerId, readyAt: null },
        data: { readyAt: new Date(), statusReason: null },
      });
    },

    /**
     * A ready worker's health: its container runs, its host is reachable, it keeps pinging (queue
     * workers) or its health check keeps passing (load-balancing workers).
     */
    async inspectWorker(workerId: string): Promise<WatchResult> {
      const w = await db.worker.findUnique({
        where: { id: workerId },
        include: {
          host: true,
          endpoint: { select: { type: true, accountId: true } },
          pod: { select: { accountId: true } },
        },
      });
      if (!w) return { state: 'gone' };
      if (!w.hostId || !w.host) return { state: 'failed', reason: 'the worker lost its host' };
      if (w.host.status === 'UNREACHABLE' || w.host.status === 'HOST_KEY_MISMATCH') {
        return {
          state: 'failed',
          reason: `host ${w.host.name} is ${w.host.status}${w.host.statusReason ? `: ${w.host.statusReason}` : ''}`,
        };
      }
      if (w.status === 'UNHEALTHY')
        return { state: 'failed', reason: w.statusReason ?? 'the worker reported itself unhealthy' };
      // Only once a worker has pinged is its silence a sign of trouble (pings start with the SDK).
      if (w.lastPingAt && Date.now() - w.lastPingAt.getTime() > rt.settings.silentAfterSec * 1000) {
        return { state: 'failed', reason: `no ping for ${Math.round((Date.now() - w.lastPingAt.getTime()) / 1000)} s` };
      }
      try {
        const h = await hostHandle(rt, w.hostId);
        // Where the runtime cannot cap the container's disk, its writable layer is measured now and then.
        const measure = w.host.diskLimitMethod !== 'storage-opt' && diskCheckDue(workerId);
        const state = await inspectContainer(rt.pool, h, containerNameOf(workerId), { withSize: measure });
        if (!state) return { state: 'failed', reason: 'the container is gone' };
        if (state.running && state.writtenBytes !== undefined) {
          const diskGb = await workerDiskGb(w);
          if (state.writtenBytes > diskGb * 1024 ** 3) {
            return {
              state: 'failed',
              reason: `the container wrote ${(state.writtenBytes / 1024 ** 3).toFixed(2)} GB outside its volumes, more than its disk of ${diskGb} GB`,
            };
          }
        }
        if (!state.running) {
          // A worker that said it would leave (stopPod) and did is stopped, not failed.
          if (w.desiredStatus === 'EXITED' && state.exitCode === 0)
            return { state: 'stopped', reason: w.statusReason ?? 'the worker exited as it said it would' };
          const tail = await containerLogTail(rt.pool, h, containerNameOf(workerId), EXIT_LOG_LINES).catch(() => '');
          return { state: 'failed', reason: exitReason(state.exitCode, '', tail) };
        }
        await meterWorker(db, w);
        if (w.endpoint?.type === 'LOAD_BALANCING' && w.hostPort)
          return await watchLbHealth(w.id, w.host.address, w.hostPort, w.healthFailingSince);
        return { state: 'ok' };
      } catch (err) {
        const ssh = await sshTrouble(db, w.hostId, err);
        if (ssh) return { state: 'unknown', reason: ssh };
        throw err;
      }
    },

    /** No new jobs for this worker from now on (the job API hands jobs only to IDLE/RUNNING workers). */
    async beginDrain(workerId: string, reason: string): Promise<void> {
      await db.worker.updateMany({
        where: { id: workerId, ...liveWorker },
        data: { status: 'DRAINING', desiredStatus: 'EXITED', statusReason: reason },
      });
    },

    /** Jobs under way on the worker, or for a load-balancing worker the requests (and proxies) that still use it. */
    async workerJobsInFlight(workerId: string): Promise<number> {
      const w = await db.worker.findUnique({
        where: { id: workerId },
        select: { endpoint: { select: { type: true } } },
      });
      if (w?.endpoint?.type === 'LOAD_BALANCING') return lbWorkerInFlight(db, workerId);
      return db.job.count({ where: { workerId, status: 'IN_PROGRESS' } });
    },

    /** Stops and removes the container; answers false when the host cannot be reached (its reconcile removes it later). */
    async removeWorkerContainer(workerId: string): Promise<boolean> {
      const w = await db.worker.findUnique({ where: { id: workerId }, include: { host: true } });
      if (!w?.hostId || !w.host) return true;
      if (w.host.status === 'HOST_KEY_MISMATCH') return false;
      try {
        const h = await hostHandle(rt, w.hostId);
        await removeContainer(rt.pool, h, containerNameOf(workerId), rt.settings.stopGraceSec);
        return true;
      } catch (err) {
        if (err instanceof ApplicationFailure) return false;
        const ssh = await sshTrouble(db, w.hostId, err).catch(() => 'host key mismatch');
        if (ssh && w.host.status !== 'READY') return false;
        throw err;
      }
    },

    /** Final state: no credential, jobs it held back in the queue. */
    async finishWorker(
      workerId: string,
      outcome: { status: 'STOPPED' | 'FAILED'; reason: string },
    ): Promise<{ requeued: number }> {
      return db.$transaction(async (tx) => {
        // The worker is gone: its jobs go back to the queue, or fail at their last loss (domain/jobs/queue.ts).
        const requeued = (
          await requeueLostJobs(
            prismaSql(tx),
            { workerId },
            { tag: 'orchestration', retention: rt.platform.jobs.retention },
          )
        ).length;
        await tx.worker.updateMany({
          where: { id: workerId, status: { notIn: [...FINAL_WORKER_STATUSES] } },
          data: {
            status: outcome.status,
            statusReason: outcome.reason.slice(0, 4000),
            stoppedAt: new Date(),
            credentialHash: null,
            desiredStatus: 'TERMINATED',
          },
        });
        await meterWorker(tx, workerId);
        return { requeued };
      });
    },
  };
  // Each reaches a host over SSH and can take minutes: it heartbeats, so that one whose Temporal
  // worker died (kill -9, a lost machine) is retried elsewhere after the workflow's heartbeat
  // timeout instead of its whole start-to-close timeout (a drain or a release would wait that long).
  activities.startWorkerContainer = heartbeating(activities.startWorkerContainer);
  activities.checkWorkerReady = heartbeating(activities.checkWorkerReady);
  activities.inspectWorker = heartbeating(activities.inspectWorker);
  activities.removeWorkerContainer = heartbeating(activities.removeWorkerContainer);
  return activities;
}

export type WorkerActivities = ReturnType<typeof createWorkerActivities>;
