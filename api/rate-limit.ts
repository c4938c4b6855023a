import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { serializeList } from 'structured-headers';
import type { Principal } from '../domain/accounts/index.ts';
import type { DomainContext } from '../domain/context.ts';
import { DomainError } from '../domain/errors.ts';
import {
  consumeCounter,
  purgeExpiredRateLimitCounters,
  type CounterSpec,
  type RateLimitDecision,
  type RateLimitQuotas,
  type SurfaceLimits,
} from '../domain/rate-limits/index.ts';

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * The counter a route of a counted scope spends instead of the scope's (countRequests): the
     * console's once-a-second key check, which would otherwise spend the account's quota.
     */
    counter?: (request: FastifyRequest) => CounterSpec;
  }
}

const PURGE_EVERY_MS = 5 * 60_000;

/** `"minute";r=599;t=42, "hour";r=...;t=..., "day";r=...;t=...` (docs/security.md, "Authentication and limits"). */
export function rateLimitHeader(decision: RateLimitDecision): string {
  return serializeList(
    decision.windows.map((w) => [
      w.window,
      new Map([
        ['r', w.remaining],
        ['t', w.resetSeconds],
      ]),
    ]),
  );
}

/** Serialized policies by their quotas: a policy changes only with its quotas, and serializing it costs as much as a proxied request's routing. */
const policies = new Map<string, string>();

/** `"minute";q=600;w=60, "hour";q=...;w=3600, "day";q=...;w=86400`. */
export function rateLimitPolicyHeader(decision: RateLimitDecision): string {
  const key = decision.windows.map((w) => `${w.window}/${w.quota}/${w.seconds}`).join(',');
  let header = policies.get(key);
  if (header === undefined) {
    header = serializeList(
      decision.windows.map((w) => [
        w.window,
        new Map([
          ['q', w.quota],
          ['w', w.seconds],
        ]),
      ]),
    );
    if (policies.size >= 10_000) policies.clear();
    policies.set(key, header);
  }
  return header;
}

/**
 * The headers an answer to a counted request carries: RateLimit and RateLimit-Policy, and over
 * quota Retry-After.
 */
export function rateLimitHeaders(decision: RateLimitDecision): Array<[string, string]> {
  const headers: Array<[string, string]> = [
    ['RateLimit', rateLimitHeader(decision)],
    ['RateLimit-Policy', rateLimitPolicyHeader(decision)],
  ];
  if (!decision.allowed && decision.exceeded) headers.push(['Retry-After', String(decision.exceeded.resetSeconds)]);
  return headers;
}

/**
 * Counts one request against `spec`'s windows; over quota it throws `rate_limited` (429). The
 * caller sets rateLimitHeaders(decision) first, whatever the outcome.
 */
export async function consumeQuota(
  ctx: Pick<DomainContext, 'db' | 'rateLimiter'>,
  spec: CounterSpec,
): Promise<RateLimitDecision> {
  return ctx.rateLimiter ? ctx.rateLimiter.consume(spec) : consumeCounter(ctx.db, spec);
}

/** Throws `rate_limited` (429) when the decision refused the request. */
export function refuseOverQuota(decision: RateLimitDecision): void {
  if (!decision.allowed && decision.exceeded)
    throw new DomainError('rate_limited', `rate limit exceeded for the ${decision.exceeded.window} window`);
}

/**
 * Counts one request against `spec`'s windows and sets the RateLimit and RateLimit-Policy headers;
 * over quota it throws `rate_limited` (429) with Retry-After.
 */
export async function enforceRateLimit(
  ctx: Pick<DomainContext, 'db' | 'rateLimiter'>,
  reply: FastifyReply,
  spec: CounterSpec,
): Promise<void> {
  const decision = await consumeQuota(ctx, spec);
  for (const [name, value] of rateLimitHeaders(decision)) reply.header(name, value);
  refuseOverQuota(decision);
}

/**
 * In `scope` (an encapsulated plugin, after its authentication hook) every request counts against
 * the counter `counterOf` names for it, on `onRequest`, before the body is read. Every answer to a
 * counted request carries the RateLimit headers; over quota it is 429 with Retry-After.
 */
export function countRequests(
  scope: FastifyInstance,
  ctx: Pick<DomainContext, 'db' | 'rateLimiter'>,
  counterOf: (request: FastifyRequest) => CounterSpec,
): void {
  scope.addHook('onRequest', async (request, reply) =>
    enforceRateLimit(ctx, reply, request.routeOptions.config.counter?.(request) ?? counterOf(request)),
  );
}

/** The management API's quota: per account, REST and GraphQL together (docs/security.md). */
export function managementCounter(principal: Principal, limits: SurfaceLimits): CounterSpec {
  return { counter: principal.accountId, accountId: principal.accountId, quotas: limits.management };
}

/**
 * GET /v2/keys/self's quota, per key and apart from the account's: the console asks it every second
 * in each open tab (3,600 an hour, 86,400 a day), which would use up the management quota (20,000 an
 * hour by default) within hours. This one holds ten such tabs all day; a flood past it is still 429.
 */
export const KEY_CHECK_QUOTAS: RateLimitQuotas = { minute: 600, hour: 36_000, day: 864_000 };

export function keyCheckCounter(principal: Principal): CounterSpec {
  return { counter: `${principal.accountId}/key-check/${principal.keyId}`, quotas: KEY_CHECK_QUOTAS };
}

/** The job API's quota: per account and endpoint. */
export function jobApiCounter(principal: Principal, endpointId: string, limits: SurfaceLimits): CounterSpec {
  return { counter: `${principal.accountId}/jobs/${endpointId}`, quotas: limits.jobs };
}

/** Removes the counters of ended windows every few minutes while the app runs. */
export function registerRateLimitPurge(app: FastifyInstance, ctx: DomainContext): void {
  let timer: NodeJS.Timeout | undefined;
  app.addHook('onReady', async () => {
    timer = setInterval(() => {
      purgeExpiredRateLimitCounters(ctx.db).catch((err: unknown) =>
        app.log.warn({ err }, 'purging rate-limit counters failed'),
      );
    }, PURGE_EVERY_MS);
    timer.unref();
  });
  app.addHook('onClose', async () => {
    if (timer) clearInterval(timer);
  });
}
