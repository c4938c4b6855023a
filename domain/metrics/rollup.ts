/**
 * The per-endpoint, per-minute rollup (EndpointMetricMinute), run by the `rollup-endpoint-metrics`
 * schedule (workflows/metrics-rollup.ts) every GANTRY_METRICS_ROLLUP_INTERVAL_MS. One run, in one
 * transaction holding the MetricRollupState row locked (so two processes never roll a minute twice):
 *
 * 1. Jobs: every minute from the watermark (`rolledUntil`) up to the last minute that ended at least
 *    LAG_MS ago, and at most LOOKBACK_MS back, gets the jobs that ended in it (by `completedAt`, the
 *    partial index Job_completedAt_idx): counts by final status, and for the jobs that had started,
 *    execution time (completedAt - startedAt) and delay time (startedAt - createdAt) as histograms
 *    (histogram.ts) with sums. Each minute is rolled once: the watermark moves past it.
 * 2. Cold starts, in the same minutes: workers whose first readiness fell in the minute, count, sum
 *    and max of (first readiness - createdAt). A FlashBoot thaw sets `readyAt` again; the readiness it
 *    replaced is kept in `firstReadyAt` (activities/worker-standby.ts), so a thaw is no cold start: it
 *    counts in `thaws` in the minute of its `readyAt` (two thaws of one worker within one run count once).
 * 3. Worker states, sampled: the endpoint's workers by state now, each worth the seconds since the
 *    previous sample (at most 60), spread over the minutes those seconds fall in. A state held between
 *    two samples is not seen: these are samples, not a record of every change.
 * 4. Minutes older than RETENTION_MS are deleted.
 *
 * Late commits: a job that commits its end more than LAG_MS after its `completedAt` misses its
 * minute. Finished jobs are not deleted before their minute is rolled (domain/jobs/queue-supervision.ts
 * deleteExpired), so a short retention loses nothing.
 */
import type { DomainContext } from '../context.ts';
import type { Prisma } from '../shared/db.ts';
import { BUCKETS, bucketSql } from './histogram.ts';
import type { RollupEndpointMetricsResult } from '../../contracts/workflows.ts';

/** How long after a minute ends it is rolled: jobs whose end commits within this are counted. */
export const LAG_MS = 10_000;
/** How far back a run reaches (the first run, or one after a stall): older minutes stay empty. */
export const LOOKBACK_MS = 10 * 60_000;
/** How long minutes are kept. */
export const RETENTION_MS = 7 * 24 * 3_600_000;
/** How often the rollup runs (GANTRY_METRICS_ROLLUP_INTERVAL_MS). */
export interface MetricsSettings {
  rollupIntervalMs: number;
}
export const DEFAULT_METRICS_SETTINGS: MetricsSettings = { rollupIntervalMs: 60_000 };

/** Most seconds one sample of worker states is worth. */
export const MAX_SAMPLE_SECONDS = 60;

const MINUTE = 60_000;
/** The start of the minute `ms` falls in. */
export const floorMinute = (ms: number): number => Math.floor(ms / MINUTE) * MINUTE;

/** SQL: epoch milliseconds (a float8 parameter) as the UTC `timestamp` the tables store. */
const ts = (param: string): string => `(to_timestamp(${param}::float8 / 1000) AT TIME ZONE 'UTC')`;
/** SQL: a UTC `timestamp` column as epoch milliseconds. */
export const epochMs = (column: string): string => `(extract(epoch FROM ${column}) * 1000)::float8`;

/** The worker states whose seconds are kept, with their columns. */
export const WORKER_STATES = [
  ['PENDING', 'pendingSeconds'],
  ['INITIALIZING', 'initializingSeconds'],
  ['IDLE', 'idleSeconds'],
  ['RUNNING', 'runningSeconds'],
  ['UNHEALTHY', 'unhealthySeconds'],
  ['STANDBY', 'standbySeconds'],
] as const;

export interface RollupOptions {
  /** The time the run takes as now (tests, the benchmark); default the database's clock. */
  now?: Date;
  /** How far back the run may reach (default LOOKBACK_MS); the benchmark rolls a week at once. */
  lookbackMs?: number;
  /** The transaction's time limit (default 5 minutes). */
  timeoutMs?: number;
}

/** What one run did: the workflow's result (contracts/workflows.ts), one shape. */
export type RollupResult = RollupEndpointMetricsResult;

const JOB_COLUMNS = [
  'completed',
  'failed',
  '"timedOut"',
  'cancelled',
  '"executionCount"',
  '"executionSumMs"',
  '"executionHist"',
  '"delayCount"',
  '"delaySumMs"',
  '"delayHist"',
];

/**
 * The jobs that ended in [$1, $2) by endpoint and minute. The histograms are built dense: every
 * (endpoint, minute) crossed with every bucket, the counts joined in.
 */
const JOBS_SQL = `
WITH j AS (
  SELECT "endpointId" AS e, date_trunc('minute', "completedAt") AS m, status,
         CASE WHEN "startedAt" IS NOT NULL THEN GREATEST(0, ${epochMs('"completedAt"')} - ${epochMs('"startedAt"')}) END AS x,
         CASE WHEN "startedAt" IS NOT NULL THEN GREATEST(0, ${epochMs('"startedAt"')} - ${epochMs('"createdAt"')}) END AS d
  FROM "Job"
  WHERE "completedAt" >= ${ts('$1')} AND "completedAt" < ${ts('$2')}
    AND status IN ('COMPLETED', 'FAILED', 'TIMED_OUT', 'CANCELLED')
),
t AS (
  SELECT e, m,
         count(*) FILTER (WHERE status = 'COMPLETED')::int AS completed,
         count(*) FILTER (WHERE status = 'FAILED')::int AS failed,
         count(*) FILTER (WHERE status = 'TIMED_OUT')::int AS timed_out,
         count(*) FILTER (WHERE status = 'CANCELLED')::int AS cancelled,
         count(x)::int AS xn, coalesce(sum(x), 0)::float8 AS xs,
         count(d)::int AS dn, coalesce(sum(d), 0)::float8 AS ds
  FROM j GROUP BY e, m
),
b AS (
  SELECT e, m, 'x' AS k, ${bucketSql('x')} AS i, count(*)::int AS n FROM j WHERE x IS NOT NULL GROUP BY 1, 2, 4
  UNION ALL
  SELECT e, m, 'd' AS k, ${bucketSql('d')} AS i, count(*)::int AS n FROM j WHERE d IS NOT NULL GROUP BY 1, 2, 4
),
h AS (
  SELECT t.e, t.m, g.k, array_agg(coalesce(b.n, 0) ORDER BY g.i) AS hist
  FROM t
  CROSS JOIN (SELECT k, i FROM (VALUES ('x'), ('d')) AS ks(k), generate_series(0, ${BUCKETS - 1}) AS i) g
  LEFT JOIN b ON b.e = t.e AND b.m = t.m AND b.k = g.k AND b.i = g.i
  WHERE (g.k = 'x' AND t.xn > 0) OR (g.k = 'd' AND t.dn > 0)
  GROUP BY t.e, t.m, g.k
),
ins AS (
  INSERT INTO "EndpointMetricMinute" AS r ("endpointId", minute, ${JOB_COLUMNS.join(', ')})
  SELECT t.e, t.m, t.completed, t.failed, t.timed_out, t.cancelled,
         t.xn, t.xs, coalesce(hx.hist, '{}'), t.dn, t.ds, coalesce(hd.hist, '{}')
  FROM t
  LEFT JOIN h hx ON hx.e = t.e AND hx.m = t.m AND hx.k = 'x'
  LEFT JOIN h hd ON hd.e = t.e AND hd.m = t.m AND hd.k = 'd'
  ON CONFLICT ("endpointId", minute) DO UPDATE SET ${JOB_COLUMNS.map((c) => `${c} = EXCLUDED.${c}`).join(', ')}
  RETURNING 1
)
SELECT coalesce((SELECT sum(completed + failed + timed_out + cancelled) FROM t), 0)::int AS jobs,
       (SELECT count(*) FROM ins)::int AS rows`;

/** Workers whose first readiness (or a thaw's) fell in [$1, $2). */
const READY_SQL = `
WITH w AS (
  SELECT "endpointId" AS e, coalesce("firstReadyAt", "readyAt") AS first, "createdAt" AS created,
         CASE WHEN "firstReadyAt" IS NOT NULL THEN "readyAt" END AS thawed
  FROM "Worker"
  WHERE "endpointId" IS NOT NULL AND "readyAt" IS NOT NULL
    AND ((coalesce("firstReadyAt", "readyAt") >= ${ts('$1')} AND coalesce("firstReadyAt", "readyAt") < ${ts('$2')})
      OR ("firstReadyAt" IS NOT NULL AND "readyAt" >= ${ts('$1')} AND "readyAt" < ${ts('$2')}))
),
c AS (
  SELECT e, date_trunc('minute', first) AS m, count(*)::int AS n,
         sum(GREATEST(0, ${epochMs('first')} - ${epochMs('created')}))::float8 AS s,
         max(GREATEST(0, ${epochMs('first')} - ${epochMs('created')}))::float8 AS mx
  FROM w WHERE first >= ${ts('$1')} AND first < ${ts('$2')} GROUP BY 1, 2
),
th AS (
  SELECT e, date_trunc('minute', thawed) AS m, count(*)::int AS n
  FROM w WHERE thawed >= ${ts('$1')} AND thawed < ${ts('$2')} GROUP BY 1, 2
),
ins AS (
  INSERT INTO "EndpointMetricMinute" AS r ("endpointId", minute, "coldStarts", "coldStartSumMs", "coldStartMaxMs", thaws)
  SELECT coalesce(c.e, th.e), coalesce(c.m, th.m), coalesce(c.n, 0), coalesce(c.s, 0), coalesce(c.mx, 0), coalesce(th.n, 0)
  FROM c FULL JOIN th ON th.e = c.e AND th.m = c.m
  ON CONFLICT ("endpointId", minute) DO UPDATE SET "coldStarts" = EXCLUDED."coldStarts",
    "coldStartSumMs" = EXCLUDED."coldStartSumMs", "coldStartMaxMs" = EXCLUDED."coldStartMaxMs", thaws = EXCLUDED.thaws
  RETURNING 1
)
SELECT coalesce((SELECT sum(n) FROM c), 0)::int AS cold, coalesce((SELECT sum(n) FROM th), 0)::int AS thaws,
       (SELECT count(*) FROM ins)::int AS rows`;

/** The workers of every endpoint by state now, each worth $2[k] seconds in minute $1[k]. */
const SAMPLE_SQL = `
INSERT INTO "EndpointMetricMinute" AS r ("endpointId", minute, ${WORKER_STATES.map(([, c]) => `"${c}"`).join(', ')})
SELECT w."endpointId", ${ts('seg.m')},
       ${WORKER_STATES.map(([s]) => `count(*) FILTER (WHERE w.status = '${s}') * seg.s`).join(',\n       ')}
FROM "Worker" w CROSS JOIN unnest($1::float8[], $2::float8[]) AS seg(m, s)
WHERE w."endpointId" IS NOT NULL AND w.status IN (${WORKER_STATES.map(([s]) => `'${s}'`).join(', ')})
GROUP BY w."endpointId", seg.m, seg.s
ON CONFLICT ("endpointId", minute) DO UPDATE SET
  ${WORKER_STATES.map(([, c]) => `"${c}" = r."${c}" + EXCLUDED."${c}"`).join(', ')}`;

/**
 * The seconds of (fromMs, toMs] by minute: [minute start, seconds] for each minute they touch.
 */
export function spreadOverMinutes(fromMs: number, toMs: number): Array<[number, number]> {
  const out: Array<[number, number]> = [];
  for (let m = floorMinute(fromMs); m < toMs; m += MINUTE) {
    const s = (Math.min(toMs, m + MINUTE) - Math.max(fromMs, m)) / 1000;
    if (s > 0) out.push([m, s]);
  }
  return out;
}

/** One run of the rollup (see the file's comment). Safe to run from several processes at once. */
export async function rollupEndpointMetrics(
  ctx: Pick<DomainContext, 'db'>,
  opts: RollupOptions = {},
): Promise<RollupResult> {
  return ctx.db.$transaction(
    async (tx) => {
      await tx.$executeRawUnsafe(
        `INSERT INTO "MetricRollupState" (id, "rolledUntil") VALUES (1, 'epoch') ON CONFLICT (id) DO NOTHING`,
      );
      const [state] = await tx.$queryRawUnsafe<Array<{ until: number; sampled: number | null; now: number }>>(
        `SELECT ${epochMs('"rolledUntil"')} AS until, ${epochMs('"sampledAt"')} AS sampled,
                (extract(epoch FROM now()) * 1000)::float8 AS now
         FROM "MetricRollupState" WHERE id = 1 FOR UPDATE`,
      );
      if (!state) throw new Error('the metrics rollup state row is missing');
      const now = opts.now?.getTime() ?? state.now;
      const to = Math.max(state.until, floorMinute(now - LAG_MS));
      const from = Math.min(to, Math.max(state.until, to - (opts.lookbackMs ?? LOOKBACK_MS)));

      let jobs = 0;
      let coldStarts = 0;
      let thaws = 0;
      if (from < to) {
        const [j] = await tx.$queryRawUnsafe<Array<{ jobs: number }>>(JOBS_SQL, from, to);
        const [r] = await tx.$queryRawUnsafe<Array<{ cold: number; thaws: number }>>(READY_SQL, from, to);
        jobs = j?.jobs ?? 0;
        coldStarts = r?.cold ?? 0;
        thaws = r?.thaws ?? 0;
      }

      // The first sample ever is worth nothing: what the workers did before it is unknown.
      const sampledFrom = state.sampled === null ? now : Math.max(state.sampled, now - MAX_SAMPLE_SECONDS * 1000);
      const segments = spreadOverMinutes(sampledFrom, now);
      if (segments.length > 0)
        await tx.$executeRawUnsafe(
          SAMPLE_SQL,
          segments.map(([m]) => m),
          segments.map(([, s]) => s),
        );

      const purged = await tx.$executeRawUnsafe(
        `DELETE FROM "EndpointMetricMinute" WHERE minute < ${ts('$1')}`,
        now - RETENTION_MS,
      );
      await tx.$executeRawUnsafe(
        `UPDATE "MetricRollupState" SET "rolledUntil" = ${ts('$1')}, "sampledAt" = ${ts('$2')} WHERE id = 1`,
        to,
        Math.max(now, state.sampled ?? now),
      );
      return {
        from: new Date(from).toISOString(),
        to: new Date(to).toISOString(),
        jobs,
        coldStarts,
        thaws,
        sampledSeconds: segments.reduce((n, [, s]) => n + s, 0),
        purged,
      };
    },
    { timeout: opts.timeoutMs ?? 5 * 60_000, maxWait: 60_000 },
  );
}

/** For the readers: where the rollup stands (null before its first run). */
export async function rolledUntil(db: Prisma.TransactionClient | DomainContext['db']): Promise<number | null> {
  const [row] = await db.$queryRawUnsafe<Array<{ until: number }>>(
    `SELECT ${epochMs('"rolledUntil"')} AS until FROM "MetricRollupState" WHERE id = 1`,
  );
  return row && row.until > 0 ? row.until : null;
}
