import { Type, type Static } from 'typebox';
import type { DataCenter } from '../../generated/prisma/client.ts';
import { requireScope, type Principal } from '../accounts/auth.ts';
import type { DomainContext } from '../context.ts';
import { CPU_FLAVORS, MIN_VCPUS, maxVcpusOnHost, type CpuFlavor } from './cpu-instances.ts';
import { DomainError, notFound } from '../errors.ts';
import { describeGpu, GPU_MODELS, GPU_POOL_IDS, isGpuPoolId, type GpuPoolId } from './gpu-pools.ts';
import { cpuRate, gpuRate, priceTable, type CpuRate, type GpuRate, type PriceTable } from '../billing/pricing.ts';
import { validate } from '../shared/validation.ts';
import { LIVE_WORKER_STATUSES } from '../workers/status.ts';

/**
 * The catalog: what the registered hosts offer. GPU types are every type of the pools
 * (gpu-pools.ts GPU_MODELS) and any other card a READY host has, as the hosted service lists every
 * type it knows with its stock: a type no READY host has is listed with no stock (counts 0,
 * `secure` false, availability NONE). CPU flavors come from hosts with status READY; a GPU is
 * available when its host can pass GPUs to containers and no live worker (status other than
 * STOPPED or FAILED) holds its UUID, as placement (domain/workers/placement.ts) decides.
 * Prices come from the price table (domain/billing/pricing.ts). The REST shapes are
 * api/routes/shapes/gpu-type.ts, cpu-type.ts and data-center.ts; GraphQL's api/graphql/shapes/gpu-type.ts.
 */

// ---------------------------------------------------------------- models

/** NONE: nothing free; LOW: one unit or under a quarter free; MEDIUM: under half free; HIGH: half or more free. */
export type Availability = 'NONE' | 'LOW' | 'MEDIUM' | 'HIGH';

export type Region =
  | 'NORTH_AMERICA'
  | 'SOUTH_AMERICA'
  | 'EUROPE'
  | 'ASIA'
  | 'MIDDLE_EAST'
  | 'AFRICA'
  | 'OCEANIA'
  | 'ANTARCTICA'
  | 'UNKNOWN';

/** A GPU type: its spec, its list prices, and its stock on READY hosts. */
export interface GpuTypeModel {
  /** The name nvidia-smi prints for the card. */
  id: string;
  name: string;
  /** Serverless pool; null when the card is in none. */
  pool: GpuPoolId | null;
  memoryGb: number;
  /** GPUs of this type on READY hosts (0: no READY host has it). */
  total: number;
  /** Those of them no live worker holds. */
  available: number;
  /** Most GPUs of this type on one READY host. */
  maxPerHost: number;
  rate: GpuRate;
  /** When asked for with a GPU count (include=AVAILABILITY). */
  availability?: GpuAvailability;
}

/** Whether a GPU count can be had on one host: overall, and per data center that has the type (by id). */
export interface GpuAvailability {
  overall: Availability;
  dataCenters: Array<{ id: string; availability: Availability }>;
}

/** A CPU flavor that fits at least one READY host at its minimum size. */
export interface CpuTypeModel {
  flavor: CpuFlavor;
  /** max: the largest power of two a READY host can give at the flavor's memory per vCPU. */
  vcpus: { min: number; max: number };
  /** READY hosts that can run the flavor at its minimum size. */
  hosts: number;
  rate: CpuRate;
}

/** A data center that registered hosts name, with its stock. */
export interface DataCenterModel {
  id: string;
  /** The operator's settings (data-centers.ts); null when only hosts name it. */
  settings: DataCenter | null;
  region: Region;
  /** Network volumes can be made here: it has shared storage, or a single host. */
  networkVolumes: boolean;
  /** Registered hosts here, and how many are READY. */
  hosts: { total: number; ready: number };
  gpus: { total: number; available: number };
  /** When asked for (include=GPU_AVAILABILITY): each GPU type the data center has. */
  gpuAvailability?: Array<{ gpuTypeId: string; name: string; availability: Availability }>;
}

// ---------------------------------------------------------------- queries

const listOf = (values: readonly string[]): string => `^(${values.join('|')})(,(${values.join('|')}))*$`;

export const GpuCatalogQuerySchema = Type.Object(
  {
    include: Type.Optional(
      Type.String({
        pattern: listOf(['AVAILABILITY']),
        description: 'AVAILABILITY adds `availability` and `dataCenters`; needs `product`',
      }),
    ),
    product: Type.Optional(
      Type.String({
        pattern: listOf(['POD', 'CLUSTER', 'SERVERLESS']),
        description:
          'comma-separated POD, CLUSTER, SERVERLESS; only with include=AVAILABILITY (pods and workers share the same hosts, so every product sees the same stock)',
      }),
    ),
    count: Type.Optional(
      Type.String({
        pattern: '^[1-9][0-9]{0,3}$',
        description: 'GPUs wanted on one host (default 1); only with include=AVAILABILITY',
      }),
    ),
  },
  { additionalProperties: false },
);
export type GpuCatalogQuery = Static<typeof GpuCatalogQuerySchema>;

export const DataCenterQuerySchema = Type.Object(
  {
    include: Type.Optional(
      Type.String({
        pattern: listOf(['GPU_AVAILABILITY']),
        description:
          'GPU_AVAILABILITY adds gpuAvailability (CPU_AVAILABILITY is not offered: workers do not record the vCPUs they hold)',
      }),
    ),
  },
  { additionalProperties: false },
);

// ---------------------------------------------------------------- inventory

interface HostGpu {
  uuid: string;
  name: string;
  memoryMb: number;
  pool: GpuPoolId | undefined;
}

/** Host.gpus as stored by the probe; entries that are not GPU records are skipped. */
function hostGpus(json: unknown): HostGpu[] {
  if (!Array.isArray(json)) return [];
  const out: HostGpu[] = [];
  for (const g of json as unknown[]) {
    if (typeof g !== 'object' || g === null) continue;
    const r = g as Record<string, unknown>;
    if (typeof r.uuid !== 'string' || typeof r.name !== 'string' || typeof r.memoryMb !== 'number') continue;
    out.push({
      uuid: r.uuid,
      name: r.name,
      memoryMb: r.memoryMb,
      pool: typeof r.pool === 'string' && isGpuPoolId(r.pool) ? r.pool : undefined,
    });
  }
  return out;
}

interface GpuStock {
  gpuTypeId: string;
  name: string;
  pool: GpuPoolId | null;
  memoryGb: number;
  total: number;
  available: number;
  maxPerHost: number;
  /** Per data center: totals and the most free GPUs of this type on one of its hosts. */
  dataCenters: Map<string, { total: number; available: number; maxFreeOnHost: number }>;
}

interface Inventory {
  gpus: Map<string, GpuStock>;
  dataCenters: Map<string, { hosts: number; readyHosts: number; gpuTotal: number; gpuAvailable: number }>;
  cpuHosts: Map<string, { hosts: number; maxVcpus: number }>;
}

async function inventory(ctx: DomainContext): Promise<Inventory> {
  const [hosts, workers] = await Promise.all([
    ctx.db.host.findMany({
      select: { dataCenterId: true, status: true, cpuCount: true, memoryMb: true, gpus: true, gpuMethod: true },
      orderBy: { name: 'asc' },
    }),
    // A FlashBoot standby's GPUs are available: the next worker that needs them evicts it.
    ctx.db.worker.findMany({
      where: { status: { in: LIVE_WORKER_STATUSES.filter((s) => s !== 'STANDBY') } },
      select: { gpuUuids: true },
    }),
  ]);
  const held = new Set(workers.flatMap((w) => w.gpuUuids));
  const inv: Inventory = { gpus: new Map(), dataCenters: new Map(), cpuHosts: new Map() };
  for (const host of hosts) {
    let dc = inv.dataCenters.get(host.dataCenterId);
    if (!dc) inv.dataCenters.set(host.dataCenterId, (dc = { hosts: 0, readyHosts: 0, gpuTotal: 0, gpuAvailable: 0 }));
    dc.hosts++;
    if (host.status !== 'READY') continue;
    dc.readyHosts++;

    for (const flavor of CPU_FLAVORS) {
      const max = maxVcpusOnHost(flavor, host.cpuCount, host.memoryMb);
      if (max === 0) continue;
      const c = inv.cpuHosts.get(flavor.id) ?? { hosts: 0, maxVcpus: 0 };
      inv.cpuHosts.set(flavor.id, { hosts: c.hosts + 1, maxVcpus: Math.max(c.maxVcpus, max) });
    }

    // As placement sees it: GPUs a host cannot hand to containers are never free.
    const passthrough = host.gpuMethod !== null && host.gpuMethod !== 'none';
    const perType = new Map<string, { total: number; free: number }>();
    for (const g of hostGpus(host.gpus)) {
      const d = describeGpu(g.name, g.memoryMb);
      let stock = inv.gpus.get(d.gpuTypeId);
      if (!stock) {
        stock = {
          gpuTypeId: d.gpuTypeId,
          name: d.displayName,
          pool: g.pool ?? d.pool ?? null,
          memoryGb: d.memoryGb,
          total: 0,
          available: 0,
          maxPerHost: 0,
          dataCenters: new Map(),
        };
        inv.gpus.set(d.gpuTypeId, stock);
      }
      const free = passthrough && !held.has(g.uuid);
      stock.total++;
      dc.gpuTotal++;
      if (free) {
        stock.available++;
        dc.gpuAvailable++;
      }
      const t = perType.get(d.gpuTypeId) ?? { total: 0, free: 0 };
      perType.set(d.gpuTypeId, { total: t.total + 1, free: t.free + (free ? 1 : 0) });
    }
    for (const [typeId, t] of perType) {
      const stock = inv.gpus.get(typeId)!;
      stock.maxPerHost = Math.max(stock.maxPerHost, t.total);
      const s = stock.dataCenters.get(host.dataCenterId) ?? { total: 0, available: 0, maxFreeOnHost: 0 };
      stock.dataCenters.set(host.dataCenterId, {
        total: s.total + t.total,
        available: s.available + t.free,
        maxFreeOnHost: Math.max(s.maxFreeOnHost, t.free),
      });
    }
  }
  return inv;
}

export function availabilityLevel(available: number, total: number): Availability {
  if (available <= 0 || total <= 0) return 'NONE';
  const share = available / total;
  if (available === 1 || share < 0.25) return 'LOW';
  if (share < 0.5) return 'MEDIUM';
  return 'HIGH';
}

// ---------------------------------------------------------------- GPU types

const poolOrder = (pool: string | null): number =>
  pool === null ? GPU_POOL_IDS.length : (GPU_POOL_IDS as readonly string[]).indexOf(pool);

function gpuTypeModel(
  stock: GpuStock,
  withAvailability: { count: number } | undefined,
  prices: PriceTable,
): GpuTypeModel {
  const model: GpuTypeModel = {
    id: stock.gpuTypeId,
    name: stock.name,
    pool: stock.pool,
    memoryGb: stock.memoryGb,
    total: stock.total,
    available: stock.available,
    maxPerHost: stock.maxPerHost,
    rate: gpuRate(prices, stock.gpuTypeId, stock.pool),
  };
  if (withAvailability) model.availability = gpuAvailability(stock, withAvailability.count);
  return model;
}

/** A worker or pod runs on one host: `wanted` GPUs must be free together on one of them. */
function gpuAvailability(stock: GpuStock, wanted: number): GpuAvailability {
  const dcs = [...stock.dataCenters.entries()].sort(([a], [b]) => a.localeCompare(b));
  return {
    overall: dcs.some(([, s]) => s.maxFreeOnHost >= wanted) ? availabilityLevel(stock.available, stock.total) : 'NONE',
    dataCenters: dcs.map(([id, s]) => ({
      id,
      availability: s.maxFreeOnHost >= wanted ? availabilityLevel(s.available, s.total) : 'NONE',
    })),
  };
}

function availabilityOption(query: GpuCatalogQuery): { count: number } | undefined {
  const include = query.include !== undefined;
  if (include && query.product === undefined)
    throw new DomainError('bad_request', 'include=AVAILABILITY needs product (POD, CLUSTER or SERVERLESS)');
  if (!include && (query.product !== undefined || query.count !== undefined))
    throw new DomainError('bad_request', 'product and count are valid only with include=AVAILABILITY');
  return include ? { count: Number(query.count ?? 1) } : undefined;
}

/**
 * Every GPU type of the pools, and every other type on READY hosts, pools in catalog order (GraphQL
 * `gpuTypes` reads this too). A type no READY host has is there with no stock: the hosted service's
 * clients look a type up by id before they ask for it (its Python client's get_gpu raises "No GPU
 * found" on an empty answer), and "none free now" is an answer, not an unknown type.
 */
export async function gpuTypes(ctx: DomainContext, availability?: { count: number }): Promise<GpuTypeModel[]> {
  const inv = await inventory(ctx);
  const prices = priceTable(ctx.settings.pricesFile);
  for (const m of GPU_MODELS)
    if (!inv.gpus.has(m.gpuTypeId))
      inv.gpus.set(m.gpuTypeId, {
        gpuTypeId: m.gpuTypeId,
        name: m.displayName,
        pool: m.pool,
        memoryGb: m.memoryGb,
        total: 0,
        available: 0,
        maxPerHost: 0,
        dataCenters: new Map(),
      });
  return [...inv.gpus.values()]
    .sort(
      (a, b) =>
        poolOrder(a.pool) - poolOrder(b.pool) || a.memoryGb - b.memoryGb || a.gpuTypeId.localeCompare(b.gpuTypeId),
    )
    .map((s) => gpuTypeModel(s, availability, prices));
}

export async function listGpuTypes(
  ctx: DomainContext,
  principal: Principal,
  query: unknown = {},
): Promise<GpuTypeModel[]> {
  requireScope(principal, 'READ');
  return gpuTypes(ctx, availabilityOption(validate(GpuCatalogQuerySchema, query)));
}

export async function getGpuType(
  ctx: DomainContext,
  principal: Principal,
  id: string,
  query: unknown = {},
): Promise<GpuTypeModel> {
  requireScope(principal, 'READ');
  const found = (await gpuTypes(ctx, availabilityOption(validate(GpuCatalogQuerySchema, query)))).find(
    (g) => g.id === id,
  );
  if (!found) throw notFound('GPU type');
  return found;
}

// ---------------------------------------------------------------- CPU types

/** Flavors that fit at least one READY host at their minimum size. */
export async function cpuTypes(ctx: DomainContext): Promise<CpuTypeModel[]> {
  const inv = await inventory(ctx);
  const table = priceTable(ctx.settings.pricesFile);
  return CPU_FLAVORS.flatMap((flavor) => {
    const hosts = inv.cpuHosts.get(flavor.id);
    if (!hosts) return [];
    return [
      {
        flavor,
        vcpus: { min: MIN_VCPUS, max: hosts.maxVcpus },
        hosts: hosts.hosts,
        rate: cpuRate(table, flavor.id),
      },
    ];
  });
}

export async function listCpuTypes(ctx: DomainContext, principal: Principal): Promise<CpuTypeModel[]> {
  requireScope(principal, 'READ');
  return cpuTypes(ctx);
}

export async function getCpuType(ctx: DomainContext, principal: Principal, id: string): Promise<CpuTypeModel> {
  requireScope(principal, 'READ');
  const found = (await cpuTypes(ctx)).find((c) => c.flavor.id === id);
  if (!found) throw notFound('CPU type');
  return found;
}

// ---------------------------------------------------------------- data centers

const REGION_BY_PREFIX: Record<string, Region> = {
  US: 'NORTH_AMERICA',
  CA: 'NORTH_AMERICA',
  NA: 'NORTH_AMERICA',
  MX: 'NORTH_AMERICA',
  EU: 'EUROPE',
  EUR: 'EUROPE',
  AP: 'ASIA',
  ASIA: 'ASIA',
  SEA: 'ASIA',
  OC: 'OCEANIA',
  SA: 'SOUTH_AMERICA',
  BR: 'SOUTH_AMERICA',
  ME: 'MIDDLE_EAST',
  AF: 'AFRICA',
};

/** The region of an id such as "EU-RO-1" or "US-TX-3", from its first segment; UNKNOWN otherwise. */
export function regionOf(dataCenterId: string): Region {
  return REGION_BY_PREFIX[dataCenterId.split(/[-_]/)[0]!.toUpperCase()] ?? 'UNKNOWN';
}

/** Data centers Gantry knows: every dataCenterId a registered host carries, whatever its status. */
export async function knownDataCenterIds(ctx: DomainContext): Promise<string[]> {
  const rows = await ctx.db.host.findMany({
    distinct: ['dataCenterId'],
    select: { dataCenterId: true },
    orderBy: { dataCenterId: 'asc' },
  });
  return rows.map((r) => r.dataCenterId);
}

async function dataCenters(ctx: DomainContext, query: unknown): Promise<DataCenterModel[]> {
  const include = new Set((validate(DataCenterQuerySchema, query).include ?? '').split(',').filter(Boolean));
  const [inv, settings] = await Promise.all([inventory(ctx), ctx.db.dataCenter.findMany()]);
  const settingsOf = new Map(settings.map((s) => [s.id, s]));
  return [...inv.dataCenters.entries()]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([id, dc]) => {
      const s = settingsOf.get(id) ?? null;
      const model: DataCenterModel = {
        id,
        settings: s,
        region: regionOf(id),
        networkVolumes: Boolean(s?.networkVolumePath) || dc.hosts === 1,
        hosts: { total: dc.hosts, ready: dc.readyHosts },
        gpus: { total: dc.gpuTotal, available: dc.gpuAvailable },
      };
      if (include.has('GPU_AVAILABILITY')) model.gpuAvailability = gpuAvailabilityAt(inv, id);
      return model;
    });
}

function gpuAvailabilityAt(inv: Inventory, dataCenterId: string): DataCenterModel['gpuAvailability'] {
  return [...inv.gpus.values()].flatMap((s) => {
    const at = s.dataCenters.get(dataCenterId);
    return at
      ? [{ gpuTypeId: s.gpuTypeId, name: s.name, availability: availabilityLevel(at.available, at.total) }]
      : [];
  });
}

export async function listDataCenters(
  ctx: DomainContext,
  principal: Principal,
  query: unknown = {},
): Promise<DataCenterModel[]> {
  requireScope(principal, 'READ');
  return dataCenters(ctx, query);
}

export async function getDataCenter(
  ctx: DomainContext,
  principal: Principal,
  id: string,
  query: unknown = {},
): Promise<DataCenterModel> {
  requireScope(principal, 'READ');
  const found = (await dataCenters(ctx, query)).find((d) => d.id === id);
  if (!found) throw notFound('data center');
  return found;
}
