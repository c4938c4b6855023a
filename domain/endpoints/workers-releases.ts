/**
 * What an endpoint runs: its workers (GET /v2/serverless/{id}/workers) and its releases with the
 * rollout between them (GET /v2/serverless/{id}/releases), in their public states. The REST shapes
 * are api/routes/shapes/endpoint-worker.ts and api/routes/shapes/release.ts.
 */
import type { Release, Worker, WorkerStatus } from '../../generated/prisma/client.ts';
import { requireScope, type Principal } from '../accounts/auth.ts';
import type { DomainContext } from '../context.ts';
import type { ReleaseDiffEntry } from './schemas.ts';
import { findOwned } from './endpoints.ts';
import { prismaSql } from '../jobs/lost-workers.ts';
import { endpointWorkerProblem, type WorkerProblem } from './worker-problem.ts';
import { workerImagesOnHosts, type WorkerImageOnHost } from './image-prepull.ts';

/**
 * The public worker states; the stored lifecycle states map onto these. STANDBY: FlashBoot froze it
 * on its host when it went idle; it is thawed (in well under a second) when work comes, takes no job
 * until then, and is not billed.
 */
export type PublicWorkerStatus = 'RUNNING' | 'IDLE' | 'INITIALIZING' | 'THROTTLED' | 'UNHEALTHY' | 'STANDBY';

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

/** Counts of listed workers by public state; `total` is their sum. */
export interface WorkerCounts {
  running: number;
  idle: number;
  initializing: number;
  throttled: number;
  unhealthy: number;
  standby: number;
  total: number;
}

const noWorkers = (): WorkerCounts => ({
  running: 0,
  idle: 0,
  initializing: 0,
  throttled: 0,
  unhealthy: 0,
  standby: 0,
  total: 0,
});

function countInto(counts: WorkerCounts, status: PublicWorkerStatus, n = 1): void {
  counts[status.toLowerCase() as Exclude<keyof WorkerCounts, 'total'>] += n;
  counts.total += n;
}

/** A listed worker: its row and what the worker list shows of it. */
export interface EndpointWorkerModel {
  row: Worker & { host: { dataCenterId: string } | null };
  status: PublicWorkerStatus;
  /** It runs an older release than the endpoint's current one. */
  isStale: boolean;
  /** The GPUs it holds once placed; until then those the endpoint asks for (none for a CPU endpoint). */
  gpuCount: number;
  /** Its release's image; null when that release is not found. */
  image: string | null;
  uptimeSeconds: number | null;
  /** Its host for the platform admin; null for others (which machine tenants share is the operator's to know). */
  hostId: string | null;
  /** When it last took a job, among the jobs still kept. */
  lastJobAt: Date | null;
  imageOnHost: WorkerImageOnHost | undefined;
}

/** The newest failed worker of the current release while none of it is ready. */
export interface WorkerFailure {
  workerId: string;
  version: number;
  failedAt: Date;
  reason: string;
}

/** An endpoint's listed workers (not stopped or failed), their counts and why none can serve, if so. */
export interface EndpointWorkersModel {
  endpointVersion: number;
  summary: WorkerCounts;
  workers: EndpointWorkerModel[];
  lastFailure: WorkerFailure | null;
  workerProblem: WorkerProblem | null;
}

/** GET /v2/serverless/{id}/workers: the endpoint's allocated workers (not stopped or failed). */
export async function listEndpointWorkers(
  ctx: DomainContext,
  principal: Principal,
  id: string,
): Promise<EndpointWorkersModel> {
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
  const lastJobAt = await lastJobTimes(ctx, workers);
  const onHost = await workerImagesOnHosts(ctx, endpoint, workers);
  const now = Date.now();
  const models = workers.map((w): EndpointWorkerModel => {
    const status = PUBLIC_WORKER_STATUS[w.status] as PublicWorkerStatus;
    const placedGpus =
      w.gpuUuids.length > 0 ? w.gpuUuids.length : endpoint.gpuPools.length > 0 ? (endpoint.gpuCount ?? 1) : 0;
    return {
      row: w,
      status,
      isStale: w.releaseVersion !== endpoint.currentReleaseVersion,
      gpuCount: placedGpus,
      image: imageOf.get(w.releaseVersion) ?? null,
      uptimeSeconds: w.startedAt ? Math.max(0, Math.floor((now - w.startedAt.getTime()) / 1000)) : null,
      hostId: principal.isAdmin ? w.hostId : null,
      lastJobAt: lastJobAt.get(w.id) ?? null,
      imageOnHost: onHost.get(w.id),
    };
  });
  const summary = noWorkers();
  for (const w of models) countInto(summary, w.status);
  const [failure, problem] = await Promise.all([
    lastFailure(ctx, id, endpoint.currentReleaseVersion, workers),
    endpointWorkerProblem(prismaSql(ctx.db), id),
  ]);
  return {
    endpointVersion: endpoint.currentReleaseVersion,
    summary,
    workers: models,
    lastFailure: failure,
    workerProblem: problem,
  };
}

/** The last job each worker took (by the workerId index), among the jobs still kept. */
async function lastJobTimes(ctx: DomainContext, workers: readonly { id: string }[]) {
  const lastJobs = await ctx.db.job.groupBy({
    by: ['workerId'],
    where: { workerId: { in: workers.map((w) => w.id) } },
    _max: { startedAt: true },
  });
  return new Map(lastJobs.map((j) => [j.workerId, j._max.startedAt]));
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
): Promise<WorkerFailure | null> {
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
    failedAt: failed.stoppedAt ?? failed.createdAt,
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

/** A release: its row, the listed workers on it and what changed from the previous one. */
export interface ReleaseModel {
  row: Release;
  /** Listed workers on this release by public state. */
  workers: WorkerCounts;
  /** Container fields that changed from the previous release. */
  diff: ReleaseDiffEntry[];
}

/** How far the current release has rolled out over the listed workers. */
export interface RolloutModel {
  /** True while any worker still runs an older release. */
  inProgress: boolean;
  currentVersion: number;
  workersOnLatest: number;
  workersOnOlder: number;
  workersTotal: number;
  /** Share of workers on the current release in percent, 0 when there are none. */
  percentOnLatest: number;
}

/** An endpoint's releases, newest first, and the rollout of its current one. */
export interface EndpointReleasesModel {
  endpointVersion: number;
  rollout: RolloutModel;
  releases: ReleaseModel[];
}

/** GET /v2/serverless/{id}/releases (listEndpointReleases): newest first, with a rollout summary. */
export async function listEndpointReleases(
  ctx: DomainContext,
  principal: Principal,
  id: string,
): Promise<EndpointReleasesModel> {
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
  const byVersion = new Map<number, WorkerCounts>();
  const total = noWorkers();
  for (const c of counts) {
    const status = PUBLIC_WORKER_STATUS[c.status] as PublicWorkerStatus;
    let onVersion = byVersion.get(c.releaseVersion);
    if (!onVersion) byVersion.set(c.releaseVersion, (onVersion = noWorkers()));
    countInto(onVersion, status, c._count._all);
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
    releases: releases.map((r) => ({
      row: r,
      workers: byVersion.get(r.version) ?? noWorkers(),
      diff: Array.isArray(r.changes) ? (r.changes as ReleaseDiffEntry[]) : [],
    })),
  };
}
