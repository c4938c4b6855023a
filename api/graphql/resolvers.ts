import type { Principal } from '../../domain/accounts/index.ts';
import { gpuStockStatus, gpuTypes } from '../../domain/catalog/index.ts';
import type { DomainContext } from '../../domain/context.ts';
import {
  deleteEndpointScaledToZero,
  endpointActiveBuild,
  findEndpointRecord,
  listEndpointRecords,
  publicWorkerStatus,
  saveEndpoint,
  updateEndpointTemplate,
  workerImagesOnHosts,
  workerProblemOfEndpoint,
  type EndpointRecord,
  type WorkerImageOnHost,
} from '../../domain/endpoints/index.ts';
import {
  endpointNetworkVolume,
  listNetworkVolumes,
  type NetworkVolumeView,
} from '../../domain/network-volumes/index.ts';
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
import {
  deleteTemplateByName,
  getTemplateRecord,
  listTemplateRecords,
  saveTemplate,
} from '../../domain/templates/index.ts';
import { requireScope, updateUserSettings } from '../../domain/accounts/index.ts';
import { DomainError, validationFailed } from '../../domain/errors.ts';
import {
  getPublicModel,
  listPublicModels,
  publishPublicModel,
  unpublishPublicModel,
  updatePublicModel,
  type PublicEndpointView,
} from '../../domain/public-models/index.ts';
import { liveWorker } from '../../domain/workers/index.ts';

export interface GraphqlContext {
  ctx: DomainContext;
  principal: Principal;
  /** The client's address: set only for a request without a key (flash login's). */
  requesterIp?: string;
}

type Args<T> = Record<string, T>;

/** Thin: every resolver calls a domain service with the caller's principal. */
export const resolvers = {
  Query: {
    myself: async (_: unknown, __: unknown, { ctx, principal }: GraphqlContext) => {
      requireScope(principal, 'READ');
      const account = await ctx.db.account.findUniqueOrThrow({ where: { id: principal.accountId } });
      const discountLive =
        account.serverlessDiscountFactor !== null &&
        (!account.serverlessDiscountExpires || account.serverlessDiscountExpires > new Date());
      return {
        id: account.id,
        email: account.email,
        pubKey: account.pubKey,
        serverlessDiscount: discountLive
          ? {
              discountFactor: account.serverlessDiscountFactor,
              type: account.serverlessDiscountType ?? 'DISCOUNT',
              expirationDate: account.serverlessDiscountExpires?.toISOString() ?? null,
            }
          : null,
      };
    },
    gpuTypes: async (
      _: unknown,
      args: { input?: { id?: string | null; ids?: string[] | null } | null },
      { ctx, principal }: GraphqlContext,
    ) => {
      requireScope(principal, 'READ');
      const only = [...(args.input?.id ? [args.input.id] : []), ...(args.input?.ids ?? [])];
      return (await gpuTypes(ctx))
        .filter((g) => only.length === 0 || only.includes(g.id))
        .map((g) => ({
          id: g.id,
          displayName: g.name,
          memoryInGb: g.memory,
          pool: g.pool,
          secureCloud: g.secure,
          communityCloud: g.community,
          securePrice: g.price.secure,
          serverlessPrice: g.price.serverless ?? null,
          // A type no READY host has (listed from the pools' catalog): 0, secureCloud false.
          maxGpuCount: g.maxCount.secure,
          totalCount: g.count.total,
          availableCount: g.count.available,
          manufacturer: 'Nvidia',
          cudaCores: null,
          communityPrice: g.community ? g.price.secure : null,
          oneWeekPrice: null,
          oneMonthPrice: null,
          threeMonthPrice: null,
          communitySpotPrice: null,
          secureSpotPrice: null,
        }));
    },
    pod: (_: unknown, args: Args<unknown>, { ctx, principal }: GraphqlContext) => getPod(ctx, principal, args.input),
    podTemplate: (_: unknown, args: Args<string>, { ctx, principal }: GraphqlContext) =>
      getTemplateRecord(ctx, principal, args.id ?? ''),
    publicEndpoints: async (_: unknown, __: unknown, { ctx, principal }: GraphqlContext) =>
      (await listPublicModels(ctx, principal)).map(publicEndpoint),
    publicEndpoint: async (_: unknown, args: Args<string>, { ctx, principal }: GraphqlContext) => {
      try {
        return publicEndpoint(await getPublicModel(ctx, principal, args.id ?? ''));
      } catch (err) {
        if (err instanceof DomainError && err.kind === 'not_found') return null;
        throw err;
      }
    },
  },
  User: {
    endpoints: (_: unknown, __: unknown, { ctx, principal }: GraphqlContext) => listEndpointRecords(ctx, principal),
    podTemplates: (_: unknown, __: unknown, { ctx, principal }: GraphqlContext) => {
      requireScope(principal, 'READ');
      return listTemplateRecords(ctx, principal);
    },
    containerRegistryCreds: (_: unknown, __: unknown, { ctx, principal }: GraphqlContext) =>
      listRegistries(ctx, principal),
    pods: (_: unknown, __: unknown, { ctx, principal }: GraphqlContext) => listPods(ctx, principal),
    endpoint: (_: unknown, args: Args<string>, { ctx, principal }: GraphqlContext) =>
      findEndpointRecord(ctx, principal, args.id ?? ''),
    networkVolumes: async (_: unknown, __: unknown, { ctx, principal }: GraphqlContext) =>
      (await listNetworkVolumes(ctx, principal)).map(networkVolume),
  },
  GpuType: {
    lowestPrice: async (
      g: { id: string; securePrice: number | null; totalCount: number },
      args: { input?: { gpuCount?: number | null; dataCenterId?: string | null } | null },
      { ctx }: GraphqlContext,
    ) => {
      const count = args.input?.gpuCount ?? 1;
      if (count < 1 || count > MAX_GPU_COUNT)
        throw validationFailed([`$.input.gpuCount: from 1 to ${MAX_GPU_COUNT}, got ${count}`]);
      return {
        minimumBidPrice: null,
        // No price where no READY host has the type: nothing could be rented at it.
        uninterruptablePrice:
          g.securePrice === null || g.totalCount === 0 ? null : Math.round(g.securePrice * count * 1e6) / 1e6,
        stockStatus: await gpuStockStatus(ctx, g.id, { count, dataCenterId: args.input?.dataCenterId }),
      };
    },
  },
  Endpoint: {
    networkVolumeIds: async (endpoint: EndpointRecord, _: unknown, { ctx, principal }: GraphqlContext) => {
      const volumes = await Promise.all(
        endpoint.networkVolumeIds.map((id) => endpointNetworkVolume(ctx, principal, id)),
      );
      return volumes.flatMap((v) => (v ? [{ networkVolumeId: v.id, dataCenterId: v.dataCenter }] : []));
    },
    activeBuildid: (endpoint: EndpointRecord, _: unknown, { ctx }: GraphqlContext) =>
      endpointActiveBuild(ctx, endpoint),
    workerProblem: (endpoint: EndpointRecord, _: unknown, { ctx }: GraphqlContext) =>
      workerProblemOfEndpoint(ctx, endpoint.id),
    networkVolume: async (endpoint: EndpointRecord, _: unknown, { ctx, principal }: GraphqlContext) => {
      const v = endpoint.networkVolumeId ? await endpointNetworkVolume(ctx, principal, endpoint.networkVolumeId) : null;
      return v ? networkVolume(v) : null;
    },
    pods: async (endpoint: EndpointRecord, _: unknown, { ctx }: GraphqlContext) => {
      const [workers, row] = await Promise.all([
        ctx.db.worker.findMany({ where: { endpointId: endpoint.id, ...liveWorker }, orderBy: { createdAt: 'asc' } }),
        ctx.db.endpoint.findUnique({
          where: { id: endpoint.id },
          select: { id: true, accountId: true, image: true, appEnvironmentId: true },
        }),
      ]);
      const onHost = row ? await workerImagesOnHosts(ctx, row, workers) : new Map<string, WorkerImageOnHost>();
      return workers.map((w) => ({
        id: w.id,
        desiredStatus: w.desiredStatus,
        workerStatus: publicWorkerStatus(w.status),
        lastStatusChange: (w.readyAt ?? w.startedAt ?? w.createdAt).toISOString(),
        imageName: null,
        machineId: w.hostId,
        statusReason: w.statusReason,
        imageOnHostSince: onHost.get(w.id)?.imageOnHostSince ?? null,
        imagePulledAhead: onHost.get(w.id)?.imagePulledAhead ?? false,
      }));
    },
  },
  Mutation: {
    publishPublicEndpoint: async (
      _: unknown,
      args: Args<Record<string, unknown>>,
      { ctx, principal }: GraphqlContext,
    ) => publicEndpoint(await publishPublicModel(ctx, principal, withParsedSchema(stripNulls(args.input)))),
    updatePublicEndpoint: async (
      _: unknown,
      args: { id?: string; input?: Record<string, unknown> },
      { ctx, principal }: GraphqlContext,
    ) =>
      publicEndpoint(await updatePublicModel(ctx, principal, args.id ?? '', withParsedSchema(stripNulls(args.input)))),
    unpublishPublicEndpoint: async (_: unknown, args: Args<string>, { ctx, principal }: GraphqlContext) => {
      await unpublishPublicModel(ctx, principal, args.id ?? '');
      return true;
    },
    saveEndpoint: (_: unknown, args: Args<{ template?: unknown }>, { ctx, principal }: GraphqlContext) => {
      const input = stripNulls(args.input) as Record<string, unknown> | undefined;
      return saveEndpoint(
        ctx,
        principal,
        input?.template ? { ...input, template: stripAllNulls(input.template) } : input,
      );
    },
    updateEndpointTemplate: (_: unknown, args: Args<unknown>, { ctx, principal }: GraphqlContext) =>
      updateEndpointTemplate(ctx, principal, args.input),
    updateUserSettings: (_: unknown, args: Args<unknown>, { ctx, principal }: GraphqlContext) =>
      updateUserSettings(ctx, principal, args.input),
    deleteEndpoint: async (_: unknown, args: Args<string>, { ctx, principal }: GraphqlContext) => {
      await deleteEndpointScaledToZero(ctx, principal, args.id ?? '');
      return null;
    },
    saveTemplate: (_: unknown, args: Args<unknown>, { ctx, principal }: GraphqlContext) => {
      if (args.input === null || args.input === undefined) throw validationFailed(['$.input: required']);
      return saveTemplate(ctx, principal, stripNulls(args.input));
    },
    deleteTemplate: async (_: unknown, args: Args<string>, { ctx, principal }: GraphqlContext) => {
      await deleteTemplateByName(ctx, principal, args.templateName ?? '');
      return null;
    },
    saveRegistryAuth: (_: unknown, args: Args<unknown>, { ctx, principal }: GraphqlContext) =>
      createRegistry(ctx, principal, stripNulls(args.input)),
    updateRegistryAuth: (
      _: unknown,
      args: Args<{ id: string; username: string; password: string; registry?: string | null }>,
      { ctx, principal }: GraphqlContext,
    ) => {
      const { id, ...login } = args.input ?? { id: '', username: '', password: '' };
      return updateRegistry(ctx, principal, id, stripNulls(login));
    },
    deleteRegistryAuth: async (_: unknown, args: Args<string>, { ctx, principal }: GraphqlContext) => {
      await deleteRegistry(ctx, principal, args.registryAuthId ?? '');
      return null;
    },
    podFindAndDeployOnDemand: (_: unknown, args: Args<unknown>, { ctx, principal }: GraphqlContext) =>
      deployPod(ctx, principal, stripAllNulls(args.input)),
    deployCpuPod: (_: unknown, args: Args<unknown>, { ctx, principal }: GraphqlContext) =>
      deployCpuPod(ctx, principal, stripAllNulls(args.input)),
    podStop: (_: unknown, args: Args<unknown>, { ctx, principal }: GraphqlContext) =>
      stopPod(ctx, principal, stripAllNulls(args.input)),
    podResume: (_: unknown, args: Args<unknown>, { ctx, principal }: GraphqlContext) =>
      resumePod(ctx, principal, stripAllNulls(args.input)),
    podTerminate: async (_: unknown, args: Args<unknown>, { ctx, principal }: GraphqlContext) => {
      await terminatePod(ctx, principal, stripAllNulls(args.input));
      return null;
    },
  },
};

/** GraphQL inputs arrive with nulls for some omitted optionals in some clients; the domain treats absent and null alike where the schema allows. */
/** GraphQL has no JSON type here: the schema travels as JSON text. */
const publicEndpoint = (m: PublicEndpointView) => ({ ...m, inputSchema: JSON.stringify(m.inputSchema) });

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

/** The most GPUs a price is asked for (a pod takes at most 64). */
const MAX_GPU_COUNT = 64;

const networkVolume = (v: NetworkVolumeView) => ({ id: v.id, name: v.name, size: v.size, dataCenterId: v.dataCenter });
