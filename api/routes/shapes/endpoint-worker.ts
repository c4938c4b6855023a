import { Type, type Static } from 'typebox';
import {
  nullableWorkerProblemSchema,
  type EndpointWorkerModel,
  type EndpointWorkersModel,
  type WorkerCounts,
} from '../../../domain/endpoints/index.ts';

/** An endpoint's workers in REST v2 (`GET /v2/serverless/{id}/workers`), with their counts by public state. */
/**
 * The public worker states; the stored lifecycle states map onto these. STANDBY: FlashBoot froze it
 * on its host when it went idle; it is thawed (in well under a second) when work comes, takes no job
 * until then, and is not billed.
 */
export const WorkerStatusSchema = Type.Union([
  Type.Literal('RUNNING'),
  Type.Literal('IDLE'),
  Type.Literal('INITIALIZING'),
  Type.Literal('THROTTLED'),
  Type.Literal('UNHEALTHY'),
  Type.Literal('STANDBY'),
]);

/** Counts of workers by public state; `total` is their sum. */
export const WorkerSummarySchema = Type.Object({
  running: Type.Integer({ minimum: 0 }),
  idle: Type.Integer({ minimum: 0 }),
  initializing: Type.Integer({ minimum: 0 }),
  throttled: Type.Integer({ minimum: 0 }),
  unhealthy: Type.Integer({ minimum: 0 }),
  standby: Type.Integer({ minimum: 0 }),
  total: Type.Integer({ minimum: 0 }),
});
export type WorkerSummary = Static<typeof WorkerSummarySchema>;

const NullableString = Type.Union([Type.String(), Type.Null()]);
const NullableInteger = Type.Union([Type.Integer(), Type.Null()]);

export const WorkerViewSchema = Type.Object({
  id: Type.String(),
  status: WorkerStatusSchema,
  /** True when the worker runs an older release than the endpoint's current one. */
  isStale: Type.Boolean(),
  version: NullableInteger,
  gpuCount: Type.Integer({ minimum: 0 }),
  image: NullableString,
  uptimeSeconds: NullableInteger,
  gpuTypeId: NullableString,
  dataCenterId: NullableString,
  hostId: Type.Union([Type.String(), Type.Null()], {
    description:
      "the host it runs on, for the platform admin's key only (null for others: which machine tenants share is the operator's to know)",
  }),
  lastJobAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], {
    description: 'when the worker last took a job, among the jobs still kept (null: none)',
  }),
  startedAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  /**
   * Why the worker is in its state: what placement lacks while THROTTLED, what a starting worker
   * waits for, why it drains or is unhealthy; null once it is ready.
   */
  statusReason: NullableString,
  imageOnHostSince: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], {
    description:
      "since when the worker's host has had the worker's image for this account (pulled with its credential, or built there); null until Gantry has put it there for this account (the worker then pulls it as it starts)",
  }),
  imagePulledAhead: Type.Boolean({
    description:
      'true when a pre-pull put the image on the host ahead of any worker (GANTRY_PREPULL_HOSTS): a cold start there pays no pull',
  }),
});
export type WorkerView = Static<typeof WorkerViewSchema>;

export const WorkerFailureSchema = Type.Object({
  workerId: Type.String(),
  version: Type.Integer(),
  failedAt: Type.String({ format: 'date-time' }),
  /** What went wrong, as the worker's lifecycle recorded it: the image that could not be had and why, ... */
  reason: Type.String(),
});

export const ListEndpointWorkersResponseSchema = Type.Object({
  endpointVersion: NullableInteger,
  summary: WorkerSummarySchema,
  workers: Type.Array(WorkerViewSchema),
  /**
   * The newest worker of the current release that failed, while none of that release's workers is
   * ready: why the endpoint is not serving (failed workers are not listed above). Null otherwise.
   */
  lastFailure: Type.Union([WorkerFailureSchema, Type.Null()]),
  /**
   * Why no worker of the current release can run right now: an image it cannot get, a container
   * that exits before it is ready, a worker no host can take. Null once one of them is IDLE or RUNNING.
   */
  workerProblem: nullableWorkerProblemSchema(),
});
export type ListEndpointWorkersResponse = Static<typeof ListEndpointWorkersResponseSchema>;

/** The counts by public state, in the summary's order. */
export function workerSummaryView(c: WorkerCounts): WorkerSummary {
  return {
    running: c.running,
    idle: c.idle,
    initializing: c.initializing,
    throttled: c.throttled,
    unhealthy: c.unhealthy,
    standby: c.standby,
    total: c.total,
  };
}

function workerView(w: EndpointWorkerModel): WorkerView {
  const { row } = w;
  return {
    id: row.id,
    status: w.status,
    isStale: w.isStale,
    version: row.releaseVersion,
    gpuCount: w.gpuCount,
    image: w.image,
    uptimeSeconds: w.uptimeSeconds,
    gpuTypeId: row.gpuTypeId,
    dataCenterId: row.host?.dataCenterId ?? null,
    hostId: w.hostId,
    lastJobAt: w.lastJobAt?.toISOString() ?? null,
    startedAt: row.startedAt?.toISOString() ?? null,
    statusReason: row.statusReason,
    imageOnHostSince: w.imageOnHost?.imageOnHostSince ?? null,
    imagePulledAhead: w.imageOnHost?.imagePulledAhead ?? false,
  };
}

/** The REST answer of the worker list, from the domain's model. */
export function endpointWorkersView(m: EndpointWorkersModel): ListEndpointWorkersResponse {
  return {
    endpointVersion: m.endpointVersion,
    summary: workerSummaryView(m.summary),
    workers: m.workers.map(workerView),
    lastFailure: m.lastFailure && { ...m.lastFailure, failedAt: m.lastFailure.failedAt.toISOString() },
    workerProblem: m.workerProblem,
  };
}
