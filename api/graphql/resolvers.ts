import { gpuCountPrice, gpuTypes } from '../../domain/catalog/index.ts';
import {
  deleteEndpointScaledToZero,
  endpointActiveBuild,
  findEndpoint,
  listEndpoints,
  saveEndpoint,
  updateEndpointTemplate,
  workerImagesOnHosts,
  workerProblemOfEndpoint,
  type WorkerImageOnHost,
} from '../../domain/endpoints/index.ts';
import { endpointNetworkVolume, listNetworkVolumes } from '../../domain/network-volumes/index.ts';
import {
  deployCpuPod,
  deployPod,
  getPod,
  listPods,
  resumePod,
  stopPod,
  terminatePod,
} from '../../domain/pods/index.ts';
import { createRegistry, deleteRegistry, listRegistries, updateRegistry } from '../../domain/registries/index.ts';
import { deleteTemplateByName, findTemplate, listTemplates, saveTemplate } from '../../domain/templates/index.ts';
import { ownAccount, requireScope, updateUserSettings } from '../../domain/accounts/index.ts';
import { DomainError, validationFailed } from '../../domain/errors.ts';
import {
  getPublicModel,
  listPublicModels,
  publishPublicModel,
  unpublishPublicModel,
  updatePublicModel,
} from '../../domain/public-models/index.ts';
import { liveWorker } from '../../domain/workers/index.ts';
import type { Resolvers } from './generated-types.ts';
import { endpointNode } from './shapes/endpoint.ts';
import { gpuTypeNode } from './shapes/gpu-type.ts';
import { networkVolumeNode } from './shapes/network-volume.ts';
import { endpointWorkerNode, podNode } from './shapes/pod.ts';
import { publicEndpointNode } from './shapes/public-model.ts';
import { podTemplateNode } from './shapes/template.ts';
import { userNode } from './shapes/user.ts';

/**
 * Thin: every resolver calls a domain service with the caller's principal. Arguments, parents and
 * results are typed from the schema (./generated-types.ts, `npm run generate:graphql-types`).
 */
export const resolvers: Resolvers = {
  Query: {
    myself: async (_, __, { ctx, principal }) => userNode(await ownAccount(ctx, principal)),
    gpuTypes: async (_, args, { ctx, principal }) => {
      requireScope(principal, 'READ');
      const only = [...(args.input?.id ? [args.input.id] : []), ...(args.input?.ids ?? [])];
      return (await gpuTypes(ctx)).filter((g) => only.length === 0 || only.includes(g.id)).map(gpuTypeNode);
    },
    pod: async (_, args, { ctx, principal }) => podNode(await getPod(ctx, principal, args.input)),
    podTemplate: async (_, args, { ctx, principal }) => {
      const t = await findTemplate(ctx, principal, args.id);
      return t ? podTemplateNode(t) : null;
    },
    publicEndpoints: async (_, __, { ctx, principal }) =>
      (await listPublicModels(ctx, principal)).map(publicEndpointNode),
    publicEndpoint: async (_, args, { ctx, principal }) => {
      try {
        return publicEndpointNode(await getPublicModel(ctx, principal, args.id));
      } catch (err) {
        if (err instanceof DomainError && err.kind === 'not_found') return null;
        throw err;
      }
    },
  },
  User: {
    endpoints: async (_, __, { ctx, principal }) => (await listEndpoints(ctx, principal)).map(endpointNode),
    podTemplates: async (_, __, { ctx, principal }) => {
      requireScope(principal, 'READ');
      return (await listTemplates(ctx, principal)).map(podTemplateNode);
    },
    containerRegistryCreds: (_, __, { ctx, principal }) => listRegistries(ctx, principal),
    pods: async (_, __, { ctx, principal }) => (await listPods(ctx, principal)).map(podNode),
    endpoint: async (_, args, { ctx, principal }) => {
      const e = await findEndpoint(ctx, principal, args.id);
      return e ? endpointNode(e) : null;
    },
    networkVolumes: async (_, __, { ctx, principal }) =>
      (await listNetworkVolumes(ctx, principal)).map(networkVolumeNode),
  },
  GpuType: {
    lowestPrice: async (g, args, { ctx }) => {
      const { perHour, stockStatus } = await gpuCountPrice(
        ctx,
        { id: g.id, podPerHour: g.securePrice ?? null, total: g.totalCount },
        args.input ?? {},
      );
      return { minimumBidPrice: null, uninterruptablePrice: perHour, stockStatus };
    },
  },
  Endpoint: {
    networkVolumeIds: async (endpoint, _, { ctx, principal }) => {
      const volumes = await Promise.all(
        endpoint.networkVolumeIds.map((id) => endpointNetworkVolume(ctx, principal, id)),
      );
      return volumes.flatMap((v) => (v ? [{ networkVolumeId: v.id, dataCenterId: v.dataCenterId }] : []));
    },
    activeBuildid: (endpoint, _, { ctx }) => endpointActiveBuild(ctx, endpoint.flashEnvironmentId),
    workerProblem: (endpoint, _, { ctx }) => workerProblemOfEndpoint(ctx, endpoint.id),
    networkVolume: async (endpoint, _, { ctx, principal }) => {
      const v = endpoint.networkVolumeId ? await endpointNetworkVolume(ctx, principal, endpoint.networkVolumeId) : null;
      return v ? networkVolumeNode(v) : null;
    },
    pods: async (endpoint, _, { ctx }) => {
      const [workers, row] = await Promise.all([
        ctx.db.worker.findMany({ where: { endpointId: endpoint.id, ...liveWorker }, orderBy: { createdAt: 'asc' } }),
        ctx.db.endpoint.findUnique({
          where: { id: endpoint.id },
          select: { id: true, accountId: true, image: true, appEnvironmentId: true },
        }),
      ]);
      const onHost = row ? await workerImagesOnHosts(ctx, row, workers) : new Map<string, WorkerImageOnHost>();
      return workers.map((w) => endpointWorkerNode(w, onHost.get(w.id)));
    },
  },
  Mutation: {
    publishPublicEndpoint: async (_, args, { ctx, principal }) =>
      publicEndpointNode(await publishPublicModel(ctx, principal, withParsedSchema(stripNulls(args.input)))),
    updatePublicEndpoint: async (_, args, { ctx, principal }) =>
      publicEndpointNode(await updatePublicModel(ctx, principal, args.id, withParsedSchema(stripNulls(args.input)))),
    unpublishPublicEndpoint: async (_, args, { ctx, principal }) => {
      await unpublishPublicModel(ctx, principal, args.id);
      return true;
    },
    saveEndpoint: async (_, args, { ctx, principal }) => {
      const input = stripNulls(args.input) as Record<string, unknown> | undefined;
      return endpointNode(
        await saveEndpoint(
          ctx,
          principal,
          input?.template ? { ...input, template: stripAllNulls(input.template) } : input,
        ),
      );
    },
    updateEndpointTemplate: async (_, args, { ctx, principal }) =>
      endpointNode(await updateEndpointTemplate(ctx, principal, args.input)),
    updateUserSettings: async (_, args, { ctx, principal }) =>
      userNode(await updateUserSettings(ctx, principal, args.input)),
    deleteEndpoint: async (_, args, { ctx, principal }) => {
      await deleteEndpointScaledToZero(ctx, principal, args.id);
      return null;
    },
    saveTemplate: async (_, args, { ctx, principal }) => {
      if (args.input === null || args.input === undefined) throw validationFailed(['$.input: required']);
      return podTemplateNode(await saveTemplate(ctx, principal, stripNulls(args.input)));
    },
    deleteTemplate: async (_, args, { ctx, principal }) => {
      await deleteTemplateByName(ctx, principal, args.templateName);
      return null;
    },
    saveRegistryAuth: (_, args, { ctx, principal }) => createRegistry(ctx, principal, stripNulls(args.input)),
    updateRegistryAuth: (_, args, { ctx, principal }) => {
      const { id, ...login } = args.input;
      return updateRegistry(ctx, principal, id, stripNulls(login));
    },
    deleteRegistryAuth: async (_, args, { ctx, principal }) => {
      await deleteRegistry(ctx, principal, args.registryAuthId);
      return null;
    },
    podFindAndDeployOnDemand: async (_, args, { ctx, principal }) =>
      podNode(await deployPod(ctx, principal, stripAllNulls(args.input))),
    deployCpuPod: async (_, args, { ctx, principal }) =>
      podNode(await deployCpuPod(ctx, principal, stripAllNulls(args.input))),
    podStop: async (_, args, { ctx, principal }) => podNode(await stopPod(ctx, principal, stripAllNulls(args.input))),
    podResume: async (_, args, { ctx, principal }) =>
      podNode(await resumePod(ctx, principal, stripAllNulls(args.input))),
    podTerminate: async (_, args, { ctx, principal }) => {
      await terminatePod(ctx, principal, stripAllNulls(args.input));
      return null;
    },
  },
};

/** A public model's input schema arrives as JSON text (GraphQL has no JSON type here); the domain takes the object. */
function withParsedSchema(input: unknown): unknown {
  if (input === null || typeof input !== 'object' || !('inputSchema' in input)) return input;
  const text = (input as { inputSchema: unknown }).inputSchema;
  if (typeof text !== 'string') return input;
  try {
    return { ...input, inputSchema: JSON.parse(text) as unknown };
  } catch {
    throw validationFailed(['$.inputSchema: is not JSON text']);
  }
}

/** GraphQL inputs arrive with nulls for some omitted optionals in some clients; the domain treats absent and null alike where the schema allows. */
export function stripNulls(input: unknown): unknown {
  if (!input || typeof input !== 'object') return input;
  return Object.fromEntries(
    Object.entries(input as Record<string, unknown>).filter(
      ([k, v]) => v !== null || k === 'locations' || k === 'networkVolumeId' || k === 'containerRegistryAuthId',
    ),
  );
}

/** Pod inputs: clients send null for options they leave out (`templateId: null`); the domain reads absent and null alike. */
export function stripAllNulls(input: unknown): unknown {
  if (!input || typeof input !== 'object') return input;
  return Object.fromEntries(Object.entries(input as Record<string, unknown>).filter(([, v]) => v !== null));
}
