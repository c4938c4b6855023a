import type { FastifyInstance, FastifyReply } from 'fastify';
import { serializeList } from 'structured-headers';
import type { DomainContext } from '../domain/context.ts';
import { DomainError } from '../domain/errors.ts';
import { consumeCounter, purgeExpiredRateLimitCounters, type CounterSpec, type RateLimitDecision, type SurfaceLimits } from '../domain/rate-limit.ts';
import { cachedPrincipalOf, isJobApiRoute, isManagementRoute, principalOf } from './auth.ts';

const PURGE_EVERY_MS = 5 * 60_000;

/** `"minute";r=599;t=42, "hour";r=...;t=..., "day";r=...;t=...` (spec "Limits"). */
export function rateLimitHeader(decision: RateLimitDecision): string {
  return serializeList(decision.windows.map((w) => [w.window, new Map([['r', w.remaining], ['t', w.resetSeconds]])]));
}

/** `"minute";q=600;w=60, "hour";q=...;w=3600, "day";q=...;w=86400`. */
export function rateLimitPolicyHeader(decision: RateLimitDecision): string {
  return serializeList(decision.windows.map((w) => [w.window, new Map([['q', w.quota], ['w', w.seconds]])]));
}

function setHeaders(reply: FastifyReply, decision: RateLimitDecision): void {
  reply.header('RateLimit', rateLimitHeader(decision));
  reply.header('RateLimit-Policy', rateLimitPolicyHeader(decision));
}

/**
 * Counts one request against `spec`'s windows and sets the RateLimit and RateLimit-Policy headers;
 * over quota it throws `rate_limited` (429) with Retry-After.
 */
export async function enforceRateLimit(ctx: Pick<DomainContext, 'db'>, reply: FastifyReply, spec: CounterSpec): Promise<void> {
  const decision = await consumeCounter(ctx.db, spec);
  setHeaders(reply, decision);
  if (!decision.allowed && decision.exceeded) {
    reply.header('Retry-After', String(decision.exceeded.resetSeconds));
    throw new DomainError('rate_limited', `rate limit exceeded for the ${decision.exceeded.window} window`);
  }
}

/**
 * Counts every authenticated management request against its account's quotas, and every job API
 * request against its account-and-endpoint quotas (registered after authentication, before body
 * parsing). GraphQL and the load-balancing proxy count theirs where they authenticate. Every
 * answer to a counted request carries the RateLimit headers; over quota is 429 with Retry-After.
 */
export function registerRateLimit(app: FastifyInstance, ctx: DomainContext, limits: SurfaceLimits): void {
  app.addHook('onRequest', async (request, reply) => {
    const url = request.routeOptions.url;
    if (isManagementRoute(url)) {
      const principal = await principalOf(ctx.db, request);
      await enforceRateLimit(ctx, reply, { counter: principal.accountId, accountId: principal.accountId, quotas: limits.management });
    } else if (isJobApiRoute(url)) {
      const principal = await cachedPrincipalOf(ctx.db, request);
      const endpointId = (request.params as { endpointId?: string }).endpointId ?? '';
      await enforceRateLimit(ctx, reply, { counter: `${principal.accountId}/jobs/${endpointId}`, quotas: limits.jobs });
    }
  });

  let timer: NodeJS.Timeout | undefined;
  app.addHook('onReady', async () => {
    timer = setInterval(() => {
      purgeExpiredRateLimitCounters(ctx.db).catch((err: unknown) => app.log.warn({ err }, 'purging rate-limit counters failed'));
    }, PURGE_EVERY_MS);
    timer.unref();
  });
  app.addHook('onClose', async () => {
    if (timer) clearInterval(timer);
  });
}
