import { Type, type Static } from 'typebox';
import { PodActionNameSchema, podPorts, PodStatusSchema, type PodModel } from '../../../domain/pods/index.ts';

/**
 * A pod in REST v2 (`/v2/pods`): the container fields `image`, `args`, `disk`, `ports` array, `env`
 * object and `registry` that templates and endpoints share, plus `gpu {id, count}`, `mounts`,
 * `ssh`, `runtime` and the actions its status allows.
 */
const NullableString = Type.Union([Type.String(), Type.Null()]);
const SshEndpointSchema = Type.Object({
  host: Type.String(),
  port: Type.Integer(),
  username: Type.String(),
  command: Type.String(),
});

export const PodViewSchema = Type.Object({
  id: Type.String(),
  name: Type.String(),
  status: PodStatusSchema,
  desiredStatus: Type.Union([Type.Literal('RUNNING'), Type.Literal('EXITED'), Type.Literal('TERMINATED')], {
    description: 'what the owner asked for, as GraphQL shows it',
  }),
  actions: Type.Array(PodActionNameSchema, { description: 'the actions the current status allows' }),
  image: Type.String(),
  args: Type.String(),
  disk: Type.Integer(),
  ports: Type.Array(Type.String()),
  env: Type.Record(Type.String(), Type.String()),
  registry: NullableString,
  mounts: Type.Object({
    persistent: Type.Optional(Type.Object({ size: Type.Integer(), path: Type.String() })),
    network: Type.Optional(Type.Array(Type.Object({ volumeId: Type.String(), path: Type.String() }))),
  }),
  gpu: Type.Optional(
    Type.Object(
      {
        id: Type.Union([Type.String(), Type.Null()], {
          description: 'null: any type (a pod made without one, not yet placed)',
        }),
        count: Type.Integer(),
      },
      { description: 'GPU pods only' },
    ),
  ),
  cloud: Type.Literal('SECURE'),
  dataCenterId: Type.Union([Type.String(), Type.Null()], {
    description: "the data center of the pod's host while it has one",
  }),
  cudaVersion: Type.Union([Type.String(), Type.Null()], {
    description: "the CUDA version the pod's host reports, when known",
  }),
  ssh: Type.Object({
    proxy: Type.Null({ description: 'no SSH proxy here' }),
    direct: Type.Union([SshEndpointSchema, Type.Null()], {
      description: 'the published `22/tcp` port while the pod runs (the image must run its own sshd)',
    }),
  }),
  template: NullableString,
  cost: Type.Number({
    description: 'USD per hour while the pod should run (GPU price list); 0 when stopped and for CPU pods',
  }),
  locked: Type.Boolean({ description: 'always false' }),
  globalNetworking: Type.Object({ enabled: Type.Boolean({ description: 'always false' }) }),
  runtime: Type.Union([
    Type.Object({
      uptime: Type.Integer({ description: 'seconds since the container became ready' }),
      gpus: Type.Array(Type.Object({ id: Type.String({ description: 'GPU UUID' }) })),
      ports: Type.Array(
        Type.Object({
          private: Type.Integer(),
          public: Type.Union([Type.Integer(), Type.Null()]),
          type: Type.String(),
          ip: NullableString,
        }),
      ),
    }),
    Type.Null(),
  ]),
  createdAt: Type.String({ format: 'date-time' }),
  startedAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], {
    description: 'when the running container became ready',
  }),
  lastStatusChange: Type.String({ format: 'date-time' }),
});
export type PodView = Static<typeof PodViewSchema>;
export const PodListViewSchema = Type.Object({ pods: Type.Array(PodViewSchema) });

/** The REST shape of a pod, from the domain's model. */
export function podView(m: PodModel): PodView {
  const { row } = m;
  const ssh = m.runtimePorts.find((p) => p.privatePort === 22 && p.protocol === 'tcp');
  return {
    id: row.id,
    name: row.name,
    status: m.status,
    desiredStatus: row.desiredStatus,
    actions: m.actions,
    image: row.imageName,
    args: row.dockerArgs,
    disk: row.containerDiskInGb,
    ports: podPorts(row.ports).map((p) => `${p.port}/${p.protocol}`),
    env: row.env as Record<string, string>,
    registry: row.registryId,
    mounts: {
      ...(row.volumeInGb > 0 ? { persistent: { size: row.volumeInGb, path: row.volumeMountPath } } : {}),
      ...(row.networkVolumeId ? { network: [{ volumeId: row.networkVolumeId, path: row.volumeMountPath }] } : {}),
    },
    ...(row.gpuCount > 0 ? { gpu: { id: row.gpuTypeId ?? m.worker?.gpuTypeId ?? null, count: row.gpuCount } } : {}),
    cloud: 'SECURE',
    dataCenterId: m.worker && m.host ? m.host.dataCenterId : null,
    cudaVersion: m.cudaVersion,
    ssh: {
      proxy: null,
      direct: ssh
        ? { host: ssh.ip, port: ssh.publicPort, username: 'root', command: `ssh root@${ssh.ip} -p ${ssh.publicPort}` }
        : null,
    },
    template: row.templateId,
    cost: row.desiredStatus === 'RUNNING' ? (m.costPerHr ?? 0) : 0,
    locked: false,
    globalNetworking: { enabled: false },
    runtime: m.running
      ? {
          uptime: m.uptimeSeconds,
          gpus: (m.worker?.gpuUuids ?? []).map((id) => ({ id })),
          ports: m.runtimePorts.map((p) => ({
            private: p.privatePort,
            public: p.publicPort,
            type: p.protocol,
            ip: p.ip,
          })),
        }
      : null,
    createdAt: row.createdAt.toISOString(),
    startedAt: m.running ? m.lastStatusChange.toISOString() : null,
    lastStatusChange: m.lastStatusChange.toISOString(),
  };
}
