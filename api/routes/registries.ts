import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { DomainContext } from '../../domain/context.ts';
import {
  createRegistry,
  CreateRegistrySchema,
  deleteRegistry,
  getRegistry,
  listRegistries,
  updateRegistry,
  UpdateRegistrySchema,
} from '../../domain/registries/index.ts';
import { principalOf } from '../auth.ts';
import { RegistryListSchema, RegistrySchema, registryView } from './shapes/registry.ts';

const IdParams = Type.Object({
  id: Type.String({ minLength: 1, maxLength: 200, description: 'registry credential id' }),
});
const tags = ['Registries'];
const ACCESS = 'Needs a key for the whole account (not one limited to endpoints).';

/** REST /v2/registries: container registry credentials, write-only. */
export const registryRoutes: FastifyPluginAsyncTypebox<{ ctx: DomainContext }> = async (app, { ctx }) => {
  app.post(
    '/v2/registries',
    {
      config: { requiredScope: 'WRITE' },
      schema: {
        operationId: 'createRegistry',
        summary: 'Create a container registry credential',
        description: `Stores a user name and password for pulling private images, sealed with the server key. They are never returned by any read. The credential is bound to one registry host (\`registry\`; default: the name when it is a host such as ghcr.io, else docker.io) and is never sent to another: an endpoint, template or pod whose image is elsewhere is refused (422). Names are unique within the account (409). ${ACCESS} Scope: WRITE.`,
        tags,
        body: CreateRegistrySchema,
        response: { 201: RegistrySchema },
      },
    },
    async (request, reply) =>
      reply.code(201).send(registryView(await createRegistry(ctx, principalOf(request), request.body))),
  );

  app.get(
    '/v2/registries',
    {
      config: { requiredScope: 'READ' },
      schema: {
        operationId: 'listRegistries',
        summary: 'List container registry credentials',
        description: `The account's registry credentials: id, name and the registry they are bound to (null: not bound yet, refused until bound with PATCH). ${ACCESS} Scope: READ.`,
        tags,
        response: { 200: RegistryListSchema },
      },
    },
    async (request) => ({ registries: (await listRegistries(ctx, principalOf(request))).map(registryView) }),
  );

  app.get(
    '/v2/registries/:id',
    {
      config: { requiredScope: 'READ' },
      schema: {
        operationId: 'getRegistry',
        summary: 'Get a container registry credential',
        description: `One credential: id, name and bound registry; the user name and password are never returned. Another account's credential is 404. ${ACCESS} Scope: READ.`,
        tags,
        params: IdParams,
        response: { 200: RegistrySchema },
      },
    },
    async (request) => registryView(await getRegistry(ctx, principalOf(request), request.params.id)),
  );

  app.patch(
    '/v2/registries/:id',
    {
      config: { requiredScope: 'WRITE' },
      schema: {
        operationId: 'updateRegistry',
        summary: 'Replace the login of a container registry credential, or bind it to a registry',
        description: `Replaces the user name and password; with \`registry\`, binds the credential to that registry host (a credential made before binding has none and is refused until bound). Changing the registry takes the whole login again and is refused (422) while an endpoint, template or pod with an image elsewhere uses the credential. ${ACCESS} Scope: WRITE.`,
        tags,
        params: IdParams,
        body: UpdateRegistrySchema,
        response: { 200: RegistrySchema },
      },
    },
    async (request) => registryView(await updateRegistry(ctx, principalOf(request), request.params.id, request.body)),
  );

  app.delete(
    '/v2/registries/:id',
    {
      config: { requiredScope: 'WRITE' },
      schema: {
        operationId: 'deleteRegistry',
        summary: 'Delete a container registry credential',
        description: `Deletes a credential. Refused with 400 while a pod or an endpoint pulls with it; templates that name it lose the reference. ${ACCESS} Scope: WRITE.`,
        tags,
        params: IdParams,
        response: { 204: Type.Null({ description: 'deleted; no body' }) },
      },
    },
    async (request, reply) => {
      await deleteRegistry(ctx, principalOf(request), request.params.id);
      return reply.code(204).send(null);
    },
  );
};
