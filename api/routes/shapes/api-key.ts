import { Type, type Static } from 'typebox';
import type { ApiKey } from '../../../generated/prisma/client.ts';
import { ScopeSchema, type CallingKey, type IssuedKey } from '../../../domain/accounts/index.ts';

/** An API key in REST v2 (`/v2/keys`): never the key or its hash, only its first characters. */
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
export const ApiKeyListSchema = Type.Object({ keys: Type.Array(ApiKeySchema) });

export function apiKeyView(k: ApiKey): Static<typeof ApiKeySchema> {
  return {
    id: k.id,
    accountId: k.accountId,
    name: k.name,
    prefix: k.prefix,
    scopes: k.scopes,
    endpointIds: k.endpointIds,
    expiresAt: k.expiresAt?.toISOString() ?? null,
    revokedAt: k.revokedAt?.toISOString() ?? null,
    lastUsedAt: k.lastUsedAt?.toISOString() ?? null,
    createdAt: k.createdAt.toISOString(),
  };
}

/** A key just made (POST /v2/keys): its record, and the key itself, which no later answer shows. */
export const CreatedApiKeySchema = Type.Object({
  ...ApiKeySchema.properties,
  key: Type.String({ description: 'the key itself: shown this once, never again' }),
});

export function createdApiKeyView(issued: IssuedKey): Static<typeof CreatedApiKeySchema> {
  return { ...apiKeyView(issued.row), key: issued.key };
}

/** The calling key (GET /v2/keys/self), as authentication resolved it. */
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

export function apiKeySelfView({ principal, facts }: CallingKey): Static<typeof ApiKeySelfSchema> {
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
