import { readFileSync, statSync } from 'node:fs';
import { Type, type Static } from 'typebox';
import { GPU_MODELS, GPU_POOL_IDS, isGpuPoolId, type GpuPoolId } from '../catalog/gpu-pools.ts';
import { ajv, formatErrors } from '../shared/validation.ts';

/**
 * The price table: list prices in USD that the catalog shows and billing charges. The defaults
 * below are in line with what hosted serverless GPU services ask; an operator sets their own with
 * a JSON file named by GANTRY_PRICES_FILE, merged over these defaults entry by entry (a file with
 * `{"gpuPools": {"ADA_24": {"serverlessPerHour": 0.9}}}` changes that one figure). The file is
 * read again whenever it changes, so prices can be edited without a restart.
 */

const GpuRate = Type.Object(
  {
    serverlessPerHour: Type.Number({ minimum: 0, description: 'serverless price per GPU per hour' }),
    podPerHour: Type.Number({ minimum: 0, description: 'pod price per GPU per hour' }),
  },
  { additionalProperties: false },
);
const CpuRate = Type.Object(
  {
    serverlessPerVcpuHour: Type.Number({ minimum: 0, description: 'serverless price per vCPU per hour' }),
    podPerVcpuHour: Type.Number({ minimum: 0, description: 'pod price per vCPU per hour' }),
  },
  { additionalProperties: false },
);

export interface GpuRate {
  serverlessPerHour: number;
  podPerHour: number;
}
export interface CpuRate {
  serverlessPerVcpuHour: number;
  podPerVcpuHour: number;
}

export interface PriceTable {
  currency: 'USD';
  /** Per serverless pool: every card of the pool costs this unless `gpuTypes` names it. */
  gpuPools: Record<GpuPoolId, GpuRate>;
  /** Per GPU type id (nvidia-smi name, e.g. "NVIDIA H100 80GB HBM3"): overrides its pool's rate. */
  gpuTypes: Record<string, Partial<GpuRate>>;
  /** Cards that belong to no pool and have no `gpuTypes` entry. */
  otherGpu: GpuRate;
  /** Per CPU flavor id (catalog `cpus`). */
  cpuFlavors: Record<string, CpuRate>;
  /** CPU flavors without an entry. */
  otherCpu: CpuRate;
}

/** What a GANTRY_PRICES_FILE may contain: any part of the table. */
const PriceFileSchema = Type.Object(
  {
    currency: Type.Optional(Type.Literal('USD')),
    gpuPools: Type.Optional(
      Type.Object(Object.fromEntries(GPU_POOL_IDS.map((id) => [id, Type.Optional(Type.Partial(GpuRate))])), {
        additionalProperties: false,
      }),
    ),
    gpuTypes: Type.Optional(Type.Record(Type.String({ minLength: 1 }), Type.Partial(GpuRate))),
    otherGpu: Type.Optional(Type.Partial(GpuRate)),
    cpuFlavors: Type.Optional(Type.Record(Type.String({ minLength: 1 }), Type.Partial(CpuRate))),
    otherCpu: Type.Optional(Type.Partial(CpuRate)),
  },
  { additionalProperties: false },
);
type PriceFile = Static<typeof PriceFileSchema>;

const gpu = (serverlessPerHour: number, podPerHour: number): GpuRate => ({ serverlessPerHour, podPerHour });
const cpu = (serverlessPerVcpuHour: number, podPerVcpuHour: number): CpuRate => ({
  serverlessPerVcpuHour,
  podPerVcpuHour,
});

export const DEFAULT_PRICES: PriceTable = {
  currency: 'USD',
  gpuPools: {
    AMPERE_16: gpu(0.58, 0.26),
    AMPERE_24: gpu(0.68, 0.3),
    ADA_24: gpu(1.1, 0.59),
    ADA_32_PRO: gpu(1.58, 0.89),
    AMPERE_48: gpu(1.22, 0.49),
    ADA_48_PRO: gpu(1.91, 0.86),
    AMPERE_80: gpu(2.72, 1.39),
    ADA_80_PRO: gpu(4.18, 2.39),
    HOPPER_141: gpu(5.58, 3.59),
    BLACKWELL_96: gpu(4.0, 1.84),
    BLACKWELL_180: gpu(8.64, 5.98),
  },
  gpuTypes: {},
  otherGpu: gpu(0.5, 0.25),
  cpuFlavors: {
    cpu3c: cpu(0.07, 0.03),
    cpu3g: cpu(0.08, 0.04),
    cpu3m: cpu(0.1, 0.05),
  },
  otherCpu: cpu(0.08, 0.04),
};

function merged(file: PriceFile): PriceTable {
  const gpuPools = { ...DEFAULT_PRICES.gpuPools };
  for (const id of GPU_POOL_IDS) gpuPools[id] = { ...gpuPools[id], ...file.gpuPools?.[id] };
  const cpuFlavors: Record<string, CpuRate> = { ...DEFAULT_PRICES.cpuFlavors };
  for (const [id, rate] of Object.entries(file.cpuFlavors ?? {}))
    cpuFlavors[id] = { ...(cpuFlavors[id] ?? DEFAULT_PRICES.otherCpu), ...rate };
  return {
    currency: 'USD',
    gpuPools,
    gpuTypes: { ...DEFAULT_PRICES.gpuTypes, ...file.gpuTypes },
    otherGpu: { ...DEFAULT_PRICES.otherGpu, ...file.otherGpu },
    cpuFlavors,
    otherCpu: { ...DEFAULT_PRICES.otherCpu, ...file.otherCpu },
  };
}

/** Reads and checks a price file; the error names the file and every problem in it. */
export function loadPriceFile(file: string): PriceTable {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    throw new Error(`GANTRY_PRICES_FILE ${file}: ${err instanceof Error ? err.message : String(err)}`);
  }
  const check = ajv.compile(PriceFileSchema);
  if (!check(parsed)) throw new Error(`GANTRY_PRICES_FILE ${file}: ${formatErrors(check.errors).join('; ')}`);
  return merged(parsed as PriceFile);
}

let cached: { key: string; table: PriceTable } | undefined;

/** The prices in force: the defaults, or the price file (GANTRY_PRICES_FILE) merged over them, re-read when it changes. */
export function priceTable(file: string | undefined): PriceTable {
  if (!file) return DEFAULT_PRICES;
  const stat = statSync(file, { throwIfNoEntry: false });
  if (!stat) throw new Error(`GANTRY_PRICES_FILE ${file}: no such file`);
  const key = `${file}\0${stat.mtimeMs}\0${stat.size}`;
  if (cached?.key !== key) cached = { key, table: loadPriceFile(file) };
  return cached.table;
}

/** The pool of a GPU type id, from the known models (or the id itself when it names a pool). */
export function poolOfGpuType(gpuTypeId: string): GpuPoolId | undefined {
  if (isGpuPoolId(gpuTypeId)) return gpuTypeId;
  return GPU_MODELS.find((m) => m.gpuTypeId === gpuTypeId)?.pool;
}

/** Price of one GPU of a type for an hour: the type's own entry, else its pool's, else `otherGpu`. */
export function gpuRate(
  table: PriceTable,
  gpuTypeId: string,
  pool: GpuPoolId | null | undefined = poolOfGpuType(gpuTypeId),
): GpuRate {
  const base = pool ? table.gpuPools[pool] : table.otherGpu;
  return { ...base, ...table.gpuTypes[gpuTypeId] };
}

export function cpuRate(table: PriceTable, flavorId: string): CpuRate {
  return table.cpuFlavors[flavorId] ?? table.otherCpu;
}
