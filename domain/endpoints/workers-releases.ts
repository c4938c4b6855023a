/**
 * What an endpoint runs: its workers (GET /v2/serverless/{id}/workers) and its releases with the
 * rollout between them (GET /v2/serverless/{id}/releases), in their public states.
 */
import type { WorkerStatus } from '../../generated/prisma/client.ts';
import { requireScope, type Principal } from '../accounts/auth.ts';
import type { DomainContext } from '../context.ts';
import {
  type ListEndpointReleasesResponse,
  type ListEndpointWorkersResponse,
  type ReleaseDiffEntry,
  type WorkerSummary,
  type WorkerView,
} from './schemas.ts';
import { findOwned } from './endpoints.ts';
import { prismaSql } from '../jobs/lost-workers.ts';
import { endpointWorkerProblem } from './worker-problem.ts';
import { workerImagesOnHosts } from './image-prepull.ts';

type PublicWorkerStatus = WorkerView['status'];

/** Stored lifecycle state → public state; stopped and failed workers are not listed. */
const PUBLIC_WORKER_STATUS: Record<WorkerStatus, PublicWorkerStatus | null> = {
  PENDING: 'THROTTLED', // waiting for capacity
  INITIALIZING: 'INITIALIZING',
  IDLE: 'IDLE',
  RUNNING: 'RUNNING',
  UNHEALTHY: 'UNHEALTHY',
  DRAINING: 'RUNNING', // finishing its jobs before it stops
  STANDBY: 'STANDBY', // FlashBoot: frozen on its host, thawed when work comes
  STOPPED: null,
  FAILED: null,
};
/** A worker's public state (the REST worker list's, GraphQL's `workerStatus`); null once it stopped or failed. */
export const publicWorkerStatus = (status: WorkerStatus): PublicWorkerStatus | null => PUBLIC_WORKER_STATUS[status];

const LISTED_WORKER_STATUSES = (Object.keys(PUBLIC_WORKER_STATUS) as WorkerStatus[]).filter(
  (s) => PUBLIC_WORKER_STATUS[s] !== null,
);

const emptySummary = (): WorkerSummary => ({
  running: 0,
  idle: 0,
  initializing: 0,
  throttled: 0,
  unhealthy: 0,
  standby: 0,
  total: 0,
});

function countInto(summary: WorkerSummary, status: PublicWorkerStatus, n = 1): void {
  summary[status.toLowerCase() as Exclude<keyof WorkerSummary, 'total'>] += n;
  summary.total += n;
}

/** GET /v2/serverless/{id}/workers: the endpoint's allocated workers (not stopped or failed). */
export async function listEndpointWorkers(
  ctx: DomainContext,
  principal: Principal,
  id: string,
): Promise<ListEndpointWorkersResponse> {
  requireScope(principal, 'READ');
  const endpoint = await findOwned(ctx, principal, id);
  const [workers, releases] = await Promise.all([
    ctx.db.worker.findMany({
      where: { endpointId: id, status: { in: LISTED_WORKER_STATUSES } },
      include: { host: { select: { dataCenterId: true } } },
      orderBy: { createdAt: 'asc' },
    }),
    ctx.db.release.findMany({ where: { endpointId: id }, select: { version: true, image: true } }),
  ]);
  const imageOf = new Map(releases.map((r) => [r.version, r.image]));
  // The last job each took (by the workerId index), among the jobs still kept.
  const lastJobs = await ctx.db.job.groupBy({
    by: ['workerId'],
    where: { workerId: { in: workers.map((w) => w.id) } },
    _max: { startedAt: true },
  });
  const lastJobAt = new Map(lastJobs.map((j) => [j.workerId, j._max.startedAt]));
  const onHost = await workerImagesOnHosts(ctx, endpoint, workers);
  const summary = emptySummary();
  const now = Date.now();
  const views = workers.map((w): WorkerView => {
    const status = PUBLIC_WORKER_STATUS[w.status] as PublicWorkerStatus;
    countInto(summary, status);
    const placedGpus =
      w.gpuUuids.length > 0 ? w.gpuUuids.length : endpoint.gpuPools.length > 0 ? (endpoint.gpuCount ?? 1) : 0;
    return {
      id: w.id,
      status,
      isStale: w.releaseVersion !== endpoint.currentReleaseVersion,
      version: w.releaseVersion,
      gpuCount: placedGpus,
      image: imageOf.get(w.releaseVersion) ?? null,
      uptimeSeconds: w.startedAt ? Math.max(0, Math.floor((now - w.startedAt.getTime()) / 1000)) : null,
      gpuTypeId: w.gpuTypeId,
      dataCenterId: w.host?.dataCenterId ?? null,
      hostId: principal.isAdmin ? w.hostId : null,
      lastJobAt: lastJobAt.get(w.id)?.toISOString() ?? null,
      startedAt: w.startedAt?.toISOString() ?? null,
      statusReason: w.statusReason,
      imageOnHostSince: onHost.get(w.id)?.imageOnHostSince ?? null,
      imagePulledAhead: onHost.get(w.id)?.imagePulledAhead ?? false,
    };
  });
  const [failure, problem] = await Promise.all([
    lastFailure(ctx, id, endpoint.currentReleaseVersion, workers),
    endpointWorkerProblem(prismaSql(ctx.db), id),
  ]);
  return {
    endpointVersion: endpoint.currentReleaseVersion,
    summary,
    workers: views,
    lastFailure: failure,
    workerProblem: problem,
  };
}

/**
 * The newest failed worker of the current release while none of it is ready (IDLE or RUNNING): a
 * worker that could not get its image or start says so here, where a user looks, instead of
 * leaving the endpoint's jobs IN_QUEUE with the reason in a log.
 */
async function lastFailure(
  ctx: DomainContext,
  endpointId: string,
  version: number,
  listed: readonly { releaseVersion: number; status: WorkerStatus }[],
): Promise<ListEndpointWorkersResponse['lastFailure']> {
  if (listed.some((w) => w.releaseVersion === version && (w.status === 'IDLE' || w.status === 'RUNNING'))) return null;
  const failed = await ctx.db.worker.findFirst({
    where: { endpointId, releaseVersion: version, status: 'FAILED' },
    orderBy: { stoppedAt: 'desc' },
    select: { id: true, releaseVersion: true, statusReason: true, stoppedAt: true, createdAt: true },
  });
  if (!failed) return null;
  return {
    workerId: failed.id,
    version: failed.releaseVersion,
    failedAt: (failed.stoppedAt ?? failed.createdAt).toISOString(),
    reason: failed.statusReason ?? 'failed (no reason recorded)',
  };
}

/**
 * The worker problem of an endpoint the caller was already allowed to read (GraphQL's
 * Endpoint.workerProblem resolves it for each endpoint record it answers).
 */
export function workerProblemOfEndpoint(ctx: Pick<DomainContext, 'db'>, endpointId: string) {
  return endpointWorkerProblem(prismaSql(ctx.db), endpointId);
}

/** GET /v2/serverless/{id}/releases (listEndpointReleases): newest first, with a rollout summary. */
export async function listEndpointReleases(
  ctx: DomainContext,
  principal: Principal,
  id: string,
): Promise<ListEndpointReleasesResponse> {
  requireScope(principal, 'READ');
  const endpoint = await findOwned(ctx, principal, id);
  const [releases, counts] = await Promise.all([
    ctx.db.release.findMany({ where: { endpointId: id }, orderBy: { version: 'desc' } }),
    ctx.db.worker.groupBy({
      by: ['releaseVersion', 'status'],
      where: { endpointId: id, status: { in: LISTED_WORKER_STATUSES } },
      _count: { _all: true },
    }),
  ]);
  const byVersion = new Map<number, WorkerSummary>();
  const total = emptySummary();
  for (const c of counts) {
    const status = PUBLIC_WORKER_STATUS[c.status] as PublicWorkerStatus;
    let summary = byVersion.get(c.releaseVersion);
    if (!summary) byVersion.set(c.releaseVersion, (summary = emptySummary()));
    countInto(summary, status, c._count._all);
    countInto(total, status, c._count._all);
  }
  const onLatest = byVersion.get(endpoint.currentReleaseVersion)?.total ?? 0;
  return {
    endpointVersion: endpoint.currentReleaseVersion,
    rollout: {
      inProgress: total.total > onLatest,
      currentVersion: endpoint.currentReleaseVersion,
      workersOnLatest: onLatest,
      workersOnOlder: total.total - onLatest,
      workersTotal: total.total,
      percentOnLatest: total.total === 0 ? 0 : Math.round((onLatest * 100) / total.total),
    },
    releases: releases.map((r) => {
      const workers = byVersion.get(r.version) ?? emptySummary();
      return {
        id: r.id,
        version: r.version,
        source: 'MANUAL' as const,
        buildId: null,
        createdByUserId: null,
        status: r.status,
        statusReason: r.statusReason,
        createdAt: r.createdAt.toISOString(),
        finishedAt: r.finishedAt?.toISOString() ?? null,
        workerCount: workers.total,
        workers,
        diff: Array.isArray(r.changes) ? (r.changes as ReleaseDiffEntry[]) : [],
      };
    }),
  };
}
