import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { DomainContext } from '../../domain/context.ts';
import { openOutput } from '../../domain/public-models/index.ts';
import {
  getPublicModel,
  listPublicModels,
  MODEL_ID_PATTERN,
  publishPublicModel,
  PublishPublicEndpointSchema,
  unpublishPublicModel,
  updatePublicModel,
  UpdatePublicEndpointSchema,
} from '../../domain/public-models/index.ts';
import { principalOf, throttledAuth } from '../auth.ts';
import { enforceRateLimit } from '../rate-limit.ts';
import { PublicEndpointSchema, publicEndpointView } from './shapes/public-model.ts';

const ModelParams = Type.Object({ modelId: Type.String({ pattern: MODEL_ID_PATTERN, description: 'the model id' }) });
const tags = ['Public endpoints'];
const OPERATOR = "Publishing is the platform operator's: an ADMIN key of the administrator account.";

/** REST /v2/public-endpoints: the catalogue of public models, and the operator's publishing (docs/public-models.md). */
export const publicEndpointRoutes: FastifyPluginAsyncTypebox<{ ctx: DomainContext }> = async (app, { ctx }) => {
  app.get(
    '/v2/public-endpoints',
    {
      config: { requiredScope: ['READ', 'RUN'] },
      schema: {
        operationId: 'listPublicEndpoints',
        summary: 'List the public models',
        description:
          'Every published model: its id (called as `{runUrl}/run`, `/runsync`, `/status/{id}` with any RUN key), input schema, output kind and price. Scope: READ or RUN.',
        tags,
        response: { 200: Type.Array(PublicEndpointSchema) },
      },
    },
    async (request) => (await listPublicModels(ctx, principalOf(request))).map(publicEndpointView),
  );

  app.get(
    '/v2/public-endpoints/:modelId',
    {
      config: { requiredScope: ['READ', 'RUN'] },
      schema: {
        operationId: 'getPublicEndpoint',
        summary: 'Get a public model',
        description: 'One published model. Scope: READ or RUN.',
        tags,
        params: ModelParams,
        response: { 200: PublicEndpointSchema },
      },
    },
    async (request) => publicEndpointView(await getPublicModel(ctx, principalOf(request), request.params.modelId)),
  );

  app.post(
    '/v2/public-endpoints',
    {
      config: { requiredScope: 'ADMIN' },
      schema: {
        operationId: 'publishPublicEndpoint',
        summary: 'Publish a queue-based endpoint as a public model',
        description: `Makes the endpoint callable by every account under the model id; inputs are validated against \`inputSchema\` and each completed call is billed to its caller at \`price\`. 409 when the id is taken or the endpoint already published. ${OPERATOR} Scope: ADMIN.`,
        tags,
        body: PublishPublicEndpointSchema,
        response: { 201: PublicEndpointSchema },
      },
    },
    async (request, reply) =>
      reply.code(201).send(publicEndpointView(await publishPublicModel(ctx, principalOf(request), request.body))),
  );

  app.patch(
    '/v2/public-endpoints/:modelId',
    {
      config: { requiredScope: 'ADMIN' },
      schema: {
        operationId: 'updatePublicEndpoint',
        summary: 'Change a public model',
        description: `Changes its name, description, output kind, input schema or price; calls see the change within a second. ${OPERATOR} Scope: ADMIN.`,
        tags,
        params: ModelParams,
        body: UpdatePublicEndpointSchema,
        response: { 200: PublicEndpointSchema },
      },
    },
    async (request) =>
      publicEndpointView(await updatePublicModel(ctx, principalOf(request), request.params.modelId, request.body)),
  );

  app.delete(
    '/v2/public-endpoints/:modelId',
    {
      config: { requiredScope: 'ADMIN' },
      schema: {
        operationId: 'unpublishPublicEndpoint',
        summary: 'Unpublish a public model',
        description: `The model id stops answering (404) within a second; the endpoint stays. Jobs already queued run and are billed. ${OPERATOR} Scope: ADMIN.`,
        tags,
        params: ModelParams,
        response: { 204: Type.Null({ description: 'unpublished; no body' }) },
      },
    },
    async (request, reply) => {
      await unpublishPublicModel(ctx, principalOf(request), request.params.modelId);
      return reply.code(204).send(null);
    },
  );
};

/**
 * GET /v2/outputs/{objectId}/{file}: a public model's output file. No key: the signed URL is the
 * credential; a forged signature counts as a failed authentication (the per-address throttle), and
 * each object has a request quota. The bytes go out with the type found when they were stored,
 * never sniffed by the browser, sandboxed, and cacheable until the URL expires.
 */
export const outputRoutes: FastifyPluginAsyncTypebox<{ ctx: DomainContext }> = async (scope, { ctx }) => {
  scope.get<{ Params: { objectId: string; file: string }; Querystring: Record<string, string> }>(
    '/v2/outputs/:objectId/:file',
    {
      schema: {
        hide: true,
        params: Type.Object({
          objectId: Type.String({ pattern: '^[a-z0-9]{24}$' }),
          file: Type.String({ pattern: '^[a-z]+\\.[a-z0-9]{1,5}$' }),
        }),
      },
    },
    async (request, reply) => {
      const { objectId, file } = request.params;
      const out = await throttledAuth(request, () =>
        openOutput(ctx, objectId, file, `/v2/outputs/${objectId}/${file}`, request.query),
      );
      await enforceRateLimit(ctx, reply, {
        counter: `output/${objectId}`,
        quotas: { minute: 600, hour: 10_000, day: 100_000 },
      });
      return reply
        .header('content-type', out.contentType)
        .header('content-length', String(out.size))
        .header('x-content-type-options', 'nosniff')
        .header('content-security-policy', "default-src 'none'; sandbox")
        .header('content-disposition', `inline; filename="${out.fileName}"`)
        .header('cache-control', 'private, max-age=3600')
        .header('cross-origin-resource-policy', 'cross-origin')
        .send(out.body);
    },
  );
};
