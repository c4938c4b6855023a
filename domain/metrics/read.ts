/**
 * Reading the rollups: an endpoint's points for a window and step (REST), and every endpoint's last
 * complete minute (the admin's Prometheus scrape). Steps merge minutes in SQL: counts and sums add,
 * histograms add bucket by bucket, and the percentiles are read from the merged counts here.
 */
import { requireScope, type Principal } from '../accounts/auth.ts';
import type { DomainContext } from '../context.ts';
import { findOwned } from '../endpoints/endpoints.ts';
import { DomainError } from '../errors.ts';
import { rowReader } from '../shared/db.ts';
import { BUCKETS, quantile } from './histogram.ts';
import { epochMs, floorMinute, LAG_MS, rolledUntil, WORKER_STATES } from './rollup.ts';
import {
  MAX_POINTS,
  STEPS,
  WINDOWS,
  type EndpointMetricsQuery,
  type MetricsStep,
  type MetricsWindow,
} from './schemas.ts';

const MINUTE = 60_000;

/** Durations of the jobs that ended in a step after starting, ms to 0.1; null without one. */
export interface MetricsDurations {
  /** From the histogram (±12 %). */
  p50: number | null;
  p90: number | null;
  /** Exact. */
  avg: number | null;
}

/** One step's figures, computed from the sums of its minutes (zeros and nulls where none was rolled). */
export interface MetricsPointModel {
  /** Start of the step. */
  time: Date;
  /** Jobs that ended in the step, by final status. */
  jobs: { completed: number; failed: number; timedOut: number; cancelled: number };
  executionMs: MetricsDurations;
  delayMs: MetricsDurations;
  /** Workers whose first readiness fell in the step (a FlashBoot thaw is not one), ms created to ready. */
  coldStarts: { count: number; avgMs: number | null; maxMs: number | null };
  /** FlashBoot standbys thawed in the step. */
  thaws: number;
  /** Average workers in each state over the step, from the rollups' samples. */
  workers: Record<'pending' | 'initializing' | 'idle' | 'running' | 'unhealthy' | 'standby', number>;
}

/** An endpoint's points for a window and step, oldest first, every step present. */
export interface EndpointMetricsModel {
  endpointId: string;
  window: MetricsWindow;
  step: MetricsStep;
  /** Start of the first point. */
  from: Date;
  /** End of the last point: the end of the last minute rolled up. */
  to: Date;
  points: MetricsPointModel[];
}

const has = <T extends object>(o: T, k: string): k is Extract<keyof T, string> => Object.hasOwn(o, k);

/** The window and step of a query, or a 400 that says what is taken. */
export function parseMetricsQuery(q: EndpointMetricsQuery): { window: MetricsWindow; step: MetricsStep } {
  const window = q.window ?? '1h';
  const step = q.step ?? '1m';
  if (!has(WINDOWS, window))
    throw new DomainError('bad_request', `window must be one of ${Object.keys(WINDOWS).join(', ')}`);
  if (!has(STEPS, step)) throw new DomainError('bad_request', `step must be one of ${Object.keys(STEPS).join(', ')}`);
  const points = WINDOWS[window] / STEPS[step];
  if (points > MAX_POINTS)
    throw new DomainError(
      'bad_request',
      `window ${window} at step ${step} is ${points} points; at most ${MAX_POINTS} (take a coarser step)`,
    );
  return { window, step };
}

/**
 * SQL: the bucket-by-bucket sums of a histogram column over a group, as text (`3,0,12,...`): a
 * driver converts a number array element by element, which costs this process more than the split.
 */
const histSums = (column: string): string =>
  `array_to_string(ARRAY[${Array.from({ length: BUCKETS }, (_, i) => `coalesce(sum("${column}"[${i + 1}]), 0)`).join(', ')}], ',')`;
const counts = (text: string | null): number[] | null => (text === null ? null : text.split(',').map(Number));

/** The sums of one group of minutes, as the statements below answer them. */
interface Sums {
  completed: number;
  failed: number;
  timed_out: number;
  cancelled: number;
  xn: number;
  xs: number;
  xh: string | null;
  dn: number;
  ds: number;
  dh: string | null;
  cold: number;
  cold_sum: number;
  cold_max: number;
  thaws: number;
  pending: number;
  initializing: number;
  idle: number;
  running: number;
  unhealthy: number;
  standby: number;
}

const SUMS = `sum(completed)::int AS completed, sum(failed)::int AS failed, sum("timedOut")::int AS timed_out,
  sum(cancelled)::int AS cancelled,
  sum("executionCount")::int AS xn, sum("executionSumMs")::float8 AS xs,
  CASE WHEN sum("executionCount") > 0 THEN ${histSums('executionHist')} END AS xh,
  sum("delayCount")::int AS dn, sum("delaySumMs")::float8 AS ds,
  CASE WHEN sum("delayCount") > 0 THEN ${histSums('delayHist')} END AS dh,
  sum("coldStarts")::int AS cold, sum("coldStartSumMs")::float8 AS cold_sum, max("coldStartMaxMs")::float8 AS cold_max,
  sum(thaws)::int AS thaws,
  ${WORKER_STATES.map(([s, c]) => `sum("${c}")::float8 AS ${s.toLowerCase()}`).join(', ')}`;

const round = (x: number, digits: number): number => Math.round(x * 10 ** digits) / 10 ** digits;
const ms = (x: number | null): number | null => (x === null ? null : round(x, 1));

/** One point from the sums of its minutes (absent: nothing was rolled for it). */
export function pointOf(time: number, stepSeconds: number, s: Sums | undefined): MetricsPointModel {
  const avg = (sum: number | undefined, n: number | undefined) => (n ? ms((sum ?? 0) / n) : null);
  const workers = (x: number | undefined) => round((x ?? 0) / stepSeconds, 3);
  const xh = counts(s?.xh ?? null);
  const dh = counts(s?.dh ?? null);
  return {
    time: new Date(time),
    jobs: {
      completed: s?.completed ?? 0,
      failed: s?.failed ?? 0,
      timedOut: s?.timed_out ?? 0,
      cancelled: s?.cancelled ?? 0,
    },
    executionMs: {
      p50: xh ? ms(quantile(xh, 0.5)) : null,
      p90: xh ? ms(quantile(xh, 0.9)) : null,
      avg: avg(s?.xs, s?.xn),
    },
    delayMs: {
      p50: dh ? ms(quantile(dh, 0.5)) : null,
      p90: dh ? ms(quantile(dh, 0.9)) : null,
      avg: avg(s?.ds, s?.dn),
    },
    coldStarts: {
      count: s?.cold ?? 0,
      avgMs: avg(s?.cold_sum, s?.cold),
      maxMs: s?.cold ? ms(s.cold_max) : null,
    },
    thaws: s?.thaws ?? 0,
    workers: {
      pending: workers(s?.pending),
      initializing: workers(s?.initializing),
      idle: workers(s?.idle),
      running: workers(s?.running),
      unhealthy: workers(s?.unhealthy),
      standby: workers(s?.standby),
    },
  };
}

/** The end of the last minute rolled up; before the first run, the minute that ended LAG_MS ago. */
async function lastRolled(ctx: Pick<DomainContext, 'db'>): Promise<number> {
  const until = await rolledUntil(ctx.db);
  if (until !== null) return until;
  const [row] = await ctx.db.$queryRawUnsafe<Array<{ now: number }>>(
    `SELECT (extract(epoch FROM now()) * 1000)::float8 AS now`,
  );
  return floorMinute((row?.now ?? Date.now()) - LAG_MS);
}

/**
 * GET /v2/serverless/{id}/metrics: window / step points ending at the last minute rolled up, each
 * merging its minutes. Another account's endpoint is 404, as every endpoint read.
 */
export async function getEndpointMetrics(
  ctx: DomainContext,
  principal: Principal,
  endpointId: string,
  query: EndpointMetricsQuery,
): Promise<EndpointMetricsModel> {
  requireScope(principal, 'READ');
  const { window, step } = parseMetricsQuery(query);
  await findOwned(ctx, principal, endpointId);
  const stepMs = STEPS[step] * MINUTE;
  const to = await lastRolled(ctx);
  const from = to - WINDOWS[window] * MINUTE;
  const rows = await rowReader(ctx)<Sums & { k: number }>(
    `SELECT floor((${epochMs('minute')} - $2::float8) / $3::float8)::int AS k, ${SUMS}
     FROM "EndpointMetricMinute"
     WHERE "endpointId" = $1 AND minute >= (to_timestamp($2::float8 / 1000) AT TIME ZONE 'UTC')
       AND minute < (to_timestamp($4::float8 / 1000) AT TIME ZONE 'UTC')
     GROUP BY 1`,
    [endpointId, from, stepMs, to],
  );
  const byStep = new Map(rows.map((r) => [r.k, r]));
  const points: MetricsPointModel[] = [];
  for (let k = 0; k * stepMs < to - from; k++) points.push(pointOf(from + k * stepMs, stepMs / 1000, byStep.get(k)));
  return {
    endpointId,
    window,
    step,
    from: new Date(from),
    to: new Date(to),
    points,
  };
}

/** Every live endpoint's figures of the last complete minute (zeros where it had none). */
export async function lastMinuteMetrics(
  ctx: Pick<DomainContext, 'db' | 'jobs'>,
): Promise<{ minute: string; endpoints: Array<{ endpointId: string; point: MetricsPointModel }> } | null> {
  const until = await rolledUntil(ctx.db);
  if (until === null) return null;
  const minute = until - MINUTE;
  const rows = await rowReader(ctx)<Sums & { id: string; rolled: boolean }>(
    `SELECT e.id, count(m.minute) > 0 AS rolled, ${SUMS}
     FROM "Endpoint" e
     LEFT JOIN "EndpointMetricMinute" m ON m."endpointId" = e.id AND m.minute = (to_timestamp($1::float8 / 1000) AT TIME ZONE 'UTC')
     WHERE e."deletingAt" IS NULL
     GROUP BY e.id ORDER BY e.id`,
    [minute],
  );
  return {
    minute: new Date(minute).toISOString(),
    endpoints: rows.map((r) => ({ endpointId: r.id, point: pointOf(minute, 60, r.rolled ? r : undefined) })),
  };
}
