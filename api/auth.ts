import type { FastifyRequest } from 'fastify';
import { authenticate, type Principal } from '../domain/auth.ts';
import type { Db } from '../domain/db.ts';
import { DomainError } from '../domain/errors.ts';

declare module 'fastify' {
  interface FastifyRequest {
    principal?: Principal;
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
