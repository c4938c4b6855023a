import type { FastifyInstance } from 'fastify';
import type { DomainContext } from '../../domain/context.ts';
import { serverlessRoutes } from './serverless.ts';

/** Every route module of the API, one line each. */
export function registerRoutes(app: FastifyInstance, ctx: DomainContext): void {
  serverlessRoutes(app, ctx);
}
