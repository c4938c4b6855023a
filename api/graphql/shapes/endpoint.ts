import type { Endpoint } from '../../../generated/prisma/client.ts';
import { cpuInstanceId } from '../../../domain/catalog/index.ts';

/**
 * GraphQL's `Endpoint` (`myself { endpoints }`, `saveEndpoint`: docs/graphql.md), from the endpoint's
 * row, in the hosted service's vocabulary: the parent of the `Endpoint` resolvers, which compute
 * the fields left out here (its template, volumes, workers).
 */
export interface EndpointNode {
  id: string;
  name: string;
  gpuIds: string;
  idleTimeout: number;
  locations: string;
  networkVolumeId: string | null;
  flashBootType: 'OFF' | 'FLASHBOOT' | 'PRIORITY_FLASHBOOT';
  scalerType: 'QUEUE_DELAY' | 'REQUEST_COUNT';
  scalerValue: number;
  templateId: string | null;
  workersMax: number;
  workersMin: number;
  type: 'QB' | 'LB';
  gpuCount: number;
  /** A CPU endpoint's instance (`cpu3c-2-4`); empty for a GPU endpoint. */
  instanceIds: string[];
  executionTimeoutMs: number;
  /** Comma-separated, as the hosted service's clients send it; empty: any. */
  allowedCudaVersions: string;
  /** The owning account. */
  userId: string;
  /** The release the endpoint's new workers run. */
  version: number;
  env: Array<{ key: string; value: string }>;
  createdAt: string;
  /** Gantry has no per-endpoint AI key and no standby pool: always null. */
  aiKey: null;
  workersStandby: null;
  /** The volumes it mounts, each with its data center (the hosted service's multi-volume form). */
  networkVolumeIds: string[];
  /** The app environment (flash's or gantry deploy's) the endpoint belongs to. */
  flashEnvironmentId: string | null;
  minCudaVersion: string | null;
  /** No pre-warmed FlashBoot pool and no IDE pods here: null. */
  workersPFBTarget: null;
  idePodId: null;
}

export function endpointNode(e: Endpoint): EndpointNode {
  return {
    id: e.id,
    name: e.name,
    gpuIds: e.gpuPools.join(','),
    idleTimeout: e.idleTimeout,
    locations: e.locations,
    networkVolumeId: e.networkVolumeIds[0] ?? null,
    flashBootType: e.flashboot,
    scalerType: e.scalerType,
    scalerValue: e.scalerValue,
    templateId: e.templateId,
    workersMax: e.workersMax,
    workersMin: e.workersMin,
    type: e.type === 'LOAD_BALANCING' ? 'LB' : 'QB',
    gpuCount: e.gpuCount ?? (e.cpuFlavorId ? 0 : 1),
    instanceIds: e.cpuFlavorId
      ? [cpuInstanceId({ flavorId: e.cpuFlavorId, vcpus: e.cpuVcpuCount ?? 2, memoryGb: e.cpuMemoryGb ?? 4 })]
      : [],
    executionTimeoutMs: e.timeoutMs,
    allowedCudaVersions: e.allowedCudaVersions.join(','),
    userId: e.accountId,
    version: e.currentReleaseVersion,
    env: Object.entries(e.env as Record<string, string>).map(([key, value]) => ({ key, value })),
    createdAt: e.createdAt.toISOString(),
    aiKey: null,
    workersStandby: null,
    networkVolumeIds: e.networkVolumeIds,
    flashEnvironmentId: e.appEnvironmentId,
    minCudaVersion: e.minCudaVersion,
    workersPFBTarget: null,
    idePodId: null,
  };
}
