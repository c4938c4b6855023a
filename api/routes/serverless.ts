import type { FastifyInstance } from 'fastify';
import type { DomainContext } from '../../domain/context.ts';
import { createEndpoint, getEndpoint, listEndpoints } from '../../domain/endpoints.ts';
import { principalOf } from '../auth.ts';

/** REST /v2/serverless: a thin skin over the endpoint domain service. */
export function serverlessRoutes(app: FastifyInstance, ctx: DomainContext): void {
  app.post('/v2/serverless', async (request, reply) => {
    const principal = await principalOf(ctx.db, request);
    const endpoint = await createEndpoint(ctx, principal, request.body);
    return reply.code(201).send(endpoint);
  });

  app.get('/v2/serverless', async (request) => {
    const principal = await principalOf(ctx.db, request);
    return { endpoints: await listEndpoints(ctx, principal) };
  });

  app.get<{ Params: { id: string } }>('/v2/serverless/:id', async (request) => {
    const principal = await principalOf(ctx.db, request);
    return getEndpoint(ctx, principal, request.params.id);
  });
}
