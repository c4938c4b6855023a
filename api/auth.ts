import type { FastifyInstance, FastifyRequest } from 'fastify';
import {
  authenticateCached,
  authenticateCurrent,
  requireAnyScope,
  requireScope,
  type KeySource,
  type Principal,
  type Scope,
} from '../domain/accounts/index.ts';
import type { DomainContext } from '../domain/context.ts';
import type { Db } from '../domain/shared/index.ts';
import type { RecordCaches } from '../domain/shared/index.ts';
import { DomainError, ForgedCredential } from '../domain/errors.ts';
import { consumeCounter } from '../domain/rate-limits/index.ts';

declare module 'fastify' {
  interface FastifyRequest {
    principal?: Principal;
  }
  interface FastifyInstance {
    authThrottle?: AuthFailureThrottle;
  }
  interface FastifyContextConfig {
    /** The key scope a management route needs (see requireDeclaredScopes); the OpenAPI document shows it as `x-required-scope`. */
    requiredScope?: Scope | readonly Scope[];
  }
}

/** `Authorization: Bearer <key>`; anything else is 401 (docs/security.md). */
export function bearerToken(request: FastifyRequest): string | undefined {
  return bearerOf(request.headers.authorization);
}

/** The key of an `Authorization` header's value; undefined without one, 401 when it is not `Bearer <key>`. */
export function bearerOf(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  if (!match) throw new DomainError('unauthenticated', 'malformed Authorization header; expected "Bearer <key>"');
  return match[1];
}

/**
 * Per client address: failed authentications are counted in PostgreSQL (shared by every API
 * process); past the per-minute limit the address is refused before any key lookup until the
 * minute ends. The refusal itself is remembered in this process only, which costs each process at
 * most one more counted failure per address and minute.
 */
export class AuthFailureThrottle {
  private readonly blockedUntil = new Map<string, number>();
  constructor(
    private readonly db: Db,
    private readonly perMinute: number,
  ) {}

  /** Refuses a blocked address (429), before any key is looked at. */
  check(address: string): void {
    const until = this.blockedUntil.get(address);
    if (until === undefined) return;
    const left = until - Date.now();
    if (left > 0)
      throw new DomainError(
        'rate_limited',
        `too many failed authentications from this address; retry in ${Math.ceil(left / 1000)} s`,
      );
    this.blockedUntil.delete(address);
  }

  private async failed(address: string): Promise<void> {
    const d = await consumeCounter(this.db, {
      counter: `auth-failure/${address}`,
      quotas: { minute: this.perMinute, hour: 2 ** 31 - 1, day: 2 ** 31 - 1 },
    });
    // The failure that reaches the limit is the last one answered.
    const minute = d.windows.find((w) => w.window === 'minute');
    if (!minute || minute.count < this.perMinute) return;
    if (this.blockedUntil.size > 100_000) this.blockedUntil.clear();
    this.blockedUntil.set(address, Date.now() + minute.resetSeconds * 1000);
  }

  /**
   * Runs `authenticate` for the request's address: refused while blocked, counted when it fails
   * (a 401, or a `forbidden` that says a credential was forged: a signed URL's bad signature).
   */
  async guard<T>(address: string, authenticate: () => Promise<T>): Promise<T> {
    this.check(address);
    try {
      return await authenticate();
    } catch (err) {
      if (err instanceof DomainError && (err.kind === 'unauthenticated' || err instanceof ForgedCredential))
        await this.failed(address);
      throw err;
    }
  }
}

/** Authenticates through the app's failed-authentication throttle (when it has one). */
export function throttledAuth<T>(request: FastifyRequest, authenticate: () => Promise<T>): Promise<T> {
  const throttle = request.server.authThrottle;
  return throttle ? throttle.guard(request.ip, authenticate) : authenticate();
}

/** One failed-authentication throttle for the whole app: every surface counts into it (docs/security.md). */
export function registerAuthThrottle(app: FastifyInstance, db: Db, authFailuresPerMinute: number): void {
  app.decorate('authThrottle', new AuthFailureThrottle(db, authFailuresPerMinute));
}

/**
 * The principal the scope's authentication hook resolved. Only routes inside an authenticated scope
 * (see authenticateRequests) may call it; elsewhere it is a programming error, not a 401.
 */
export function principalOf(request: FastifyRequest): Principal {
  if (!request.principal)
    throw new Error(
      `${request.method} ${request.routeOptions.url ?? request.url}: no principal; the route is outside an authenticated scope`,
    );
  return request.principal;
}

/**
 * Principals of the job API, through the process's record cache (`ctx.records`): every job call
 * (run, runsync, status polls) would otherwise cost a key lookup. A revoked key keeps working here
 * for at most the revocation bound (domain/shared/record-cache.ts).
 */
export async function cachedPrincipalOf(
  ctx: Pick<DomainContext, 'db' | 'records' | 'jobs'>,
  request: FastifyRequest,
): Promise<Principal> {
  // Inside the throttle: a refused address is refused even with a key this process remembers.
  request.principal ??= await throttledAuth(request, () => authenticateCached(ctx, bearerToken(request)));
  return request.principal;
}

/**
 * In `scope` (an encapsulated plugin) every request presents an API key as `Authorization: Bearer
 * <key>`, checked on `onRequest`: before the body is read, parsed or validated, so a request without
 * a valid key is 401 whatever it carries, and the failed-authentication throttle refuses a flooding
 * address before any key is looked up. Routes read the principal with principalOf. `cache`: through
 * the process's record cache (cachedPrincipalOf; the job API); without it every key is as current as
 * a read (authenticateCurrent: the management API).
 */
export function authenticateRequests(
  scope: FastifyInstance,
  source: KeySource,
  opts: { cache?: RecordCaches } = {},
): void {
  const { cache } = opts;
  scope.addHook('onRequest', async (request) => {
    if (cache) await cachedPrincipalOf({ ...source, records: cache }, request);
    else request.principal = await throttledAuth(request, () => authenticateCurrent(source, bearerToken(request)));
  });
}

/**
 * Every route of `scope` declares the key scope it needs (`config: { requiredScope }`, shown in the
 * OpenAPI document as `x-required-scope`); a route without one fails the app's start. The check
 * runs on `onRequest`, after authentication and the rate limit and before validation, so the order
 * of refusals is 401, 429, 403, 422. The domain functions check their own scopes as well: they are
 * the rule, this is the early answer.
 */
export function requireDeclaredScopes(scope: FastifyInstance): void {
  scope.addHook('onRoute', (route) => {
    if (!route.config?.requiredScope)
      throw new Error(`${String(route.method)} ${route.url}: a route of this scope must declare config.requiredScope`);
  });
  scope.addHook('onRequest', async (request) => {
    const needed = request.routeOptions.config.requiredScope;
    if (typeof needed === 'string') requireScope(principalOf(request), needed);
    else if (needed) requireAnyScope(principalOf(request), needed);
  });
}
