/**
 * Serverless GPU pools: the tiers endpoints ask for (`gpuIds` / `gpu.pools`), and which physical
 * cards belong to each. A host's GPUs are detected by name and memory (nvidia-smi) and mapped here.
 *
 * A pool's `memoryGb` is its tier, not an exact size: the hosted service puts 20 GB cards (RTX
 * A4500, RTX 4000 Ada) in the 16 GB tier and the 94 GB H100 NVL in the 80 GB tier, and so does this
 * table. A card must have at least 90% of the tier's memory, so an A100 40GB is not an AMPERE_80.
 */

export const GPU_POOL_IDS = [
  'AMPERE_16',
  'AMPERE_24',
  'ADA_24',
  'ADA_32_PRO',
  'AMPERE_48',
  'ADA_48_PRO',
  'AMPERE_80',
  'ADA_80_PRO',
  'HOPPER_141',
  'BLACKWELL_96',
  'BLACKWELL_180',
] as const;

export type GpuPoolId = (typeof GPU_POOL_IDS)[number];

export interface GpuPool {
  id: GpuPoolId;
  displayName: string;
  memoryGb: number;
  architecture: 'Ampere' | 'Ada Lovelace' | 'Hopper' | 'Blackwell';
  /** Listed in the serverless API reference; the others are tiers the hosted service added later. */
  documented: boolean;
}

export const GPU_POOLS: readonly GpuPool[] = [
  {
    id: 'AMPERE_16',
    displayName: '16 GB (RTX A4000, RTX A4500, RTX 4000 Ada, RTX 2000 Ada)',
    memoryGb: 16,
    architecture: 'Ampere',
    documented: true,
  },
  {
    id: 'AMPERE_24',
    displayName: '24 GB (RTX A5000, L4, RTX 3090)',
    memoryGb: 24,
    architecture: 'Ampere',
    documented: true,
  },
  { id: 'ADA_24', displayName: '24 GB Ada (RTX 4090)', memoryGb: 24, architecture: 'Ada Lovelace', documented: true },
  { id: 'ADA_32_PRO', displayName: '32 GB (RTX 5090)', memoryGb: 32, architecture: 'Blackwell', documented: false },
  { id: 'AMPERE_48', displayName: '48 GB (RTX A6000, A40)', memoryGb: 48, architecture: 'Ampere', documented: true },
  {
    id: 'ADA_48_PRO',
    displayName: '48 GB Ada Pro (L40, L40S, RTX 6000 Ada)',
    memoryGb: 48,
    architecture: 'Ada Lovelace',
    documented: true,
  },
  { id: 'AMPERE_80', displayName: '80 GB (A100)', memoryGb: 80, architecture: 'Ampere', documented: true },
  {
    id: 'ADA_80_PRO',
    displayName: '80 GB Pro (H100 PCIe, H100 SXM, H100 NVL)',
    memoryGb: 80,
    architecture: 'Hopper',
    documented: true,
  },
  { id: 'HOPPER_141', displayName: '141 GB (H200)', memoryGb: 141, architecture: 'Hopper', documented: false },
  {
    id: 'BLACKWELL_96',
    displayName: '96 GB (RTX PRO 6000 Blackwell)',
    memoryGb: 96,
    architecture: 'Blackwell',
    documented: false,
  },
  { id: 'BLACKWELL_180', displayName: '180 GB (B200)', memoryGb: 180, architecture: 'Blackwell', documented: false },
];

export interface GpuModel {
  /** The GPU type id: the name nvidia-smi prints for the card (catalog `id`, `excludedTypes`). */
  gpuTypeId: string;
  /** Short name (catalog `name`). */
  displayName: string;
  pool: GpuPoolId;
  memoryGb: number;
  /** Matched against the name with the vendor/brand prefix removed (see modelKey). */
  match: RegExp;
}

/** Cards with a serverless pool. Names are as current NVIDIA drivers print them. */
export const GPU_MODELS: readonly GpuModel[] = [
  { gpuTypeId: 'NVIDIA RTX A4000', displayName: 'RTX A4000', pool: 'AMPERE_16', memoryGb: 16, match: /^RTX A4000$/ },
  { gpuTypeId: 'NVIDIA RTX A4500', displayName: 'RTX A4500', pool: 'AMPERE_16', memoryGb: 20, match: /^RTX A4500$/ },
  {
    gpuTypeId: 'NVIDIA RTX 4000 Ada Generation',
    displayName: 'RTX 4000 Ada',
    pool: 'AMPERE_16',
    memoryGb: 20,
    match: /^RTX 4000 ADA\b/,
  },
  {
    gpuTypeId: 'NVIDIA RTX 2000 Ada Generation',
    displayName: 'RTX 2000 Ada',
    pool: 'AMPERE_16',
    memoryGb: 16,
    match: /^RTX 2000 ADA\b/,
  },
  { gpuTypeId: 'NVIDIA RTX A5000', displayName: 'RTX A5000', pool: 'AMPERE_24', memoryGb: 24, match: /^RTX A5000$/ },
  // L4 is an Ada card, but the hosted service serves it from the 24 GB Ampere tier.
  { gpuTypeId: 'NVIDIA L4', displayName: 'L4', pool: 'AMPERE_24', memoryGb: 24, match: /^L4$/ },
  {
    gpuTypeId: 'NVIDIA GeForce RTX 3090',
    displayName: 'RTX 3090',
    pool: 'AMPERE_24',
    memoryGb: 24,
    match: /^RTX 3090$/,
  },
  {
    gpuTypeId: 'NVIDIA GeForce RTX 3090 Ti',
    displayName: 'RTX 3090 Ti',
    pool: 'AMPERE_24',
    memoryGb: 24,
    match: /^RTX 3090 TI$/,
  },
  { gpuTypeId: 'NVIDIA GeForce RTX 4090', displayName: 'RTX 4090', pool: 'ADA_24', memoryGb: 24, match: /^RTX 4090$/ },
  {
    gpuTypeId: 'NVIDIA GeForce RTX 5090',
    displayName: 'RTX 5090',
    pool: 'ADA_32_PRO',
    memoryGb: 32,
    match: /^RTX 5090$/,
  },
  { gpuTypeId: 'NVIDIA RTX A6000', displayName: 'RTX A6000', pool: 'AMPERE_48', memoryGb: 48, match: /^RTX A6000$/ },
  { gpuTypeId: 'NVIDIA A40', displayName: 'A40', pool: 'AMPERE_48', memoryGb: 48, match: /^A40$/ },
  { gpuTypeId: 'NVIDIA L40', displayName: 'L40', pool: 'ADA_48_PRO', memoryGb: 48, match: /^L40$/ },
  { gpuTypeId: 'NVIDIA L40S', displayName: 'L40S', pool: 'ADA_48_PRO', memoryGb: 48, match: /^L40S$/ },
  {
    gpuTypeId: 'NVIDIA RTX 6000 Ada Generation',
    displayName: 'RTX 6000 Ada',
    pool: 'ADA_48_PRO',
    memoryGb: 48,
    match: /^RTX 6000 ADA\b/,
  },
  {
    gpuTypeId: 'NVIDIA A100 80GB PCIe',
    displayName: 'A100 PCIe',
    pool: 'AMPERE_80',
    memoryGb: 80,
    match: /^A100 80GB PCIE$/,
  },
  { gpuTypeId: 'NVIDIA A100-SXM4-80GB', displayName: 'A100 SXM', pool: 'AMPERE_80', memoryGb: 80, match: /^A100\b/ },
  { gpuTypeId: 'NVIDIA H100 PCIe', displayName: 'H100 PCIe', pool: 'ADA_80_PRO', memoryGb: 80, match: /^H100 PCIE$/ },
  { gpuTypeId: 'NVIDIA H100 NVL', displayName: 'H100 NVL', pool: 'ADA_80_PRO', memoryGb: 94, match: /^H100 NVL$/ },
  { gpuTypeId: 'NVIDIA H100 80GB HBM3', displayName: 'H100 SXM', pool: 'ADA_80_PRO', memoryGb: 80, match: /^H100\b/ },
  { gpuTypeId: 'NVIDIA H200', displayName: 'H200 SXM', pool: 'HOPPER_141', memoryGb: 141, match: /^H200$/ },
  { gpuTypeId: 'NVIDIA H200 NVL', displayName: 'H200 NVL', pool: 'HOPPER_141', memoryGb: 141, match: /^H200 NVL$/ },
  {
    gpuTypeId: 'NVIDIA RTX PRO 6000 Blackwell Server Edition',
    displayName: 'RTX PRO 6000',
    pool: 'BLACKWELL_96',
    memoryGb: 96,
    match: /^RTX PRO 6000 BLACKWELL\b/,
  },
  { gpuTypeId: 'NVIDIA B200', displayName: 'B200', pool: 'BLACKWELL_180', memoryGb: 180, match: /^B200$/ },
];

export function isGpuPoolId(value: string): value is GpuPoolId {
  return (GPU_POOL_IDS as readonly string[]).includes(value);
}

export function gpuPool(id: GpuPoolId): GpuPool {
  return GPU_POOLS.find((p) => p.id === id)!;
}

/**
 * The GPU type id of a detected card: nvidia-smi's name with whitespace tidied. Drivers before
 * the R510 series left out the "NVIDIA" prefix ("GeForce RTX 3090", "A100-SXM4-80GB"); it is
 * added back so that one card has one id. "Tesla"/"Quadro" names were never prefixed.
 */
export function gpuTypeId(nvidiaSmiName: string): string {
  const name = nvidiaSmiName.trim().replace(/\s+/g, ' ');
  return /^(NVIDIA|Tesla|Quadro)\b/i.test(name) ? name : `NVIDIA ${name}`;
}

/** Upper-case name without vendor and brand words, for matching: "NVIDIA GeForce RTX 4090" → "RTX 4090". */
function modelKey(name: string): string {
  return name
    .trim()
    .replace(/\s+/g, ' ')
    .toUpperCase()
    .replace(/^NVIDIA /, '')
    .replace(/^(GEFORCE|TESLA|QUADRO) /, '');
}

/** The known model a detected card is, if it has enough memory for that model's pool. */
export function gpuModelFor(name: string, memoryMb: number): GpuModel | undefined {
  const key = modelKey(name);
  const model = GPU_MODELS.find((m) => m.match.test(key));
  if (!model) return undefined;
  const tier = gpuPool(model.pool).memoryGb;
  // nvidia-smi reports MiB, a little under the marketing size (81559 MiB on an "80GB" H100).
  return memoryMb >= tier * 1024 * 0.9 ? model : undefined;
}

/** The serverless pool for a detected card (nvidia-smi name and memory.total in MiB), if any. */
export function poolForGpu(name: string, memoryMb: number): GpuPoolId | undefined {
  return gpuModelFor(name, memoryMb)?.pool;
}

export interface DetectedGpuType {
  gpuTypeId: string;
  displayName: string;
  memoryGb: number;
  pool: GpuPoolId | undefined;
}

/** Catalog view of a detected card; unknown cards keep their own name and get no pool. */
export function describeGpu(name: string, memoryMb: number): DetectedGpuType {
  const model = gpuModelFor(name, memoryMb);
  const id = gpuTypeId(name);
  return {
    gpuTypeId: id,
    displayName: model?.displayName ?? id.replace(/^NVIDIA (GeForce )?/, ''),
    memoryGb: Math.round(memoryMb / 1024),
    pool: model?.pool,
  };
}
