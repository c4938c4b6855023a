import type { GpuTypeModel } from '../../../domain/catalog/index.ts';
import type { GpuTypeParent } from '../parents.ts';

/** GraphQL's `GpuType` (the `gpuTypes` query), from the domain's model; lowestPrice is its own resolver's. */
export function gpuTypeNode(g: GpuTypeModel): GpuTypeParent {
  return {
    id: g.id,
    displayName: g.name,
    memoryInGb: g.memoryGb,
    pool: g.pool,
    // A type no READY host has (listed from the pools' catalog): 0, secureCloud false.
    secureCloud: g.total > 0,
    // One cloud, Gantry's own hosts: no community cloud and no community price.
    communityCloud: false,
    securePrice: g.rate.podPerHour,
    serverlessPrice: g.pool ? g.rate.serverlessPerHour : null,
    maxGpuCount: g.maxPerHost,
    totalCount: g.total,
    availableCount: g.available,
    manufacturer: 'Nvidia',
    cudaCores: null,
    communityPrice: null,
    oneWeekPrice: null,
    oneMonthPrice: null,
    threeMonthPrice: null,
    communitySpotPrice: null,
    secureSpotPrice: null,
  };
}
