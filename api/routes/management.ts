import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { DomainContext } from '../../domain/context.ts';
import { authenticateRequests, principalOf, requireDeclaredScopes } from '../auth.ts';
import { refuseUnstorableBodies } from '../input-guards.ts';
import { countRequests, managementCounter } from '../rate-limit.ts';
import { apiKeyRoutes } from './api-keys.ts';
import { appRoutes } from './apps.ts';
import { publicEndpointRoutes } from './public-endpoints.ts';
import { billingRoutes } from './billing.ts';
import { catalogRoutes } from './catalog.ts';
import { endpointJobRoutes } from './endpoint-jobs.ts';
import { endpointMetricsRoutes } from './endpoint-metrics.ts';
import { hostRoutes } from './hosts.ts';
import { networkVolumeRoutes } from './network-volumes.ts';
import { hostedNetworkVolumeRoutes } from './network-volumes-hosted.ts';
import { podRoutes } from './pods.ts';
import { registryRoutes } from './registries.ts';
import { serverlessRoutes } from './serverless.ts';
import { templateRoutes } from './templates.ts';
import { workerLogRoutes } from './worker-logs.ts';

/**
 * The management REST API (`/v2/serverless`, `/v2/templates`, `/v2/hosts`, ...) in one encapsulated
 * scope. Its hooks run for every route registered in it, in this order and all on `onRequest`,
 * before the body is read or validated: the API key (through the failed-authentication throttle),
 * the account's quota (shared with GraphQL; RateLimit headers on every answer), then the key scope
 * the route declares (`config: { requiredScope }`, which every route here must); then, on
 * `preValidation`, JSON bodies no handler could store are refused (422). A route module
 * added here needs nothing else; nothing outside this scope (the public routes, the job API, the
 * worker protocol, the proxy, GraphQL) gets any of it.
 */
export const managementRoutes: FastifyPluginAsyncTypebox<{ ctx: DomainContext }> = async (scope, { ctx }) => {
  authenticateRequests(scope, ctx);
  countRequests(scope, ctx, (request) => managementCounter(principalOf(request), scope.surfaceLimits));
  requireDeclaredScopes(scope);
  refuseUnstorableBodies(scope);

  await scope.register(serverlessRoutes, { ctx });
  await scope.register(endpointMetricsRoutes, { ctx });
  await scope.register(endpointJobRoutes, { ctx });
  await scope.register(workerLogRoutes, { ctx });
  await scope.register(registryRoutes, { ctx });
  await scope.register(templateRoutes, { ctx });
  await scope.register(networkVolumeRoutes, { ctx });
  await scope.register(hostedNetworkVolumeRoutes, { ctx });
  await scope.register(podRoutes, { ctx });
  await scope.register(catalogRoutes, { ctx });
  await scope.register(billingRoutes, { ctx });
  await scope.register(apiKeyRoutes, { ctx });
  await scope.register(hostRoutes, { ctx });
  await scope.register(appRoutes, { ctx });
  await scope.register(publicEndpointRoutes, { ctx });
};
