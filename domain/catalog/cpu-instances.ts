/**
 * CPU flavors and CPU instances: what a CPU endpoint's workers get. A flavor is a memory-per-vCPU
 * family (cpu3c: 2 GB per vCPU, ...); an instance is a flavor at a size, written the way the hosted
 * service names it in `saveEndpoint(instanceIds: [...])`: `<flavor>-<vCPUs>-<memory GB>` (cpu3c-2-4).
 * The instance is applied as the container's CPU and memory limits, reserved on the host it is
 * placed on, and billed per vCPU-hour.
 */
import { validationFailed } from '../errors.ts';

export interface CpuFlavor {
  id: string;
  name: string;
  group: string;
  ramGbPerVcpu: number;
}

/**
 * Flavors by memory per vCPU: hosts are not told apart by CPU generation, so there is one family
 * and a flavor fits a host when the host has the vCPUs and the memory for them.
 */
export const CPU_FLAVORS: readonly CpuFlavor[] = [
  { id: 'cpu3c', name: 'Compute-Optimized', group: 'cpu3', ramGbPerVcpu: 2 },
  { id: 'cpu3g', name: 'General Purpose', group: 'cpu3', ramGbPerVcpu: 4 },
  { id: 'cpu3m', name: 'Memory-Optimized', group: 'cpu3', ramGbPerVcpu: 8 },
];

export const MIN_VCPUS = 2;
/** Largest instance offered; a host must still have the vCPUs and memory for it. */
export const MAX_VCPUS = 512;

export interface CpuInstance {
  flavorId: string;
  vcpus: number;
  memoryGb: number;
}

/** What a CPU endpoint gets when nothing names a size (a REST create without `gpu`). */
export const DEFAULT_CPU_INSTANCE: CpuInstance = { flavorId: 'cpu3c', vcpus: 2, memoryGb: 4 };

export const cpuInstanceId = (i: CpuInstance): string => `${i.flavorId}-${i.vcpus}-${i.memoryGb}`;

export const cpuFlavor = (id: string): CpuFlavor | undefined => CPU_FLAVORS.find((f) => f.id === id);

const isPowerOfTwo = (n: number): boolean => Number.isInteger(n) && n > 0 && (n & (n - 1)) === 0;

/** Why an instance cannot be made (empty when it can). */
export function cpuInstanceProblems(i: CpuInstance): string[] {
  const flavor = cpuFlavor(i.flavorId);
  if (!flavor) return [`unknown CPU flavor '${i.flavorId}'; one of ${CPU_FLAVORS.map((f) => f.id).join(', ')}`];
  const problems: string[] = [];
  if (!isPowerOfTwo(i.vcpus) || i.vcpus < MIN_VCPUS || i.vcpus > MAX_VCPUS)
    problems.push(`vcpuCount must be a power of two from ${MIN_VCPUS} to ${MAX_VCPUS}, got ${i.vcpus}`);
  else if (i.memoryGb !== i.vcpus * flavor.ramGbPerVcpu) {
    problems.push(
      `${flavor.id} gives ${flavor.ramGbPerVcpu} GB per vCPU: ${i.vcpus} vCPUs come with ${i.vcpus * flavor.ramGbPerVcpu} GB, not ${i.memoryGb}`,
    );
  }
  return problems;
}

/** Parses `cpu3c-2-4`; undefined when it is not of that shape (the rules are cpuInstanceProblems'). */
export function parseCpuInstanceId(id: string): CpuInstance | undefined {
  const m = /^([a-z0-9]{1,32})-([0-9]{1,4})-([0-9]{1,5})$/.exec(id);
  return m ? { flavorId: m[1]!, vcpus: Number(m[2]), memoryGb: Number(m[3]) } : undefined;
}

/** `id` parsed, or a validation failure at `at` (the field's path) saying what the shape is. */
export function requireCpuInstanceId(at: string, id: string): CpuInstance {
  const parsed = parseCpuInstanceId(id);
  if (!parsed)
    throw validationFailed([
      `${at}: '${id}' is not a CPU instance id such as cpu3c-2-4 (<flavor>-<vCPUs>-<memory GB>)`,
    ]);
  return parsed;
}

/**
 * The hosted service's 1-vCPU instances (`cpu3c-1-2`, the hosted flash tool's default size), named in
 * GraphQL `saveEndpoint(instanceIds)`: run at the smallest size Gantry's CPU rules allow (docs/graphql.md "CPU instances"), MIN_VCPUS with the
 * flavor's memory for them (cpu3c-2-4), so a fresh flash project deploys unchanged. Only that exact
 * shape (one vCPU with its flavor's memory per vCPU) is widened; any other id stays as parsed, and
 * cpuInstanceProblems refuses what breaks the rules (cpu3c-1-99, cpu3c-3-6, ...). REST's
 * `cpu.vcpuCount` is not read through here: its rule (>= 2) is unchanged.
 */
export function smallestForOneVcpu(i: CpuInstance): CpuInstance {
  const flavor = cpuFlavor(i.flavorId);
  if (!flavor || i.vcpus !== 1 || i.memoryGb !== flavor.ramGbPerVcpu) return i;
  return { flavorId: flavor.id, vcpus: MIN_VCPUS, memoryGb: MIN_VCPUS * flavor.ramGbPerVcpu };
}

/**
 * The instance a worker's recorded `cpuFlavorId` names. Rows written before instances were recorded
 * hold a bare flavor id: their size is the endpoint's, or the smallest.
 */
export function recordedCpuInstance(cpuFlavorId: string, endpointVcpus?: number | null): CpuInstance {
  const parsed = parseCpuInstanceId(cpuFlavorId);
  if (parsed) return parsed;
  const vcpus = endpointVcpus ?? MIN_VCPUS;
  return { flavorId: cpuFlavorId, vcpus, memoryGb: vcpus * (cpuFlavor(cpuFlavorId)?.ramGbPerVcpu ?? 2) };
}

const largestPowerOfTwoAtMost = (n: number): number => (n < 1 ? 0 : 2 ** Math.floor(Math.log2(n)));

/** The most vCPUs (a power of two) one worker of `flavor` can have on a host, or 0 if it does not fit. */
export function maxVcpusOnHost(flavor: CpuFlavor, cpuCount: number | null, memoryMb: number | null): number {
  if (!cpuCount || !memoryMb) return 0;
  const byMemory = Math.floor(memoryMb / 1024 / flavor.ramGbPerVcpu);
  const max = largestPowerOfTwoAtMost(Math.min(cpuCount, byMemory));
  return max >= MIN_VCPUS ? max : 0;
}
