import { Type, type Static } from 'typebox';

/** The windows and steps GET /v2/serverless/{id}/metrics takes, in minutes. */
export const WINDOWS = { '1h': 60, '6h': 360, '24h': 1440, '7d': 10_080 } as const;
export const STEPS = { '1m': 1, '5m': 5, '15m': 15, '1h': 60 } as const;
/** Most points one answer holds (window / step). */
export const MAX_POINTS = 1440;

export type MetricsWindow = keyof typeof WINDOWS;
export type MetricsStep = keyof typeof STEPS;

// Strings and not enumerations in the schema: a window or step it does not know is the domain's
// 400 (with the values it takes), as is a combination of more than MAX_POINTS points.
export const EndpointMetricsQuerySchema = Type.Object(
  {
    window: Type.Optional(
      Type.String({
        maxLength: 8,
        description: `How far back: ${Object.keys(WINDOWS).join(', ')} (default 1h).`,
        examples: ['1h'],
      }),
    ),
    step: Type.Optional(
      Type.String({
        maxLength: 8,
        description: `One point per: ${Object.keys(STEPS).join(', ')} (default 1m). At most ${MAX_POINTS} points (7d takes 15m or 1h).`,
        examples: ['1m'],
      }),
    ),
  },
  { additionalProperties: false },
);
export type EndpointMetricsQuery = Static<typeof EndpointMetricsQuerySchema>;

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
