import type { Worker } from '../../../generated/prisma/client.ts';
import { publicWorkerStatus, type WorkerImageOnHost } from '../../../domain/endpoints/index.ts';
import type { PodModel } from '../../../domain/pods/index.ts';
import type { Pod } from '../generated-types.ts';

/** GraphQL's `Pod` (docs/pods.md), from the domain's model of a pod. */
export function podNode(m: PodModel): Pod {
  const { row, worker, host } = m;
  return {
    id: row.id,
    name: row.name,
    imageName: row.imageName,
    desiredStatus: row.desiredStatus,
    lastStatusChange: m.lastStatusChange.toISOString(),
    dockerArgs: row.dockerArgs,
    // `KEY=VALUE` strings, as the hosted service lists a pod's environment.
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
    dockerId: m.running ? (worker?.containerId ?? null) : null,
    // Every Gantry pod is on demand (the hosted service's RESERVED); none is interruptible.
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
    costPerHr: m.costPerHr,
    uptimeSeconds: m.uptimeSeconds,
    runtime: m.running
      ? {
          uptimeInSeconds: m.uptimeSeconds,
          ports: m.runtimePorts.map((p) => ({
            ip: p.ip,
            isIpPublic: p.isIpPublic,
            privatePort: p.privatePort,
            publicPort: p.publicPort,
            type: p.protocol,
          })),
          gpus: (worker?.gpuUuids ?? []).map((id) => ({ id })),
        }
      : null,
  };
}

/** GraphQL's `Pod` for an endpoint's worker (`Endpoint.pods`): its state, why it waits, and its image on the host. */
export function endpointWorkerNode(w: Worker, onHost: WorkerImageOnHost | undefined): Pod {
  return {
    id: w.id,
    desiredStatus: w.desiredStatus,
    workerStatus: publicWorkerStatus(w.status),
    lastStatusChange: (w.readyAt ?? w.startedAt ?? w.createdAt).toISOString(),
    imageName: null,
    podType: 'RESERVED',
    machineId: w.hostId,
    statusReason: w.statusReason,
    imageOnHostSince: onHost?.imageOnHostSince ?? null,
    imagePulledAhead: onHost?.imagePulledAhead ?? false,
  };
}
