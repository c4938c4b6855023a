import type { FastifyInstance } from 'fastify';
import { registerGraphql } from '../graphql/index.ts';
import { lbProxyRoutes } from '../lb-proxy.ts';
import { recordCachesOf } from '../../domain/shared/record-cache.ts';
import { authenticateRequests, principalOf } from '../auth.ts';
import { refuseUnstorableBodies } from '../input-guards.ts';
import { countRequests, jobApiCounter } from '../rate-limit.ts';
import { artifactRoutes } from './apps.ts';
import { jobApiRoutes } from './jobs.ts';
import { outputRoutes } from './public-endpoints.ts';
import { managementRoutes, type ContextOptions } from './management.ts';
import { workerProtocolRoutes } from './worker-protocol.ts';
import { playgroundRoutes } from '../playground/routes.ts';

/**
 * Every surface of the API, each in its own scope with its own authentication and limits: the
 * management REST API (management.ts), the job API (below), the worker protocol (a worker's own
 * credential, checked by its handlers), the signed artifact and model-output routes (the URL is the credential), GraphQL (key and quota on its route) and the
 * load-balancing proxy (its scope's hooks). The public routes (health, readiness, metrics, the
 * OpenAPI document and the explorers) are outside all of them.
 */
export async function registerRoutes(app: FastifyInstance, { ctx }: ContextOptions): Promise<void> {
  await app.register(managementRoutes, { ctx });
  await app.register(jobApi, { ctx });
  workerProtocolRoutes(app, ctx);
  await app.register(artifactRoutes, { ctx });
  await app.register(outputRoutes, { ctx });
  await app.register(async (scope) => registerGraphql(scope, ctx));
  await app.register(playgroundRoutes, { ctx });
  lbProxyRoutes(app, ctx);
}

/**
 * The job API (`/v2/{endpointId}/run`, `status`, ...): an API key, through the failed-authentication
 * throttle and a short cache, then the quota of the account and endpoint, both on `onRequest`,
 * before the body is read; then JSON bodies no handler could store are refused (422). Which scope
 * the key needs (RUN) and which endpoints it reaches, the domain decides.
 */
async function jobApi(scope: FastifyInstance, { ctx }: ContextOptions): Promise<void> {
  authenticateRequests(scope, ctx, { cache: recordCachesOf(ctx) });
  countRequests(scope, ctx, (request) => jobApiCounter(principalOf(request), (request.params as { endpointId: string }).endpointId, scope.surfaceLimits));
  refuseUnstorableBodies(scope);
  jobApiRoutes(scope, ctx);
}
