import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import type { DomainContext } from '../../domain/context.ts';
import { createRegistry, CreateRegistrySchema, deleteRegistry, getRegistry, listRegistries, RegistryListSchema, RegistrySchema } from '../../domain/registries.ts';
import { principalOf, scopeGuard } from '../auth.ts';

const IdParams = Type.Object({ id: Type.String({ minLength: 1, description: 'registry credential id' }) });
const tags = ['Registries'];
const ACCESS = 'Needs a key for the whole account (not one limited to endpoints).';

/** REST /v2/registries: container registry credentials, write-only. */
export function registryRoutes(app: FastifyInstance, ctx: DomainContext): void {
  app.post(
    '/v2/registries',
    {
      onRequest: scopeGuard(ctx.db, 'WRITE'),
      schema: {
        'x-required-scope': 'WRITE',
        operationId: 'createRegistry',
        summary: 'Create a container registry credential',
        description: `Stores a user name and password for pulling private images, sealed with the server key. They are never returned by any read. Names are unique within the account (409). ${ACCESS} Scope: WRITE.`,
        tags,
        body: CreateRegistrySchema,
        response: { 201: RegistrySchema },
      },
    },
    async (request, reply) => reply.code(201).send(await createRegistry(ctx, await principalOf(ctx.db, request), request.body)),
  );

  app.get(
    '/v2/registries',
    {
      onRequest: scopeGuard(ctx.db, 'READ'),
      schema: {
        'x-required-scope': 'READ',
        operationId: 'listRegistries',
        summary: 'List container registry credentials',
        description: `The account's registry credentials: id and name only. ${ACCESS} Scope: READ.`,
        tags,
        response: { 200: RegistryListSchema },
      },
    },
    async (request) => ({ registries: await listRegistries(ctx, await principalOf(ctx.db, request)) }),
  );

  app.get<{ Params: { id: string } }>(
    '/v2/registries/:id',
    {
      onRequest: scopeGuard(ctx.db, 'READ'),
      schema: {
        'x-required-scope': 'READ',
        operationId: 'getRegistry',
        summary: 'Get a container registry credential',
        description: `One credential: id and name only; the user name and password are never returned. Another account's credential is 404. ${ACCESS} Scope: READ.`,
        tags,
        params: IdParams,
        response: { 200: RegistrySchema },
      },
    },
    async (request) => getRegistry(ctx, await principalOf(ctx.db, request), request.params.id),
  );

  app.delete<{ Params: { id: string } }>(
    '/v2/registries/:id',
    {
      onRequest: scopeGuard(ctx.db, 'WRITE'),
      schema: {
        'x-required-scope': 'WRITE',
        operationId: 'deleteRegistry',
        summary: 'Delete a container registry credential',
        description: `Deletes a credential. Refused with 400 while a pod or an endpoint pulls with it; templates that name it lose the reference. ${ACCESS} Scope: WRITE.`,
        tags,
        params: IdParams,
        response: { 204: Type.Null({ description: 'deleted; no body' }) },
      },
    },
    async (request, reply) => {
      await deleteRegistry(ctx, await principalOf(ctx.db, request), request.params.id);
      return reply.code(204).send();
    },
  );
}
