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
} from '../../domain/apps/index.ts';
import {
  createFlashLogin,
  decideFlashLogin,
  describeFlashLogin,
  flashLoginStatus,
} from '../../domain/accounts/index.ts';
import { CPU_FLAVORS, cpuStockStatus } from '../../domain/catalog/index.ts';
import { validationFailed } from '../../domain/errors.ts';
import {
  flashAppNode,
  flashBuildNode,
  flashBuildWithManifest,
  flashDeploymentNode,
  flashEnvironmentNode,
  flashManifestOf,
} from './shapes/app.ts';
import { flashAuthRequestNode } from './shapes/flash-login.ts';
import { networkVolumeNode } from './shapes/network-volume.ts';
import type { Resolvers } from './generated-types.ts';
import { stripNulls } from './resolvers.ts';

/** Thin, as ./resolvers.ts: apps, environments and builds (schema-flash.ts) over domain/apps. */

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

export const flashResolvers: Resolvers = {
  JSON: JSON_SCALAR,
  Query: {
    // No principal: api/graphql/index.ts lets a request without a key through for these two alone.
    flashAuthRequestStatus: async (_, args, { ctx }) =>
      flashAuthRequestNode(await flashLoginStatus(ctx, args.flashAuthRequestId)),
    flashAuthRequest: async (_, args, { ctx, principal }) =>
      flashAuthRequestNode(await describeFlashLogin(ctx, principal, args.flashAuthRequestId)),
    flashApp: async (_, args, { ctx, principal }) => flashAppNode(await getApp(ctx, principal, args.flashAppId)),
    flashAppByName: async (_, args, { ctx, principal }) =>
      flashAppNode(await getApp(ctx, principal, args.flashAppName)),
    flashDeployment: async (_, args, { ctx, principal }) =>
      flashDeploymentNode(await getDeployment(ctx, principal, args.flashAppId, args.deploymentId)),
    flashEnvironment: async (_, args, { ctx, principal }) =>
      flashEnvironmentNode(await getEnvironmentById(ctx, principal, args.flashEnvironmentId)),
    flashEnvironmentByName: async (_, args, { ctx, principal }) =>
      flashEnvironmentNode(await getEnvironment(ctx, principal, args.input.flashAppId, args.input.name)),
    flashBuild: async (_, args, { ctx, principal }) =>
      flashBuildWithManifest(await getFlashBuild(ctx, principal, args.flashBuildId)),
    cpuFlavors: (_, args) =>
      CPU_FLAVORS.filter((f) => !args.input?.id || f.id === args.input.id).map((f) => ({
        id: f.id,
        displayName: f.name,
        ramGbPerVcpu: f.ramGbPerVcpu,
      })),
  },
  User: {
    flashApps: async (_, __, { ctx, principal }) => (await listApps(ctx, principal)).map(flashAppNode),
  },
  FlashApp: {
    flashBuilds: async (app, _, { ctx, principal }) => (await listBuilds(ctx, principal, app.id)).map(flashBuildNode),
  },
  FlashBuild: {
    // Listings carry no manifests (they can be large): the field reads the one build's.
    manifest: async (b, _, { ctx, principal }) =>
      b.manifest !== undefined ? b.manifest : flashManifestOf(await getFlashBuild(ctx, principal, b.id)),
  },
  FlashEnvironment: {
    networkVolumes: async (env, _, { ctx, principal }) =>
      (await environmentNetworkVolumes(ctx, principal, env.id)).map(networkVolumeNode),
  },
  FlashDeployment: {
    activeArtifact: (d, _, { ctx, principal }) => buildArtifactLink(ctx, principal, d.buildId),
  },
  CpuFlavor: {
    specifics: async (f, args, { ctx }) => ({
      stockStatus: await cpuStockStatus(ctx, f.id, {
        instanceId: args.input?.instanceId ?? '',
        dataCenterId: args.input?.dataCenterId,
      }),
    }),
  },
  Mutation: {
    createFlashAuthRequest: async (_, __, { ctx, requesterIp }) =>
      flashAuthRequestNode(await createFlashLogin(ctx, requesterIp ?? '')),
    approveFlashAuthRequest: async (_, args, { ctx, principal }) =>
      flashAuthRequestNode(await decideFlashLogin(ctx, principal, args.flashAuthRequestId, true)),
    denyFlashAuthRequest: async (_, args, { ctx, principal }) =>
      flashAuthRequestNode(await decideFlashLogin(ctx, principal, args.flashAuthRequestId, false)),
    createFlashApp: async (_, args, { ctx, principal }) =>
      flashAppNode(
        await createApp(ctx, principal, stripNulls({ name: args.input.name, environment: args.input.environmentName })),
      ),
    createFlashEnvironment: async (_, args, { ctx, principal }) =>
      flashEnvironmentNode(await createEnvironment(ctx, principal, args.input.flashAppId, { name: args.input.name })),
    prepareFlashArtifactUpload: async (_, args, { ctx, principal }) => {
      const input = args.input;
      let manifest: unknown;
      // gantry deploy's manifest travels as JSON text.
      if (typeof input.manifest === 'string') {
        try {
          manifest = JSON.parse(input.manifest);
        } catch {
          throw validationFailed(['$.input.manifest: not JSON text']);
        }
      }
      const prepared = await prepareUpload(ctx, principal, input.flashAppId, {
        // GraphQL's Float carries the size; the domain wants an integer and says so when it is not one.
        size: input.tarballSize,
        ...(typeof input.sha256 === 'string' ? { sha256: input.sha256 } : {}),
        ...(manifest !== undefined ? { manifest } : {}),
      });
      return {
        buildId: prepared.build.id,
        uploadUrl: prepared.upload.url,
        objectKey: prepared.build.id,
        expiresAt: prepared.upload.expiresAt,
      };
    },
    finalizeFlashArtifactUpload: async (_, args, { ctx, principal }) => {
      const { flashAppId, ...rest } = args.input;
      return flashBuildWithManifest(await finalizeUpload(ctx, principal, flashAppId, stripNulls(rest)));
    },
    updateFlashBuildManifest: async (_, args, { ctx, principal }) =>
      flashBuildWithManifest(
        await updateFlashBuildManifest(ctx, principal, args.input.flashBuildId, args.input.manifest),
      ),
    deployBuildToEnvironment: async (_, args, { ctx, principal }) => {
      const owner = await environmentOwner(ctx, principal, args.input.flashEnvironmentId);
      return flashDeploymentNode(
        await deployBuild(ctx, principal, owner.appId, owner.environmentId, { buildId: args.input.flashBuildId }),
      );
    },
    deleteFlashApp: async (_, args, { ctx, principal }) => {
      await deleteApp(ctx, principal, args.flashAppId);
      return true;
    },
    deleteFlashEnvironment: async (_, args, { ctx, principal }) => {
      const owner = await environmentOwner(ctx, principal, args.flashEnvironmentId);
      await deleteEnvironment(ctx, principal, owner.appId, owner.environmentId);
      return true;
    },
  },
};
