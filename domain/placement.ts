/**
 * Worker placement: which host (and which GPUs on it) a new worker goes to. Pure: the caller reads
 * hosts and live workers inside one serialized transaction, asks here, and writes the answer.
 *
 * Rules: only READY hosts; a GPU worker takes `gpuCount` whole devices of one of the endpoint's pools
 * on one host, named by UUID, and a device is never given to two live workers; a host's maxWorkers
 * caps its workers. Among hosts that fit, the preferred data centers come first, then the host with
 * the fewest workers of this endpoint (spreading an endpoint over hosts), then the fewest workers in
 * all, then, for CPU workers, hosts without GPUs (GPU boxes stay free for GPU work), then the pool
 * listed first. Ties break by host id so that the answer is stable.
 */

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
}

/** A worker that holds (or is about to hold) a place on a host. */
export interface PlacedWorker {
  hostId: string;
  endpointId: string | null;
  gpuUuids: readonly string[];
}

export interface PlacementRequest {
  endpointId: string;
  /** Empty: a CPU worker. */
  gpuPools: readonly string[];
  gpuCount: number;
  dataCenterIds: readonly string[];
  /** Hosts not to use (e.g. the one a worker just failed on). */
  avoidHostIds?: readonly string[];
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

export function placeWorker(request: PlacementRequest, hosts: readonly PlacementHost[], workers: readonly PlacedWorker[]): Placement {
  const wantsGpu = request.gpuPools.length > 0;
  const count = Math.max(1, request.gpuCount);
  const avoid = new Set(request.avoidHostIds ?? []);
  const byHost = new Map<string, PlacedWorker[]>();
  for (const w of workers) byHost.set(w.hostId, [...(byHost.get(w.hostId) ?? []), w]);
  const ready = hosts.filter((h) => h.status === 'READY');
  const usable = ready.filter((h) => !avoid.has(h.id));
  const full: string[] = [];
  let poolDevices = 0;
  let noPassthrough = 0;

  const candidates: Candidate[] = [];
  for (const host of usable) {
    const onHost = byHost.get(host.id) ?? [];
    if (host.maxWorkers !== null && onHost.length >= host.maxWorkers) {
      full.push(host.id);
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
    return { ok: true, hostId: best.host.id, gpuUuids: best.gpus.map((g) => g.uuid), pool: best.pool, gpuName: best.gpus[0]?.name ?? null };
  }

  const want = wantsGpu ? `${count} free GPU${count > 1 ? 's' : ''} of pool ${request.gpuPools.join(' or ')} on one host` : 'room for a CPU worker';
  const facts: string[] = [`${ready.length} of ${hosts.length} host${hosts.length === 1 ? '' : 's'} READY`];
  if (avoid.size > 0) facts.push(`${ready.length - usable.length} avoided`);
  if (full.length > 0) facts.push(`${full.length} at maxWorkers`);
  if (wantsGpu) {
    facts.push(`${poolDevices} GPU${poolDevices === 1 ? '' : 's'} of those pools`);
    if (noPassthrough > 0) facts.push(`${noPassthrough} host${noPassthrough === 1 ? '' : 's'} without GPU passthrough for containers`);
  }
  return { ok: false, reason: `no capacity: no READY host has ${want} (${facts.join(', ')})` };
}
