/**
 * The per-process request limiter (domain/rate-limits/rate-limits.ts RateLimiter) against a real PostgreSQL:
 * far from a quota a statement grants a block of requests spent without round trips; near it every
 * request asks; the database's count is never below what was admitted and a quota is never passed,
 * by one process or several.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb, type Db } from '../../domain/shared/index.ts';
import { newId } from '../../domain/shared/index.ts';
import { DEFAULT_RATE_LIMITER_OPTIONS, RateLimiter, type CounterSpec } from '../../domain/rate-limits/index.ts';
import { freshDatabase } from '../support/databases.ts';

/** A Prisma client whose raw statements are counted (the same client underneath: every statement is real). */
function counting(db: Db): { db: Db; statements: () => number } {
  let n = 0;
  const wrapped = new Proxy(db, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver) as unknown;
      if (prop === '$queryRaw' && typeof value === 'function') {
        return (...args: unknown[]) => {
          n++;
          return (value as (...a: unknown[]) => unknown).apply(target, args);
        };
      }
      return value;
    },
  });
  return { db: wrapped, statements: () => n };
}

async function stored(db: Db, counter: string): Promise<number> {
  const rows = await db.rateLimitCounter.findMany({ where: { accountId: counter, window: 'minute' } });
  return rows.reduce((sum, r) => sum + r.count, 0);
}

/** Fixed windows reset on the minute: a run that must stay in one window starts well inside it. */
async function awayFromMinuteEdge(): Promise<void> {
  const intoMinute = Date.now() % 60_000;
  if (intoMinute > 45_000) await new Promise((r) => setTimeout(r, 60_000 - intoMinute + 500));
}

describe('the request limiter', () => {
  let db: Db;
  let url: string;
  beforeAll(async () => {
    url = await freshDatabase();
    db = createDb(url, 6);
  });
  afterAll(async () => {
    await db?.$disconnect();
  });

  it('far from the quota: admits without a round trip per request, counts every admitted request', async () => {
    await awayFromMinuteEdge();
    const c = counting(db);
    const limiter = new RateLimiter(c.db);
    const spec: CounterSpec = {
      counter: `bench/${newId()}`,
      quotas: { minute: 1_000_000, hour: 1_000_000, day: 1_000_000 },
    };
    let allowed = 0;
    for (let i = 0; i < 2_000; i++) {
      const d = await limiter.consume(spec);
      if (d.allowed) allowed++;
      expect(d.windows.map((w) => w.window)).toEqual(['minute', 'hour', 'day']);
    }
    expect(allowed).toBe(2_000);
    // One block of one request first (nothing known of the counter), then blocks of 100.
    expect(c.statements()).toBeLessThanOrEqual(22);
    // Counted up front: what was granted, at least what was admitted.
    const count = await stored(db, spec.counter);
    expect(count).toBeGreaterThanOrEqual(2_000);
    expect(count).toBeLessThan(2_000 + DEFAULT_RATE_LIMITER_OPTIONS.maxBlock);
  });

  it('one process is exact at the quota', async () => {
    await awayFromMinuteEdge();
    const limiter = new RateLimiter(db);
    const spec: CounterSpec = { counter: `one/${newId()}`, quotas: { minute: 300, hour: 100_000, day: 100_000 } };
    const decisions = await Promise.all(Array.from({ length: 400 }, () => limiter.consume(spec)));
    expect(decisions.filter((d) => d.allowed)).toHaveLength(300);
    const refused = decisions.find((d) => !d.allowed)!;
    expect(refused.exceeded?.window).toBe('minute');
    expect(await stored(db, spec.counter)).toBe(300);
  });

  it('several processes together admit up to the quota, never past it, and count at least what they admitted', async () => {
    await awayFromMinuteEdge();
    const quota = 1_000;
    // Each "process": its own limiter and its own connections, on the same database.
    const pools = [0, 1, 2].map(() => createDb(url, 2));
    const limiters = pools.map((own) => new RateLimiter(own));
    const spec: CounterSpec = {
      counter: `many/${newId()}`,
      quotas: { minute: quota, hour: 1_000_000, day: 1_000_000 },
    };
    let allowed = 0;
    const tasks = limiters.map(async (l) => {
      for (let i = 0; i < 600; i++) {
        if ((await l.consume(spec)).allowed) allowed++;
        if (i % 50 === 0) await new Promise((r) => setTimeout(r, 5));
      }
    });
    await Promise.all(tasks);
    for (const own of pools) await own.$disconnect();
    // The quota is never passed: of statements racing for the last request, the one whose count
    // went over is refused. Each keeps asking after a refusal, so what the others still held is
    // spent; one that ended its loop first may have held back a block at most.
    expect(allowed).toBeLessThanOrEqual(quota);
    expect(allowed).toBeGreaterThanOrEqual(quota - DEFAULT_RATE_LIMITER_OPTIONS.maxBlock);
    // The count is never below what was admitted; the racing statements that were refused are in
    // it (near the quota blocks are one request: the three pass it by two at most).
    const count = await stored(db, spec.counter);
    expect(count).toBeGreaterThanOrEqual(allowed);
    expect(count).toBeLessThanOrEqual(quota + 2);
  });
});
