import { Type, type Static } from 'typebox';
import { Labels, type HostModel } from '../../../domain/hosts/index.ts';

/** A host in REST v2 (`/v2/hosts`, the admin account's): its row, what the probe found, and what live workers hold. */
const HostGpuSchema = Type.Object({
  uuid: Type.String(),
  name: Type.String(),
  memoryMb: Type.Integer(),
  driverVersion: Type.String(),
  pool: Type.Union([Type.String(), Type.Null()]),
});

export const HostSchema = Type.Object({
  id: Type.String(),
  name: Type.String(),
  address: Type.String(),
  port: Type.Integer(),
  user: Type.String(),
  dataCenterId: Type.String(),
  labels: Labels,
  maxWorkers: Type.Union([Type.Integer(), Type.Null()]),
  source: Type.String({ description: 'api, file (GANTRY_HOSTS_FILE) or local (GANTRY_LOCAL_HOST)' }),
  status: Type.Union([
    Type.Literal('PENDING'),
    Type.Literal('READY'),
    Type.Literal('UNREACHABLE'),
    Type.Literal('HOST_KEY_MISMATCH'),
    Type.Literal('DISABLED'),
  ]),
  statusReason: Type.Union([Type.String(), Type.Null()]),
  hostKeySha256: Type.Union([Type.String(), Type.Null()]),
  cpuCount: Type.Union([Type.Integer(), Type.Null()]),
  memoryMb: Type.Union([Type.Integer(), Type.Null()]),
  diskFreeGb: Type.Union([Type.Integer(), Type.Null()]),
  containerRuntime: Type.Union([Type.String(), Type.Null()]),
  gpuMethod: Type.Union([Type.String(), Type.Null()]),
  gpus: Type.Array(HostGpuSchema),
  probe: Type.Union([Type.Record(Type.String(), Type.Unknown()), Type.Null()]),
  workers: Type.Integer({ description: 'live workers placed here' }),
  gpusInUse: Type.Array(Type.String(), {
    description: "UUIDs of the host's GPUs that live workers hold (FlashBoot standbys included); the others are free",
  }),
  lastProbeAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  lastSeenAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  createdAt: Type.String({ format: 'date-time' }),
});
export const HostListSchema = Type.Object({ hosts: Type.Array(HostSchema) });

/** The REST shape of a host, from the domain's model. */
export function hostView({ row: h, live }: HostModel): Static<typeof HostSchema> {
  return {
    id: h.id,
    name: h.name,
    address: h.address,
    port: h.port,
    user: h.user,
    dataCenterId: h.dataCenterId,
    labels: h.labels as Record<string, string>,
    maxWorkers: h.maxWorkers,
    source: h.source,
    status: h.status,
    statusReason: h.statusReason,
    hostKeySha256: h.hostKeySha256,
    cpuCount: h.cpuCount,
    memoryMb: h.memoryMb,
    diskFreeGb: h.diskFreeGb,
    containerRuntime: h.containerRuntime,
    gpuMethod: h.gpuMethod,
    gpus: h.gpus as Static<typeof HostGpuSchema>[],
    probe: (h.probe as Record<string, unknown> | null) ?? null,
    workers: live.workers,
    gpusInUse: live.gpuUuids,
    lastProbeAt: h.lastProbeAt?.toISOString() ?? null,
    lastSeenAt: h.lastSeenAt?.toISOString() ?? null,
    createdAt: h.createdAt.toISOString(),
  };
}
