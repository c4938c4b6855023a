import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { DomainContext } from '../../domain/context.ts';
import { EndpointIdParamsSchema } from '../../domain/endpoints/index.ts';
import { EndpointMetricsQuerySchema, getEndpointMetrics, MAX_POINTS } from '../../domain/metrics/index.ts';
import { principalOf } from '../auth.ts';
import { EndpointMetricsSchema, endpointMetricsView } from './shapes/endpoint-metrics.ts';

/**
 * REST /v2/serverless/{id}/metrics: a thin skin over domain/metrics (docs/metrics.md); its model is
 * mapped by shapes/endpoint-metrics.ts.
 */
export const endpointMetricsRoutes: FastifyPluginAsyncTypebox<{ ctx: DomainContext }> = async (app, { ctx }) => {
  app.get(
    '/v2/serverless/:id/metrics',
    {
      config: { requiredScope: 'READ' },
      schema: {
        operationId: 'getEndpointMetrics',
        summary: 'Metrics of a serverless endpoint',
        description: [
          'Per-step figures of the endpoint, from its per-minute rollups (kept 7 days): jobs that ended by status,',
          'execution and delay times (p50 and p90 from log-spaced histograms, within ±12 %, and the exact mean),',
          'cold starts, FlashBoot thaws, and the average workers in each state (sampled about once a minute).',
          `Points are \`step\` long and end at the last minute rolled up (\`to\`); every step is present, zeros and nulls where nothing happened.`,
          `At most ${MAX_POINTS} points: an unknown window or step, or a finer step than that allows, is 400.`,
          "Another account's endpoint is 404. Scope: READ.",
        ].join(' '),
        tags: ['Serverless'],
        params: EndpointIdParamsSchema,
        querystring: EndpointMetricsQuerySchema,
        response: { 200: EndpointMetricsSchema },
      },
    },
    async (request) =>
      endpointMetricsView(await getEndpointMetrics(ctx, principalOf(request), request.params.id, request.query)),
  );
};
