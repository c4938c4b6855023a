import { Type } from 'typebox';
import type { Account, ApiKey } from '../../generated/prisma/client.ts';
import {
  type IssuedKey,
  issueApiKey,
  type KeyFacts,
  type Principal,
  requireAccountWide,
  requireScope,
  type Scope,
} from './auth.ts';
import type { DomainContext } from '../context.ts';
import { DomainError, forbidden, notFound, validationFailed } from '../errors.ts';
import { newId } from '../shared/ids.ts';
import { isUniqueViolation } from '../shared/db.ts';
import { validate } from '../shared/validation.ts';

/**
 * API keys and accounts.
 *
 * Who may manage keys: a key never makes or revokes a key stronger than itself.
 * - Listing needs READ; creating and revoking need WRITE; all within the caller's own account.
 * - A new key's scopes must be scopes the calling key has (a key with ADMIN has them all), and it
 *   cannot outlive the calling key. Revoking a key needs every scope that key has.
 * - Keys limited to some endpoints cannot manage keys.
 * - The platform admin (an admin account's key with the ADMIN scope) may do all of this for any
 *   account (`accountId`), without those limits, and alone may create accounts.
 * A key is shown once, when created; only its SHA-256 and its first characters are kept.
 */

export const ScopeSchema = Type.Union([
  Type.Literal('READ'),
  Type.Literal('WRITE'),
  Type.Literal('RUN'),
  Type.Literal('ADMIN'),
]);

export const CreateApiKeySchema = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 191 }),
    scopes: Type.Array(ScopeSchema, {
      minItems: 1,
      uniqueItems: true,
      description:
        'READ: read management resources; WRITE: change them; RUN: submit jobs and call endpoints; ADMIN: everything, and keys',
    }),
    endpointIds: Type.Optional(
      Type.Array(Type.String({ minLength: 1 }), {
        uniqueItems: true,
        maxItems: 1000,
        description: 'limit the key to these endpoints; empty or absent: all',
      }),
    ),
    expiresAt: Type.Optional(
      Type.String({ format: 'date-time', description: 'the key stops working at this instant' }),
    ),
    accountId: Type.Optional(
      Type.String({ minLength: 1, description: 'platform admin only: make the key for this account' }),
    ),
  },
  { additionalProperties: false },
);

export const ApiKeyListQuerySchema = Type.Object(
  {
    accountId: Type.Optional(Type.String({ minLength: 1, description: "platform admin only: another account's keys" })),
  },
  { additionalProperties: false },
);

export const CreateAccountSchema = Type.Object(
  {
    email: Type.String({ format: 'email', maxLength: 320 }),
    name: Type.String({ minLength: 1, maxLength: 191 }),
    isAdmin: Type.Optional(
      Type.Boolean({ default: false, description: 'a platform admin account (its ADMIN keys manage every account)' }),
    ),
    serverlessDiscount: Type.Optional(
      Type.Object(
        {
          discountFactor: Type.Number({
            minimum: 0,
            maximum: 1,
            description: 'serverless list prices are multiplied by this (0.8: 20% off)',
          }),
          type: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
          expirationDate: Type.Optional(
            Type.String({ format: 'date-time', description: 'usage after this instant is billed at list price' }),
          ),
        },
        { additionalProperties: false },
      ),
    ),
  },
  { additionalProperties: false },
);

/** The account a key operation acts on: the caller's, or (platform admin only) the one named. */
function targetAccount(principal: Principal, accountId: string | undefined): string {
  if (accountId === undefined || accountId === principal.accountId) return principal.accountId;
  if (!principal.isAdmin) throw forbidden('only the platform admin manages keys of other accounts');
  return accountId;
}

const holds = (principal: Principal, scope: Scope): boolean =>
  principal.scopes.has(scope) || principal.scopes.has('ADMIN');

export async function createApiKey(ctx: DomainContext, principal: Principal, body: unknown): Promise<IssuedKey> {
  requireScope(principal, 'WRITE');
  requireAccountWide(principal);
  const input = validate(CreateApiKeySchema, body);
  const accountId = targetAccount(principal, input.accountId);
  const problems: string[] = [];
  const expiresAt = input.expiresAt !== undefined ? new Date(input.expiresAt) : null;
  if (expiresAt && expiresAt.getTime() <= Date.now()) problems.push('$.expiresAt: must be in the future');
  if (
    accountId !== principal.accountId &&
    !(await ctx.db.account.findUnique({ where: { id: accountId }, select: { id: true } }))
  ) {
    problems.push(`$.accountId: no account '${accountId}'`);
  }
  const endpointIds = input.endpointIds ?? [];
  if (endpointIds.length > 0) {
    const found = await ctx.db.endpoint.findMany({
      where: { id: { in: endpointIds }, accountId, deletingAt: null },
      select: { id: true },
    });
    const known = new Set(found.map((e) => e.id));
    for (const id of endpointIds) if (!known.has(id)) problems.push(`$.endpointIds: no endpoint '${id}'`);
  }
  if (problems.length > 0) throw validationFailed(problems);

  if (!principal.isAdmin) {
    const stronger = input.scopes.filter((s) => !holds(principal, s));
    if (stronger.length > 0) throw forbidden(`a key cannot grant scopes it does not have: ${stronger.join(', ')}`);
    const caller = await ctx.db.apiKey.findUnique({ where: { id: principal.keyId }, select: { expiresAt: true } });
    if (caller?.expiresAt && (!expiresAt || expiresAt > caller.expiresAt)) {
      throw forbidden(
        `a key cannot outlive the key that makes it: set expiresAt no later than ${caller.expiresAt.toISOString()}`,
      );
    }
  }

  return issueApiKey(ctx.db, accountId, input.name, input.scopes, undefined, endpointIds, expiresAt);
}

export async function listApiKeys(ctx: DomainContext, principal: Principal, query: unknown = {}): Promise<ApiKey[]> {
  requireScope(principal, 'READ');
  requireAccountWide(principal);
  const accountId = targetAccount(principal, validate(ApiKeyListQuerySchema, query).accountId);
  return ctx.db.apiKey.findMany({ where: { accountId }, orderBy: { createdAt: 'asc' } });
}

/** The calling key: its principal (scopes, endpoints, account, admin) and its record's facts. */
export interface CallingKey {
  principal: Principal;
  facts: KeyFacts;
}

/**
 * The calling key as authentication resolved it: no query when the principal carries its key's
 * record (every key-made principal does), one indexed read otherwise. Any valid key may ask.
 */
export async function describeCallingKey(ctx: Pick<DomainContext, 'db'>, principal: Principal): Promise<CallingKey> {
  let facts = principal.key;
  if (!facts) {
    const row = await ctx.db.apiKey.findUnique({ where: { id: principal.keyId } });
    if (!row) throw new DomainError('unauthenticated', 'invalid bearer token');
    facts = {
      name: row.name,
      prefix: row.prefix,
      createdAt: row.createdAt.toISOString(),
      expiresAt: row.expiresAt?.toISOString() ?? null,
    };
  }
  return { principal, facts };
}

/** Revokes a key (idempotent). Another account's key is 404, except for the platform admin. */
export async function revokeApiKey(ctx: DomainContext, principal: Principal, id: string): Promise<void> {
  requireScope(principal, 'WRITE');
  requireAccountWide(principal);
  const key = await ctx.db.apiKey.findFirst({
    where: principal.isAdmin ? { id } : { id, accountId: principal.accountId },
  });
  if (!key) throw notFound('API key');
  if (!principal.isAdmin) {
    const stronger = key.scopes.filter((s) => !holds(principal, s));
    if (stronger.length > 0) throw forbidden(`revoking this key needs the scopes it has: ${stronger.join(', ')}`);
  }
  if (!key.revokedAt)
    await ctx.db.apiKey.updateMany({ where: { id, revokedAt: null }, data: { revokedAt: new Date() } });
  // This process forgets it now; every other one when the trigger's notification reaches it.
  ctx.records?.keys.delete(key.hash);
}

function requirePlatformAdmin(principal: Principal): void {
  if (!principal.isAdmin) throw forbidden('only the platform admin manages accounts');
  // An admin key limited to some endpoints is limited: accounts are wider than any account.
  requireAccountWide(principal);
}

export async function createAccount(ctx: DomainContext, principal: Principal, body: unknown): Promise<Account> {
  requirePlatformAdmin(principal);
  const input = validate(CreateAccountSchema, body);
  const d = input.serverlessDiscount;
  try {
    return await ctx.db.account.create({
      data: {
        id: newId(),
        email: input.email,
        name: input.name,
        isAdmin: input.isAdmin ?? false,
        serverlessDiscountFactor: d?.discountFactor ?? null,
        serverlessDiscountType: d?.type ?? null,
        serverlessDiscountExpires: d?.expirationDate !== undefined ? new Date(d.expirationDate) : null,
      },
    });
  } catch (err) {
    if (isUniqueViolation(err))
      throw new DomainError('conflict', `an account with e-mail '${input.email}' already exists`);
    throw err;
  }
}

export async function listAccounts(ctx: DomainContext, principal: Principal): Promise<Account[]> {
  requirePlatformAdmin(principal);
  return ctx.db.account.findMany({ orderBy: { createdAt: 'asc' } });
}
