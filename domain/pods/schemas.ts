import { Type, type Static } from 'typebox';
import { ArgsSchema, EnvListSchema, EnvSchema, ImageSchema, MountPathSchema } from '../containers/fields.ts';

/** The shapes of pods: the GraphQL inputs (`podFindAndDeployOnDemand`, ...: docs/pods.md) and the REST /v2/pods bodies and views. */

/** Container env files take POSIX names only (hostctl/containers.ts envFile). */

/** Most ports one pod may expose (each takes a host port). */
export const MAX_PORTS = 32;

/** A CUDA version of a GPU pod's constraint, read by placement (domain/workers/placement.ts cudaAllows). */
const CudaVersionSchema = Type.String({
  pattern: '^[0-9]{1,4}\\.[0-9]{1,4}$',
  description: "major.minor; the pod runs only on a host whose CUDA version (nvidia-smi's) matches",
});

/**
 * `podFindAndDeployOnDemand` input: the container fields pods share with templates, plus `templateId`. The hosted service's
 * other placement and billing options (cloud type, minimum vCPUs and memory, SSH and Jupyter
 * start-up, ...) are accepted so that existing clients work, and have no effect here.
 */
export const PodDeployInputSchema = Type.Object(
  {
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 191, description: 'unique within the account' })),
    imageName: Type.Optional(ImageSchema),
    templateId: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    dockerArgs: Type.Optional(ArgsSchema),
    containerDiskInGb: Type.Optional(Type.Integer({ minimum: 1, maximum: 4096 })),
    volumeInGb: Type.Optional(Type.Integer({ minimum: 0, maximum: 4096 })),
    volumeMountPath: Type.Optional(MountPathSchema),
    env: Type.Optional(EnvListSchema),
    ports: Type.Optional(Type.String({ maxLength: 1024 })),
    gpuTypeId: Type.Optional(Type.String({ minLength: 1, maxLength: 191 })),
    gpuCount: Type.Optional(Type.Integer({ minimum: 0, maximum: 64 })),
    containerRegistryAuthId: Type.Optional(Type.String({ maxLength: 200 })),
    networkVolumeId: Type.Optional(Type.String({ maxLength: 200 })),
    // Accepted for compatibility, no effect.
    cloudType: Type.Optional(Type.String({ maxLength: 64 })),
    dataCenterId: Type.Optional(Type.String({ maxLength: 200 })),
    countryCode: Type.Optional(Type.String({ maxLength: 64 })),
    minVcpuCount: Type.Optional(Type.Integer()),
    minMemoryInGb: Type.Optional(Type.Integer()),
    startSsh: Type.Optional(Type.Boolean()),
    startJupyter: Type.Optional(Type.Boolean()),
    supportPublicIp: Type.Optional(Type.Boolean()),
    // A GPU pod's CUDA constraint; CPU pods ignore it.
    allowedCudaVersions: Type.Optional(Type.Array(CudaVersionSchema, { maxItems: 32 })),
    /** REST's gpu.minCudaVersion (GraphQL's input has no such field). */
    minCudaVersion: Type.Optional(CudaVersionSchema),
    minDownload: Type.Optional(Type.Integer()),
    minUpload: Type.Optional(Type.Integer()),
  },
  { additionalProperties: false },
);
export type PodDeployInput = Static<typeof PodDeployInputSchema>;

/**
 * `deployCpuPod` input (the hosted service's CPU pods): a pod without GPUs. `instanceId` names a CPU
 * size (`cpu3c-2-4`), checked and not enforced, like a GPU pod's `minVcpuCount`: Gantry does not
 * limit a pod's CPUs or memory.
 */
export const CpuPodDeployInputSchema = Type.Object(
  {
    name: PodDeployInputSchema.properties.name,
    imageName: PodDeployInputSchema.properties.imageName,
    templateId: PodDeployInputSchema.properties.templateId,
    instanceId: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
    dockerArgs: PodDeployInputSchema.properties.dockerArgs,
    containerDiskInGb: PodDeployInputSchema.properties.containerDiskInGb,
    volumeInGb: PodDeployInputSchema.properties.volumeInGb,
    volumeMountPath: PodDeployInputSchema.properties.volumeMountPath,
    env: PodDeployInputSchema.properties.env,
    ports: PodDeployInputSchema.properties.ports,
    containerRegistryAuthId: PodDeployInputSchema.properties.containerRegistryAuthId,
    networkVolumeId: PodDeployInputSchema.properties.networkVolumeId,
    cloudType: PodDeployInputSchema.properties.cloudType,
    dataCenterId: PodDeployInputSchema.properties.dataCenterId,
    countryCode: PodDeployInputSchema.properties.countryCode,
    startSsh: PodDeployInputSchema.properties.startSsh,
    startJupyter: PodDeployInputSchema.properties.startJupyter,
    minDownload: PodDeployInputSchema.properties.minDownload,
    minUpload: PodDeployInputSchema.properties.minUpload,
  },
  { additionalProperties: false },
);

/**
 * The hosted service's public base template that its Python client names for every CPU pod left
 * without one. Gantry has no public templates: beside an `imageName` it means no template.
 */
export const HOSTED_CPU_BASE_TEMPLATE = 'runpod-ubuntu';

export const PodIdInputSchema = Type.Object({ podId: Type.String({ minLength: 1 }) }, { additionalProperties: false });
export const PodResumeInputSchema = Type.Object(
  { podId: Type.String({ minLength: 1 }), gpuCount: Type.Optional(Type.Integer({ minimum: 0, maximum: 64 })) },
  { additionalProperties: false },
);

/** A pod's `ports` string (`8888/http,22/tcp`) as entries, in order: the order its host ports are handed out in. */
export const podPorts = (ports: string): Array<{ port: number; protocol: 'http' | 'tcp' | 'udp' }> =>
  ports
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean)
    .map((entry) => {
      const [port = '', protocol = 'tcp'] = entry.split('/');
      return { port: Number(port), protocol: protocol === 'http' || protocol === 'udp' ? protocol : 'tcp' };
    });

const RestPortSchema = Type.String({
  pattern: '^[0-9]{1,5}/(http|tcp|udp)$',
  maxLength: 11,
  description: '`port/protocol`, e.g. `8888/http`',
});
const RestPortsSchema = Type.Array(RestPortSchema, {
  maxItems: MAX_PORTS,
  description: `exposed ports, each published on a host port while the pod runs; at most ${MAX_PORTS}`,
});
const RestDiskSchema = Type.Integer({
  minimum: 1,
  maximum: 4096,
  description: 'container disk in GB (ephemeral: a new container starts empty)',
});
const RestRegistrySchema = Type.Union([Type.String({ minLength: 1, maxLength: 200 }), Type.Null()], {
  description: 'registry credential id, for private images',
});
const RestPersistentMountSchema = Type.Object(
  {
    size: Type.Integer({
      minimum: 1,
      maximum: 4096,
      description: 'GB (not enforced: volume quotas need XFS project quotas on the host)',
    }),
    path: MountPathSchema,
  },
  {
    additionalProperties: false,
    description:
      "a volume on the pod's host that survives stop, start and a replaced container; the pod stays on that host",
  },
);
const RestNetworkMountSchema = Type.Object(
  {
    volumeId: Type.String({ minLength: 1, maxLength: 200, description: 'a network volume of the account' }),
    path: MountPathSchema,
  },
  { additionalProperties: false },
);
const RestMountsSchema = Type.Object(
  {
    persistent: Type.Optional(RestPersistentMountSchema),
    network: Type.Optional(
      Type.Array(RestNetworkMountSchema, { maxItems: 1, description: 'at most one network volume' }),
    ),
  },
  { additionalProperties: false, description: 'at most one of `persistent` and `network`' },
);

export const CreatePodBodySchema = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 191, description: 'unique within the account' }),
    image: Type.Optional(ImageSchema),
    args: Type.Optional(ArgsSchema),
    disk: Type.Optional(RestDiskSchema),
    ports: Type.Optional(RestPortsSchema),
    env: Type.Optional(EnvSchema),
    registry: Type.Optional(RestRegistrySchema),
    templateId: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 200,
        description:
          "a template of the account whose container settings fill what the body leaves out (`env` merged per key, the body's values winning)",
      }),
    ),
    gpu: Type.Optional(
      Type.Object(
        {
          id: Type.String({ minLength: 1, maxLength: 191, description: 'GPU type (GET /v2/catalog/gpus)' }),
          count: Type.Optional(Type.Integer({ minimum: 1, maximum: 64, description: 'GPUs on one host; default 1' })),
          allowedCudaVersions: Type.Optional(Type.Array(CudaVersionSchema, { maxItems: 64 })),
          minCudaVersion: Type.Optional(CudaVersionSchema),
        },
        { additionalProperties: false, description: 'a GPU pod: give exactly one of `gpu` and `cpu`' },
      ),
    ),
    cpu: Type.Optional(
      Type.Object(
        { id: Type.String({ minLength: 1, maxLength: 64 }), vcpuCount: Type.Integer({ minimum: 2, maximum: 1024 }) },
        {
          additionalProperties: false,
          description: 'a CPU pod (no GPU); the flavor and vCPU count are accepted and have no effect',
        },
      ),
    ),
    mounts: Type.Optional(RestMountsSchema),
    dataCenterIds: Type.Optional(
      Type.Array(Type.String({ minLength: 1, maxLength: 200 }), { maxItems: 64, description: 'accepted, no effect' }),
    ),
    cloud: Type.Optional(
      Type.Union([Type.Literal('SECURE'), Type.Literal('COMMUNITY')], { description: 'accepted, no effect' }),
    ),
    globalNetworking: Type.Optional(Type.Boolean({ description: 'accepted, no effect' })),
    startSsh: Type.Optional(Type.Boolean({ description: 'accepted, no effect' })),
    startJupyter: Type.Optional(Type.Boolean({ description: 'accepted, no effect' })),
  },
  { additionalProperties: false },
);

export const UpdatePodBodySchema = Type.Object(
  {
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 191 })),
    image: Type.Optional(ImageSchema),
    args: Type.Optional(ArgsSchema),
    disk: Type.Optional(RestDiskSchema),
    ports: Type.Optional(RestPortsSchema),
    env: Type.Optional(EnvSchema),
    registry: Type.Optional(RestRegistrySchema),
    templateId: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 200,
        description:
          "a template whose container settings apply as if given here (not its mounts); the body's fields win, `env` merged per key",
      }),
    ),
    mounts: Type.Optional(RestMountsSchema),
    locked: Type.Optional(Type.Boolean({ description: 'accepted, no effect' })),
    globalNetworking: Type.Optional(Type.Boolean({ description: 'accepted, no effect' })),
  },
  { additionalProperties: false },
);

export const PodActionNameSchema = Type.Union([
  Type.Literal('start'),
  Type.Literal('stop'),
  Type.Literal('restart'),
  Type.Literal('terminate'),
]);
export const PodActionBodySchema = Type.Object({ action: PodActionNameSchema }, { additionalProperties: false });
export type PodActionName = Static<typeof PodActionNameSchema>;
export const PodStatusSchema = Type.Union(
  [
    Type.Literal('PROVISIONING'),
    Type.Literal('STARTING'),
    Type.Literal('RUNNING'),
    Type.Literal('EXITED'),
    Type.Literal('ERROR'),
    Type.Literal('TERMINATED'),
  ],
  {
    description:
      'PROVISIONING (waiting for a host), STARTING (image pull, container start), RUNNING (container up), EXITED (stopped)',
  },
);
export type PodStatus = Static<typeof PodStatusSchema>;
