import type { FastifyInstance, FastifyRequest } from 'fastify';
import { authenticate, requireScope, type Principal, type Scope } from '../domain/auth.ts';
import type { Db } from '../domain/db.ts';
import { DomainError } from '../domain/errors.ts';

declare module 'fastify' {
  interface FastifyRequest {
    principal?: Principal;
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

export async function principalOf(db: Db, request: FastifyRequest): Promise<Principal> {
  if (!request.principal) request.principal = await authenticate(db, bearerToken(request));
  return request.principal;
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
export function registerAuthentication(app: FastifyInstance, db: Db): void {
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
