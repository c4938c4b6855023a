import { parseList } from 'structured-headers';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issueApiKey } from '../../domain/accounts/index.ts';
import { newId } from '../../domain/shared/index.ts';
import { parseRateLimits, purgeExpiredRateLimitCounters } from '../../domain/rate-limits/index.ts';
import { startTestApp, type TestApp } from '../support/app.ts';

/** `"minute";r=1;t=2, ...` → {minute: {r: 1, t: 2}, ...}, read with the same structured-field library. */
function fields(header: string | null): Record<string, Record<string, unknown>> {
  expect(header).toBeTruthy();
  return Object.fromEntries(parseList(header!).map(([name, params]) => [String(name), Object.fromEntries(params)]));
}

/** Fixed windows reset on the minute: sequences that must stay in one window start well inside it. */
async function awayFromMinuteEdge(): Promise<void> {
  const intoMinute = Date.now() % 60_000;
  if (intoMinute > 45_000) await new Promise((r) => setTimeout(r, 60_000 - intoMinute + 500));
}

/** Through `app.inject`: the limits are the API's own business, no network is needed to check them. */
describe('rate limits per account in three windows, shared by every API process', () => {
  let p: TestApp;
  // A second API process: its own app and its own database pool, on the same database.
  let second: Awaited<ReturnType<TestApp['another']>>;
  const quotas = { minute: 5, hour: 1000, day: 10_000 };

  beforeAll(async () => {
    p = await startTestApp();
    second = await p.another({ rateLimits: quotas });
  });
  afterAll(async () => {
    await p?.stop();
  });

  async function freshKey(
    limits: { rateLimitPerMinute?: number; rateLimitPerHour?: number; rateLimitPerDay?: number } = {},
  ): Promise<{ key: string; accountId: string }> {
    const account = await p.ctx.db.account.create({
      data: { id: newId(), email: `${newId()}@example.test`, name: 'rl', ...limits },
    });
    return { key: (await issueApiKey(p.ctx.db, account.id, 'rl', ['READ', 'WRITE'])).key, accountId: account.id };
  }

  it('parses GANTRY_RATE_LIMITS and refuses nonsense', () => {
    expect(parseRateLimits('minute=600,hour=20000,day=200000')).toEqual({ minute: 600, hour: 20_000, day: 200_000 });
    expect(parseRateLimits(' hour = 7 ', { minute: 1, hour: 2, day: 3 })).toEqual({ minute: 1, hour: 7, day: 3 });
    expect(parseRateLimits(undefined)).toEqual({ minute: 600, hour: 20_000, day: 200_000 });
    expect(() => parseRateLimits('minute=many')).toThrow(/GANTRY_RATE_LIMITS/);
    expect(() => parseRateLimits('week=5')).toThrow(/GANTRY_RATE_LIMITS/);
  });

  it('sends RateLimit and RateLimit-Policy on every authenticated answer', async () => {
    const { key } = await freshKey();
    await awayFromMinuteEdge();
    const ok = await p.call('GET', '/v2/serverless', { key });
    expect(ok.status).toBe(200);
    // This process runs on the built-in defaults.
    expect(ok.headers.get('ratelimit-policy')).toBe(
      '"minute";q=600;w=60, "hour";q=20000;w=3600, "day";q=200000;w=86400',
    );
    const state = fields(ok.headers.get('ratelimit'));
    expect(Object.keys(state)).toEqual(['minute', 'hour', 'day']);
    expect(state.minute).toMatchObject({ r: 599 });
    expect(state.hour).toMatchObject({ r: 19_999 });
    expect(state.day).toMatchObject({ r: 199_999 });
    expect(state.minute!.t).toBeGreaterThanOrEqual(1);
    expect(state.minute!.t).toBeLessThanOrEqual(60);
    expect(state.hour!.t).toBeLessThanOrEqual(3600);
    expect(state.day!.t).toBeLessThanOrEqual(86_400);
    // Errors of authenticated requests carry them too.
    const missing = await p.call('GET', '/v2/serverless/nosuchendpoint', { key });
    expect(missing.status).toBe(404);
    expect(fields(missing.headers.get('ratelimit')).minute).toMatchObject({ r: 598 });
    // Not on unauthenticated answers, nor outside the management API.
    expect((await p.call('GET', '/v2/serverless')).headers.get('ratelimit')).toBeNull();
    for (const path of ['/healthz', '/metrics', '/v2/openapi.json']) {
      const r = await p.call('GET', path, { key });
      expect(r.status, path).toBe(200);
      expect(r.headers.get('ratelimit'), path).toBeNull();
    }
  });

  it('enforces one limit across two API processes on one database, with 429, Retry-After and the window named', async () => {
    const { key, accountId } = await freshKey();
    // The first process runs on the defaults; pin the account to the second's quotas so both agree.
    await p.ctx.db.account.update({
      where: { id: accountId },
      data: { rateLimitPerMinute: quotas.minute, rateLimitPerHour: quotas.hour, rateLimitPerDay: quotas.day },
    });
    const processes = [p, second];
    await awayFromMinuteEdge();
    const answers = [];
    for (let i = 0; i < 8; i++) answers.push(await processes[i % 2]!.call('GET', '/v2/serverless', { key }));
    // If the two processes counted apart, each would allow 5.
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200, 200, 429, 429, 429]);
    const refused = answers[5]!;
    expect(refused.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(refused.body).toEqual({
      title: 'Too Many Requests',
      status: 429,
      detail: 'rate limit exceeded for the minute window',
    });
    const retryAfter = Number(refused.headers.get('retry-after'));
    const state = fields(refused.headers.get('ratelimit'));
    expect(retryAfter).toBe(state.minute!.t);
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(state.minute!.r).toBe(0);
    expect(refused.headers.get('ratelimit-policy')).toBe(
      '"minute";q=5;w=60, "hour";q=1000;w=3600, "day";q=10000;w=86400',
    );
    // Refused requests are not counted: the hour and day windows hold the 5 that went through.
    const counters = await p.ctx.db.rateLimitCounter.findMany({ where: { accountId } });
    expect(Object.fromEntries(counters.map((c) => [c.window, c.count]))).toEqual({ minute: 5, hour: 5, day: 5 });
    // Concurrent requests through both processes never let more than the quota through.
    const other = await freshKey({ rateLimitPerMinute: 10 });
    await awayFromMinuteEdge();
    const burst = await Promise.all(
      Array.from({ length: 30 }, (_, i) => processes[i % 2]!.call('GET', '/v2/serverless', { key: other.key })),
    );
    expect(burst.filter((b) => b.status === 200)).toHaveLength(10);
    expect(burst.filter((b) => b.status === 429)).toHaveLength(20);
  });

  it('uses the per-account override columns and names the exceeded window (hour, day)', async () => {
    const hourly = await freshKey({ rateLimitPerHour: 2 });
    const h = [];
    for (let i = 0; i < 3; i++) h.push(await second.call('GET', '/v2/serverless', { key: hourly.key }));
    expect(h.map((r) => r.status)).toEqual([200, 200, 429]);
    expect(h[2]!.body.detail).toBe('rate limit exceeded for the hour window');
    expect(h[2]!.headers.get('ratelimit-policy')).toBe('"minute";q=5;w=60, "hour";q=2;w=3600, "day";q=10000;w=86400');
    const hourState = fields(h[2]!.headers.get('ratelimit')).hour!;
    expect(Number(h[2]!.headers.get('retry-after'))).toBe(hourState.t);

    const daily = await freshKey({ rateLimitPerDay: 1, rateLimitPerMinute: 50 });
    await second.call('GET', '/v2/serverless', { key: daily.key });
    const d = await second.call('GET', '/v2/serverless', { key: daily.key });
    expect(d.status).toBe(429);
    expect(d.body.detail).toBe('rate limit exceeded for the day window');
    expect(Number(d.headers.get('retry-after'))).toBeGreaterThan(60);

    // A quota of zero refuses everything.
    const blocked = await freshKey({ rateLimitPerMinute: 0 });
    expect((await p.call('GET', '/v2/serverless', { key: blocked.key })).status).toBe(429);
  });

  it('limits every management route, writes included, before the body is read', async () => {
    const { key } = await freshKey({ rateLimitPerMinute: 1 });
    await awayFromMinuteEdge();
    expect((await p.call('GET', '/v2/serverless', { key })).status).toBe(200);
    // Over quota: 429 even for a body that would fail validation.
    const write = await p.call('POST', '/v2/serverless', { key, body: { bogus: true } });
    expect(write.status).toBe(429);
    const patch = await p.call('PATCH', '/v2/serverless/whatever', { key, body: {} });
    expect(patch.status).toBe(429);
  });

  it('purges the counters of ended windows and keeps the current ones', async () => {
    const { key, accountId } = await freshKey();
    await p.call('GET', '/v2/serverless', { key });
    const old = (secondsAgo: number) => new Date(Date.now() - secondsAgo * 1000);
    await p.ctx.db.rateLimitCounter.createMany({
      data: [
        { accountId, window: 'minute', windowStart: old(600), count: 3 },
        { accountId, window: 'hour', windowStart: old(3 * 3600), count: 3 },
        { accountId, window: 'day', windowStart: old(3 * 86_400), count: 3 },
        // The hour window that began 30 minutes ago has not ended.
        { accountId: `${accountId}-x`, window: 'hour', windowStart: old(1800), count: 3 },
      ],
    });
    const deleted = await purgeExpiredRateLimitCounters(p.ctx.db);
    expect(deleted).toBeGreaterThanOrEqual(3);
    const left = await p.ctx.db.rateLimitCounter.findMany({
      where: { accountId: { in: [accountId, `${accountId}-x`] } },
    });
    // The current windows stay (their count is the block the limiter took: at least the one request).
    expect(
      left
        .map((c) =>
          c.accountId === accountId
            ? `a:${c.window}:${c.count >= 1 ? 'current' : c.count}`
            : `x:${c.window}:${c.count}`,
        )
        .sort(),
    ).toEqual(['a:day:current', 'a:hour:current', 'a:minute:current', 'x:hour:3']);
  });
});
