import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { DomainContext } from '../../domain/context.ts';
import {
  createNetworkVolume,
  CreateNetworkVolumeSchema,
  deleteNetworkVolume,
  getNetworkVolume,
  listNetworkVolumes,
  updateNetworkVolume,
  UpdateNetworkVolumeSchema,
} from '../../domain/network-volumes/index.ts';
import { principalOf } from '../auth.ts';
import { NetworkVolumeListSchema, NetworkVolumeSchema, networkVolumeView } from './shapes/network-volume.ts';

const IdParams = Type.Object({ id: Type.String({ minLength: 1, description: 'network volume id' }) });
const tags = ['Network Volumes'];
const ACCESS = "Needs a key for the whole account (not one limited to endpoints); another account's volume is 404.";

/** REST /v2/network-volumes: named storage in a data center. */
export const networkVolumeRoutes: FastifyPluginAsyncTypebox<{ ctx: DomainContext }> = async (app, { ctx }) => {
  app.get(
    '/v2/network-volumes',
    {
      config: { requiredScope: 'READ' },
      schema: {
        operationId: 'listNetworkVolumes',
        summary: 'List network volumes',
        description: `The account's network volumes, oldest first. ${ACCESS} Scope: READ.`,
        tags,
        response: { 200: NetworkVolumeListSchema },
      },
    },
    async (request) => ({
      networkVolumes: (await listNetworkVolumes(ctx, principalOf(request))).map(networkVolumeView),
    }),
  );

  app.post(
    '/v2/network-volumes',
    {
      config: { requiredScope: 'WRITE' },
      schema: {
        operationId: 'createNetworkVolume',
        summary: 'Create a network volume',
        description: `Creates a volume of \`size\` GB in \`dataCenter\`, which must be the data center of a registered host (GET /v2/catalog/datacenters; 422 otherwise). Names are unique within the account (409). ${ACCESS} Scope: WRITE.`,
        tags,
        body: CreateNetworkVolumeSchema,
        response: { 201: NetworkVolumeSchema },
      },
    },
    async (request, reply) =>
      reply.code(201).send(networkVolumeView(await createNetworkVolume(ctx, principalOf(request), request.body))),
  );

  app.get(
    '/v2/network-volumes/:id',
    {
      config: { requiredScope: 'READ' },
      schema: {
        operationId: 'getNetworkVolume',
        summary: 'Get a network volume',
        description: `One network volume. ${ACCESS} Scope: READ.`,
        tags,
        params: IdParams,
        response: { 200: NetworkVolumeSchema },
      },
    },
    async (request) => networkVolumeView(await getNetworkVolume(ctx, principalOf(request), request.params.id)),
  );

  app.patch(
    '/v2/network-volumes/:id',
    {
      config: { requiredScope: 'WRITE' },
      schema: {
        operationId: 'updateNetworkVolume',
        summary: 'Update a network volume',
        description: `Renames and/or grows a volume; at least one field. A smaller size is refused with 400. ${ACCESS} Scope: WRITE.`,
        tags,
        params: IdParams,
        body: UpdateNetworkVolumeSchema,
        response: { 200: NetworkVolumeSchema },
      },
    },
    async (request) =>
      networkVolumeView(await updateNetworkVolume(ctx, principalOf(request), request.params.id, request.body)),
  );

  app.delete(
    '/v2/network-volumes/:id',
    {
      config: { requiredScope: 'WRITE' },
      schema: {
        operationId: 'deleteNetworkVolume',
        summary: 'Delete a network volume',
        description: `Deletes a volume. Refused with 400 while an endpoint mounts it. ${ACCESS} Scope: WRITE.`,
        tags,
        params: IdParams,
        response: { 204: Type.Null({ description: 'deleted; no body' }) },
      },
    },
    async (request, reply) => {
      await deleteNetworkVolume(ctx, principalOf(request), request.params.id);
      return reply.code(204).send(null);
    },
  );
};
