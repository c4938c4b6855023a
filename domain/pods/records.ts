import { isIP } from 'node:net';
import type { Host, Pod, Worker } from '../../generated/prisma/client.ts';
import type { Principal } from '../accounts/auth.ts';
import type { DomainContext } from '../context.ts';
import { notFound } from '../errors.ts';
import { gpuRate, type PriceTable } from '../billing/pricing.ts';
import { liveWorker } from '../workers/status.ts';
import { podPorts } from './schemas.ts';

/** The pod as GraphQL shows it (docs/pods.md): its record, built from the row, its live worker and the price table. */

export interface PodRuntimePort {
  ip: string;
  isIpPublic: boolean;
  privatePort: number;
  publicPort: number;
  type: string;
}

export interface PodRecord {
  id: string;
  name: string;
  imageName: string;
  desiredStatus: Pod['desiredStatus'];
  lastStatusChange: string;
  dockerArgs: string;
  /** `KEY=VALUE` strings, as the hosted service lists a pod's environment. */
  env: string[];
  ports: string;
  gpuCount: number;
  gpuTypeId: string | null;
  containerDiskInGb: number;
  volumeInGb: number;
  volumeMountPath: string;
  templateId: string | null;
  containerRegistryAuthId: string | null;
  machineId: string | null;
  /** The running container's id on its host; null while none runs. */
  dockerId: string | null;
  /** Every Gantry pod is on demand (the hosted service's RESERVED); none is interruptible. */
  podType: 'RESERVED';
  /** The hosted service's single-port field of old: `ports` lists them. Always null. */
  port: null;
  machine: { podHostId: string; gpuDisplayName: string | null; gpuTypeId: string | null; location: string } | null;
  costPerHr: number | null;
  uptimeSeconds: number;
  /** Null while the pod's container is not running. */
  runtime: { uptimeInSeconds: number; ports: PodRuntimePort[]; gpus: Array<{ id: string }> } | null;
}

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

export function podRecord(row: PodRow, prices: PriceTable, now = Date.now()): PodRecord {
  // The newest live worker: at most one, except for a moment while a replacement starts.
  const worker = row.workers.at(-1);
  const host = worker?.host ?? null;
  const running = !!worker && !!host && !!worker.readyAt && (worker.status === 'RUNNING' || worker.status === 'IDLE');
  const uptime = running ? Math.max(0, Math.floor((now - worker.readyAt!.getTime()) / 1000)) : 0;
  const gpuType = worker?.gpuTypeId ?? row.gpuTypeId;
  return {
    id: row.id,
    name: row.name,
    imageName: row.imageName,
    desiredStatus: row.desiredStatus,
    lastStatusChange: (running ? worker.readyAt! : row.updatedAt).toISOString(),
    dockerArgs: row.dockerArgs,
    env: Object.entries(row.env as Record<string, string>).map(([k, v]) => `${k}=${v}`),
    ports: row.ports,
    gpuCount: row.gpuCount,
    gpuTypeId: row.gpuTypeId,
    containerDiskInGb: row.containerDiskInGb,
    volumeInGb: row.volumeInGb,
    volumeMountPath: row.volumeMountPath,
    templateId: row.templateId,
    containerRegistryAuthId: row.registryId,
    machineId: host?.id ?? null,
    dockerId: running ? worker.containerId : null,
    podType: 'RESERVED',
    port: null,
    machine:
      host && worker
        ? {
            podHostId: worker.id,
            gpuDisplayName: worker.gpuTypeId,
            gpuTypeId: worker.gpuTypeId,
            location: host.dataCenterId,
          }
        : null,
    costPerHr:
      row.gpuCount > 0 && gpuType ? Math.round(gpuRate(prices, gpuType).podPerHour * row.gpuCount * 1e4) / 1e4 : null,
    uptimeSeconds: uptime,
    runtime: running
      ? {
          uptimeInSeconds: uptime,
          ports: worker.hostPort
            ? podPorts(row.ports).map((p, i) => ({
                ip: host.address,
                isIpPublic: isPublicAddress(host.address),
                privatePort: p.port,
                publicPort: worker.hostPort! + i,
                type: p.protocol,
              }))
            : [],
          gpus: worker.gpuUuids.map((id) => ({ id })),
        }
      : null,
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
