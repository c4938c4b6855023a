// The OpenAPI fields of route schemas (operationId, summary, description, tags) are typed by @fastify/swagger.
import type {} from '@fastify/swagger';
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import type { DomainContext } from '../../domain/context.ts';
import { createHost, CreateHostSchema, deleteHost, getHost, HostListSchema, HostSchema, listHosts, probeHostOnDemand } from '../../domain/hosts.ts';
import { DataCenterSettingsListSchema, DataCenterSettingsSchema, DataCenterSettingsViewSchema, getDataCenterSettings, listDataCenterSettings, putDataCenterSettings } from '../../domain/data-centers.ts';
import { principalOf, scopeGuard } from '../auth.ts';

const IdParams = Type.Object({ id: Type.String({ minLength: 1, description: 'host id' }) });
const tags = ['Hosts'];
const ACCESS = 'Needs an ADMIN key of the admin account.';

/** REST /v2/hosts: the machines workers run on (admin only). */
export function hostRoutes(app: FastifyInstance, ctx: DomainContext): void {
  const admin = scopeGuard(ctx.db, 'ADMIN');

  app.post(
    '/v2/hosts',
    {
      onRequest: admin,
      schema: {
        operationId: 'createHost',
        summary: 'Register a host',
        description: `Stores the host (its private key sealed, never returned), probes it over SSH (CPU, memory, disk, container runtime, GPUs), pins its host key on first contact, and answers the host as found: READY, or UNREACHABLE / PENDING with the reason. ${ACCESS}`,
        tags,
        'x-required-scope': 'ADMIN',
        body: CreateHostSchema,
        response: { 201: HostSchema },
      },
    },
    async (request, reply) => reply.code(201).send(await createHost(ctx, await principalOf(ctx.db, request), request.body)),
  );

  app.get(
    '/v2/hosts',
    {
      onRequest: admin,
      schema: { operationId: 'listHosts', summary: 'List hosts', description: ACCESS, tags, 'x-required-scope': 'ADMIN', response: { 200: HostListSchema } },
    },
    async (request) => ({ hosts: await listHosts(ctx, await principalOf(ctx.db, request)) }),
  );

  app.get<{ Params: { id: string } }>(
    '/v2/hosts/:id',
    {
      onRequest: admin,
      schema: { operationId: 'getHost', summary: 'Get a host', description: ACCESS, tags, 'x-required-scope': 'ADMIN', params: IdParams, response: { 200: HostSchema } },
    },
    async (request) => getHost(ctx, await principalOf(ctx.db, request), request.params.id),
  );

  app.post<{ Params: { id: string } }>(
    '/v2/hosts/:id/probe',
    {
      onRequest: admin,
      schema: {
        operationId: 'probeHost',
        summary: 'Probe a host now',
        // The body is optional, which a body schema cannot say: the domain validates it (ProbeHostSchema).
        description: `Probes the host at once and answers what it found. Optional body \`{"acceptHostKey": "SHA256:..."}\`: a host whose key changed (HOST_KEY_MISMATCH) is trusted again only with the new fingerprint, checked out of band. ${ACCESS}`,
        tags,
        'x-required-scope': 'ADMIN',
        params: IdParams,
        response: { 200: HostSchema },
      },
    },
    async (request) => probeHostOnDemand(ctx, await principalOf(ctx.db, request), request.params.id, request.body ?? {}),
  );

  app.delete<{ Params: { id: string } }>(
    '/v2/hosts/:id',
    {
      onRequest: admin,
      schema: {
        operationId: 'deleteHost',
        summary: 'Remove a host',
        description: `No new workers are placed on the host; its workers drain (their endpoints replace them elsewhere) and then the host is removed: 204 when that was at once, 202 with the host (DISABLED) while its workers drain. ${ACCESS}`,
        tags,
        'x-required-scope': 'ADMIN',
        params: IdParams,
        response: { 202: HostSchema, 204: Type.Null() },
      },
    },
    async (request, reply) => {
      const result = await deleteHost(ctx, await principalOf(ctx.db, request), request.params.id);
      return result.removed ? reply.code(204).send() : reply.code(202).send(result.host);
    },
  );

  dataCenterRoutes(app, ctx);
}

const DataCenterParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 64, description: 'data center id, as hosts name it' }) });
const dcTags = ['Data centers'];

/**
 * REST /v2/datacenters: what the operator says of each data center (admin only). Tenants see data
 * centers through /v2/catalog/datacenters.
 */
function dataCenterRoutes(app: FastifyInstance, ctx: DomainContext): void {
  const admin = scopeGuard(ctx.db, 'ADMIN');
  app.get(
    '/v2/datacenters',
    {
      onRequest: admin,
      schema: {
        operationId: 'listDataCenterSettings',
        summary: 'List data centers and their settings',
        description: `Every data center hosts name or settings describe: its country (GraphQL \`locations\` places workers by it), its shared storage for network volumes, and how network volumes work there. ${ACCESS}`,
        tags: dcTags,
        'x-required-scope': 'ADMIN',
        response: { 200: DataCenterSettingsListSchema },
      },
    },
    async (request) => ({ dataCenters: await listDataCenterSettings(ctx, await principalOf(ctx.db, request)) }),
  );
  app.get<{ Params: { id: string } }>(
    '/v2/datacenters/:id',
    {
      onRequest: admin,
      schema: { operationId: 'getDataCenterSettings', summary: 'Get a data center\'s settings', description: ACCESS, tags: dcTags, 'x-required-scope': 'ADMIN', params: DataCenterParams, response: { 200: DataCenterSettingsViewSchema } },
    },
    async (request) => getDataCenterSettings(ctx, await principalOf(ctx.db, request), request.params.id),
  );
  app.put<{ Params: { id: string } }>(
    '/v2/datacenters/:id',
    {
      onRequest: admin,
      schema: {
        operationId: 'putDataCenterSettings',
        summary: 'Set a data center\'s country and shared storage',
        description: `\`country\`: ISO 3166-1 alpha-2. \`networkVolumePath\`: an absolute directory that every host of the data center mounts from the same shared storage (NFS, CephFS, ...); each network volume is a directory under it. Without it, a data center of a single host keeps network volumes as named volumes on that host. What the body leaves out is cleared; data already written is not moved. A hosts file's \`dataCenters\` wins at the next start. ${ACCESS}`,
        tags: dcTags,
        'x-required-scope': 'ADMIN',
        params: DataCenterParams,
        body: DataCenterSettingsSchema,
        response: { 200: DataCenterSettingsViewSchema },
      },
    },
    async (request) => putDataCenterSettings(ctx, await principalOf(ctx.db, request), request.params.id, request.body),
  );
}
