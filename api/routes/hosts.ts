// The OpenAPI fields of route schemas (operationId, summary, description, tags) are typed by @fastify/swagger.
import type {} from '@fastify/swagger';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { DomainContext } from '../../domain/context.ts';
import {
  createHost,
  CreateHostSchema,
  deleteHost,
  getHost,
  listHosts,
  probeHostOnDemand,
  updateHost,
  UpdateHostSchema,
} from '../../domain/hosts/index.ts';
import {
  DataCenterSettingsSchema,
  getDataCenterSettings,
  listDataCenterSettings,
  putDataCenterSettings,
} from '../../domain/catalog/index.ts';
import { principalOf } from '../auth.ts';
import { HostListSchema, HostSchema, hostView } from './shapes/host.ts';
import {
  DataCenterSettingsListSchema,
  DataCenterSettingsViewSchema,
  dataCenterSettingsView,
} from './shapes/data-center.ts';

const IdParams = Type.Object({ id: Type.String({ minLength: 1, description: 'host id' }) });
const tags = ['Hosts'];
const ACCESS = 'Needs an ADMIN key of the admin account.';

/** REST /v2/hosts: the machines workers run on (admin only). */
export const hostRoutes: FastifyPluginAsyncTypebox<{ ctx: DomainContext }> = async (app, { ctx }) => {
  app.post(
    '/v2/hosts',
    {
      config: { requiredScope: 'ADMIN' },
      schema: {
        operationId: 'createHost',
        summary: 'Register a host',
        description: `Stores the host (its private key sealed, never returned), probes it over SSH (CPU, memory, disk, container runtime, GPUs), pins its host key on first contact, and answers the host as found: READY, or UNREACHABLE / PENDING with the reason. ${ACCESS}`,
        tags,
        body: CreateHostSchema,
        response: { 201: HostSchema },
      },
    },
    async (request, reply) => reply.code(201).send(hostView(await createHost(ctx, principalOf(request), request.body))),
  );

  app.get(
    '/v2/hosts',
    {
      config: { requiredScope: 'ADMIN' },
      schema: {
        operationId: 'listHosts',
        summary: 'List hosts',
        description: ACCESS,
        tags,
        response: { 200: HostListSchema },
      },
    },
    async (request) => ({ hosts: (await listHosts(ctx, principalOf(request))).map(hostView) }),
  );

  app.get(
    '/v2/hosts/:id',
    {
      config: { requiredScope: 'ADMIN' },
      schema: {
        operationId: 'getHost',
        summary: 'Get a host',
        description: ACCESS,
        tags,
        params: IdParams,
        response: { 200: HostSchema },
      },
    },
    async (request) => hostView(await getHost(ctx, principalOf(request), request.params.id)),
  );

  app.patch(
    '/v2/hosts/:id',
    {
      config: { requiredScope: 'ADMIN' },
      schema: {
        operationId: 'updateHost',
        summary: 'Change a host',
        description: `Labels (they replace the host's; \`gantry.io/cpu-overcommit\` lets a small host take more CPU workers than it has cores), data center and worker limit, as placement reads them from now on; workers already placed stay. 409 for a host of the hosts file or GANTRY_LOCAL_HOST: every start applies those again. ${ACCESS}`,
        tags,
        params: IdParams,
        body: UpdateHostSchema,
        response: { 200: HostSchema },
      },
    },
    async (request) => hostView(await updateHost(ctx, principalOf(request), request.params.id, request.body)),
  );

  app.post(
    '/v2/hosts/:id/probe',
    {
      config: { requiredScope: 'ADMIN' },
      schema: {
        operationId: 'probeHost',
        summary: 'Probe a host now',
        // The body is optional, which a body schema cannot say: the domain validates it (ProbeHostSchema).
        description: `Probes the host at once and answers what it found. Optional body \`{"acceptHostKey": "SHA256:..."}\`: a host whose key changed (HOST_KEY_MISMATCH) is trusted again only with the new fingerprint, checked out of band. ${ACCESS}`,
        tags,
        params: IdParams,
        response: { 200: HostSchema },
      },
    },
    async (request) =>
      hostView(await probeHostOnDemand(ctx, principalOf(request), request.params.id, request.body ?? {})),
  );

  app.delete(
    '/v2/hosts/:id',
    {
      config: { requiredScope: 'ADMIN' },
      schema: {
        operationId: 'deleteHost',
        summary: 'Remove a host',
        description: `No new workers are placed on the host; its workers drain (their endpoints replace them elsewhere) and then the host is removed: 204 when that was at once, 202 with the host (DISABLED) while its workers drain. ${ACCESS}`,
        tags,
        params: IdParams,
        response: { 202: HostSchema, 204: Type.Null() },
      },
    },
    async (request, reply) => {
      const { removed, host } = await deleteHost(ctx, principalOf(request), request.params.id);
      return removed || !host ? reply.code(204).send(null) : reply.code(202).send(hostView(host));
    },
  );

  await app.register(dataCenterRoutes, { ctx });
};

const DataCenterParams = Type.Object({
  id: Type.String({ minLength: 1, maxLength: 64, description: 'data center id, as hosts name it' }),
});
const dcTags = ['Data centers'];

/**
 * REST /v2/datacenters: what the operator says of each data center (admin only). Tenants see data
 * centers through /v2/catalog/datacenters.
 */
const dataCenterRoutes: FastifyPluginAsyncTypebox<{ ctx: DomainContext }> = async (app, { ctx }) => {
  app.get(
    '/v2/datacenters',
    {
      config: { requiredScope: 'ADMIN' },
      schema: {
        operationId: 'listDataCenterSettings',
        summary: 'List data centers and their settings',
        description: `Every data center hosts name or settings describe: its country (GraphQL \`locations\` places workers by it), its shared storage for network volumes, and how network volumes work there. ${ACCESS}`,
        tags: dcTags,
        response: { 200: DataCenterSettingsListSchema },
      },
    },
    async (request) => ({
      dataCenters: (await listDataCenterSettings(ctx, principalOf(request))).map(dataCenterSettingsView),
    }),
  );
  app.get(
    '/v2/datacenters/:id',
    {
      config: { requiredScope: 'ADMIN' },
      schema: {
        operationId: 'getDataCenterSettings',
        summary: "Get a data center's settings",
        description: ACCESS,
        tags: dcTags,
        params: DataCenterParams,
        response: { 200: DataCenterSettingsViewSchema },
      },
    },
    async (request) =>
      dataCenterSettingsView(await getDataCenterSettings(ctx, principalOf(request), request.params.id)),
  );
  app.put(
    '/v2/datacenters/:id',
    {
      config: { requiredScope: 'ADMIN' },
      schema: {
        operationId: 'putDataCenterSettings',
        summary: "Set a data center's country and shared storage",
        description: `\`country\`: ISO 3166-1 alpha-2. \`networkVolumePath\`: an absolute directory that every host of the data center mounts from the same shared storage (NFS, CephFS, ...); each network volume is a directory under it. Without it, a data center of a single host keeps network volumes as named volumes on that host. What the body leaves out is cleared; data already written is not moved. A hosts file's \`dataCenters\` wins at the next start. ${ACCESS}`,
        tags: dcTags,
        params: DataCenterParams,
        body: DataCenterSettingsSchema,
        response: { 200: DataCenterSettingsViewSchema },
      },
    },
    async (request) =>
      dataCenterSettingsView(await putDataCenterSettings(ctx, principalOf(request), request.params.id, request.body)),
  );
};
