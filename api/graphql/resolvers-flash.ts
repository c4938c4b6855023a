import { GraphQLScalarType, Kind, type ValueNode } from 'graphql';
import {
  buildArtifactLink,
  createApp,
  createEnvironment,
  deleteApp,
  deleteEnvironment,
  deployBuild,
  environmentNetworkVolumes,
  environmentOwner,
  finalizeUpload,
  getApp,
  getDeployment,
  getEnvironment,
  getEnvironmentById,
  getFlashBuild,
  listApps,
  listBuilds,
  prepareUpload,
  updateFlashBuildManifest,
  type AppView,
  type BuildView,
  type DeploymentView,
  type EnvironmentView,
} from '../../domain/apps/index.ts';
import {
  createFlashLogin,
  decideFlashLogin,
  describeFlashLogin,
  flashLoginStatus,
  type FlashLoginView,
} from '../../domain/accounts/index.ts';
import { CPU_FLAVORS, cpuStockStatus } from '../../domain/catalog/index.ts';
import { validationFailed } from '../../domain/errors.ts';
import type { NetworkVolumeView } from '../../domain/network-volumes/index.ts';
import { stripNulls, type GraphqlContext } from './resolvers.ts';

/** Thin, as ./resolvers.ts: apps, environments and builds (schema-flash.ts) over domain/apps. */

type Args<T> = Record<string, T>;

/** A literal in a document, as the JSON value it writes (variables arrive parsed already). */
function literalValue(node: ValueNode, variables: Record<string, unknown> | null | undefined): unknown {
  switch (node.kind) {
    case Kind.STRING:
    case Kind.BOOLEAN:
    case Kind.ENUM:
      return node.value;
    case Kind.INT:
    case Kind.FLOAT:
      return Number(node.value);
    case Kind.NULL:
      return null;
    case Kind.LIST:
      return node.values.map((v) => literalValue(v, variables));
    case Kind.OBJECT:
      return Object.fromEntries(node.fields.map((f) => [f.name.value, literalValue(f.value, variables)]));
    case Kind.VARIABLE:
      return variables?.[node.name.value];
  }
}

/** JSON values as they are: the size and depth rules of what is stored are the domain's. */
const JSON_SCALAR = new GraphQLScalarType({
  name: 'JSON',
  serialize: (value) => value,
  parseValue: (value) => value,
  parseLiteral: (node, variables) => literalValue(node, variables),
});

const flashEnvironment = (e: EnvironmentView) => ({
  id: e.id,
  name: e.name,
  createdAt: e.createdAt,
  activeBuildId: e.currentBuildId,
  state: e.state,
  endpoints: e.endpoints,
});
const flashApp = (a: AppView) => ({
  id: a.id,
  name: a.name,
  createdAt: a.createdAt,
  flashEnvironments: a.environments.map(flashEnvironment),
});
const flashBuild = (b: BuildView) => ({ ...b, objectKey: b.id });
const flashDeployment = (d: DeploymentView) => ({
  id: d.id,
  name: d.workflowId,
  status: d.status,
  error: d.error,
  buildId: d.buildId,
});
const networkVolume = (v: NetworkVolumeView) => ({ id: v.id, name: v.name, size: v.size, dataCenterId: v.dataCenter });

/** GraphQL's Float carries the size; the domain wants an integer and says so when it is not one. */
const size = (n: unknown): number | undefined => (typeof n === 'number' ? n : undefined);

const flashAuthRequest = (r: FlashLoginView) => ({
  ...r,
  createdAt: r.createdAt.toISOString(),
  expiresAt: r.expiresAt.toISOString(),
  apiKey: r.apiKey ?? null,
});

export const flashResolvers = {
  JSON: JSON_SCALAR,
  Query: {
    // No principal: api/graphql/index.ts lets a request without a key through for these two alone.
    flashAuthRequestStatus: async (_: unknown, args: Args<string>, { ctx }: GraphqlContext) =>
      flashAuthRequest(await flashLoginStatus(ctx, args.flashAuthRequestId ?? '')),
    flashAuthRequest: async (_: unknown, args: Args<string>, { ctx, principal }: GraphqlContext) =>
      flashAuthRequest(await describeFlashLogin(ctx, principal, args.flashAuthRequestId ?? '')),
    flashApp: async (_: unknown, args: Args<string>, { ctx, principal }: GraphqlContext) =>
      flashApp(await getApp(ctx, principal, args.flashAppId ?? '')),
    flashAppByName: async (_: unknown, args: Args<string>, { ctx, principal }: GraphqlContext) =>
      flashApp(await getApp(ctx, principal, args.flashAppName ?? '')),
    flashDeployment: async (_: unknown, args: Args<string>, { ctx, principal }: GraphqlContext) =>
      flashDeployment(await getDeployment(ctx, principal, args.flashAppId ?? '', args.deploymentId ?? '')),
    flashEnvironment: async (_: unknown, args: Args<string>, { ctx, principal }: GraphqlContext) =>
      flashEnvironment(await getEnvironmentById(ctx, principal, args.flashEnvironmentId ?? '')),
    flashEnvironmentByName: async (
      _: unknown,
      args: Args<{ flashAppId: string; name: string }>,
      { ctx, principal }: GraphqlContext,
    ) => flashEnvironment(await getEnvironment(ctx, principal, args.input?.flashAppId ?? '', args.input?.name ?? '')),
    flashBuild: async (_: unknown, args: Args<string>, { ctx, principal }: GraphqlContext) =>
      flashBuild(await getFlashBuild(ctx, principal, args.flashBuildId ?? '')),
    cpuFlavors: (_: unknown, args: { input?: { id?: string | null } | null }) =>
      CPU_FLAVORS.filter((f) => !args.input?.id || f.id === args.input.id).map((f) => ({
        id: f.id,
        displayName: f.name,
        ramGbPerVcpu: f.ramGbPerVcpu,
      })),
  },
  User: {
    flashApps: async (_: unknown, __: unknown, { ctx, principal }: GraphqlContext) =>
      (await listApps(ctx, principal)).map(flashApp),
  },
  FlashApp: {
    flashBuilds: async (app: { id: string }, _: unknown, { ctx, principal }: GraphqlContext) =>
      (await listBuilds(ctx, principal, app.id)).map(flashBuild),
  },
  FlashBuild: {
    // Listings carry no manifests (they can be large): the field reads the one build's.
    manifest: async (b: { id: string; manifest?: unknown }, _: unknown, { ctx, principal }: GraphqlContext) =>
      b.manifest !== undefined ? b.manifest : (await getFlashBuild(ctx, principal, b.id)).manifest,
  },
  FlashEnvironment: {
    networkVolumes: async (env: { id: string }, _: unknown, { ctx, principal }: GraphqlContext) =>
      (await environmentNetworkVolumes(ctx, principal, env.id)).map(networkVolume),
  },
  FlashDeployment: {
    activeArtifact: (d: { buildId: string }, _: unknown, { ctx, principal }: GraphqlContext) =>
      buildArtifactLink(ctx, principal, d.buildId),
  },
  CpuFlavor: {
    specifics: async (
      f: { id: string },
      args: { input?: { instanceId?: string | null; dataCenterId?: string | null } | null },
      { ctx }: GraphqlContext,
    ) => ({
      stockStatus: await cpuStockStatus(ctx, f.id, {
        instanceId: args.input?.instanceId ?? '',
        dataCenterId: args.input?.dataCenterId,
      }),
    }),
  },
  Mutation: {
    createFlashAuthRequest: async (_: unknown, _args: unknown, { ctx, requesterIp }: GraphqlContext) =>
      flashAuthRequest(await createFlashLogin(ctx, requesterIp ?? '')),
    approveFlashAuthRequest: async (_: unknown, args: Args<string>, { ctx, principal }: GraphqlContext) =>
      flashAuthRequest(await decideFlashLogin(ctx, principal, args.flashAuthRequestId ?? '', true)),
    denyFlashAuthRequest: async (_: unknown, args: Args<string>, { ctx, principal }: GraphqlContext) =>
      flashAuthRequest(await decideFlashLogin(ctx, principal, args.flashAuthRequestId ?? '', false)),
    createFlashApp: async (
      _: unknown,
      args: Args<{ name?: string; environmentName?: string | null }>,
      { ctx, principal }: GraphqlContext,
    ) =>
      flashApp(
        await createApp(
          ctx,
          principal,
          stripNulls({ name: args.input?.name, environment: args.input?.environmentName }),
        ),
      ),
    createFlashEnvironment: async (
      _: unknown,
      args: Args<{ flashAppId: string; name: string }>,
      { ctx, principal }: GraphqlContext,
    ) =>
      flashEnvironment(
        await createEnvironment(ctx, principal, args.input?.flashAppId ?? '', { name: args.input?.name }),
      ),
    prepareFlashArtifactUpload: async (
      _: unknown,
      args: Args<{ flashAppId: string; tarballSize: number; sha256?: string | null; manifest?: string | null }>,
      { ctx, principal }: GraphqlContext,
    ) => {
      const input = args.input;
      let manifest: unknown;
      // gantry deploy's manifest travels as JSON text.
      if (typeof input?.manifest === 'string') {
        try {
          manifest = JSON.parse(input.manifest);
        } catch {
          throw validationFailed(['$.input.manifest: not JSON text']);
        }
      }
      const prepared = await prepareUpload(ctx, principal, input?.flashAppId ?? '', {
        size: size(input?.tarballSize),
        ...(typeof input?.sha256 === 'string' ? { sha256: input.sha256 } : {}),
        ...(manifest !== undefined ? { manifest } : {}),
      });
      return {
        buildId: prepared.build.id,
        uploadUrl: prepared.upload.url,
        objectKey: prepared.build.id,
        expiresAt: prepared.upload.expiresAt,
      };
    },
    finalizeFlashArtifactUpload: async (
      _: unknown,
      args: Args<{ flashAppId: string } & Record<string, unknown>>,
      { ctx, principal }: GraphqlContext,
    ) => {
      const { flashAppId, ...rest } = args.input ?? { flashAppId: '' };
      return flashBuild(await finalizeUpload(ctx, principal, flashAppId, stripNulls(rest)));
    },
    updateFlashBuildManifest: async (
      _: unknown,
      args: Args<{ flashBuildId: string; manifest: unknown }>,
      { ctx, principal }: GraphqlContext,
    ) =>
      flashBuild(await updateFlashBuildManifest(ctx, principal, args.input?.flashBuildId ?? '', args.input?.manifest)),
    deployBuildToEnvironment: async (
      _: unknown,
      args: Args<{ flashEnvironmentId: string; flashBuildId: string }>,
      { ctx, principal }: GraphqlContext,
    ) => {
      const owner = await environmentOwner(ctx, principal, args.input?.flashEnvironmentId ?? '');
      return flashDeployment(
        await deployBuild(ctx, principal, owner.appId, owner.environmentId, { buildId: args.input?.flashBuildId }),
      );
    },
    deleteFlashApp: async (_: unknown, args: Args<string>, { ctx, principal }: GraphqlContext) => {
      await deleteApp(ctx, principal, args.flashAppId ?? '');
      return true;
    },
    deleteFlashEnvironment: async (_: unknown, args: Args<string>, { ctx, principal }: GraphqlContext) => {
      const owner = await environmentOwner(ctx, principal, args.flashEnvironmentId ?? '');
      await deleteEnvironment(ctx, principal, owner.appId, owner.environmentId);
      return true;
    },
  },
};
