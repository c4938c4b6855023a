import { isIP } from 'node:net';
import type { Host, Pod, Worker } from '../../generated/prisma/client.ts';
import type { Principal } from '../accounts/auth.ts';
import type { DomainContext } from '../context.ts';
import { notFound } from '../errors.ts';
import { gpuRate, priceTable, type PriceTable } from '../billing/pricing.ts';
import { liveWorker } from '../workers/status.ts';
import { podPorts, type PodActionName, type PodStatus } from './schemas.ts';

/**
 * The pod as the domain knows it: its row, its newest live worker on its host, and the facts both
 * skins show (status, the actions it allows, uptime, cost, published ports), read from the row, the
 * worker and the price table. REST (api/routes/shapes/pod.ts) and GraphQL (api/graphql/shapes/pod.ts)
 * each map it to their own shape.
 */

/** A published container port while the pod runs. */
export interface PodRuntimePort {
  /** The host's address. */
  ip: string;
  isIpPublic: boolean;
  privatePort: number;
  publicPort: number;
  protocol: string;
}

type PodWorker = Worker & { host: Host | null };

export interface PodModel {
  row: PodRow;
  /** The newest live worker: at most one, except for a moment while a replacement starts. */
  worker: PodWorker | undefined;
  host: Host | null;
  status: PodStatus;
  actions: PodActionName[];
  /** The container runs: its worker is ready on its host. */
  running: boolean;
  uptimeSeconds: number;
  /** When the container became ready while it runs; the row's last change otherwise. */
  lastStatusChange: Date;
  /** USD per hour of the pod's GPUs at the price list; null for a CPU pod. */
  costPerHr: number | null;
  /** Empty while the container is not running. */
  runtimePorts: PodRuntimePort[];
  /** The CUDA version the host reports, when known. */
  cudaVersion: string | null;
}

/** What each status allows; any other action is refused (409). */
const ACTIONS_BY_STATUS: Record<PodStatus, PodActionName[]> = {
  PROVISIONING: ['stop', 'terminate'],
  STARTING: ['stop', 'terminate'],
  RUNNING: ['stop', 'restart', 'terminate'],
  EXITED: ['start', 'terminate'],
  ERROR: ['start', 'terminate'],
  TERMINATED: [],
};

export type PodRow = Pod & { workers: Array<Worker & { host: Host | null }> };

/** Loopback, private, link-local and shared ranges; a host name counts as not public (unknown). */
function isPublicAddress(address: string): boolean {
  const kind = isIP(address);
  if (kind === 4) {
    const [a = 0, b = 0] = address.split('.').map(Number);
    return !(
      a === 10 ||
      a === 127 ||
      a === 0 ||
      (a === 172 && b >= 16 && b < 32) ||
      (a === 192 && b === 168) ||
      (a === 169 && b === 254) ||
      (a === 100 && b >= 64 && b < 128)
    );
  }
  if (kind === 6) return !/^(::1$|fc|fd|fe80)/i.test(address);
  return false;
}

export function podModel(row: PodRow, prices: PriceTable, now = Date.now()): PodModel {
  const worker = row.workers.at(-1);
  const host = worker?.host ?? null;
  const running = !!worker && !!host && !!worker.readyAt && (worker.status === 'RUNNING' || worker.status === 'IDLE');
  const gpuType = worker?.gpuTypeId ?? row.gpuTypeId;
  const status: PodStatus =
    row.desiredStatus === 'TERMINATED' || row.desiredStatus === 'EXITED'
      ? row.desiredStatus
      : running
        ? 'RUNNING'
        : worker?.hostId
          ? 'STARTING'
          : 'PROVISIONING';
  const cudaVersion = (host?.probe as { cudaVersion?: unknown } | null | undefined)?.cudaVersion;
  return {
    row,
    worker,
    host,
    status,
    actions: ACTIONS_BY_STATUS[status],
    running,
    uptimeSeconds: running ? Math.max(0, Math.floor((now - worker.readyAt!.getTime()) / 1000)) : 0,
    lastStatusChange: running ? worker.readyAt! : row.updatedAt,
    costPerHr:
      row.gpuCount > 0 && gpuType ? Math.round(gpuRate(prices, gpuType).podPerHour * row.gpuCount * 1e4) / 1e4 : null,
    runtimePorts:
      running && worker.hostPort
        ? podPorts(row.ports).map((p, i) => ({
            ip: host.address,
            isIpPublic: isPublicAddress(host.address),
            privatePort: p.port,
            publicPort: worker.hostPort! + i,
            protocol: p.protocol,
          }))
        : [],
    cudaVersion: typeof cudaVersion === 'string' ? cudaVersion : null,
  };
}

export const withWorkers = {
  workers: { where: liveWorker, include: { host: true }, orderBy: { createdAt: 'asc' as const } },
};

/** The caller's pod; others' pods and terminated ones are not found. */
export async function findPod(ctx: DomainContext, principal: Principal, podId: string): Promise<PodRow> {
  const row = await ctx.db.pod.findFirst({
    where: { id: podId, accountId: principal.accountId, desiredStatus: { not: 'TERMINATED' } },
    include: withWorkers,
  });
  if (!row) throw notFound('pod');
  return row;
}

/** The caller's pod, as the domain's model. */
export async function loadPod(ctx: DomainContext, principal: Principal, podId: string): Promise<PodModel> {
  return podModel(await findPod(ctx, principal, podId), priceTable(ctx.settings.pricesFile));
}
