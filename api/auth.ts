import type { FastifyInstance, FastifyRequest } from 'fastify';
import { authenticate, authenticateCached, requireScope, type Principal, type Scope } from '../domain/auth.ts';
import type { Db } from '../domain/db.ts';
import { DomainError } from '../domain/errors.ts';
import { consumeCounter } from '../domain/rate-limit.ts';

declare module 'fastify' {
  interface FastifyRequest {
    principal?: Principal;
  }
  interface FastifyInstance {
    authThrottle?: AuthFailureThrottle;
  }
  interface FastifySchema {
    /** The key scope the operation needs, shown in the OpenAPI document. */
    'x-required-scope'?: Scope;
  }
}

/** `Authorization: Bearer <key>`; anything else is 401 (spec "Authentication"). */
export function bearerToken(request: FastifyRequest): string | undefined {
  const header = request.headers.authorization;
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

  private check(address: string): void {
    const until = this.blockedUntil.get(address);
    if (until === undefined) return;
    const left = until - Date.now();
    if (left > 0) throw new DomainError('rate_limited', `too many failed authentications from this address; retry in ${Math.ceil(left / 1000)} s`);
    this.blockedUntil.delete(address);
  }

  private async failed(address: string): Promise<void> {
    const d = await consumeCounter(this.db, { counter: `auth-failure/${address}`, quotas: { minute: this.perMinute, hour: 2 ** 31 - 1, day: 2 ** 31 - 1 } });
    // The failure that reaches the limit is the last one answered.
    const minute = d.windows.find((w) => w.window === 'minute');
    if (!minute || minute.count < this.perMinute) return;
    if (this.blockedUntil.size > 100_000) this.blockedUntil.clear();
    this.blockedUntil.set(address, Date.now() + minute.resetSeconds * 1000);
  }

  /** Runs `authenticate` for the request's address: refused while blocked, counted when it fails. */
  async guard<T>(address: string, authenticate: () => Promise<T>): Promise<T> {
    this.check(address);
    try {
      return await authenticate();
    } catch (err) {
      if (err instanceof DomainError && err.kind === 'unauthenticated') await this.failed(address);
      throw err;
    }
  }
}

/** Authenticates through the app's failed-authentication throttle (when it has one). */
export function throttledAuth<T>(request: FastifyRequest, authenticate: () => Promise<T>): Promise<T> {
  const throttle = request.server.authThrottle;
  return throttle ? throttle.guard(request.ip, authenticate) : authenticate();
}

export async function principalOf(db: Db, request: FastifyRequest): Promise<Principal> {
  if (!request.principal) request.principal = await throttledAuth(request, () => authenticate(db, bearerToken(request)));
  return request.principal;
}

/**
 * Principals of the job API, cached briefly by key hash: every job call (run, runsync, status
 * polls) would otherwise cost a key lookup. A revoked key keeps working here for up to this long.
 */
const PRINCIPAL_CACHE_MS = 5_000;

export async function cachedPrincipalOf(db: Db, request: FastifyRequest): Promise<Principal> {
  // Inside the throttle: a refused address is refused even with a key this process remembers.
  request.principal ??= await throttledAuth(request, () => authenticateCached(db, bearerToken(request), PRINCIPAL_CACHE_MS));
  return request.principal;
}

/** The job API's actions (`/v2/:endpointId/<action>/...`); the worker protocol's routes are not among them. */
const JOB_API_ACTIONS = new Set(['run', 'runsync', 'status', 'status-sync', 'stream', 'cancel', 'retry', 'purge-queue', 'health']);

export function isJobApiRoute(url: string | undefined): boolean {
  if (!url?.startsWith('/v2/:endpointId/')) return false;
  return JOB_API_ACTIONS.has(url.slice('/v2/:endpointId/'.length).split('/')[0] ?? '');
}

/** Paths under /v2 that anyone may read: the API description and its explorer. */
const PUBLIC_V2 = new Set(['openapi.json', 'docs']);

/**
 * The management REST API: routes `/v2/<static segment>/...` (serverless, templates, registries,
 * ...). Job API and worker routes begin with a parameter (`/v2/:endpointId/run`) and have their own
 * authentication, rules and limits. `url` is the route's pattern, not the request's path.
 */
export function isManagementRoute(url: string | undefined): boolean {
  if (!url?.startsWith('/v2/')) return false;
  const first = url.slice(4).split('/')[0] ?? '';
  return first !== '' && !first.startsWith(':') && !first.startsWith('*') && !PUBLIC_V2.has(first);
}

/**
 * Authenticates every management request before its body is parsed or validated, so a request
 * without a valid key is 401 whatever it carries; routes read the cached principal.
 */
export function registerAuthentication(app: FastifyInstance, db: Db, authFailuresPerMinute: number): void {
  app.decorate('authThrottle', new AuthFailureThrottle(db, authFailuresPerMinute));
  app.addHook('onRequest', async (request) => {
    if (isManagementRoute(request.routeOptions.url)) await principalOf(db, request);
  });
}

/** Route-level onRequest hook: the scope check before validation, so the order is 401, 403, 422. */
export const scopeGuard =
  (db: Db, scope: Scope) =>
  async (request: FastifyRequest): Promise<void> => {
    requireScope(await principalOf(db, request), scope);
  };
