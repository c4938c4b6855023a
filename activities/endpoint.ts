/**
 * Called by the endpoint workflow (workflows/endpoint.ts): its row, and the workers the autoscaler
 * counts and starts. The rollout workflow reads the same scaling state and writes worker rows too.
 */
import { WorkflowNotFoundError } from '@temporalio/client';
import { Prisma, type Endpoint } from '../generated/prisma/client.ts';
import { ENDPOINT_DELETED, type QueueStats, type ScalingWorker } from '../domain/endpoints/index.ts';
import { lbEndpointLoad } from '../domain/load-balancing/index.ts';
import { FINAL_WORKER_STATUSES_SQL } from '../domain/workers/index.ts';
import { jobChanged, jobWorkflowId, workerWorkflowId, type EndpointSpec } from '../contracts/workflows.ts';
import { snapshotOf, type JobRow } from '../domain/jobs/index.ts';
import type { OrchestrationRuntime } from './orchestration-runtime.ts';

/** Signals sent at once while an endpoint's jobs are told it is gone. */
const SIGNALS_AT_ONCE = 16;

async function mapLimited<T>(items: T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const lanes = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) await fn(items[next++]!);
  });
  await Promise.all(lanes);
}

/** The part of an endpoint's row its workflow executes. */
export function endpointSpecOf(e: Endpoint): EndpointSpec {
  return {
    endpointId: e.id,
    workersMin: e.workersMin,
    workersMax: e.workersMax,
    scalerType: e.scalerType,
    scalerValue: e.scalerValue,
    idleTimeout: e.idleTimeout,
    timeoutMs: e.timeoutMs,
    releaseVersion: e.currentReleaseVersion,
    flashboot: e.flashboot,
  };
}

export interface EndpointScalingState {
  queue: QueueStats;
  workers: Array<ScalingWorker & { status: string; hostId: string | null; ready: boolean }>;
  /** False once the endpoint row is gone. */
  exists: boolean;
}

/** Side effects of the endpoint workflow: the database, and Temporal for its workers' workflows. */
export function createEndpointActivities(rt: Pick<OrchestrationRuntime, 'db' | 'temporal'>) {
  const { db } = rt;
  return {
    /** The first read of a new run (retried until the row can be read). */
    async loadEndpointSpec(endpointId: string): Promise<EndpointSpec> {
      return endpointSpecOf(await db.endpoint.findUniqueOrThrow({ where: { id: endpointId } }));
    },

    /** The read after `endpointChanged`: the row is the truth. Null once the row is gone. */
    async readEndpointSpec(endpointId: string): Promise<EndpointSpec | null> {
      const e = await db.endpoint.findUnique({ where: { id: endpointId } });
      return e ? endpointSpecOf(e) : null;
    },

    /**
     * The endpoint's jobs go with its row; their workflows must not wait for timers meant for jobs
     * that no longer exist. The deletion cancelled the queued ones with the reason; any still marked
     * running (its worker lost) is cancelled here too; each workflow is told (it ends at once: the
     * state is final), then the row goes. Repeatable: a retry finds the cancelled jobs and tells their
     * workflows again.
     */
    async removeEndpointRecord(endpointId: string): Promise<void> {
      await db.$executeRaw`
        update "Job" set status = 'CANCELLED', error = ${ENDPOINT_DELETED}, "completedAt" = now(), seq = seq + 1
        where "endpointId" = ${endpointId} and status in ('IN_QUEUE', 'IN_PROGRESS')`;
      const cancelled = await db.$queryRaw<JobRow[]>`
        select id, seq, status, "createdAt", "ttlMs", "startedAt", "lastSeenAt", "executionTimeoutMs", webhook, "webhookDeliveredAt"
        from "Job" where "endpointId" = ${endpointId} and status = 'CANCELLED' and error = ${ENDPOINT_DELETED}`;
      await mapLimited(cancelled, SIGNALS_AT_ONCE, async (job) => {
        await rt.temporal.workflow
          .getHandle(jobWorkflowId(job.id))
          .signal(jobChanged, snapshotOf(job, 0))
          .catch((err: unknown) => {
            // Not started yet (its first signal is still held back): it starts, finds no row and ends.
            if (!(err instanceof WorkflowNotFoundError)) throw err;
          });
      });
      await db.endpoint.deleteMany({ where: { id: endpointId } });
    },

    /**
     * Rows for workers about to be started (PENDING), so that the autoscaler counts them at once.
     * Also called by the rollout workflow (a new release's workers) and by the worker workflow (when
     * its starter did not write the row).
     */
    async createWorkerRecords(input: {
      endpointId: string;
      releaseVersion: number;
      workerIds: string[];
    }): Promise<number> {
      const endpoint = await db.endpoint.findUnique({ where: { id: input.endpointId }, select: { id: true } });
      if (!endpoint) return 0;
      const r = await db.worker.createMany({
        data: input.workerIds.map((id) => ({
          id,
          endpointId: input.endpointId,
          releaseVersion: input.releaseVersion,
          status: 'PENDING' as const,
          statusReason: 'waiting for placement',
        })),
        skipDuplicates: true,
      });
      return r.count;
    },

    /**
     * What the autoscaler and rollouts decide on: queue numbers from the Job table (lowPriority
     * apart) and the endpoint's live workers with how long each has been idle. Two queries; a
     * load-balancing endpoint reads its requests from what the API processes publish instead
     * (requests waiting for a worker count as queued, requests under way as in progress). Also
     * called by the rollout workflow.
     */
    async endpointScalingState(endpointId: string): Promise<EndpointScalingState> {
      const [stats] = await db.$queryRaw<
        Array<{
          queued: bigint;
          queued_low: bigint;
          in_progress: bigint;
          oldest_age_ms: number | null;
          exists: boolean;
          type: string | null;
        }>
      >`
        select
          (select e.type::text from "Endpoint" e where e.id = ${endpointId}) as type,
          count(*) filter (where j.status = 'IN_QUEUE' and not j."lowPriority") as queued,
          count(*) filter (where j.status = 'IN_QUEUE' and j."lowPriority") as queued_low,
          count(*) filter (where j.status = 'IN_PROGRESS') as in_progress,
          (extract(epoch from (now() - min(j."createdAt") filter (where j.status = 'IN_QUEUE' and not j."lowPriority"))) * 1000)::float8 as oldest_age_ms,
          exists(select 1 from "Endpoint" e where e.id = ${endpointId}) as exists
        from "Job" j
        where j."endpointId" = ${endpointId} and j.status in ('IN_QUEUE', 'IN_PROGRESS') and (j.status = 'IN_PROGRESS' or j."expiresAt" > now())`;
      const workers = await db.$queryRaw<
        Array<{
          id: string;
          status: string;
          releaseVersion: number;
          hostId: string | null;
          in_flight: bigint;
          idle_ms: number | null;
        }>
      >`
        select w.id, w.status::text as status, w."releaseVersion", w."hostId",
          (select count(*) from "Job" j where j."workerId" = w.id and j.status = 'IN_PROGRESS') as in_flight,
          (extract(epoch from (now() - greatest(w."readyAt", (select max(coalesce(j."completedAt", j."startedAt")) from "Job" j where j."workerId" = w.id)))) * 1000)::float8 as idle_ms
        from "Worker" w
        where w."endpointId" = ${endpointId} and w.status not in (${Prisma.raw(FINAL_WORKER_STATUSES_SQL)})`;
      const lb = stats?.type === 'LOAD_BALANCING' ? await lbEndpointLoad(db, endpointId) : null;
      const queue: QueueStats = lb
        ? { queued: lb.waiting, queuedLowPriority: 0, inProgress: lb.inFlight, oldestQueuedAgeMs: lb.oldestWaitMs }
        : {
            queued: Number(stats?.queued ?? 0),
            queuedLowPriority: Number(stats?.queued_low ?? 0),
            inProgress: Number(stats?.in_progress ?? 0),
            oldestQueuedAgeMs: stats?.oldest_age_ms ?? null,
          };
      return {
        exists: stats?.exists ?? false,
        queue,
        workers: workers.map((w) => {
          const load = lb?.workers[w.id];
          const inFlight = load ? load.inFlight : Number(w.in_flight);
          // Idle since it became ready or since its last request, whichever is later.
          const idleMs = load?.idleForMs != null ? Math.min(load.idleForMs, w.idle_ms ?? Infinity) : w.idle_ms;
          const ready = w.status === 'IDLE' || w.status === 'RUNNING';
          const busy = inFlight > 0 || w.status === 'RUNNING';
          const state: ScalingWorker['state'] =
            w.status === 'DRAINING'
              ? 'draining'
              : w.status === 'STANDBY'
                ? 'standby'
                : !ready
                  ? 'starting'
                  : busy
                    ? 'busy'
                    : 'idle';
          return {
            id: w.id,
            status: w.status,
            hostId: w.hostId,
            ready,
            state,
            releaseVersion: w.releaseVersion,
            idleForMs: state === 'idle' ? Math.max(0, idleMs ?? 0) : 0,
          };
        }),
      };
    },

    /**
     * Closes workers that wait for placement (PENDING, no host) although their workflow is gone
     * (terminated by hand, say): they would hold a place in the autoscaler's count for ever. Placed
     * workers are the hosts' reconciles' business.
     */
    async closeOrphanWorkers(endpointId: string): Promise<string[]> {
      const rows = await db.worker.findMany({
        where: { endpointId, hostId: null, status: 'PENDING', createdAt: { lt: new Date(Date.now() - 60_000) } },
        select: { id: true },
      });
      const closed: string[] = [];
      for (const { id } of rows) {
        let running = false;
        try {
          running = (await rt.temporal.workflow.getHandle(workerWorkflowId(id)).describe()).status.name === 'RUNNING';
        } catch (err) {
          if (!(err instanceof WorkflowNotFoundError)) throw err;
        }
        if (running) continue;
        await db.worker.updateMany({
          where: { id, status: 'PENDING' },
          data: {
            status: 'FAILED',
            statusReason: 'its workflow was gone',
            stoppedAt: new Date(),
            credentialHash: null,
            desiredStatus: 'TERMINATED',
          },
        });
        closed.push(id);
      }
      return closed;
    },
  };
}

export type EndpointActivities = ReturnType<typeof createEndpointActivities>;
