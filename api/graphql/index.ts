import { ApolloServer, type ApolloServerPlugin } from '@apollo/server';
import { ApolloServerPluginLandingPageLocalDefault } from '@apollo/server/plugin/landingPage/default';
import fastifyApollo, { fastifyApolloDrainPlugin } from '@as-integrations/fastify';
import { costLimitRule } from '@escape.tech/graphql-armor-cost-limit';
import { maxAliasesRule } from '@escape.tech/graphql-armor-max-aliases';
import { maxDepthRule } from '@escape.tech/graphql-armor-max-depth';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { GraphQLError, type ValidationContext } from 'graphql';
import { authenticate } from '../../domain/auth.ts';
import type { DomainContext } from '../../domain/context.ts';
import { DomainError } from '../../domain/errors.ts';
import { bearerToken } from '../auth.ts';
import { resolvers, type GraphqlContext } from './resolvers.ts';
import { typeDefs } from './schema.ts';

const CODE_OF: Record<DomainError['kind'], string> = {
  bad_request: 'BAD_REQUEST',
  unauthenticated: 'UNAUTHENTICATED',
  forbidden: 'FORBIDDEN',
  not_found: 'NOT_FOUND',
  conflict: 'CONFLICT',
  validation: 'BAD_USER_INPUT',
  rate_limited: 'RATE_LIMITED',
  unavailable: 'SERVICE_UNAVAILABLE',
};

/** The limits answer as ordinary validation errors (GRAPHQL_VALIDATION_FAILED), not as thrown exceptions. */
const reportInsteadOfThrow = {
  propagateOnRejection: false,
  onReject: [(context: ValidationContext | null, error: GraphQLError) => context?.reportError(error)],
};

/** The key comes as `?api_key=` (the spec) or, for tools, as a bearer header. */
function presentedKey(request: FastifyRequest): string | undefined {
  const query = request.query as Record<string, unknown> | undefined;
  const fromQuery = typeof query?.api_key === 'string' ? query.api_key : undefined;
  return fromQuery ?? bearerToken(request);
}

/**
 * POST {base_url}/graphql on Apollo Server inside the Fastify app, over the same domain services as
 * REST. Queries are bounded: depth, cost and alias limits reject unbounded work before it starts.
 */
export async function registerGraphql(app: FastifyInstance, ctx: DomainContext): Promise<void> {
  const domainErrors: ApolloServerPlugin<GraphqlContext> = {};
  const apollo = new ApolloServer<GraphqlContext>({
    typeDefs,
    resolvers,
    introspection: true,
    // Depth counts introspection too: the standard introspection query is 21 deep and the schema's own
    // deepest path is 4, so 25 refuses only crafted nesting. Cost leaves introspection out (the
    // standard query alone would cost 87k by the default weights).
    validationRules: [
      maxDepthRule({ n: 25, ignoreIntrospection: false, ...reportInsteadOfThrow }),
      costLimitRule({ maxCost: 5000, ...reportInsteadOfThrow }),
      maxAliasesRule({ n: 15, ...reportInsteadOfThrow }),
    ],
    plugins: [fastifyApolloDrainPlugin(app), ApolloServerPluginLandingPageLocalDefault({ embed: true }), domainErrors],
    formatError: (formatted, error) => {
      const original = (error as { originalError?: unknown }).originalError;
      if (original instanceof DomainError) {
        return {
          message: original.message,
          path: formatted.path,
          extensions: { code: CODE_OF[original.kind], ...(original.errors ? { errors: original.errors } : {}) },
        };
      }
      if (formatted.extensions?.code === 'INTERNAL_SERVER_ERROR') {
        app.log.error({ err: original ?? error, formatted }, 'graphql resolver failed');
        return { message: 'internal error', path: formatted.path, extensions: { code: 'INTERNAL_SERVER_ERROR' } };
      }
      return formatted;
    },
  });
  await apollo.start();
  await app.register(fastifyApollo(apollo), {
    path: '/graphql',
    context: async (request) => {
      try {
        const principal = await authenticate(ctx.db, presentedKey(request));
        return { ctx, principal };
      } catch (err) {
        if (err instanceof DomainError) {
          throw new GraphQLError(err.message, { extensions: { code: 'UNAUTHENTICATED', http: { status: 401 } } });
        }
        throw err;
      }
    },
  });
}
