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
  type SurfaceLimits,
} from '../domain/rate-limits/index.ts';

const PURGE_EVERY_MS = 5 * 60_000;

/** `"minute";r=599;t=42, "hour";r=...;t=..., "day";r=...;t=...` (spec "Limits"). */
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

/** `"minute";q=600;w=60, "hour";q=...;w=3600, "day";q=...;w=86400`. */
export function rateLimitPolicyHeader(decision: RateLimitDecision): string {
  return serializeList(
    decision.windows.map((w) => [
      w.window,
      new Map([
        ['q', w.quota],
        ['w', w.seconds],
      ]),
    ]),
  );
}

function setHeaders(reply: FastifyReply, decision: RateLimitDecision): void {
  reply.header('RateLimit', rateLimitHeader(decision));
  reply.header('RateLimit-Policy', rateLimitPolicyHeader(decision));
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
  const decision = ctx.rateLimiter ? await ctx.rateLimiter.consume(spec) : await consumeCounter(ctx.db, spec);
  setHeaders(reply, decision);
  if (!decision.allowed && decision.exceeded) {
    reply.header('Retry-After', String(decision.exceeded.resetSeconds));
    throw new DomainError('rate_limited', `rate limit exceeded for the ${decision.exceeded.window} window`);
  }
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
  scope.addHook('onRequest', async (request, reply) => enforceRateLimit(ctx, reply, counterOf(request)));
}

/** The management API's quota: per account, REST and GraphQL together (docs/security.md). */
export function managementCounter(principal: Principal, limits: SurfaceLimits): CounterSpec {
  return { counter: principal.accountId, accountId: principal.accountId, quotas: limits.management };
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
