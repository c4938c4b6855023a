/**
 * Worker placement: which host (and which GPUs on it) a new worker goes to. Pure: the caller reads
 * hosts and live workers inside one serialized transaction, asks here, and writes the answer.
 *
 * Rules: only READY hosts; only hosts the request allows (its locations, the data centers or hosts
 * that hold its network volume); a GPU worker takes `gpuCount` whole devices of one of the
 * endpoint's pools on one host, named by UUID, and a device is never given to two live workers; a
 * CPU worker reserves its instance's vCPUs and memory, which the host's CPUs and memory (times its
 * overcommit factor) must hold besides the other CPU workers' reservations; a host's maxWorkers
 * caps its workers; a GPU worker with a CUDA constraint (allowedCudaVersions, minCudaVersion) goes
 * only to GPU hosts whose CUDA version meets it (cudaAllows). Among hosts that fit, the preferred data centers come first, then the host with
 * the fewest workers of this endpoint (spreading an endpoint over hosts), then the fewest workers in
 * all, then, for CPU workers, hosts without GPUs (GPU boxes stay free for GPU work), then the pool
 * listed first. Ties break by host id so that the answer is stable.
 */
import { DEFAULT_CPU_INSTANCE } from '../catalog/cpu-instances.ts';

export interface PlacementGpu {
  uuid: string;
  name: string;
  pool: string | null | undefined;
}

export interface PlacementHost {
  id: string;
  name?: string;
  status: string;
  dataCenterId: string;
  gpus: readonly PlacementGpu[];
  /** How containers get GPUs here; 'none' means GPUs cannot be handed to containers. */
  gpuMethod: string | null;
  maxWorkers: number | null;
  /** The data center's country (ISO 3166-1 alpha-2), when the operator gave one. */
  country?: string | null;
  /** What CPU workers may reserve here: CPUs and memory as probed, times cpuOvercommit (cpuOvercommitOf; default 1). */
  cpuCount?: number | null;
  memoryMb?: number | null;
  cpuOvercommit?: number;
  /** The CUDA version the host's driver reports (nvidia-smi's header, "12.4"); null or absent: unknown. */
  cudaVersion?: string | null;
}

/** The host label that sets a host's CPU overcommit factor (docs/hosts.md, "Labels"). */
export const CPU_OVERCOMMIT_LABEL = 'gantry.io/cpu-overcommit';

/**
 * How many CPU workers of the default instance (DEFAULT_CPU_INSTANCE: 2 vCPUs, 4 GB) the local host
 * (GANTRY_LOCAL_HOST=1, `source` 'local') holds at once without the label, however small it is. Six:
 * a `gantry init` project's cpu-worker and lb-worker at their most (workers=(0, 3) each: 3 + 3), and
 * a `flash init` project's lb_worker at its most (workers=(1, 3)) with its cpu_worker (max 1) plus a
 * redeploy's replacements of the lb_worker's one kept worker and the cpu_worker's (a rollout starts
 * each worker's replacement before the old one goes: 3 + 1 + 2). A worker's reservation is its
 * container's limit, not what an idle Python worker uses (tens of MB), so on the machine a developer
 * tries Gantry on the templates run whole rather than wait THROTTLED; a host that is someone's
 * production is registered some other way and keeps overcommit 1.
 */
export const LOCAL_HOST_CPU_WORKERS = 6;

/** What CPU overcommit needs of a host: its row's origin, labels and probed size. */
export interface OvercommitHost {
  /** 'api', 'file' or 'local' (GANTRY_LOCAL_HOST). */
  source?: string | null;
  labels?: unknown;
  cpuCount?: number | null;
  memoryMb?: number | null;
}

/**
 * The host's CPU overcommit factor: its label `gantry.io/cpu-overcommit` when that is a positive
 * number; otherwise 1, except on the local host, where it is the smallest whole factor (at least 1)
 * at which LOCAL_HOST_CPU_WORKERS default instances fit in both its vCPUs and its memory (both
 * bind: cpuFits scales both by it). A local host of 2 cores and 8 GB gets 6 (12 vCPUs, 48 GB); one
 * of 16 cores and 32 GB, 1. A host not probed yet (no size) gets 1 and takes no CPU worker.
 */
export function cpuOvercommitOf(host: OvercommitHost): number {
  const labels = (host.labels ?? {}) as Record<string, unknown>;
  const raw = labels[CPU_OVERCOMMIT_LABEL];
  const labelled = typeof raw === 'string' && raw.trim() !== '' ? Number(raw) : NaN;
  if (Number.isFinite(labelled) && labelled > 0) return labelled;
  if (host.source !== 'local' || !host.cpuCount || !host.memoryMb) return 1;
  const want = {
    vcpus: LOCAL_HOST_CPU_WORKERS * DEFAULT_CPU_INSTANCE.vcpus,
    memoryMb: LOCAL_HOST_CPU_WORKERS * DEFAULT_CPU_INSTANCE.memoryGb * 1024,
  };
  return Math.max(1, Math.ceil(want.vcpus / host.cpuCount), Math.ceil(want.memoryMb / host.memoryMb));
}

/** A worker that holds (or is about to hold) a place on a host. */
export interface PlacedWorker {
  hostId: string;
  endpointId: string | null;
  gpuUuids: readonly string[];
  /** A CPU worker's reservation. */
  cpu?: CpuReservation | null;
}

export interface CpuReservation {
  vcpus: number;
  memoryMb: number;
}

export interface PlacementRequest {
  endpointId: string;
  /** Empty: a CPU worker. */
  gpuPools: readonly string[];
  gpuCount: number;
  dataCenterIds: readonly string[];
  /** Hosts not to use (e.g. the one a worker just failed on). */
  avoidHostIds?: readonly string[];
  /**
   * GraphQL `locations`: only hosts whose data center is one of these, or is in one of these
   * countries; empty: anywhere.
   */
  countries?: readonly string[];
  /** Only these data centers / hosts (where the worker's network volume lives); undefined: any. */
  onlyDataCenterIds?: readonly string[];
  onlyHostIds?: readonly string[];
  /** A CPU worker's instance: reserved on the host it goes to. */
  cpu?: CpuReservation;
  /** A GPU worker's CUDA constraint (cudaAllows); CPU workers ignore it, as the hosted service's CPU pods do. */
  cuda?: CudaConstraint;
}

/**
 * CUDA versions a worker may run under, as the hosted service matches them: the host's CUDA
 * version (the highest its driver supports, nvidia-smi's header) is one of `allowed`, compared on
 * major and minor (a patch part is ignored; "12.04" is 12.4), and at least `min`, compared
 * numerically (12.10 is above 12.9). Empty `allowed` and no `min`: any host.
 */
export interface CudaConstraint {
  allowed?: readonly string[];
  min?: string | null;
}

/** [major, minor] of "12.4" (or "12.4.1", "12"); undefined when it is no version. */
export function parseCudaVersion(text: string | null | undefined): [number, number] | undefined {
  const m = /^\s*(\d{1,4})(?:\.(\d{1,4}))?(?:\.\d+)*\s*$/.exec(text ?? '');
  return m ? [Number(m[1]), Number(m[2] ?? 0)] : undefined;
}

/** Whether the constraint asks for anything. */
export function hasCudaConstraint(c: CudaConstraint | undefined): boolean {
  return (c?.allowed?.length ?? 0) > 0 || Boolean(c?.min);
}

/**
 * Whether a host of this CUDA version meets the constraint. A host whose version is unknown (not
 * probed since Gantry read it, or nvidia-smi printed none) meets only no constraint: the hosted
 * service matches exactly, and a guess could start a worker its driver cannot run.
 */
export function cudaAllows(c: CudaConstraint | undefined, hostVersion: string | null | undefined): boolean {
  if (!hasCudaConstraint(c)) return true;
  const host = parseCudaVersion(hostVersion);
  if (!host) return false;
  const allowed = c?.allowed ?? [];
  if (allowed.length > 0 && !allowed.some((a) => sameVersion(parseCudaVersion(a), host))) return false;
  const min = parseCudaVersion(c?.min);
  return !c?.min || (min !== undefined && (host[0] > min[0] || (host[0] === min[0] && host[1] >= min[1])));
}

const sameVersion = (a: [number, number] | undefined, b: [number, number]): boolean =>
  a !== undefined && a[0] === b[0] && a[1] === b[1];

/** "allowedCudaVersions 12.4, 12.1 and minCudaVersion 12.0", for reasons. */
function cudaConstraintText(c: CudaConstraint): string {
  const parts: string[] = [];
  if (c.allowed?.length) parts.push(`allowedCudaVersions ${c.allowed.join(', ')}`);
  if (c.min) parts.push(`minCudaVersion ${c.min}`);
  return parts.join(' and ');
}

export type Placement =
  | { ok: true; hostId: string; gpuUuids: string[]; pool: string | null; gpuName: string | null }
  | { ok: false; reason: string };

interface Candidate {
  host: PlacementHost;
  gpus: PlacementGpu[];
  pool: string | null;
  preferredDc: boolean;
  endpointWorkers: number;
  totalWorkers: number;
  poolRank: number;
}

function compare(a: Candidate, b: Candidate, cpu: boolean): number {
  return (
    Number(b.preferredDc) - Number(a.preferredDc) ||
    a.endpointWorkers - b.endpointWorkers ||
    a.totalWorkers - b.totalWorkers ||
    (cpu ? Number(a.host.gpus.length > 0) - Number(b.host.gpus.length > 0) : 0) ||
    a.poolRank - b.poolRank ||
    (a.host.id < b.host.id ? -1 : a.host.id > b.host.id ? 1 : 0)
  );
}

export function placeWorker(
  request: PlacementRequest,
  hosts: readonly PlacementHost[],
  workers: readonly PlacedWorker[],
): Placement {
  const wantsGpu = request.gpuPools.length > 0;
  const count = Math.max(1, request.gpuCount);
  const avoid = new Set(request.avoidHostIds ?? []);
  const byHost = new Map<string, PlacedWorker[]>();
  for (const w of workers) byHost.set(w.hostId, [...(byHost.get(w.hostId) ?? []), w]);
  const ready = hosts.filter((h) => h.status === 'READY');
  const countries = request.countries ?? [];
  const outsideCountries = ready.filter(
    (h) => countries.length > 0 && !countries.includes(h.country ?? '') && !countries.includes(h.dataCenterId),
  );
  const outsideVolume = ready.filter(
    (h) =>
      (request.onlyDataCenterIds !== undefined && !request.onlyDataCenterIds.includes(h.dataCenterId)) ||
      (request.onlyHostIds !== undefined && !request.onlyHostIds.includes(h.id)),
  );
  // Hosts without GPUs cannot take a GPU worker anyway: the CUDA constraint is about GPU hosts.
  const cuda = wantsGpu && hasCudaConstraint(request.cuda) ? request.cuda! : undefined;
  const outsideCuda = cuda ? ready.filter((h) => h.gpus.length > 0 && !cudaAllows(cuda, h.cudaVersion)) : [];
  const excluded = new Set([...outsideCountries, ...outsideVolume, ...outsideCuda].map((h) => h.id));
  const allowed = ready.filter((h) => !excluded.has(h.id));
  const usable = allowed.filter((h) => !avoid.has(h.id));
  const full: string[] = [];
  let noCpuRoom = 0;
  let poolDevices = 0;
  let poolDevicesFree = 0;
  let noPassthrough = 0;

  const candidates: Candidate[] = [];
  for (const host of usable) {
    const onHost = byHost.get(host.id) ?? [];
    if (host.maxWorkers !== null && onHost.length >= host.maxWorkers) {
      full.push(host.id);
      continue;
    }
    if (request.cpu && !cpuFits(request.cpu, host, onHost)) {
      noCpuRoom++;
      continue;
    }
    const base = {
      host,
      preferredDc: request.dataCenterIds.includes(host.dataCenterId),
      endpointWorkers: onHost.filter((w) => w.endpointId === request.endpointId).length,
      totalWorkers: onHost.length,
    };
    if (!wantsGpu) {
      candidates.push({ ...base, gpus: [], pool: null, poolRank: 0 });
      continue;
    }
    const inUse = new Set(onHost.flatMap((w) => w.gpuUuids));
    const matching = host.gpus.filter((g) => g.pool && request.gpuPools.includes(g.pool));
    poolDevices += matching.length;
    poolDevicesFree += matching.filter((g) => !inUse.has(g.uuid)).length;
    if (matching.length > 0 && (host.gpuMethod === null || host.gpuMethod === 'none')) {
      noPassthrough++;
      continue;
    }
    request.gpuPools.forEach((pool, poolRank) => {
      // One worker's devices are one model: a pool may hold two cards of different speeds.
      const free = matching.filter((g) => g.pool === pool && !inUse.has(g.uuid));
      const byName = new Map<string, PlacementGpu[]>();
      for (const g of free) byName.set(g.name, [...(byName.get(g.name) ?? []), g]);
      const group = [...byName.values()].find((gs) => gs.length >= count);
      if (group) candidates.push({ ...base, gpus: group.slice(0, count), pool, poolRank });
    });
  }

  if (candidates.length > 0) {
    const best = candidates.sort((a, b) => compare(a, b, !wantsGpu))[0]!;
    return {
      ok: true,
      hostId: best.host.id,
      gpuUuids: best.gpus.map((g) => g.uuid),
      pool: best.pool,
      gpuName: best.gpus[0]?.name ?? null,
    };
  }

  const want = wantsGpu
    ? `${count} free GPU${count > 1 ? 's' : ''} of pool ${request.gpuPools.join(' or ')} on one host`
    : request.cpu
      ? `room for a CPU worker of ${request.cpu.vcpus} vCPUs and ${request.cpu.memoryMb / 1024} GB`
      : 'room for a CPU worker';
  const facts: string[] = [`${ready.length} of ${hosts.length} host${hosts.length === 1 ? '' : 's'} READY`];
  if (outsideCountries.length > 0)
    facts.push(`${outsideCountries.length} outside the locations ${countries.join(', ')}`);
  if (outsideVolume.length > 0) facts.push(`${outsideVolume.length} not where the network volume is`);
  if (cuda && outsideCuda.length > 0) {
    const known = outsideCuda.filter((h) => parseCudaVersion(h.cudaVersion) !== undefined);
    const unknown = outsideCuda.length - known.length;
    const versions = [...new Set(known.map((h) => h.cudaVersion!.trim()))].sort();
    if (known.length > 0)
      facts.push(`${known.length} with CUDA ${versions.join(' or ')}, outside ${cudaConstraintText(cuda)}`);
    if (unknown > 0) facts.push(`${unknown} of unknown CUDA version, which ${cudaConstraintText(cuda)} excludes`);
  }
  if (allowed.length - usable.length > 0) facts.push(`${allowed.length - usable.length} avoided`);
  if (full.length > 0) facts.push(`${full.length} at maxWorkers`);
  if (noCpuRoom > 0) facts.push(`${noCpuRoom} without free vCPUs or memory for it`);
  if (wantsGpu) {
    facts.push(
      `${poolDevices} GPU${poolDevices === 1 ? '' : 's'} of those pools${poolDevices > 0 ? `, ${poolDevicesFree} free` : ''}`,
    );
    if (noPassthrough > 0)
      facts.push(`${noPassthrough} host${noPassthrough === 1 ? '' : 's'} without GPU passthrough for containers`);
  }
  return { ok: false, reason: `no capacity: no READY host has ${want} (${facts.join(', ')})` };
}

/**
 * Whether a CPU worker's reservation fits beside the CPU workers already on the host. GPU workers
 * reserve no CPUs (their GPUs are what they hold). A host whose size is unknown fits none.
 */
function cpuFits(want: CpuReservation, host: PlacementHost, onHost: readonly PlacedWorker[]): boolean {
  if (!host.cpuCount || !host.memoryMb) return false;
  const factor = host.cpuOvercommit ?? 1;
  let vcpus = want.vcpus;
  let memoryMb = want.memoryMb;
  for (const w of onHost) {
    vcpus += w.cpu?.vcpus ?? 0;
    memoryMb += w.cpu?.memoryMb ?? 0;
  }
  return vcpus <= host.cpuCount * factor && memoryMb <= host.memoryMb * factor;
}

/** A FlashBoot standby as eviction sees it: what it holds, its mode and since when it stands by. */
export interface StandbyWorker extends PlacedWorker {
  id: string;
  /** PRIORITY_FLASHBOOT: evicted after every FLASHBOOT standby that would do. */
  priority: boolean;
  /** When it froze (ms since the epoch): the oldest goes first. */
  since: number;
}

/**
 * Placement that may evict FlashBoot standbys (docs/endpoints.md, "FlashBoot"). A standby's room is
 * reclaimable: when no host fits the worker with every standby in place, standbys are taken away in
 * eviction order (FLASHBOOT before PRIORITY_FLASHBOOT, then the oldest first) until one host fits,
 * and only those on the chosen host go. Running and starting workers (`workers`) are never evicted.
 */
export function placeEvicting(
  request: PlacementRequest,
  hosts: readonly PlacementHost[],
  workers: readonly PlacedWorker[],
  standbys: readonly StandbyWorker[],
): { placement: Placement; evict: string[] } {
  const first = placeWorker(request, hosts, [...workers, ...standbys]);
  if (first.ok || standbys.length === 0) return { placement: first, evict: [] };
  const order = [...standbys].sort(
    (a, b) => Number(a.priority) - Number(b.priority) || a.since - b.since || (a.id < b.id ? -1 : 1),
  );
  for (let n = 1; n <= order.length; n++) {
    const gone = new Set(order.slice(0, n).map((s) => s.id));
    const p = placeWorker(request, hosts, [...workers, ...standbys.filter((s) => !gone.has(s.id))]);
    if (!p.ok) continue;
    // The other hosts are as full as they were without evictions: only the chosen host's standbys
    // may need to go, and of those only the ones whose room the worker takes (not a standby on
    // another pool's GPU, or a CPU standby for a GPU worker). The most protected are kept first.
    let evict = order.slice(0, n).filter((s) => s.hostId === p.hostId);
    for (const s of [...evict].reverse()) {
      const fewer = evict.filter((e) => e.id !== s.id);
      const q = placeWorker(request, hosts, [...workers, ...standbys.filter((x) => !fewer.some((e) => e.id === x.id))]);
      if (q.ok && q.hostId === p.hostId) evict = fewer;
    }
    const kept = standbys.filter((s) => !evict.some((e) => e.id === s.id));
    const placement = placeWorker(request, hosts, [...workers, ...kept]);
    return placement.ok ? { placement, evict: evict.map((s) => s.id) } : { placement: p, evict: [...gone] };
  }
  return { placement: first, evict: [] };
}
