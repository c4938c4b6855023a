import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { DomainContext } from '../../domain/context.ts';
import { EndpointIdParamsSchema } from '../../domain/endpoints/index.ts';
import {
  EndpointJobsQuerySchema,
  ENDPOINT_JOBS_MAX_LIMIT,
  getEndpointJob,
  JobIdParamsSchema,
  LIST_ERROR_CAP,
  listEndpointJobs,
  PAYLOAD_CAP_BYTES,
} from '../../domain/jobs/index.ts';
import { principalOf } from '../auth.ts';
import {
  EndpointJobDetailSchema,
  endpointJobDetailView,
  EndpointJobsSchema,
  endpointJobsView,
} from './shapes/endpoint-job.ts';

const tags = ['Serverless'];

/**
 * REST /v2/serverless/{id}/jobs (docs/jobs.md#an-endpoints-recent-jobs): a thin skin over
 * domain/jobs/list.ts, in the management scope (management.ts: key, the account's quota, scope);
 * shapes/endpoint-job.ts maps its models to the answers.
 */
export const endpointJobRoutes: FastifyPluginAsyncTypebox<{ ctx: DomainContext }> = async (scope, { ctx }) => {
  scope.get(
    '/v2/serverless/:id/jobs',
    {
      config: { requiredScope: 'RUN' },
      schema: {
        operationId: 'listEndpointJobs',
        summary: 'List the recent jobs of a serverless endpoint',
        description: [
          'The jobs of the endpoint that `/v2/{id}/status/{jobId}` still answers (not expired: queued ones until their TTL,',
          'finished ones for the retention after they end), newest first by `createdAt` (a retried job counts from its retry), then id.',
          `\`limit\` 1-${ENDPOINT_JOBS_MAX_LIMIT} (default 50), \`status\` one job status; \`before\` a job id (the previous page's \`nextBefore\`) for the page of older jobs;`,
          'a `before` naming no job of the endpoint is 422. No input or output here (see getEndpointJob);',
          `errors are cut at ${LIST_ERROR_CAP} characters. Includes the jobs of a public model's callers, as /status does for the owner.`,
          "Another account's endpoint is 404. Scope: RUN (as /status, which returns outputs).",
        ].join(' '),
        tags,
        params: EndpointIdParamsSchema,
        querystring: EndpointJobsQuerySchema,
        response: { 200: EndpointJobsSchema },
      },
    },
    async (request) =>
      endpointJobsView(await listEndpointJobs(ctx, principalOf(request), request.params.id, request.query)),
  );

  scope.get(
    '/v2/serverless/:id/jobs/:jobId',
    {
      config: { requiredScope: 'RUN' },
      schema: {
        operationId: 'getEndpointJob',
        summary: 'One recent job of a serverless endpoint, with its input and output',
        description: [
          'A job of listEndpointJobs with its `input` and `output`. A value whose JSON text is over',
          `${PAYLOAD_CAP_BYTES} bytes is not answered whole: \`inputTruncated\` (\`outputTruncated\`) is true, the value is absent and`,
          '`inputPreview` (`outputPreview`) holds the start of its text. 404 once the job expired, as on /status.',
          "Another account's endpoint is 404. Scope: RUN.",
        ].join(' '),
        tags,
        params: JobIdParamsSchema,
        response: { 200: EndpointJobDetailSchema },
      },
    },
    async (request) =>
      endpointJobDetailView(await getEndpointJob(ctx, principalOf(request), request.params.id, request.params.jobId)),
  );
};
