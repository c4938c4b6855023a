import { Type, type Static } from 'typebox';
import {
  ReleaseDiffEntrySchema,
  type EndpointReleasesModel,
  type ReleaseModel,
} from '../../../domain/endpoints/index.ts';
import { WorkerSummarySchema, workerSummaryView } from './endpoint-worker.ts';

/** An endpoint's releases in REST v2 (`GET /v2/serverless/{id}/releases`, a rollback's answer) and their rollout. */
const NullableString = Type.Union([Type.String(), Type.Null()]);

export const ReleaseStatusSchema = Type.Union([
  Type.Literal('ROLLING_OUT'),
  Type.Literal('COMPLETED'),
  Type.Literal('HALTED'),
  Type.Literal('ROLLED_BACK'),
  Type.Literal('SUPERSEDED'),
]);

export const ReleaseViewSchema = Type.Object({
  id: Type.String(),
  version: Type.Integer(),
  source: Type.Literal('MANUAL'),
  buildId: Type.Null(),
  createdByUserId: Type.Null(),
  status: ReleaseStatusSchema,
  statusReason: NullableString,
  createdAt: Type.String({ format: 'date-time' }),
  finishedAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  /** Workers on this release, all states together. */
  workerCount: Type.Integer({ minimum: 0 }),
  /** Workers on this release by state. */
  workers: WorkerSummarySchema,
  /** Container fields that changed from the previous release: `[{field, old, new}]`. */
  diff: Type.Array(ReleaseDiffEntrySchema),
});
export type ReleaseView = Static<typeof ReleaseViewSchema>;

export const RolloutSummarySchema = Type.Object({
  /** True while any worker still runs an older release. */
  inProgress: Type.Boolean(),
  currentVersion: Type.Integer(),
  workersOnLatest: Type.Integer({ minimum: 0 }),
  workersOnOlder: Type.Integer({ minimum: 0 }),
  workersTotal: Type.Integer({ minimum: 0 }),
  /** Share of workers on the current release, 0 when there are none. */
  percentOnLatest: Type.Integer({ minimum: 0, maximum: 100 }),
});

export const ListEndpointReleasesResponseSchema = Type.Object({
  endpointVersion: Type.Integer(),
  rollout: RolloutSummarySchema,
  /** Newest first. */
  releases: Type.Array(ReleaseViewSchema),
});
export type ListEndpointReleasesResponse = Static<typeof ListEndpointReleasesResponseSchema>;

/** The REST shape of a release, from the domain's model. */
export function releaseView({ row: r, workers, diff }: ReleaseModel): ReleaseView {
  const counts = workerSummaryView(workers);
  return {
    id: r.id,
    version: r.version,
    source: 'MANUAL',
    buildId: null,
    createdByUserId: null,
    status: r.status,
    statusReason: r.statusReason,
    createdAt: r.createdAt.toISOString(),
    finishedAt: r.finishedAt?.toISOString() ?? null,
    workerCount: counts.total,
    workers: counts,
    diff,
  };
}

/** The REST answer of the release list: newest first, with the rollout of the current release. */
export function releasesView({
  endpointVersion,
  rollout: o,
  releases,
}: EndpointReleasesModel): ListEndpointReleasesResponse {
  return {
    endpointVersion,
    rollout: {
      inProgress: o.inProgress,
      currentVersion: o.currentVersion,
      workersOnLatest: o.workersOnLatest,
      workersOnOlder: o.workersOnOlder,
      workersTotal: o.workersTotal,
      percentOnLatest: o.percentOnLatest,
    },
    releases: releases.map(releaseView),
  };
}
