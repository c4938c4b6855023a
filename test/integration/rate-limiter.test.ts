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
    // Blocks of 100 first, each twice the last while they go within a second: a handful of statements.
    expect(c.statements()).toBeLessThanOrEqual(8);
    // Counted up front: what was granted, at least what was admitted, and no more than the last block beyond it.
    const count = await stored(db, spec.counter);
    expect(count).toBeGreaterThanOrEqual(2_000);
    expect(count).toBeLessThan(2_000 + 2_000);
  });

  it('asks for larger blocks while a counter is busy, and for the first size again once it is not', async () => {
    await awayFromMinuteEdge();
    const c = counting(db);
    const limiter = new RateLimiter(c.db, { ...DEFAULT_RATE_LIMITER_OPTIONS, staleMs: 60_000 });
    const spec: CounterSpec = {
      counter: `grow/${newId()}`,
      quotas: { minute: 10_000_000, hour: 10_000_000, day: 10_000_000 },
    };
    for (let i = 0; i < 20_000; i++) expect((await limiter.consume(spec)).allowed).toBe(true);
    // 100, 200, ..., 6,400 (the most), then 6,400 again: 20,000 requests in 9 statements, not 200.
    expect(c.statements()).toBeLessThanOrEqual(9);
    const busy = (await stored(db, spec.counter)) - 20_000;
    // What is held unspent is at most the largest block.
    expect(busy).toBeLessThan(DEFAULT_RATE_LIMITER_OPTIONS.maxBlock);

    // A quiet counter: its block lasts longer than a second, so the next is the first size again.
    const quiet: CounterSpec = { ...spec, counter: `quiet/${newId()}` };
    const before = c.statements();
    for (let i = 0; i < 100; i++) await limiter.consume(quiet);
    await new Promise((r) => setTimeout(r, 1_100));
    await limiter.consume(quiet);
    expect(c.statements() - before).toBe(2);
    expect(await stored(db, quiet.counter)).toBe(2 * DEFAULT_RATE_LIMITER_OPTIONS.firstBlock);
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
    // Near a quota a block is at most a 20th of what is left, however busy the counter.
    expect(allowed).toBeGreaterThanOrEqual(quota - 3 * quota * DEFAULT_RATE_LIMITER_OPTIONS.blockShare);
    // The count is never below what was admitted; the racing statements that were refused are in
    // it (near the quota blocks are one request: the three pass it by two at most).
    const count = await stored(db, spec.counter);
    expect(count).toBeGreaterThanOrEqual(allowed);
    expect(count).toBeLessThanOrEqual(quota + 2);
  });
});
