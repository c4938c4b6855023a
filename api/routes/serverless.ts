import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { DomainContext } from '../../domain/context.ts';
import { CreateEndpointSchema, EndpointIdParamsSchema, UpdateEndpointSchema } from '../../domain/endpoints/index.ts';
import {
  createEndpoint,
  deleteEndpoint,
  getEndpoint,
  listEndpointReleases,
  listEndpointWorkers,
  listEndpoints,
  rollbackEndpoint,
  updateEndpoint,
} from '../../domain/endpoints/index.ts';
import { principalOf } from '../auth.ts';
import { EndpointListSchema, EndpointSchema, endpointView } from './shapes/endpoint.ts';
import { endpointWorkersView, ListEndpointWorkersResponseSchema } from './shapes/endpoint-worker.ts';
import { ListEndpointReleasesResponseSchema, releasesView, releaseView, ReleaseViewSchema } from './shapes/release.ts';

const tags = ['Serverless'];

/** What `ports` and `networkVolumes` do in a worker (docs/endpoints.md, activities/worker-start.ts). */
const PORTS_AND_VOLUMES =
  "`ports` are not published on the worker's host: a queue-based endpoint's workers take jobs from the queue and expose no ports; a load-balancing endpoint's first `/http` port (80 without one) is the app's `PORT`, reached only through the proxy. `networkVolumes` are mounted at `/runpod-volume` in every worker, whatever a template's `volumeMountPath` says (that one is a pod's).";

/** REST /v2/serverless: a thin skin over the endpoint domain service. */
export const serverlessRoutes: FastifyPluginAsyncTypebox<{ ctx: DomainContext }> = async (app, { ctx }) => {
  app.post(
    '/v2/serverless',
    {
      config: { requiredScope: 'WRITE' },
      schema: {
        operationId: 'createEndpoint',
        summary: 'Create a serverless endpoint',
        description: [
          'Creates an endpoint and starts its workflow. Names are unique within the account (409). Scope: WRITE.',
          PORTS_AND_VOLUMES,
        ].join(' '),
        tags,
        body: CreateEndpointSchema,
        response: { 201: EndpointSchema },
      },
    },
    async (request, reply) =>
      reply.code(201).send(endpointView(await createEndpoint(ctx, principalOf(request), request.body), ctx)),
  );

  app.get(
    '/v2/serverless',
    {
      config: { requiredScope: 'READ' },
      schema: {
        operationId: 'listEndpoints',
        summary: 'List serverless endpoints',
        description: 'The endpoints of the account (those the key reaches). Scope: READ.',
        tags,
        response: { 200: EndpointListSchema },
      },
    },
    async (request) => ({
      endpoints: (await listEndpoints(ctx, principalOf(request))).map((e) => endpointView(e, ctx)),
    }),
  );

  app.get(
    '/v2/serverless/:id',
    {
      config: { requiredScope: 'READ' },
      schema: {
        operationId: 'getEndpoint',
        summary: 'Get a serverless endpoint',
        description: "One endpoint. Another account's endpoint, or one being deleted, is 404. Scope: READ.",
        tags,
        params: EndpointIdParamsSchema,
        response: { 200: EndpointSchema },
      },
    },
    async (request) => endpointView(await getEndpoint(ctx, principalOf(request), request.params.id), ctx),
  );

  app.patch(
    '/v2/serverless/:id',
    {
      config: { requiredScope: 'WRITE' },
      schema: {
        operationId: 'updateEndpoint',
        summary: 'Update a serverless endpoint',
        description: [
          'Partial update: only the fields in the body change; unknown fields are 422. Answers the complete endpoint.',
          '`workers`, `scaling` and `timeout` reach the running autoscaler at once.',
          'A change of `image`, `args`, `disk`, `ports`, `env`, `registry` or `networkVolumes` makes a new release (see listEndpointReleases) that rolls out as workers are replaced: a worker mounts its volumes when it starts.',
          '`gpu` and `dataCenterIds` are placement: new workers get them, running ones keep theirs until replaced.',
          PORTS_AND_VOLUMES,
          'A body with `cpu` is 400 (`cpu` is read-only). A CPU endpoint takes every other field, and `gpu` moves it to GPUs; its CPU size is named with GraphQL saveEndpoint(instanceIds). A name in use is 409.',
          'When the change is saved but the endpoint workflow cannot be reached in time the answer is 503: repeat the request to apply it. Scope: WRITE.',
        ].join(' '),
        tags,
        params: EndpointIdParamsSchema,
        body: UpdateEndpointSchema,
        response: { 200: EndpointSchema },
      },
    },
    async (request) =>
      endpointView(await updateEndpoint(ctx, principalOf(request), request.params.id, request.body), ctx),
  );

  app.delete(
    '/v2/serverless/:id',
    {
      config: { requiredScope: 'WRITE' },
      schema: {
        operationId: 'deleteEndpoint',
        summary: 'Delete a serverless endpoint',
        description:
          'Starts the deletion: the endpoint disappears from reads at once, its queued jobs are cancelled, and its workflow drains the workers and removes it. Repeating the request while the deletion runs answers 204 again. Scope: WRITE.',
        tags,
        params: EndpointIdParamsSchema,
        response: { 204: Type.Null({ description: 'deletion started; no body' }) },
      },
    },
    async (request, reply) => {
      await deleteEndpoint(ctx, principalOf(request), request.params.id);
      return reply.code(204).send(null);
    },
  );

  app.get(
    '/v2/serverless/:id/workers',
    {
      config: { requiredScope: 'READ' },
      schema: {
        operationId: 'listEndpointWorkers',
        summary: 'List the workers of a serverless endpoint',
        description: 'Workers allocated to the endpoint (not stopped or failed), with counts by state. Scope: READ.',
        tags,
        params: EndpointIdParamsSchema,
        response: { 200: ListEndpointWorkersResponseSchema },
      },
    },
    async (request) => endpointWorkersView(await listEndpointWorkers(ctx, principalOf(request), request.params.id)),
  );

  app.get(
    '/v2/serverless/:id/releases',
    {
      config: { requiredScope: 'READ' },
      schema: {
        operationId: 'listEndpointReleases',
        summary: 'List the releases of a serverless endpoint',
        description:
          'Release history, newest first: version, status, what changed (`diff`: `[{field, old, new}]`), workers on each release by state, and a rollout summary (workers on the current release and on older ones). Scope: READ.',
        tags,
        params: EndpointIdParamsSchema,
        response: { 200: ListEndpointReleasesResponseSchema },
      },
    },
    async (request) => releasesView(await listEndpointReleases(ctx, principalOf(request), request.params.id)),
  );

  app.post(
    '/v2/serverless/:id/releases/:version/rollback',
    {
      config: { requiredScope: 'WRITE' },
      schema: {
        operationId: 'rollbackEndpointRelease',
        summary: 'Roll a serverless endpoint back to an earlier release',
        description: [
          'Makes a new release whose container fields (`image`, `args`, `disk`, `ports`, `env`, `registry`) are those of release `version`, as the PATCH that restores them would: it rolls out like any release and answers it (201).',
          '`networkVolumes` and `type` are not part of a release and stay as they are.',
          "The current release, or one whose container fields are already the endpoint's, is 409; a version the endpoint never had is 404; what a PATCH of those fields would be refused for (a registry credential deleted since) is 422. Scope: WRITE.",
        ].join(' '),
        tags,
        // The version is checked by the domain, after the endpoint: another account's endpoint is 404 whatever the version.
        params: Type.Object({
          id: EndpointIdParamsSchema.properties.id,
          version: Type.String({ minLength: 1, maxLength: 40, description: 'the release to restore, e.g. 1' }),
        }),
        response: { 201: ReleaseViewSchema },
      },
    },
    async (request, reply) =>
      reply
        .code(201)
        .send(
          releaseView(await rollbackEndpoint(ctx, principalOf(request), request.params.id, request.params.version)),
        ),
  );
};
