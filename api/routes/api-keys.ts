import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import {
  ApiKeyListQuerySchema,
  createAccount,
  CreateAccountSchema,
  createApiKey,
  CreateApiKeySchema,
  describeCallingKey,
  listAccounts,
  listApiKeys,
  revokeApiKey,
} from '../../domain/accounts/index.ts';
import type { DomainContext } from '../../domain/context.ts';
import { principalOf } from '../auth.ts';
import { keyCheckCounter } from '../rate-limit.ts';
import { AccountListSchema, AccountSchema, accountView } from './shapes/account.ts';
import {
  ApiKeyListSchema,
  ApiKeySelfSchema,
  apiKeySelfView,
  apiKeyView,
  CreatedApiKeySchema,
  createdApiKeyView,
} from './shapes/api-key.ts';

const RULES =
  "A key never makes or revokes a key stronger than itself: listing needs READ, creating and revoking need WRITE, within the caller's account; a new key gets only scopes the calling key has (ADMIN counts as all) and cannot outlive it; revoking needs every scope of the revoked key; keys limited to endpoints cannot manage keys (403). The platform admin (an admin account's key with ADMIN) may act on any account without these limits. Another account's key is 404.";

/** REST /v2/keys and /v2/accounts: API keys, and accounts for the platform admin. */
export const apiKeyRoutes: FastifyPluginAsyncTypebox<{ ctx: DomainContext }> = async (app, { ctx }) => {
  app.post(
    '/v2/keys',
    {
      config: { requiredScope: 'WRITE' },
      schema: {
        operationId: 'createApiKey',
        summary: 'Create an API key',
        description: `Makes a key with the given scopes, optionally limited to endpoints and with an expiry. The key is in the answer this once; only its hash is stored. ${RULES}`,
        tags: ['API Keys'],
        body: CreateApiKeySchema,
        response: { 201: CreatedApiKeySchema },
      },
    },
    async (request, reply) =>
      reply.code(201).send(createdApiKeyView(await createApiKey(ctx, principalOf(request), request.body))),
  );

  app.get(
    '/v2/keys',
    {
      config: { requiredScope: 'READ' },
      schema: {
        operationId: 'listApiKeys',
        summary: 'List API keys',
        description: `The account's keys, revoked ones included (revokedAt set): never the key or its hash, only its first characters. ${RULES}`,
        tags: ['API Keys'],
        querystring: ApiKeyListQuerySchema,
        response: { 200: ApiKeyListSchema },
      },
    },
    async (request) => ({ keys: (await listApiKeys(ctx, principalOf(request), request.query)).map(apiKeyView) }),
  );

  app.get(
    '/v2/keys/self',
    {
      // Any valid key: ADMIN holds the three. The console asks every second per tab, so it spends a
      // quota of its own (keyCheckCounter), never the account's.
      config: { requiredScope: ['READ', 'WRITE', 'RUN'], counter: (request) => keyCheckCounter(principalOf(request)) },
      schema: {
        operationId: 'getCallingApiKey',
        summary: 'Describe the calling key',
        description:
          "The key this request presents: id, name, first characters, scopes, endpoints it is limited to, account, whether it is the platform admin's, creation and expiry. Any valid key may ask (a wrong, expired or revoked one is 401, as everywhere): a client checks with it that its key still works. Counted against a quota of its own per key (600 a minute, 36,000 an hour, 864,000 a day), not the account's.",
        tags: ['API Keys'],
        response: { 200: ApiKeySelfSchema },
      },
    },
    async (request) => apiKeySelfView(await describeCallingKey(ctx, principalOf(request))),
  );

  app.delete(
    '/v2/keys/:id',
    {
      config: { requiredScope: 'WRITE' },
      schema: {
        operationId: 'revokeApiKey',
        summary: 'Revoke an API key',
        description: `Revokes a key at once (it answers 401 from then on); revoking a revoked key is a no-op. ${RULES}`,
        tags: ['API Keys'],
        params: Type.Object({ id: Type.String({ minLength: 1, description: 'API key id' }) }),
        response: { 204: Type.Null({ description: 'revoked; no body' }) },
      },
    },
    async (request, reply) => {
      await revokeApiKey(ctx, principalOf(request), request.params.id);
      return reply.code(204).send(null);
    },
  );

  app.post(
    '/v2/accounts',
    {
      config: { requiredScope: 'ADMIN' },
      schema: {
        operationId: 'createAccount',
        summary: 'Create an account',
        description:
          "Platform admin only (an admin account's key with ADMIN; 403 otherwise). Creates an account with an optional serverless discount; e-mails are unique (409). Give it a first key with POST /v2/keys and its accountId.",
        tags: ['Accounts'],
        body: CreateAccountSchema,
        response: { 201: AccountSchema },
      },
    },
    async (request, reply) =>
      reply.code(201).send(accountView(await createAccount(ctx, principalOf(request), request.body))),
  );

  app.get(
    '/v2/accounts',
    {
      config: { requiredScope: 'ADMIN' },
      schema: {
        operationId: 'listAccounts',
        summary: 'List accounts',
        description:
          "Platform admin only (an admin account's key with ADMIN; 403 otherwise). Every account, oldest first.",
        tags: ['Accounts'],
        response: { 200: AccountListSchema },
      },
    },
    async (request) => ({ accounts: (await listAccounts(ctx, principalOf(request))).map(accountView) }),
  );
};
