import { FLASHBOOT_DESCRIPTION } from '../../domain/endpoints/index.ts';

/** The GraphQL schema (docs/graphql.md): the hosted service's names, Gantry's data. */
export const typeDefs = /* GraphQL */ `
  # @deprecated at its classic locations. graphql-js 16.13 and later also declare it on
  # DIRECTIVE_DEFINITION, which clients built on graphql-core 3.2 (the hosted service's Python tools)
  # do not know: their build_client_schema refuses the whole introspection. Declared here, it
  # replaces the built-in one; Gantry deprecates nothing on directives.
  directive @deprecated(
    reason: String = "No longer supported"
  ) on FIELD_DEFINITION | ARGUMENT_DEFINITION | INPUT_FIELD_DEFINITION | ENUM_VALUE

  "${FLASHBOOT_DESCRIPTION}"
  enum FlashBootType {
    OFF
    FLASHBOOT
    PRIORITY_FLASHBOOT
  }

  enum PodDesiredStatus {
    RUNNING
    EXITED
    TERMINATED
  }

  type ServerlessDiscount {
    discountFactor: Float!
    type: String!
    expirationDate: String
  }

  type PodRuntimePort {
    ip: String
    isIpPublic: Boolean!
    privatePort: Int!
    publicPort: Int!
    "http, tcp or udp"
    type: String!
  }

  type PodRuntimeGpu {
    id: String!
  }

  type PodRuntime {
    uptimeInSeconds: Int!
    ports: [PodRuntimePort!]!
    gpus: [PodRuntimeGpu!]!
  }

  type PodMachine {
    "the pod's current worker"
    podHostId: String
    gpuDisplayName: String
    gpuTypeId: String
    "the host's data center"
    location: String
  }

  "A worker of an endpoint (id, desiredStatus, lastStatusChange, machineId), or a pod (every field)."
  type Pod {
    id: String!
    desiredStatus: PodDesiredStatus!
    "Gantry: an endpoint worker's state, as the REST worker list names it (RUNNING, IDLE, INITIALIZING, THROTTLED, UNHEALTHY, or STANDBY: frozen on its host by FlashBoot until work comes); null for a pod."
    workerStatus: String
    lastStatusChange: String
    imageName: String
    machineId: String
    name: String
    dockerArgs: String
    "KEY=VALUE strings"
    env: [String!]
    ports: String
    gpuCount: Int
    gpuTypeId: String
    containerDiskInGb: Int
    volumeInGb: Int
    volumeMountPath: String
    templateId: String
    containerRegistryAuthId: String
    costPerHr: Float
    uptimeSeconds: Int
    "Not limited by Gantry: null."
    vcpuCount: Float
    "Not limited by Gantry: null."
    memoryInGb: Float
    machine: PodMachine
    "Null while the pod's container is not running."
    runtime: PodRuntime
    "The running container's id on its host; null while none runs."
    dockerId: String
    "RESERVED: every pod is on demand; none is interruptible."
    podType: String!
    "The hosted service's old single-port field: always null (ports lists them)."
    port: Int
    "An endpoint's worker: why it waits (placement's reason while no host has room, or none ever could) or what it starts with; null once ready, and for pods."
    statusReason: String
    "An endpoint's worker: since when its host has had the worker's image for this account (ISO 8601; pulled with the account's credential, or built there); null until Gantry has put it there, and for pods."
    imageOnHostSince: String
    "An endpoint's worker: true when a pre-pull put its image on the host ahead of any worker (GANTRY_PREPULL_HOSTS), so its cold start paid no pull; null for pods."
    imagePulledAhead: Boolean
  }

  type Endpoint {
    id: String!
    name: String!
    "GPU pools in order of preference, comma-separated; empty for a CPU endpoint."
    gpuIds: String!
    "GPUs per worker; 0 for a CPU endpoint."
    gpuCount: Int!
    "A CPU endpoint's instance (<flavor>-<vCPUs>-<memory GB>, e.g. cpu3c-2-4); empty for a GPU endpoint."
    instanceIds: [String!]!
    idleTimeout: Int!
    locations: String
    networkVolumeId: String
    flashBootType: FlashBootType!
    scalerType: String!
    scalerValue: Float!
    templateId: String
    type: String!
    workersMax: Int!
    workersMin: Int!
    executionTimeoutMs: Int!
    pods: [Pod!]!
    "CUDA versions the GPU workers may run under, comma-separated; empty: any. Placement keeps workers to hosts whose CUDA version (nvidia-smi's, major.minor) is one of them."
    allowedCudaVersions: String!
    "The owning account."
    userId: String!
    "The release new workers run."
    version: Int!
    env: [EnvironmentVariable!]!
    createdAt: String!
    networkVolume: NetworkVolume
    "No per-endpoint AI keys here: null."
    aiKey: String
    "No standby pool here: null."
    workersStandby: Int
    "The volumes it mounts, each with its data center."
    networkVolumeIds: [EndpointNetworkVolume!]!
    "The app environment it belongs to (made by flash with flashEnvironmentId, or by gantry deploy)."
    flashEnvironmentId: String
    "The build its environment runs; null outside an app environment."
    activeBuildid: String
    "The oldest CUDA version (major.minor) of a host its GPU workers may run on; null: any."
    minCudaVersion: String
    "No pre-warmed FlashBoot pool here: null."
    workersPFBTarget: Int
    "No IDE pods here: null."
    idePodId: String
    "Why no worker of the current release can run right now; null once one is IDLE or RUNNING (docs/endpoints.md)."
    workerProblem: WorkerProblem
  }

  "Why no worker of an endpoint's current release can run right now."
  type WorkerProblem {
    "image (its image could not be pulled or built), start (its container exited or never became ready) or placement (no READY host could take it, even empty)."
    kind: String!
    "What went wrong, as the worker recorded it."
    reason: String!
    "The worker it happened to."
    workerId: String
    "When (ISO 8601): the failed worker stopped, or the waiting worker was made."
    since: String!
  }

  type EndpointNetworkVolume {
    networkVolumeId: String!
    dataCenterId: String!
  }

  type NetworkVolume {
    id: String!
    name: String!
    "GB"
    size: Int!
    dataCenterId: String!
  }

  type EnvironmentVariable {
    key: String!
    value: String!
  }

  type PodTemplate {
    id: String!
    name: String!
    imageName: String!
    dockerArgs: String!
    containerDiskInGb: Int!
    volumeInGb: Int!
    volumeMountPath: String!
    env: [EnvironmentVariable!]!
    ports: String!
    isServerless: Boolean!
    isPublic: Boolean!
    readme: String!
    containerRegistryAuthId: String
    "A pod's GPU type when its input names none; null: none named."
    gpuTypeId: String
    "A pod's GPU count when its input names none; null: the pod's own default (1)."
    gpuCount: Int
  }

  "Every type of the serverless pools, and any other type a READY host has; a type no READY host has is listed with no stock (secureCloud false, counts 0, no uninterruptablePrice or stockStatus)."
  type GpuType {
    id: String!
    displayName: String!
    memoryInGb: Int!
    pool: String
    "Whether a READY host has the type."
    secureCloud: Boolean!
    communityCloud: Boolean!
    securePrice: Float
    serverlessPrice: Float
    maxGpuCount: Int!
    totalCount: Int!
    availableCount: Int!
    "Nvidia: hosts report their GPUs through nvidia-smi."
    manufacturer: String!
    "Not known here: null."
    cudaCores: Int
    "The price per GPU per hour where the type is offered as community cloud, else null."
    communityPrice: Float
    "No reserved terms, spot or bid offers here: null."
    oneWeekPrice: Float
    oneMonthPrice: Float
    threeMonthPrice: Float
    communitySpotPrice: Float
    secureSpotPrice: Float
    "The on-demand price of gpuCount GPUs per hour (minimumBidPrice: no bids here, null)."
    lowestPrice(input: GpuLowestPriceInput): GpuLowestPrice!
  }

  input GpuTypeFilter {
    id: String
    "Any of these (the hosted deploy tool's form)."
    ids: [String!]
  }

  input GpuLowestPriceInput {
    gpuCount: Int
    "stockStatus in this data center alone."
    dataCenterId: String
    "Accepted, no effect: one cloud, no AI API offers, no compliance tiers; allowedCudaVersions does not narrow stockStatus (placement applies an endpoint's or pod's own)."
    secureCloud: Boolean
    includeAiApi: Boolean
    allowedCudaVersions: [String]
    compliance: [String]
  }

  type GpuLowestPrice {
    minimumBidPrice: Float
    "securePrice times gpuCount; null where no READY host has the type."
    uninterruptablePrice: Float
    "High, Medium or Low: gpuCount GPUs free together on one READY host (of dataCenterId), by the share free; null: none."
    stockStatus: String
  }

  type ContainerRegistryAuth {
    id: String!
    name: String!
    "The registry host the credential is bound to: images elsewhere cannot use it. Null: not bound yet (made before binding existed); refused until updateRegistryAuth gives the registry with the login."
    registry: String
  }

  type User {
    id: String!
    email: String
    "SSH public keys, one a line (updateUserSettings); every pod's container gets them as PUBLIC_KEY (unless its env sets its own)."
    pubKey: String
    networkVolumes: [NetworkVolume!]!
    endpoints: [Endpoint!]!
    podTemplates: [PodTemplate!]!
    containerRegistryCreds: [ContainerRegistryAuth!]!
    serverlessDiscount: ServerlessDiscount
    pods: [Pod!]!
  }

  "The container configuration inline (the flash tool's form): kept as a template of that name, made or changed."
  input EndpointTemplateInput {
    name: String!
    imageName: String!
    dockerArgs: String
    containerDiskInGb: Int
    volumeInGb: Int
    volumeMountPath: String
    env: [EnvironmentVariableInput!]
    ports: String
    containerRegistryAuthId: String
    "false only: the image runs as it is."
    advancedStart: Boolean
    "Empty only: the image's own command runs."
    startScript: String
    "{} only."
    config: JSON
  }

  input EndpointInput {
    id: String
    name: String!
    "Or template, inline."
    templateId: String
    template: EndpointTemplateInput
    "An app environment of the caller's (not one running a gantry deploy build): the endpoint becomes its endpoint for resource = name."
    flashEnvironmentId: String
    "CUDA major.minor: GPU workers run only on hosts whose CUDA version is this or later."
    minCudaVersion: String
    "Accepted, no effect: no pre-warmed FlashBoot pool here."
    workersPFBTarget: Int
    "GPU pools in order of preference, comma-separated (a leading - excludes one); empty for a CPU endpoint."
    gpuIds: String
    "A CPU endpoint: one CPU instance, <flavor>-<vCPUs>-<memory GB> (cpu3c-2-4; vCPUs a power of two >= 2, memory as the flavor gives per vCPU)."
    instanceIds: [String!]
    gpuCount: Int
    type: String
    idleTimeout: Int
    "Countries (ISO 3166-1 alpha-2, comma-separated) whose data centers may run the workers; empty: anywhere."
    locations: String
    flashBootType: FlashBootType
    scalerType: String
    scalerValue: Float
    workersMin: Int
    workersMax: Int
    "Mounted at /runpod-volume in every worker (the hosted service's serverless path), whatever the template's volumeMountPath says."
    networkVolumeId: String
    executionTimeoutMs: Int
    "CUDA versions, comma-separated (12.4,12.6); empty: any. GPU workers run only on hosts whose CUDA version (major.minor) is one of them."
    allowedCudaVersions: String
  }

  input UpdateEndpointTemplateInput {
    endpointId: String!
    templateId: String!
  }

  input UserSettingsInput {
    "SSH public keys in OpenSSH form, one a line (at most 32); empty removes them."
    pubKey: String!
  }

  input EnvironmentVariableInput {
    key: String!
    value: String!
  }

  input SaveTemplateInput {
    id: String
    name: String!
    imageName: String!
    dockerArgs: String
    containerDiskInGb: Int
    volumeInGb: Int
    "Where a pod mounts its volume or network volume (default /workspace). Endpoint workers mount their network volume at /runpod-volume, whatever this says."
    volumeMountPath: String
    env: [EnvironmentVariableInput!]
    ports: String
    isServerless: Boolean
    readme: String
    containerRegistryAuthId: String
    "GPU type a pod deployed from this template gets when its input names none (the gpuTypes query lists them); empty clears it."
    gpuTypeId: String
    "GPUs per pod a pod deployed from this template gets when its input names none (0: a CPU pod)."
    gpuCount: Int
    "Accepted, no effect: SSH start-up is the image's business."
    startSsh: Boolean
    "Only false: an account's templates are its own."
    isPublic: Boolean
  }

  "The spec's common input fields plus templateId; the hosted service's other options are accepted and have no effect."
  input PodFindAndDeployOnDemandInput {
    name: String
    imageName: String
    templateId: String
    dockerArgs: String
    containerDiskInGb: Int
    volumeInGb: Int
    volumeMountPath: String
    env: [EnvironmentVariableInput!]
    ports: String
    gpuTypeId: String
    gpuCount: Int
    containerRegistryAuthId: String
    networkVolumeId: String
    cloudType: CloudTypeEnum
    dataCenterId: String
    countryCode: String
    minVcpuCount: Int
    minMemoryInGb: Int
    startSsh: Boolean
    startJupyter: Boolean
    supportPublicIp: Boolean
    "A GPU pod runs only on a host whose CUDA version (nvidia-smi's, major.minor) is one of these; empty: any; CPU pods ignore it."
    allowedCudaVersions: [String!]
    minDownload: Int
    minUpload: Int
  }

  "A pod without GPUs. instanceId (cpu3c-2-4) is checked, not enforced: pods' CPUs and memory are not limited. templateId runpod-ubuntu (the hosted service's public base, which its Python client names by default) beside an imageName means no template."
  input DeployCpuPodInput {
    name: String
    imageName: String
    templateId: String
    instanceId: String
    dockerArgs: String
    containerDiskInGb: Int
    volumeInGb: Int
    volumeMountPath: String
    env: [EnvironmentVariableInput!]
    ports: String
    containerRegistryAuthId: String
    networkVolumeId: String
    cloudType: CloudTypeEnum
    dataCenterId: String
    countryCode: String
    startSsh: Boolean
    startJupyter: Boolean
    minDownload: Int
    minUpload: Int
  }

  enum CloudTypeEnum {
    ALL
    SECURE
    COMMUNITY
  }

  input PodFilter {
    podId: String!
  }

  input PodStopInput {
    podId: String!
  }

  input PodResumeInput {
    podId: String!
    gpuCount: Int
  }

  input PodTerminateInput {
    podId: String!
  }

  input SaveRegistryAuthInput {
    name: String!
    username: String!
    password: String!
    "Registry host (default: the name when it is a host such as ghcr.io, else docker.io)."
    registry: String
  }

  input UpdateRegistryAuthInput {
    id: String!
    username: String!
    password: String!
    "Registry host to bind the credential to (default: unchanged). Moving or binding it takes the whole login again."
    registry: String
  }

  "A public model: a queue-based endpoint the operator published under a model id, called by any account with the job API at {runUrl}/run."
  type PublicEndpoint {
    id: String!
    name: String!
    description: String!
    "image, video, audio or json"
    outputKind: String!
    "JSON Schema of the job input, as JSON text."
    inputSchema: String!
    price: PublicEndpointPrice!
    runUrl: String!
    "The endpoint behind the model: shown to the operator only."
    endpointId: String
    createdAt: String!
    updatedAt: String!
  }

  type PublicEndpointPrice {
    "USD per unit"
    amount: Float!
    "call, megapixel (of the images returned) or second (of the video or audio returned)"
    unit: String!
  }

  input PublicEndpointPriceInput {
    amount: Float!
    unit: String!
  }

  input PublishPublicEndpointInput {
    "Lowercase letters and digits in groups joined by '-' (at least one '-'), 3-64 characters."
    id: String!
    endpointId: String!
    name: String!
    description: String
    outputKind: String!
    "JSON Schema of the job input (an object schema), as JSON text."
    inputSchema: String!
    price: PublicEndpointPriceInput!
  }

  input UpdatePublicEndpointInput {
    name: String
    description: String
    outputKind: String
    inputSchema: String
    price: PublicEndpointPriceInput
  }

  type Query {
    myself: User!
    "The public models (any key with the read or run scope)."
    publicEndpoints: [PublicEndpoint!]!
    publicEndpoint(id: String!): PublicEndpoint
    "The GPU types of the registered hosts; input.id: that one only."
    gpuTypes(input: GpuTypeFilter): [GpuType!]!
    "One of the caller's pods."
    pod(input: PodFilter!): Pod
    "One of the caller's templates; null when it has none of that id."
    podTemplate(id: String!): PodTemplate
  }

  type Mutation {
    "Publishes a queue-based endpoint as a public model (the platform operator's: an ADMIN key of the administrator account)."
    publishPublicEndpoint(input: PublishPublicEndpointInput!): PublicEndpoint!
    updatePublicEndpoint(id: String!, input: UpdatePublicEndpointInput!): PublicEndpoint!
    "Unpublishes the model (the endpoint stays); answers true."
    unpublishPublicEndpoint(id: String!): Boolean
    "Creates an endpoint (no id) or changes one. An endpoint of a flash environment whose template names one of flash's images runs Gantry's flash runtime: when no READY host can get that runtime's base image, the save is refused (BAD_USER_INPUT) with the sentence that names the base and the setting that names another."
    saveEndpoint(input: EndpointInput!): Endpoint!
    "The endpoint runs another template of the account's: a new release, rolled out."
    updateEndpointTemplate(input: UpdateEndpointTemplateInput!): Endpoint!
    updateUserSettings(input: UserSettingsInput!): User!
    "Deletes an endpoint whose workersMin and workersMax are both 0; answers null."
    deleteEndpoint(id: String!): Boolean
    "input is required; declared nullable because the hosted deploy tool declares its variable so."
    saveTemplate(input: SaveTemplateInput): PodTemplate!
    "Deletes the named template of the caller's account; answers null."
    deleteTemplate(templateName: String!): Boolean
    saveRegistryAuth(input: SaveRegistryAuthInput!): ContainerRegistryAuth!
    updateRegistryAuth(input: UpdateRegistryAuthInput!): ContainerRegistryAuth!
    "Answers null."
    deleteRegistryAuth(registryAuthId: String!): Boolean
    "Creates a pod and starts its container; answers once the pod is recorded (its container starts after)."
    podFindAndDeployOnDemand(input: PodFindAndDeployOnDemandInput!): Pod
    "Creates a pod without GPUs; answers once it is recorded."
    deployCpuPod(input: DeployCpuPodInput!): Pod
    "Removes the pod's container; the pod stays, EXITED."
    podStop(input: PodStopInput!): Pod
    "Runs the pod again (a new container), optionally with another GPU count."
    podResume(input: PodResumeInput!): Pod
    "Removes the pod and its container; answers null."
    podTerminate(input: PodTerminateInput!): Boolean
  }
`;
