import type { Principal } from '../accounts/auth.ts';
import type { DomainContext } from '../context.ts';
import type { Db } from '../shared/db.ts';

/**
 * Request limits in three fixed windows (docs/security.md, "Authentication and limits"): per account for the management API (REST
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
export function parseRateLimits(
  value: string | undefined,
  defaults: RateLimitQuotas = DEFAULT_RATE_LIMITS,
  variable = 'GANTRY_RATE_LIMITS',
): RateLimitQuotas {
  const quotas = { ...defaults };
  if (!value?.trim()) return quotas;
  for (const part of value.split(',')) {
    const match = /^\s*(minute|hour|day)\s*=\s*(\d+)\s*$/.exec(part);
    if (!match)
      throw new Error(`${variable}: expected entries like "minute=600,hour=20000,day=200000", got "${part.trim()}"`);
    quotas[match[1] as RateWindow] = Number(match[2]);
  }
  return quotas;
}

/** Every surface's quotas (docs/security.md; infra/config.ts reads them). */
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
export async function consumeRateLimit(
  ctx: Pick<DomainContext, 'db'>,
  principal: Principal,
  defaults: RateLimitQuotas,
): Promise<RateLimitDecision> {
  return consumeCounter(ctx.db, { counter: principal.accountId, accountId: principal.accountId, quotas: defaults });
}

export interface CounterSpec {
  /** The counters' key: an account id, `<accountId>/jobs/<endpointId>`, `auth-failure/<address>`. */
  counter: string;
  /** Whose quota overrides (`Account.rateLimitPer*`) apply; none when unset. */
  accountId?: string;
  quotas: RateLimitQuotas;
}

/**
 * Counts one request against `spec.counter`'s windows; see consumeRateLimit. The same statement as
 * the limiter's, granting a block of one (the failed-authentication throttle, and contexts built
 * without a RateLimiter).
 */
export async function consumeCounter(db: Db, spec: CounterSpec): Promise<RateLimitDecision> {
  const { rows, granted } = await grantStatement(db, spec, 1, 1);
  return decide(rows, granted > 0);
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

// ---------------------------------------------------------------- the per-process limiter

/** A block of requests this process may admit on one counter without asking the database again. */
interface Lease {
  spec: CounterSpec;
  /** Requests left in the block. */
  tokens: number;
  /** The windows as the database counted them when it granted the block (the block included). */
  windows: WindowState[];
  /** Database epoch (s) at which each window ends, and the first of them: a block is spent in the windows that counted it. */
  windowEnds: number[];
  endsAtEpoch: number;
  /** Database epoch seconds minus local epoch seconds. */
  clockOffset: number;
  grantedAt: number;
  /** The most the last statement asked for: the next asks twice as many when this block went within GROW_WITHIN_MS. */
  block: number;
  /** The statement under way for this counter: requests arriving meanwhile wait for its block. */
  asking?: Promise<void>;
}

export interface RateLimiterOptions {
  /** Most requests the first statement of a counter may grant. */
  firstBlock: number;
  /** Most requests one statement may grant, however busy the counter. */
  maxBlock: number;
  /** A block is at most this share of what is left of the tightest quota (so blocks shrink near it). */
  blockShare: number;
  /** A block unused for this long is not spent any more (the next request asks the database). */
  staleMs: number;
}

export const DEFAULT_RATE_LIMITER_OPTIONS: RateLimiterOptions = {
  firstBlock: 100,
  maxBlock: 6_400,
  blockShare: 1 / 20,
  staleMs: 10_000,
};

/**
 * A block spent within this long asks for twice as many next time: a busy counter (a proxied
 * endpoint at thousands of requests a second) runs a statement every second or so instead of one
 * per `firstBlock` requests, each of which costs more CPU than the requests it admits.
 */
const GROW_WITHIN_MS = 1_000;

/**
 * The request limits of one API process, with PostgreSQL still the one count every process shares.
 * A request either spends a token of the block this process holds for its counter (no round trip),
 * or runs one statement that grants a new block: up to `firstBlock` requests, twice the last block
 * for a counter that spent it within a second (up to `maxBlock`), at most `blockShare` of
 * what is left of the tightest window (the account's own quotas included), never more than is
 * left, all counted at once. So the
 * database's count is always at least what every process admitted, and a quota is never passed
 * (of statements racing for the last requests, the one whose count went over is refused).
 * The cost: tokens a process holds are counted before they are used, so another process may be
 * refused up to the unspent blocks of the others early (each a 1/20 of what was left when granted,
 * so the closer the quota, the smaller); blocks of a window that ended, or unused for `staleMs`, are
 * dropped. Near a quota blocks are one request, and every request runs the statement: exact.
 */
export class RateLimiter {
  private readonly leases = new Map<string, Lease>();

  constructor(
    private readonly db: Db,
    private readonly options: RateLimiterOptions = DEFAULT_RATE_LIMITER_OPTIONS,
  ) {}

  async consume(spec: CounterSpec): Promise<RateLimitDecision> {
    for (;;) {
      const lease = this.leases.get(spec.counter);
      if (lease?.asking) {
        await lease.asking.catch(() => undefined);
        continue;
      }
      return this.consumeNow(spec) ?? this.ask(spec, lease, Date.now());
    }
  }

  /** The request admitted from the block this process holds; undefined when the database must be asked. */
  consumeNow(spec: CounterSpec): RateLimitDecision | undefined {
    const now = Date.now();
    const lease = this.leases.get(spec.counter);
    if (
      !lease ||
      lease.asking ||
      lease.tokens <= 0 ||
      now - lease.grantedAt >= this.options.staleMs ||
      now / 1000 + lease.clockOffset >= lease.endsAtEpoch
    )
      return undefined;
    lease.tokens--;
    return this.decision(lease, now);
  }

  private async ask(spec: CounterSpec, previous: Lease | undefined, now: number): Promise<RateLimitDecision> {
    const { firstBlock, maxBlock } = this.options;
    const block =
      previous && previous.tokens === 0 && now - previous.grantedAt < GROW_WITHIN_MS
        ? Math.min(maxBlock, previous.block * 2)
        : firstBlock;
    const lease: Lease = previous ?? {
      spec,
      tokens: 0,
      windows: [],
      windowEnds: [],
      endsAtEpoch: 0,
      clockOffset: 0,
      grantedAt: 0,
      block,
    };
    lease.block = block;
    let result: { rows: GrantRow[]; granted: number } | undefined;
    const asking = grantStatement(this.db, spec, block, this.options.blockShare).then((r) => {
      result = r;
    });
    lease.asking = asking;
    if (this.leases.size > RATE_LIMITER_MAX_COUNTERS) this.leases.clear();
    this.leases.set(spec.counter, lease);
    try {
      await asking;
    } finally {
      lease.asking = undefined;
    }
    const { rows, granted } = result!;
    const decision = decide(rows, granted > 0);
    lease.spec = spec;
    lease.windows = decision.windows;
    lease.tokens = decision.allowed ? granted - 1 : 0;
    lease.clockOffset = (rows[0]?.epoch ?? now / 1000) - now / 1000;
    lease.windowEnds = rows.map((r) => r.start_epoch + r.seconds);
    lease.endsAtEpoch = Math.min(...lease.windowEnds);
    // Its age counts from before the statement.
    lease.grantedAt = now;
    return decision.allowed ? this.decision(lease, now) : decision;
  }

  /** An admitted request's answer: the counts as this process knows them, its unspent tokens not included (they are not used yet). */
  private decision(lease: Lease, now: number): RateLimitDecision {
    const epoch = now / 1000 + lease.clockOffset;
    return {
      allowed: true,
      windows: lease.windows.map((w, k) => {
        const count = w.count - lease.tokens;
        return {
          ...w,
          count,
          remaining: Math.max(0, w.quota - count),
          resetSeconds: Math.max(1, Math.ceil(lease.windowEnds[k]! - epoch)),
        };
      }),
    };
  }
}

/** Counters a limiter keeps blocks for before it starts over (each is a few hundred bytes). */
const RATE_LIMITER_MAX_COUNTERS = 100_000;

interface GrantRow extends CounterRow {
  start_epoch: number;
  epoch: number;
  granted: number;
}

/**
 * One statement: grants up to `block` requests on the counter (never more than every window has
 * left; none when a window is full, and then nothing is counted), counts them in all three
 * windows, and answers the windows with the grant.
 */
async function grantStatement(
  db: Db,
  spec: CounterSpec,
  block: number,
  share: number,
): Promise<{ rows: GrantRow[]; granted: number }> {
  const overridesOf = spec.accountId ?? '';
  const rows = await db.$queryRaw<GrantRow[]>`
    WITH clock AS (
      SELECT extract(epoch FROM clock_timestamp())::float8 AS epoch
    ), quota AS (
      SELECT coalesce(a."rateLimitPerMinute", ${spec.quotas.minute}::int) AS minute,
             coalesce(a."rateLimitPerHour", ${spec.quotas.hour}::int) AS hour,
             coalesce(a."rateLimitPerDay", ${spec.quotas.day}::int) AS day
      FROM (SELECT 1) AS one LEFT JOIN "Account" a ON a.id = ${overridesOf}
    ), win AS (
      SELECT v.name, v.seconds, v.quota, floor(clock.epoch / v.seconds) * v.seconds AS start_epoch, clock.epoch
      FROM quota, clock,
           LATERAL (VALUES ('minute', 60, quota.minute), ('hour', 3600, quota.hour), ('day', 86400, quota.day)) AS v(name, seconds, quota)
    ), grant_ AS (
      SELECT greatest(0, least(${block}::int, greatest(1, floor(min(win.quota - coalesce(c.count, 0)) * ${share}::float8)), min(win.quota - coalesce(c.count, 0))))::int AS g
      FROM win LEFT JOIN "RateLimitCounter" c
        ON c."accountId" = ${spec.counter} AND c."window" = win.name AND c."windowStart" = to_timestamp(win.start_epoch) AT TIME ZONE 'UTC'
    ), counted AS (
      INSERT INTO "RateLimitCounter" AS c ("accountId", "window", "windowStart", "count")
      SELECT ${spec.counter}, win.name, to_timestamp(win.start_epoch) AT TIME ZONE 'UTC', grant_.g
      FROM win, grant_
      ON CONFLICT ("accountId", "window", "windowStart") DO UPDATE SET count = c.count + excluded.count
      RETURNING c."window", c.count
    )
    SELECT win.name AS "window", win.seconds::int AS seconds, win.quota::int AS quota, counted.count::int AS count,
           greatest(1, ceil(win.start_epoch + win.seconds - win.epoch))::int AS reset_seconds,
           (grant_.g = 0) AS blocked, win.start_epoch::float8 AS start_epoch, win.epoch::float8 AS epoch, grant_.g AS granted
    FROM win JOIN counted ON counted."window" = win.name, grant_
    -- minute, hour, day: the order of RATE_WINDOWS, which the answers keep
    ORDER BY win.seconds`;
  return { rows, granted: rows[0]?.granted ?? 0 };
}

/**
 * The decision of a grant statement's rows: allowed when it granted any request and no window went
 * past its quota (statements racing for the last requests: the one that pushed a counter over is
 * refused); else the full windows name the wait.
 */
function decide(rows: CounterRow[], granted: boolean): RateLimitDecision {
  const windows = rows.map((r): WindowState => ({
    window: r.window,
    seconds: r.seconds,
    quota: r.quota,
    count: r.count,
    remaining: Math.max(0, r.quota - r.count),
    resetSeconds: r.reset_seconds,
  }));
  const over = windows.filter((w) => (granted ? w.count > w.quota : w.count >= w.quota));
  if (granted && over.length === 0) return { allowed: true, windows };
  return { allowed: false, windows, exceeded: over.reduce((a, b) => (b.resetSeconds > a.resetSeconds ? b : a)) };
}
