import type { Principal } from './auth.ts';
import type { DomainContext } from './context.ts';
import type { Db } from './db.ts';

/**
 * Request limits in three fixed windows (spec "Limits"): per account for the management API (REST
 * and GraphQL share one quota: two skins over the same operations), per account and endpoint for
 * the job API and the load-balancing proxy, and per client address for failed authentication. The
 * counters live in PostgreSQL, so every API process enforces the same limit.
 */

export type RateWindow = 'minute' | 'hour' | 'day';

export const RATE_WINDOWS: ReadonlyArray<{ name: RateWindow; seconds: number }> = [
  { name: 'minute', seconds: 60 },
  { name: 'hour', seconds: 3_600 },
  { name: 'day', seconds: 86_400 },
];

export type RateLimitQuotas = Record<RateWindow, number>;

export const DEFAULT_RATE_LIMITS: RateLimitQuotas = { minute: 600, hour: 20_000, day: 200_000 };

/** `minute=600,hour=20000,day=200000` (any subset; the rest keep `defaults`); errors name `variable`. */
export function parseRateLimits(value: string | undefined, defaults: RateLimitQuotas = DEFAULT_RATE_LIMITS, variable = 'GANTRY_RATE_LIMITS'): RateLimitQuotas {
  const quotas = { ...defaults };
  if (!value?.trim()) return quotas;
  for (const part of value.split(',')) {
    const match = /^\s*(minute|hour|day)\s*=\s*(\d+)\s*$/.exec(part);
    if (!match) throw new Error(`${variable}: expected entries like "minute=600,hour=20000,day=200000", got "${part.trim()}"`);
    quotas[match[1] as RateWindow] = Number(match[2]);
  }
  return quotas;
}

/** Every surface's quotas (README "Security"; infra/config.ts reads them). */
export interface SurfaceLimits {
  management: RateLimitQuotas;
  jobs: RateLimitQuotas;
  proxy: RateLimitQuotas;
  /** Failed authentications one client address may make per minute before it is refused for the rest of that minute. */
  authFailuresPerMinute: number;
}

export const DEFAULT_JOB_RATE_LIMITS: RateLimitQuotas = { minute: 6_000, hour: 200_000, day: 2_000_000 };
export const DEFAULT_PROXY_RATE_LIMITS: RateLimitQuotas = { minute: 12_000, hour: 400_000, day: 4_000_000 };

export interface WindowState {
  window: RateWindow;
  /** Window length in seconds. */
  seconds: number;
  quota: number;
  /** Requests counted in the current window, this one included when it was allowed. */
  count: number;
  remaining: number;
  /** Whole seconds until the window resets (at least 1). */
  resetSeconds: number;
}

export interface RateLimitDecision {
  allowed: boolean;
  /** minute, hour, day. */
  windows: WindowState[];
  /** The exceeded window that frees up last (what Retry-After waits for); set when refused. */
  exceeded?: WindowState;
}

interface CounterRow {
  window: RateWindow;
  seconds: number;
  quota: number;
  count: number;
  reset_seconds: number;
  blocked: boolean;
}

/**
 * Counts one request of the principal's account and decides whether it may proceed: ONE SQL
 * statement (one round trip) reads the account's quotas (its override columns, else `defaults`),
 * upserts the three fixed-window counters and returns them, all on the database's clock.
 *
 * A request already over some quota when it arrives is not counted in any window, so a client
 * retrying through a full minute does not use up its hour and day. Two requests racing for the
 * last slot may both be counted; the one that pushed a counter over its quota is refused.
 */
export async function consumeRateLimit(ctx: Pick<DomainContext, 'db'>, principal: Principal, defaults: RateLimitQuotas): Promise<RateLimitDecision> {
  return consumeCounter(ctx.db, { counter: principal.accountId, accountId: principal.accountId, quotas: defaults });
}

export interface CounterSpec {
  /** The counters' key: an account id, `<accountId>/jobs/<endpointId>`, `auth-failure/<address>`. */
  counter: string;
  /** Whose quota overrides (`Account.rateLimitPer*`) apply; none when unset. */
  accountId?: string;
  quotas: RateLimitQuotas;
}

/** Counts one request against `spec.counter`'s windows; see consumeRateLimit. */
export async function consumeCounter(db: Db, spec: CounterSpec): Promise<RateLimitDecision> {
  const { counter: accountId, quotas: defaults } = spec;
  const overridesOf = spec.accountId ?? '';
  const rows = await db.$queryRaw<CounterRow[]>`
    WITH clock AS (
      SELECT extract(epoch FROM clock_timestamp()) AS epoch
    ), quota AS (
      SELECT coalesce(a."rateLimitPerMinute", ${defaults.minute}::int) AS minute,
             coalesce(a."rateLimitPerHour", ${defaults.hour}::int) AS hour,
             coalesce(a."rateLimitPerDay", ${defaults.day}::int) AS day
      FROM (SELECT 1) AS one LEFT JOIN "Account" a ON a.id = ${overridesOf}
    ), win AS (
      SELECT v.name, v.seconds, v.quota,
             floor(clock.epoch / v.seconds) * v.seconds AS start_epoch,
             clock.epoch
      FROM quota, clock,
           LATERAL (VALUES ('minute', 60, quota.minute), ('hour', 3600, quota.hour), ('day', 86400, quota.day)) AS v(name, seconds, quota)
    ), blocked AS (
      SELECT EXISTS (
        SELECT 1 FROM "RateLimitCounter" c JOIN win
          ON c."accountId" = ${accountId} AND c."window" = win.name
         AND c."windowStart" = to_timestamp(win.start_epoch) AT TIME ZONE 'UTC'
        WHERE c.count >= win.quota
      ) AS b
    ), counted AS (
      INSERT INTO "RateLimitCounter" AS c ("accountId", "window", "windowStart", "count")
      SELECT ${accountId}, win.name, to_timestamp(win.start_epoch) AT TIME ZONE 'UTC', CASE WHEN blocked.b THEN 0 ELSE 1 END
      FROM win, blocked
      ON CONFLICT ("accountId", "window", "windowStart") DO UPDATE SET count = c.count + excluded.count
      RETURNING c."window", c.count
    )
    SELECT win.name AS "window", win.seconds::int AS seconds, win.quota::int AS quota, counted.count::int AS count,
           greatest(1, ceil(win.start_epoch + win.seconds - win.epoch))::int AS reset_seconds,
           (SELECT b FROM blocked) AS blocked
    FROM win JOIN counted ON counted."window" = win.name`;

  const order = new Map(RATE_WINDOWS.map((w, i) => [w.name, i]));
  rows.sort((a, b) => (order.get(a.window) ?? 0) - (order.get(b.window) ?? 0));
  const windows = rows.map((r): WindowState => ({
    window: r.window,
    seconds: r.seconds,
    quota: r.quota,
    count: r.count,
    remaining: Math.max(0, r.quota - r.count),
    resetSeconds: r.reset_seconds,
  }));
  const blocked = rows.some((r) => r.blocked);
  const over = windows.filter((w) => (blocked ? w.count >= w.quota : w.count > w.quota));
  if (over.length === 0) return { allowed: true, windows };
  const exceeded = over.reduce((a, b) => (b.resetSeconds > a.resetSeconds ? b : a));
  return { allowed: false, windows, exceeded };
}

/**
 * Deletes counters of windows that have ended. Cheap: a range scan of the windowStart index, run
 * every few minutes by each API process; ended windows are never read again.
 */
export async function purgeExpiredRateLimitCounters(db: Db): Promise<number> {
  return db.$executeRaw`
    DELETE FROM "RateLimitCounter"
    WHERE "windowStart" < (now() AT TIME ZONE 'UTC') - interval '1 minute'
      AND ("window" = 'minute'
        OR ("window" = 'hour' AND "windowStart" < (now() AT TIME ZONE 'UTC') - interval '1 hour')
        OR "windowStart" < (now() AT TIME ZONE 'UTC') - interval '1 day')`;
}
