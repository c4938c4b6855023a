import type { DomainContext } from '../context.ts';
import { validationFailed } from '../errors.ts';
import { availabilityLevel, gpuTypes, type Availability } from './catalog.ts';
import { cpuFlavor, maxVcpusOnHost, parseCpuInstanceId } from './cpu-instances.ts';

/**
 * The hosted service's stock signal (`stockStatus`: High, Medium, Low), which its `flash` tool reads
 * to say why an endpoint has no workers. From the registered hosts, as the catalog counts them;
 * null where nothing could be placed (Gantry has no "out of stock" word of its own).
 */
export type StockStatus = 'High' | 'Medium' | 'Low' | null;

const STOCK: Record<Availability, StockStatus> = { NONE: null, LOW: 'Low', MEDIUM: 'Medium', HIGH: 'High' };

/** `gpuTypes { lowestPrice(input: {gpuCount, dataCenterId}) { stockStatus } }`: `count` GPUs free together on one host. */
export async function gpuStockStatus(
  ctx: DomainContext,
  gpuTypeId: string,
  opts: { count: number; dataCenterId?: string | null },
): Promise<StockStatus> {
  const gpu = (await gpuTypes(ctx, { count: opts.count })).find((g) => g.id === gpuTypeId);
  if (!gpu) return null;
  if (!opts.dataCenterId) return STOCK[gpu.availability?.overall ?? 'NONE'];
  return STOCK[gpu.availability?.dataCenters.find((d) => d.id === opts.dataCenterId)?.availability ?? 'NONE'];
}

/**
 * `cpuFlavors { specifics(input: {instanceId, dataCenterId}) { stockStatus } }`: the share of READY
 * hosts (in the data center, when one is named) large enough for one worker of the instance. The
 * CPU that running workers hold is not subtracted: hosts are shared, not partitioned, by vCPUs.
 */
export async function cpuStockStatus(
  ctx: DomainContext,
  flavorId: string,
  opts: { instanceId: string; dataCenterId?: string | null },
): Promise<StockStatus> {
  const instance = parseCpuInstanceId(opts.instanceId);
  const flavor = cpuFlavor(flavorId);
  if (!instance || !flavor || instance.flavorId !== flavor.id) return null;
  const hosts = await ctx.db.host.findMany({
    where: { status: 'READY', ...(opts.dataCenterId ? { dataCenterId: opts.dataCenterId } : {}) },
    select: { cpuCount: true, memoryMb: true },
  });
  const fitting = hosts.filter((h) => maxVcpusOnHost(flavor, h.cpuCount, h.memoryMb) >= instance.vcpus).length;
  return STOCK[availabilityLevel(fitting, hosts.length)];
}

/** The most GPUs a price is asked for (a pod takes at most 64). */
const MAX_GPU_COUNT = 64;

/**
 * A GPU type's price for `gpuCount` GPUs (default 1) and whether they are in stock: `gpuTypes {
 * lowestPrice }`. No price where no READY host has the type: nothing could be rented at it.
 */
export async function gpuCountPrice(
  ctx: DomainContext,
  gpu: { id: string; podPerHour: number | null; total: number },
  input: { gpuCount?: number | null; dataCenterId?: string | null },
): Promise<{ perHour: number | null; stockStatus: StockStatus }> {
  const count = input.gpuCount ?? 1;
  if (count < 1 || count > MAX_GPU_COUNT)
    throw validationFailed([`$.input.gpuCount: from 1 to ${MAX_GPU_COUNT}, got ${count}`]);
  return {
    perHour: gpu.podPerHour === null || gpu.total === 0 ? null : Math.round(gpu.podPerHour * count * 1e6) / 1e6,
    stockStatus: await gpuStockStatus(ctx, gpu.id, { count, dataCenterId: input.dataCenterId }),
  };
}
