import { Type, type Static } from 'typebox';
import type { Account, ApiKey } from '../../generated/prisma/client.ts';
import { issueApiKey, type Principal, requireAccountWide, requireScope, type Scope } from './auth.ts';
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

const ScopeSchema = Type.Union([
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

export const ApiKeySchema = Type.Object({
  id: Type.String(),
  accountId: Type.String(),
  name: Type.String(),
  prefix: Type.String({ description: 'first characters of the key, to recognise it' }),
  scopes: Type.Array(ScopeSchema),
  endpointIds: Type.Array(Type.String()),
  expiresAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  revokedAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  lastUsedAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  createdAt: Type.String({ format: 'date-time' }),
});
export type ApiKeyView = Static<typeof ApiKeySchema>;

export const CreatedApiKeySchema = Type.Object({
  ...ApiKeySchema.properties,
  key: Type.String({ description: 'the key itself: shown this once, never again' }),
});
export type CreatedApiKeyView = Static<typeof CreatedApiKeySchema>;

export const ApiKeyListSchema = Type.Object({ keys: Type.Array(ApiKeySchema) });

export const ApiKeySelfSchema = Type.Object({
  id: Type.String(),
  accountId: Type.String(),
  name: Type.String(),
  prefix: Type.String({ description: 'first characters of the key, to recognise it' }),
  scopes: Type.Array(ScopeSchema),
  endpointIds: Type.Array(Type.String(), { description: 'the endpoints the key is limited to; empty: all' }),
  accountWide: Type.Boolean({
    description: "false for a key limited to endpoints: it reaches none of the account's other resources",
  }),
  admin: Type.Boolean({
    description: "the platform admin's key (an admin account's, with ADMIN, not limited to endpoints): hosts, accounts",
  }),
  createdAt: Type.String({ format: 'date-time' }),
  expiresAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
});
export type ApiKeySelfView = Static<typeof ApiKeySelfSchema>;

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

export const AccountSchema = Type.Object({
  id: Type.String(),
  email: Type.String(),
  name: Type.String(),
  isAdmin: Type.Boolean(),
  serverlessDiscount: Type.Union([
    Type.Object({
      discountFactor: Type.Number(),
      type: Type.Union([Type.String(), Type.Null()]),
      expirationDate: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
    }),
    Type.Null(),
  ]),
  createdAt: Type.String({ format: 'date-time' }),
});
export type AccountView = Static<typeof AccountSchema>;
export const AccountListSchema = Type.Object({ accounts: Type.Array(AccountSchema) });

const iso = (d: Date | null): string | null => (d ? d.toISOString() : null);

export function apiKeyView(k: ApiKey): ApiKeyView {
  return {
    id: k.id,
    accountId: k.accountId,
    name: k.name,
    prefix: k.prefix,
    scopes: k.scopes,
    endpointIds: k.endpointIds,
    expiresAt: iso(k.expiresAt),
    revokedAt: iso(k.revokedAt),
    lastUsedAt: iso(k.lastUsedAt),
    createdAt: k.createdAt.toISOString(),
  };
}

export function accountView(a: Account): AccountView {
  return {
    id: a.id,
    email: a.email,
    name: a.name,
    isAdmin: a.isAdmin,
    serverlessDiscount:
      a.serverlessDiscountFactor === null
        ? null
        : {
            discountFactor: a.serverlessDiscountFactor,
            type: a.serverlessDiscountType,
            expirationDate: iso(a.serverlessDiscountExpires),
          },
    createdAt: a.createdAt.toISOString(),
  };
}

/** The account a key operation acts on: the caller's, or (platform admin only) the one named. */
function targetAccount(principal: Principal, accountId: string | undefined): string {
  if (accountId === undefined || accountId === principal.accountId) return principal.accountId;
  if (!principal.isAdmin) throw forbidden('only the platform admin manages keys of other accounts');
  return accountId;
}

const holds = (principal: Principal, scope: Scope): boolean =>
  principal.scopes.has(scope) || principal.scopes.has('ADMIN');

export async function createApiKey(
  ctx: DomainContext,
  principal: Principal,
  body: unknown,
): Promise<CreatedApiKeyView> {
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

  const { row, key } = await issueApiKey(
    ctx.db,
    accountId,
    input.name,
    input.scopes,
    undefined,
    endpointIds,
    expiresAt,
  );
  return { ...apiKeyView(row), key };
}

export async function listApiKeys(
  ctx: DomainContext,
  principal: Principal,
  query: unknown = {},
): Promise<ApiKeyView[]> {
  requireScope(principal, 'READ');
  requireAccountWide(principal);
  const accountId = targetAccount(principal, validate(ApiKeyListQuerySchema, query).accountId);
  const rows = await ctx.db.apiKey.findMany({ where: { accountId }, orderBy: { createdAt: 'asc' } });
  return rows.map(apiKeyView);
}

/**
 * The calling key as authentication resolved it: no query when the principal carries its key's
 * record (every key-made principal does), one indexed read otherwise. Any valid key may ask.
 */
export async function describeCallingKey(
  ctx: Pick<DomainContext, 'db'>,
  principal: Principal,
): Promise<ApiKeySelfView> {
  let facts = principal.key;
  if (!facts) {
    const row = await ctx.db.apiKey.findUnique({ where: { id: principal.keyId } });
    if (!row) throw new DomainError('unauthenticated', 'invalid bearer token');
    facts = {
      name: row.name,
      prefix: row.prefix,
      createdAt: row.createdAt.toISOString(),
      expiresAt: iso(row.expiresAt),
    };
  }
  return {
    id: principal.keyId,
    accountId: principal.accountId,
    name: facts.name,
    prefix: facts.prefix,
    scopes: [...principal.scopes],
    endpointIds: [...principal.endpointIds],
    accountWide: principal.endpointIds.length === 0,
    admin: principal.isAdmin,
    createdAt: facts.createdAt,
    expiresAt: facts.expiresAt,
  };
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

export async function createAccount(ctx: DomainContext, principal: Principal, body: unknown): Promise<AccountView> {
  requirePlatformAdmin(principal);
  const input = validate(CreateAccountSchema, body);
  const d = input.serverlessDiscount;
  try {
    const row = await ctx.db.account.create({
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
    return accountView(row);
  } catch (err) {
    if (isUniqueViolation(err))
      throw new DomainError('conflict', `an account with e-mail '${input.email}' already exists`);
    throw err;
  }
}

export async function listAccounts(ctx: DomainContext, principal: Principal): Promise<AccountView[]> {
  requirePlatformAdmin(principal);
  const rows = await ctx.db.account.findMany({ orderBy: { createdAt: 'asc' } });
  return rows.map(accountView);
}
