import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { DomainContext } from '../../domain/context.ts';
import { graphqlRoutes } from '../graphql/index.ts';
import { lbProxyRoutes } from '../lb-proxy.ts';
import { artifactRoutes } from './apps.ts';
import { jobApiRoutes } from './jobs.ts';
import { outputRoutes } from './public-endpoints.ts';
import { managementRoutes } from './management.ts';
import { workerProtocolRoutes } from './worker-protocol.ts';
import { playgroundRoutes } from '../playground/routes.ts';

/**
 * Every surface of the API, each a route module with one signature (a Fastify plugin taking
 * `{ ctx }`) registered here, so each is its own encapsulated scope with its own authentication and
 * limits, set up by the module itself: the management REST API (management.ts), the job API
 * (jobs.ts), the worker protocol (a worker's own credential, checked by its handlers), the signed
 * artifact and model-output routes (the URL is the credential), GraphQL (key and quota on its
 * route) and the load-balancing proxy (its scope's hooks). Hooks a module adds reach only its own
 * routes. The public routes (health, readiness, metrics, the OpenAPI document and the explorers)
 * are outside all of them.
 */
export const registerRoutes: FastifyPluginAsyncTypebox<{ ctx: DomainContext }> = async (app, { ctx }) => {
  await app.register(managementRoutes, { ctx });
  await app.register(jobApiRoutes, { ctx });
  await app.register(workerProtocolRoutes, { ctx });
  await app.register(artifactRoutes, { ctx });
  await app.register(outputRoutes, { ctx });
  await app.register(graphqlRoutes, { ctx });
  await app.register(playgroundRoutes, { ctx });
  await app.register(lbProxyRoutes, { ctx });
};
