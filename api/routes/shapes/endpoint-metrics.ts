import { Type, type Static } from 'typebox';
import type { EndpointMetricsModel, MetricsPointModel } from '../../../domain/metrics/index.ts';

/**
 * An endpoint's metrics in REST v2 (`/v2/serverless/{id}/metrics`, the console's charts): window /
 * step points of the figures the domain computed from its per-minute rollups.
 */
const Ms = (description: string) => Type.Union([Type.Number(), Type.Null()], { description });

const DurationsSchema = (what: string) =>
  Type.Object(
    {
      p50: Ms(`median ${what}, ms, from the histogram (±12 %); null without a started job`),
      p90: Ms(`90th percentile ${what}, ms, from the histogram (±12 %)`),
      avg: Ms(`mean ${what}, ms (exact)`),
    },
    { description: `${what} of the jobs that ended in the step after starting` },
  );

export const EndpointMetricsPointSchema = Type.Object({
  time: Type.String({ format: 'date-time', description: 'start of the step (UTC)' }),
  jobs: Type.Object(
    {
      completed: Type.Integer(),
      failed: Type.Integer(),
      timedOut: Type.Integer(),
      cancelled: Type.Integer(),
    },
    { description: 'jobs that ended in the step, by final status' },
  ),
  executionMs: DurationsSchema('execution time (completedAt - startedAt)'),
  delayMs: DurationsSchema('delay time (startedAt - createdAt: queued until a worker took it)'),
  coldStarts: Type.Object(
    {
      count: Type.Integer({ description: 'workers whose first readiness fell in the step' }),
      avgMs: Ms('mean time from the worker created to ready, ms'),
      maxMs: Ms('longest, ms'),
    },
    { description: 'cold starts: a FlashBoot thaw is not one (see thaws)' },
  ),
  thaws: Type.Integer({ description: 'FlashBoot standbys thawed in the step' }),
  workers: Type.Object(
    {
      pending: Type.Number(),
      initializing: Type.Number(),
      idle: Type.Number(),
      running: Type.Number(),
      unhealthy: Type.Number(),
      standby: Type.Number(),
    },
    {
      description:
        'average workers in each state over the step, from samples taken at each rollup (about once a minute)',
    },
  ),
});
export type EndpointMetricsPoint = Static<typeof EndpointMetricsPointSchema>;

export const EndpointMetricsSchema = Type.Object({
  endpointId: Type.String(),
  window: Type.String(),
  step: Type.String(),
  from: Type.String({ format: 'date-time', description: 'start of the first point' }),
  to: Type.String({
    format: 'date-time',
    description: 'end of the last point: the end of the last minute rolled up (about 10-70 s ago)',
  }),
  points: Type.Array(EndpointMetricsPointSchema, {
    description: 'window / step points, oldest first, every step present',
  }),
});
export type EndpointMetrics = Static<typeof EndpointMetricsSchema>;

/** The REST shape of one point, from the domain's figures. */
export function endpointMetricsPointView(p: MetricsPointModel): EndpointMetricsPoint {
  return {
    time: p.time.toISOString(),
    jobs: p.jobs,
    executionMs: p.executionMs,
    delayMs: p.delayMs,
    coldStarts: p.coldStarts,
    thaws: p.thaws,
    workers: p.workers,
  };
}

/** The REST shape of an endpoint's metrics, from the domain's model. */
export function endpointMetricsView(m: EndpointMetricsModel): EndpointMetrics {
  return {
    endpointId: m.endpointId,
    window: m.window,
    step: m.step,
    from: m.from.toISOString(),
    to: m.to.toISOString(),
    points: m.points.map(endpointMetricsPointView),
  };
}
