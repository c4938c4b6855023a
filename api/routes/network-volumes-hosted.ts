import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { DomainContext } from '../../domain/context.ts';
import { inFieldNames } from '../../domain/errors.ts';
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
import { HostedNetworkVolumeSchema, hostedNetworkVolume } from './shapes/network-volume.ts';

/**
 * The hosted service's REST shape of network volumes (`{RUNPOD_REST_API_URL}/networkvolumes`, which
 * its `flash` tool calls for a resource's `NetworkVolume`), over the same records as
 * /v2/network-volumes (shapes/network-volume.ts).
 */
/** The domain's create body, with the hosted service's name for the data center. */
const CreateHostedNetworkVolumeSchema = Type.Object(
  {
    name: CreateNetworkVolumeSchema.properties.name,
    size: CreateNetworkVolumeSchema.properties.size,
    dataCenterId: CreateNetworkVolumeSchema.properties.dataCenter,
  },
  { additionalProperties: false },
);
const IdParams = Type.Object({ id: Type.String({ minLength: 1, description: 'network volume id' }) });
const tags = ['Network Volumes'];
const SAME = 'The hosted service’s shape of /v2/network-volumes (same volumes, rules and scopes).';

export const hostedNetworkVolumeRoutes: FastifyPluginAsyncTypebox<{ ctx: DomainContext }> = async (app, { ctx }) => {
  app.get(
    '/v2/networkvolumes',
    {
      config: { requiredScope: 'READ' },
      schema: {
        operationId: 'listNetworkVolumesHosted',
        summary: 'List network volumes (hosted shape)',
        description: `The account's network volumes as a list. ${SAME}`,
        tags,
        response: { 200: Type.Array(HostedNetworkVolumeSchema) },
      },
    },
    async (request) => (await listNetworkVolumes(ctx, principalOf(request))).map(hostedNetworkVolume),
  );

  app.post(
    '/v2/networkvolumes',
    {
      config: { requiredScope: 'WRITE' },
      schema: {
        operationId: 'createNetworkVolumeHosted',
        summary: 'Create a network volume (hosted shape)',
        description: `Creates a volume of \`size\` GB in \`dataCenterId\`. ${SAME}`,
        tags,
        body: CreateHostedNetworkVolumeSchema,
        response: { 200: HostedNetworkVolumeSchema },
      },
    },
    async (request) => {
      const { name, size, dataCenterId } = request.body;
      // The domain's refusals name its field (`$.dataCenter`); this shape's caller sent `dataCenterId`.
      return hostedNetworkVolume(
        await inFieldNames({ dataCenter: 'dataCenterId' }, () =>
          createNetworkVolume(ctx, principalOf(request), { name, size, dataCenter: dataCenterId }),
        ),
      );
    },
  );

  app.get(
    '/v2/networkvolumes/:id',
    {
      config: { requiredScope: 'READ' },
      schema: {
        operationId: 'getNetworkVolumeHosted',
        summary: 'Get a network volume (hosted shape)',
        description: SAME,
        tags,
        params: IdParams,
        response: { 200: HostedNetworkVolumeSchema },
      },
    },
    async (request) => hostedNetworkVolume(await getNetworkVolume(ctx, principalOf(request), request.params.id)),
  );

  app.patch(
    '/v2/networkvolumes/:id',
    {
      config: { requiredScope: 'WRITE' },
      schema: {
        operationId: 'updateNetworkVolumeHosted',
        summary: 'Update a network volume (hosted shape)',
        description: `Renames and/or grows a volume. ${SAME}`,
        tags,
        params: IdParams,
        body: UpdateNetworkVolumeSchema,
        response: { 200: HostedNetworkVolumeSchema },
      },
    },
    async (request) =>
      hostedNetworkVolume(await updateNetworkVolume(ctx, principalOf(request), request.params.id, request.body)),
  );

  app.delete(
    '/v2/networkvolumes/:id',
    {
      config: { requiredScope: 'WRITE' },
      schema: {
        operationId: 'deleteNetworkVolumeHosted',
        summary: 'Delete a network volume (hosted shape)',
        description: `Deletes a volume; refused with 400 while an endpoint mounts it. ${SAME}`,
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
