import type { FastifyInstance, FastifyReply } from 'fastify';
import { serializeList } from 'structured-headers';
import type { DomainContext } from '../domain/context.ts';
import { DomainError } from '../domain/errors.ts';
import { consumeRateLimit, purgeExpiredRateLimitCounters, type RateLimitDecision, type RateLimitQuotas } from '../domain/rate-limit.ts';
import { isManagementRoute, principalOf } from './auth.ts';

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
 * Counts every authenticated management request against its account's quotas (registered after
 * authentication, before body parsing). Every answer to such a request carries the RateLimit and
 * RateLimit-Policy headers; a request over quota gets 429 with Retry-After.
 */
export function registerRateLimit(app: FastifyInstance, ctx: DomainContext, quotas: RateLimitQuotas): void {
  app.addHook('onRequest', async (request, reply) => {
    if (!isManagementRoute(request.routeOptions.url)) return;
    const decision = await consumeRateLimit(ctx, await principalOf(ctx.db, request), quotas);
    setHeaders(reply, decision);
    if (!decision.allowed && decision.exceeded) {
      reply.header('Retry-After', String(decision.exceeded.resetSeconds));
      throw new DomainError('rate_limited', `rate limit exceeded for the ${decision.exceeded.window} window`);
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
