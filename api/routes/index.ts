import type { FastifyInstance } from 'fastify';
import type { DomainContext } from '../../domain/context.ts';
import { serverlessRoutes } from './serverless.ts';
import { apiKeyRoutes } from './api-keys.ts';
import { billingRoutes } from './billing.ts';
import { catalogRoutes } from './catalog.ts';
import { networkVolumeRoutes } from './network-volumes.ts';
import { podRoutes } from './pods.ts';
import { registryRoutes } from './registries.ts';
import { templateRoutes } from './templates.ts';
import { hostRoutes } from './hosts.ts';
import { workerLogRoutes } from './worker-logs.ts';
import { jobRoutes } from './jobs.ts';
import { registerGraphql } from '../graphql/index.ts';
import { lbProxyRoutes } from '../lb-proxy.ts';

/** Every route module of the API, one line each. */
export function registerRoutes(app: FastifyInstance, ctx: DomainContext): void {
  serverlessRoutes(app, ctx);
  registryRoutes(app, ctx);
  templateRoutes(app, ctx);
  networkVolumeRoutes(app, ctx);
  podRoutes(app, ctx);
  catalogRoutes(app, ctx);
  billingRoutes(app, ctx);
  apiKeyRoutes(app, ctx);
  hostRoutes(app, ctx);
  workerLogRoutes(app, ctx);
  jobRoutes(app, ctx);
  void app.register(async (scope) => registerGraphql(scope, ctx));
  lbProxyRoutes(app, ctx);
}
