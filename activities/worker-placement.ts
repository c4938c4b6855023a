/**
 * Placement for the worker workflow (workflows/worker.ts): which host a worker runs on, its GPUs or
 * CPU reservation, and its host ports. Assembled into the worker activities by activities/worker.ts.
 */
import { randomInt } from 'node:crypto';
import { ApplicationFailure } from '@temporalio/activity';
import { cpuInstanceId, gpuTypeId, recordedCpuInstance, type CpuInstance } from '../domain/catalog/index.ts';
import { lastStartFailure, shortReason, UNPLACEABLE } from '../domain/endpoints/index.ts';
import { prismaSql } from '../domain/jobs/index.ts';
import { podPorts } from '../domain/pods/index.ts';
import {
  cpuOvercommitOf,
  liveWorker,
  placeEvicting,
  placeWorker,
  type PlacementGpu,
  type PlacementHost,
  type PlacementRequest,
} from '../domain/workers/index.ts';
import type { Db } from '../domain/shared/index.ts';
import type { Endpoint, Host, Prisma } from '../generated/prisma/client.ts';
import { drainWorker, workerWorkflowId } from '../contracts/workflows.ts';
import { containerNameOf, removeContainer } from '../hostctl/containers.ts';
import { hostHandle } from './orchestration-runtime.ts';
import { networkVolumeHosts } from './network-volumes.ts';
import type { OrchestrationRuntime } from './orchestration-runtime.ts';

/** Host ports handed to load-balancing workers (their PORT) and to pods (their exposed ports). */
const HOST_PORTS = { first: 20_000, last: 29_999 };

/** The placement pool name a pod's GPUs of its GPU type are given (pods ask for a type, not a pool). */
const POD_GPU_POOL = 'pod-gpu-type';

/** A CPU endpoint's instance (its row's flavor and size). */
function endpointCpuInstance(e: {
  cpuFlavorId: string | null;
  cpuVcpuCount: number | null;
  cpuMemoryGb: number | null;
}): CpuInstance {
  return e.cpuVcpuCount && e.cpuMemoryGb
    ? { flavorId: e.cpuFlavorId!, vcpus: e.cpuVcpuCount, memoryGb: e.cpuMemoryGb }
    : recordedCpuInstance(e.cpuFlavorId!);
}

/** What a placed CPU worker holds on its host (GPU workers hold their GPUs, no CPUs). */
export function reservationOf(cpuFlavorId: string | null): { vcpus: number; memoryMb: number } | null {
  if (!cpuFlavorId) return null;
  const i = recordedCpuInstance(cpuFlavorId);
  return { vcpus: i.vcpus, memoryMb: i.memoryGb * 1024 };
}

type Tx = Db | Prisma.TransactionClient;

/** READY hosts as placement sees them: their GPUs (a pod's type as its one pool), room and country. */
export async function placementHosts(tx: Tx, hosts: Host[], pod: { gpuTypeId: string | null } | null) {
  const countries = await tx.dataCenter.findMany({
    where: { id: { in: [...new Set(hosts.map((h) => h.dataCenterId))] } },
    select: { id: true, country: true },
  });
  const countryOf = new Map(countries.map((c) => [c.id, c.country]));
  return hosts.map((h): PlacementHost => {
    const gpus = (h.gpus as unknown as PlacementGpu[]) ?? [];
    return {
      id: h.id,
      name: h.name,
      status: h.status,
      dataCenterId: h.dataCenterId,
      // A pod asks for a GPU type, not a pool: the matching cards form the one pool it asks for.
      gpus: pod
        ? gpus.map((g) => ({ ...g, pool: !pod.gpuTypeId || gpuTypeId(g.name) === pod.gpuTypeId ? POD_GPU_POOL : null }))
        : gpus,
      gpuMethod: h.gpuMethod,
      maxWorkers: h.maxWorkers,
      country: countryOf.get(h.dataCenterId) ?? null,
      cpuCount: h.cpuCount,
      memoryMb: h.memoryMb,
      // Its label; without one 1, or on the local host room for the templates' CPU workers.
      cpuOvercommit: cpuOvercommitOf(h),
      cudaVersion: cudaVersionOf(h),
    };
  });
}

/** The CUDA version the host's last probe read (activities/host.ts keeps it in `probe`); null: unknown. */
function cudaVersionOf(h: Host): string | null {
  const v = (h.probe as { cudaVersion?: unknown } | null)?.cudaVersion;
  return typeof v === 'string' && v !== '' ? v : null;
}

/** A CPU endpoint's instance (vCPUs and memory its workers reserve); GPU endpoints reserve none. */
const endpointCpu = (e: Endpoint): CpuInstance | undefined =>
  e.gpuPools.length === 0 && e.cpuFlavorId ? endpointCpuInstance(e) : undefined;

/** What a worker of the endpoint asks of a host; `onlyHostIds`: where its network volumes are. */
export function endpointRequest(
  e: Endpoint,
  onlyHostIds: string[] | undefined,
  avoidHostIds: string[],
): PlacementRequest {
  const cpu = endpointCpu(e);
  return {
    endpointId: e.id,
    gpuPools: e.gpuPools,
    gpuCount: e.gpuCount ?? 1,
    dataCenterIds: e.dataCenterIds,
    avoidHostIds,
    countries: e.locations.split(',').filter(Boolean),
    cuda: { allowed: e.allowedCudaVersions, min: e.minCudaVersion },
    ...(onlyHostIds ? { onlyHostIds } : {}),
    ...(cpu ? { cpu: { vcpus: cpu.vcpus, memoryMb: cpu.memoryGb * 1024 } } : {}),
  };
}

/**
 * For each endpoint no READY host could ever run a worker of, were the hosts empty (no host with its
 * pools, GPU count, CPU size, data center or network volume): why. The hosts are read once for all.
 * A deploy checks this for every resource, whether or not it keeps workers (activities/deploy.ts).
 */
export async function endpointsUnplaceable(tx: Tx, endpointIds: string[]): Promise<Map<string, string>> {
  const reasons = new Map<string, string>();
  const endpoints = await tx.endpoint.findMany({ where: { id: { in: endpointIds } } });
  if (endpoints.length === 0) return reasons;
  const candidates = await placementHosts(tx, await tx.host.findMany({ where: { status: 'READY' } }), null);
  for (const e of endpoints) {
    const volumes = await networkVolumeHosts(tx, e.networkVolumeIds);
    if (volumes.onlyHostIds && volumes.onlyHostIds.length === 0) {
      reasons.set(
        e.id,
        `${UNPLACEABLE}: the network volume cannot be mounted anywhere: ${volumes.problems.join('; ')}`,
      );
      continue;
    }
    const p = placeWorker(endpointRequest(e, volumes.onlyHostIds, []), candidates, []);
    if (!p.ok) reasons.set(e.id, p.reason.replace(/^no capacity: /, `${UNPLACEABLE}: `));
  }
  return reasons;
}

/**
 * Serializes every decision over hosts' room for the rest of the transaction: placement here, and
 * the FlashBoot freeze and thaw (worker-standby.ts), so that a standby is thawed or evicted, never both.
 */
export const lockPlacement = (tx: Tx) => tx.$executeRaw`select pg_advisory_xact_lock(hashtext('gantry.placement'))`;

export interface PlacementResult {
  placed: boolean;
  hostId?: string;
  reason?: string;
  /** FlashBoot standbys evicted to make room (removed before the answer). */
  evicted?: string[];
}

/** What an evicted standby's row says (no word of whose worker took its room: tenants do not see each other). */
const EVICTED_REASON = 'evicted: another worker needed the room its FlashBoot standby held';

/** How the reason of a worker no READY host could take, even empty, begins (defined with the worker problem it feeds). */
export { UNPLACEABLE };

export function createWorkerPlacementActivities(rt: OrchestrationRuntime) {
  const { db } = rt;

  /**
   * Evicted standbys leave before the new worker starts (their GPUs' memory is the new worker's):
   * their containers are removed here, and their workflows told to finish. A host that cannot be
   * reached now leaves the removal to the standby's workflow and the host's reconcile.
   */
  async function removeEvicted(hostId: string, workerIds: string[]): Promise<void> {
    const h = await hostHandle(rt, hostId).catch(() => undefined);
    for (const id of workerIds) {
      if (h) await removeContainer(rt.pool, h, containerNameOf(id), 0).catch(() => undefined);
      await rt.temporal.workflow
        .getHandle(workerWorkflowId(id))
        .signal(drainWorker, { reason: EVICTED_REASON })
        .catch(() => undefined);
    }
  }

  return {
    /**
     * Finds the worker a place: serialized over all placements (an advisory lock), so that two
     * workers never get one GPU. Leaves the worker PENDING with the reason when nothing fits.
     */
    async placeWorker(workerId: string, options: { avoidHostIds?: string[] } = {}): Promise<PlacementResult> {
      const result = await db.$transaction(
        async (tx) => {
          await lockPlacement(tx);
          const worker = await tx.worker.findUnique({
            where: { id: workerId },
            include: { endpoint: true, pod: true },
          });
          if (!worker || (!worker.endpoint && !worker.pod))
            throw ApplicationFailure.nonRetryable(`worker ${workerId} no longer exists`, 'WorkerGone');
          if (worker.hostId && worker.status !== 'PENDING') return { placed: true, hostId: worker.hostId };
          const pending = async (reason: string): Promise<PlacementResult> => {
            await tx.worker.update({ where: { id: workerId }, data: { status: 'PENDING', statusReason: reason } });
            return { placed: false, reason };
          };
          // A pod's volume lives on one host: once it has one, the pod runs there or waits for it.
          const volumeHostId = worker.pod?.volumeHostId ?? null;
          const hosts = await tx.host.findMany({
            where: { status: 'READY', ...(volumeHostId ? { id: volumeHostId } : {}) },
          });
          if (volumeHostId && hosts.length === 0)
            return pending(`waiting for host ${volumeHostId}, which holds the pod's volume and is not ready`);
          const e = worker.endpoint;
          const pod = worker.pod;
          // A network volume is where its data is: the worker runs there (and binds a single-host volume to its host).
          const volumeIds = pod ? (pod.networkVolumeId ? [pod.networkVolumeId] : []) : e!.networkVolumeIds;
          const volumes = await networkVolumeHosts(tx, volumeIds);
          if (volumes.onlyHostIds && volumes.onlyHostIds.length === 0)
            return pending(
              `no capacity: the network volume cannot be mounted anywhere: ${volumes.problems.join('; ')}`,
            );
          const placed = await tx.worker.findMany({
            where: { hostId: { not: null }, ...liveWorker, id: { not: workerId } },
            select: {
              id: true,
              status: true,
              standbySince: true,
              hostId: true,
              endpointId: true,
              gpuUuids: true,
              hostPort: true,
              cpuFlavorId: true,
              pod: { select: { ports: true } },
              endpoint: { select: { flashboot: true } },
            },
          });
          const candidates = await placementHosts(tx, hosts, pod);
          const cpu = pod ? undefined : endpointCpu(e!);
          const request: PlacementRequest = pod
            ? {
                endpointId: `pod:${pod.id}`,
                gpuPools: pod.gpuCount > 0 ? [POD_GPU_POOL] : [],
                gpuCount: pod.gpuCount,
                dataCenterIds: [],
                avoidHostIds: volumeHostId ? [] : (options.avoidHostIds ?? []),
                cuda: { allowed: pod.allowedCudaVersions, min: pod.minCudaVersion },
                ...(volumes.onlyHostIds ? { onlyHostIds: volumes.onlyHostIds } : {}),
              }
            : endpointRequest(e!, volumes.onlyHostIds, options.avoidHostIds ?? []);
          const holding = (w: (typeof placed)[number]) => ({
            hostId: w.hostId!,
            endpointId: w.endpointId,
            gpuUuids: w.gpuUuids,
            cpu: reservationOf(w.cpuFlavorId),
          });
          // FlashBoot standbys hold their room until a worker needs it (placeEvicting).
          const { placement: p, evict } = placeEvicting(
            request,
            candidates,
            placed.filter((w) => w.status !== 'STANDBY').map(holding),
            placed
              .filter((w) => w.status === 'STANDBY')
              .map((w) => ({
                ...holding(w),
                id: w.id,
                priority: w.endpoint?.flashboot === 'PRIORITY_FLASHBOOT',
                since: (w.standbySince ?? new Date(0)).getTime(),
              })),
          );
          if (!p.ok) {
            // Would it fit on the READY hosts were they empty? If not, waiting for capacity cannot
            // help (no host with its pools, GPU count, CPU size or place): said so, and a deploy
            // waiting on it fails fast (activities/deploy.ts).
            const ever = placeWorker({ ...request, avoidHostIds: [] }, candidates, []).ok;
            const reason = ever ? p.reason : p.reason.replace(/^no capacity: /, `${UNPLACEABLE}: `);
            return pending(volumes.problems.length > 0 ? `${reason}; ${volumes.problems.join('; ')}` : reason);
          }
          const binding = volumes.bindings.get(p.hostId);
          if (binding)
            await tx.networkVolume.updateMany({ where: { id: binding, hostId: null }, data: { hostId: p.hostId } });
          // Host ports: one for a load-balancing worker (its PORT), a block of consecutive ones for a
          // pod (one per exposed port, in the order of its `ports`). A random free start rather than
          // the first: other software (or another installation) on the host may use ports of the
          // range that this database does not know of.
          const wanted = pod ? podPorts(pod.ports).length : e!.type === 'LOAD_BALANCING' ? 1 : 0;
          let hostPort: number | null = null;
          if (wanted > 0) {
            const taken = new Set<number>();
            for (const w of placed) {
              if (w.hostId !== p.hostId || !w.hostPort) continue;
              const span = w.pod ? Math.max(1, podPorts(w.pod.ports).length) : 1;
              for (let i = 0; i < span; i++) taken.add(w.hostPort + i);
            }
            const size = HOST_PORTS.last - HOST_PORTS.first + 2 - wanted;
            const offset = randomInt(size);
            for (let i = 0; i < size && hostPort === null; i++) {
              const first = HOST_PORTS.first + ((offset + i) % size);
              if (Array.from({ length: wanted }, (_, k) => first + k).every((port) => !taken.has(port)))
                hostPort = first;
            }
            if (hostPort === null)
              return pending(`no capacity: no ${wanted} free consecutive host ports on the chosen host`);
          }
          // A worker placed after one of its release failed to start says what that one met: a user
          // who looks while the image is pulled again sees why the last try did not serve.
          const last = e ? await lastStartFailure(prismaSql(tx), e.id, worker.releaseVersion) : null;
          await tx.worker.update({
            where: { id: workerId },
            data: {
              hostId: p.hostId,
              gpuUuids: p.gpuUuids,
              gpuTypeId: p.gpuName ? gpuTypeId(p.gpuName) : null,
              cpuFlavorId: cpu ? cpuInstanceId(cpu) : null,
              hostPort,
              status: 'INITIALIZING',
              statusReason: last
                ? `pulling the image (the last try failed: ${shortReason(last.reason)})`
                : 'pulling the image',
              containerName: containerNameOf(workerId),
            },
          });
          if (pod && pod.volumeInGb > 0 && !volumeHostId)
            await tx.pod.update({ where: { id: pod.id }, data: { volumeHostId: p.hostId } });
          if (evict.length > 0)
            await tx.worker.updateMany({
              where: { id: { in: evict }, status: 'STANDBY' },
              data: { status: 'DRAINING', desiredStatus: 'TERMINATED', statusReason: EVICTED_REASON },
            });
          return { placed: true, hostId: p.hostId, ...(evict.length > 0 ? { evicted: evict } : {}) };
        },
        { timeout: 30_000, maxWait: 30_000 },
      );
      if (result.evicted && result.hostId) await removeEvicted(result.hostId, result.evicted);
      return result;
    },
  };
}
