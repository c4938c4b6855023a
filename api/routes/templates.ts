import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { DomainContext } from '../../domain/context.ts';
import {
  createTemplate,
  deleteTemplate,
  getTemplate,
  listTemplates,
  updateTemplate,
} from '../../domain/templates/index.ts';
import { CreateTemplateSchema, UpdateTemplateSchema } from '../../domain/templates/index.ts';
import { principalOf } from '../auth.ts';
import { TemplateListSchema, TemplateSchema, templateView } from './shapes/template.ts';

const IdParams = Type.Object({ id: Type.String({ minLength: 1, description: 'template id' }) });
const tags = ['Templates'];
const ACCESS = "Needs a key for the whole account (not one limited to endpoints); another account's template is 404.";

/** REST /v2/templates: reusable container configurations. */
export const templateRoutes: FastifyPluginAsyncTypebox<{ ctx: DomainContext }> = async (app, { ctx }) => {
  app.get(
    '/v2/templates',
    {
      config: { requiredScope: 'READ' },
      schema: {
        operationId: 'listTemplates',
        summary: 'List templates',
        description: `The account's templates, oldest first. ${ACCESS} Scope: READ.`,
        tags,
        response: { 200: TemplateListSchema },
      },
    },
    async (request) => ({ templates: (await listTemplates(ctx, principalOf(request))).map(templateView) }),
  );

  app.post(
    '/v2/templates',
    {
      config: { requiredScope: 'WRITE' },
      schema: {
        operationId: 'createTemplate',
        summary: 'Create a template',
        description: `Creates a named container configuration (image, args, disk, ports, env, registry, persistent volume) to create endpoints and pods from. Names are unique within the account (409). Serverless templates cannot have a persistent volume. ${ACCESS} Scope: WRITE.`,
        tags,
        body: CreateTemplateSchema,
        response: { 201: TemplateSchema },
      },
    },
    async (request, reply) =>
      reply.code(201).send(templateView(await createTemplate(ctx, principalOf(request), request.body))),
  );

  app.get(
    '/v2/templates/:id',
    {
      config: { requiredScope: 'READ' },
      schema: {
        operationId: 'getTemplate',
        summary: 'Get a template',
        description: `One template. ${ACCESS} Scope: READ.`,
        tags,
        params: IdParams,
        response: { 200: TemplateSchema },
      },
    },
    async (request) => templateView(await getTemplate(ctx, principalOf(request), request.params.id)),
  );

  app.patch(
    '/v2/templates/:id',
    {
      config: { requiredScope: 'WRITE' },
      schema: {
        operationId: 'updateTemplate',
        summary: 'Update a template',
        description: `Changes the fields present in the body; the others keep their values. Endpoints and pods already made from the template do not change. ${ACCESS} Scope: WRITE.`,
        tags,
        params: IdParams,
        body: UpdateTemplateSchema,
        response: { 200: TemplateSchema },
      },
    },
    async (request) => templateView(await updateTemplate(ctx, principalOf(request), request.params.id, request.body)),
  );

  app.delete(
    '/v2/templates/:id',
    {
      config: { requiredScope: 'WRITE' },
      schema: {
        operationId: 'deleteTemplate',
        summary: 'Delete a template',
        description: `Deletes a template. Refused with 400 while a pod or an endpoint was made from it. ${ACCESS} Scope: WRITE.`,
        tags,
        params: IdParams,
        response: { 204: Type.Null({ description: 'deleted; no body' }) },
      },
    },
    async (request, reply) => {
      await deleteTemplate(ctx, principalOf(request), request.params.id);
      return reply.code(204).send(null);
    },
  );
};
