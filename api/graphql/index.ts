import { createHash } from 'node:crypto';
import { ApolloServer, type ApolloServerPlugin } from '@apollo/server';
import { ApolloServerPluginLandingPageDisabled } from '@apollo/server/plugin/disabled';
import { fastifyApolloHandler } from '@as-integrations/fastify';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { costLimitRule } from '@escape.tech/graphql-armor-cost-limit';
import { maxAliasesRule } from '@escape.tech/graphql-armor-max-aliases';
import { maxDepthRule } from '@escape.tech/graphql-armor-max-depth';
import { maxDirectivesRule } from '@escape.tech/graphql-armor-max-directives';
import type { FastifyReply, FastifyRequest, RouteHandlerMethod } from 'fastify';
import { GraphQLError, Kind, parse, type ValidationContext, type ValidationRule } from 'graphql';
import { authenticateCurrent, type Principal } from '../../domain/accounts/index.ts';
import type { DomainContext } from '../../domain/context.ts';
import { DomainError } from '../../domain/errors.ts';
import { bearerToken, throttledAuth } from '../auth.ts';
import { unstorableJson } from '../input-guards.ts';
import { enforceRateLimit, managementCounter } from '../rate-limit.ts';
import { registerExplorerAssets, sendExplorerPage, wantsExplorer } from './explorer.ts';
import type { GraphqlContext } from './context.ts';
import { resolvers } from './resolvers.ts';
import { flashResolvers } from './resolvers-flash.ts';
import { typeDefs } from './schema.ts';
import { flashTypeDefs } from './schema-flash.ts';

const CODE_OF: Record<DomainError['kind'], string> = {
  bad_request: 'BAD_REQUEST',
  unauthenticated: 'UNAUTHENTICATED',
  forbidden: 'FORBIDDEN',
  not_found: 'NOT_FOUND',
  conflict: 'CONFLICT',
  gone: 'GONE',
  validation: 'BAD_USER_INPUT',
  rate_limited: 'RATE_LIMITED',
  unavailable: 'SERVICE_UNAVAILABLE',
};

/** The limits answer as ordinary validation errors (GRAPHQL_VALIDATION_FAILED), not as thrown exceptions. */
const reportInsteadOfThrow = {
  propagateOnRejection: false,
  onReject: [(context: ValidationContext | null, error: GraphQLError) => context?.reportError(error)],
};

/**
 * Parse-time and size bounds: graphql-js stops lexing past `maxTokens`, so a document of 200,000
 * variable definitions costs a few milliseconds, not seconds of a blocked event loop. The standard
 * introspection query is about 300 tokens; the body bound keeps `variables` small as well.
 */
export const GRAPHQL_LIMITS = { maxTokens: 5_000, maxDirectives: 50, bodyBytes: 256 * 1024 } as const;

/** String literals in a document: NUL cannot be stored, so it is the caller's error, named where it is. */
const noNulStrings: ValidationRule = (context) => ({
  StringValue(node) {
    if (node.value.includes('\0'))
      context.reportError(new GraphQLError('string values must not contain NUL characters', { nodes: [node] }));
  },
});

/**
 * The operations a request without a key may run, one per request (flash login's: the request id is
 * their credential), each with a per-address quota of its own: a login is one create and a poll every
 * two seconds for up to ten minutes.
 */
const WITHOUT_KEY = {
  createFlashAuthRequest: { minute: 10, hour: 60, day: 200 },
  flashAuthRequestStatus: { minute: 120, hour: 3_600, day: 20_000 },
} as const;
type KeylessField = keyof typeof WITHOUT_KEY;
/** flash's documents are a few hundred bytes: a keyless body past this is refused unread (401). */
const KEYLESS_BODY_BYTES = 4 * 1024;

/** The one keyless operation `body` asks for, or undefined when it asks for anything else. */
function keylessField(body: unknown): KeylessField | undefined {
  const query = (body as { query?: unknown } | undefined)?.query;
  if (typeof query !== 'string') return undefined;
  let doc;
  try {
    doc = parse(query, { maxTokens: 200 });
  } catch {
    return undefined;
  }
  if (doc.definitions.length !== 1) return undefined;
  const op = doc.definitions[0]!;
  if (op.kind !== Kind.OPERATION_DEFINITION || op.selectionSet.selections.length !== 1) return undefined;
  const field = op.selectionSet.selections[0]!;
  if (field.kind !== Kind.FIELD || field.alias) return undefined;
  const name = field.name.value;
  // The creation is a mutation and the poll a query: a subscription (or anything else) is neither.
  const wanted =
    op.operation === 'mutation' ? 'createFlashAuthRequest' : op.operation === 'query' ? 'flashAuthRequestStatus' : '';
  return name === wanted ? (wanted as KeylessField) : undefined;
}

/**
 * Operations of a kind the schema has no root for (`subscription`: this API has none, flash polls):
 * a validation error (400, GRAPHQL_VALIDATION_FAILED) instead of the executor's internal error.
 */
const knownOperationTypes: ValidationRule = (context) => ({
  OperationDefinition(node) {
    const schema = context.getSchema();
    const root =
      node.operation === 'query'
        ? schema.getQueryType()
        : node.operation === 'mutation'
          ? schema.getMutationType()
          : schema.getSubscriptionType();
    if (!root)
      context.reportError(
        new GraphQLError(`this API has no ${node.operation} operations (poll with a query instead)`, { nodes: [node] }),
      );
  },
});

/** The `extensions` of a GraphQL request: the body's (POST) or the JSON of `?extensions=` (GET). */
function extensionsOf(request: FastifyRequest): unknown {
  if (request.method === 'POST') return (request.body as { extensions?: unknown } | undefined)?.extensions;
  const raw = (request.query as Record<string, unknown> | undefined)?.extensions;
  if (typeof raw !== 'string') return undefined;
  try {
    return JSON.parse(raw) as unknown;
  } catch {
    return undefined;
  }
}

/**
 * A persisted-query extension whose hash is not the query's, or of a version there is none of: the
 * 400 Apollo gives it, with a code (Apollo's own has none, which reads as an internal error). A
 * hash alone (no query) is Apollo's to answer (PERSISTED_QUERY_NOT_FOUND, or the document it knows).
 */
function persistedQueryProblem(request: FastifyRequest): { message: string; code: string } | undefined {
  const persisted = (extensionsOf(request) as { persistedQuery?: unknown } | undefined)?.persistedQuery;
  if (!persisted || typeof persisted !== 'object') return undefined;
  const { version, sha256Hash } = persisted as { version?: unknown; sha256Hash?: unknown };
  if (version !== 1) return { message: 'unsupported persisted query version', code: 'BAD_REQUEST' };
  const body = request.method === 'POST' ? request.body : request.query;
  const query = (body as { query?: unknown } | undefined)?.query;
  if (typeof query !== 'string') return undefined;
  if (typeof sha256Hash !== 'string' || sha256Hash !== createHash('sha256').update(query).digest('hex'))
    return { message: 'provided sha does not match query', code: 'PERSISTED_QUERY_HASH_MISMATCH' };
  return undefined;
}

/** Whose request a keyless one is: no account, no scope; only the keyless resolvers run for it. */
const NOBODY: Principal = { accountId: '', keyId: '', scopes: new Set(), endpointIds: [''], isAdmin: false };

/** The key comes as `?api_key=` (the hosted service's way) or, for tools, as a bearer header. */
function presentedKey(request: FastifyRequest): string | undefined {
  const query = request.query as Record<string, unknown> | undefined;
  const fromQuery = typeof query?.api_key === 'string' ? query.api_key : undefined;
  return fromQuery ?? bearerToken(request);
}

/**
 * POST {base_url}/graphql on Apollo Server inside the Fastify app, over the same domain services as
 * REST. Queries are bounded: depth, cost and alias limits reject unbounded work before it starts.
 */
export const graphqlRoutes: FastifyPluginAsyncTypebox<{ ctx: DomainContext }> = async (app, { ctx }) => {
  const domainErrors: ApolloServerPlugin<GraphqlContext> = {};
  const apollo = new ApolloServer<GraphqlContext>({
    typeDefs: [typeDefs, flashTypeDefs],
    resolvers: [resolvers, flashResolvers],
    introspection: true,
    // The process's stop signals are infra/start.ts's to act on: Apollo's own handlers (on by default
    // outside NODE_ENV=test) would stop the server and then raise the signal again, which turns one
    // Ctrl+C into two and cuts the graceful stop short. Apollo stops when the Fastify app closes
    // (below), after the requests in flight have been answered.
    stopOnTerminationSignals: false,
    parseOptions: { maxTokens: GRAPHQL_LIMITS.maxTokens },
    // Stack traces name server paths: only a developer's own machine gets them.
    includeStacktraceInErrorResponses: ctx.settings.stackTraces,
    // Depth counts introspection too: the standard introspection query is 21 deep and the schema's own
    // deepest path is 4, so 25 refuses only crafted nesting. Cost leaves introspection out (the
    // standard query alone would cost 87k by the default weights).
    validationRules: [
      maxDepthRule({ n: 25, ignoreIntrospection: false, ...reportInsteadOfThrow }),
      costLimitRule({ maxCost: 5000, ...reportInsteadOfThrow }),
      maxAliasesRule({ n: 15, ...reportInsteadOfThrow }),
      maxDirectivesRule({ n: GRAPHQL_LIMITS.maxDirectives, ...reportInsteadOfThrow }),
      noNulStrings,
      knownOperationTypes,
    ],
    // Apollo's own landing page loads from a CDN; the explorer (./explorer.ts) is served from here.
    plugins: [ApolloServerPluginLandingPageDisabled(), domainErrors],
    formatError: (formatted, error) => {
      const original = (error as { originalError?: unknown }).originalError;
      if (original instanceof DomainError) {
        // The reasons in the message too: the hosted service's Python tools show only the message.
        const reasons = original.errors?.length ? `: ${original.errors.join('; ')}` : '';
        return {
          message: reasons ? `${original.message.replace(/\.$/, '')}${reasons}` : original.message,
          path: formatted.path,
          extensions: { code: CODE_OF[original.kind], ...(original.errors ? { errors: original.errors } : {}) },
        };
      }
      // A refusal Apollo makes of the request itself (a 4xx it set, without a code): the caller's error.
      const http = (error as { extensions?: { http?: { status?: number } } }).extensions?.http;
      if (formatted.extensions?.code === 'INTERNAL_SERVER_ERROR' && http?.status && http.status < 500)
        return { message: formatted.message, extensions: { code: 'BAD_REQUEST' } };
      if (formatted.extensions?.code === 'INTERNAL_SERVER_ERROR') {
        app.log.error({ err: original ?? error, formatted }, 'graphql resolver failed');
        return { message: 'internal error', path: formatted.path, extensions: { code: 'INTERNAL_SERVER_ERROR' } };
      }
      return formatted;
    },
  });
  await apollo.start();
  // Fastify runs onClose hooks after its server has closed and the requests in flight have ended.
  app.addHook('onClose', async () => apollo.stop());

  /**
   * Authentication and the account's rate limit run before the body is read or parsed, so neither
   * an unknown key nor a key over its quota costs a parse. The explorer page (a browser's GET
   * without a query) and its assets need no key: they are static, and the queries sent from them
   * carry the key.
   */
  const principals = new WeakMap<FastifyRequest, Principal>();
  const keyless = new WeakSet<FastifyRequest>();
  /** A request without a key that may not run: the 401 it always was, counted as a failed authentication. */
  const refuseWithoutKey = (request: FastifyRequest): Promise<Principal> =>
    throttledAuth(request, () => authenticateCurrent(ctx, undefined));
  registerExplorerAssets(app);
  app.route({
    method: ['GET', 'POST', 'OPTIONS'],
    url: '/graphql',
    bodyLimit: GRAPHQL_LIMITS.bodyBytes,
    onRequest: async (request, reply) => {
      if (wantsExplorer(request)) return sendExplorerPage(reply);
      const query = request.query as Record<string, unknown> | undefined;
      if (request.method !== 'POST' && typeof query?.query !== 'string') return;
      // Without a key only flash login's two operations run: decided once the body is read (preHandler),
      // which is read only when it is small and its address is not refused already.
      if (request.method === 'POST' && presentedKey(request) === undefined) {
        const length = Number(request.headers['content-length']);
        const refused = await refusedBy(reply, async () => {
          request.server.authThrottle?.check(request.ip);
          if (!(length > 0 && length <= KEYLESS_BODY_BYTES)) await refuseWithoutKey(request);
        });
        if (refused) return refused;
        return void keyless.add(request);
      }
      return refusedBy(reply, async () => {
        const principal = await throttledAuth(request, () => authenticateCurrent(ctx, presentedKey(request)));
        principals.set(request, principal);
        await enforceRateLimit(ctx, reply, managementCounter(principal, app.surfaceLimits));
      });
    },
    preHandler: async (request, reply) => {
      if (keyless.has(request)) {
        const field = keylessField(request.body);
        const refused = await refusedBy(reply, async () => {
          if (!field) await refuseWithoutKey(request);
          else
            await enforceRateLimit(ctx, reply, {
              counter: `keyless/${field}/${request.ip}`,
              quotas: WITHOUT_KEY[field],
            });
        });
        if (refused) return refused;
      }
      const persisted = persistedQueryProblem(request);
      if (persisted)
        return reply
          .code(400)
          .type('application/json')
          .send({ errors: [{ message: persisted.message, extensions: { code: persisted.code } }] });
      const variables = (request.body as { variables?: unknown } | undefined)?.variables;
      const problem = variables && typeof variables === 'object' ? unstorableJson(variables, '$variables') : undefined;
      if (problem)
        return reply
          .code(400)
          .type('application/json')
          .send({ errors: [{ message: problem, extensions: { code: 'BAD_USER_INPUT' } }] });
    },
    handler: fastifyApolloHandler(apollo, {
      context: async (request) => {
        if (keyless.has(request)) return { ctx, principal: NOBODY, requesterIp: request.ip };
        const principal = principals.get(request);
        if (principal) return { ctx, principal };
        try {
          return { ctx, principal: await authenticateCurrent(ctx, presentedKey(request)) };
        } catch (err) {
          if (err instanceof DomainError)
            throw new GraphQLError(err.message, { extensions: { code: 'UNAUTHENTICATED', http: { status: 401 } } });
          throw err;
        }
      },
    }) as unknown as RouteHandlerMethod, // its own route generics (Reply: string) differ from the hooks' above
  });
};

/**
 * One check before Apollo runs: a DomainError out of it is answered as a refusal (graphqlError) and
 * that reply returned; anything else it throws propagates. Undefined: the check passed.
 */
async function refusedBy(reply: FastifyReply, check: () => Promise<void>): Promise<FastifyReply | undefined> {
  try {
    await check();
    return undefined;
  } catch (err) {
    if (err instanceof DomainError) return graphqlError(reply, err);
    throw err;
  }
}

/** A refusal before Apollo runs, in GraphQL's own error shape. */
function graphqlError(reply: FastifyReply, err: DomainError): FastifyReply {
  const status = err.kind === 'rate_limited' ? 429 : 401;
  return reply
    .code(status)
    .type('application/json')
    .send({ errors: [{ message: err.message, extensions: { code: CODE_OF[err.kind] } }] });
}
