/**
 * Apps, environments and builds over GraphQL (docs/graphql.md "flash"): the operations of the hosted
 * service's `flash` tool and of gantry deploy's records, merged into the schema of ./schema.ts.
 */
export const flashTypeDefs = /* GraphQL */ `
  "Any JSON value: build manifests travel as JSON objects."
  scalar JSON

  type FlashApp {
    id: String!
    name: String!
    createdAt: String!
    flashEnvironments: [FlashEnvironment!]!
    "Newest first."
    flashBuilds: [FlashBuild!]!
  }

  type FlashEnvironment {
    id: String!
    name: String!
    createdAt: String!
    "The build every endpoint of the environment runs; null before the first deployment."
    activeBuildId: String
    "PENDING (nothing deployed yet), DEPLOYING, DEPLOYED or FAILED (the last deployment failed; activeBuildId still runs)."
    state: String!
    endpoints: [FlashEndpoint!]!
    "The network volumes the environment's endpoints mount."
    networkVolumes: [NetworkVolume!]!
  }

  type FlashEndpoint {
    resource: String!
    id: String!
    name: String!
    type: String!
    "Queue-based: {run_url}/v2/{id}; load-balanced: the base URL of its routes."
    url: String!
  }

  type FlashArtifactUpload {
    buildId: String!
    "PUT the artifact bytes here; the URL is the credential."
    uploadUrl: String!
    "The build's id: finalizeFlashArtifactUpload takes it back."
    objectKey: String!
    expiresAt: String!
  }

  type FlashBuild {
    id: String!
    "The key prepareFlashArtifactUpload answered for it: the build's id."
    objectKey: String!
    createdAt: String!
    "GANTRY (gantry deploy) or FLASH (the flash tool)."
    kind: String!
    "Null only while a flash build is uploading: Gantry computes it at finalize."
    sha256: String
    size: Float!
    "UPLOADING or READY."
    status: String!
    pythonVersion: String
    "The manifest as last sent: gantry deploy's at prepare, flash's at finalize or updateFlashBuildManifest."
    manifest: JSON
  }

  type FlashArtifact {
    "The build's id."
    objectKey: String!
    "Signed, valid one hour."
    downloadUrl: String!
    expiresAt: String!
  }

  type FlashDeployment {
    id: String!
    "The deploy workflow's id, deploy:<app>:<env>:<build>; null for a flash build, made active at once (no workflow)."
    name: String
    status: String!
    error: String
    buildId: String!
    "The deployed build's artifact; null when it is gone."
    activeArtifact: FlashArtifact
  }

  type CpuFlavorSpecifics {
    "High, Medium or Low: the share of READY hosts large enough for the instance; null: none is."
    stockStatus: String
  }

  type CpuFlavor {
    id: String!
    displayName: String!
    "GB of memory per vCPU"
    ramGbPerVcpu: Int!
    specifics(input: SpecificsInput): CpuFlavorSpecifics!
  }

  input CpuFlavorInput {
    id: String
  }

  input SpecificsInput {
    "<flavor>-<vCPUs>-<memory GB>, e.g. cpu3c-2-4"
    instanceId: String
    dataCenterId: String
  }

  input CreateFlashAppInput {
    name: String!
    "Also creates this environment."
    environmentName: String
  }

  input CreateFlashEnvironmentInput {
    flashAppId: String!
    name: String!
  }

  "gantry deploy sends sha256 and manifest; flash sends neither (its manifest comes at finalize)."
  input PrepareFlashArtifactUploadInput {
    flashAppId: String!
    "Bytes of the gzip artifact."
    tarballSize: Float!
    sha256: String
    "The artifact's manifest.json, as JSON text."
    manifest: String
  }

  "gantry deploy names the build (buildId); flash names it by objectKey and sends its manifest."
  input FinalizeFlashArtifactUploadInput {
    flashAppId: String!
    buildId: String
    objectKey: String
    manifest: JSON
  }

  input UpdateFlashBuildManifestInput {
    flashBuildId: String!
    "A JSON object of at most 128 KiB."
    manifest: JSON!
  }

  input FlashEnvironmentByNameInput {
    flashAppId: String!
    name: String!
  }

  input DeployBuildToEnvironmentInput {
    flashEnvironmentId: String!
    flashBuildId: String!
  }

  extend type User {
    "Apps made by gantry deploy (REST /v2/apps) or flash."
    flashApps: [FlashApp!]!
    "One of the caller's endpoints; null when it has none of that id."
    endpoint(id: String!): Endpoint
  }

  "A flash login request (flash login): made without a key, decided by a signed-in user."
  type FlashAuthRequest {
    id: String!
    "PENDING, APPROVED, DENIED, EXPIRED or CONSUMED."
    status: String!
    createdAt: String!
    expiresAt: String!
    "The address the request came from."
    requesterIp: String!
    "The new key: on the one poll after the approval, else null."
    apiKey: String
  }

  extend type Query {
    "A flash login request's state; needs no key (the id is the secret). Polled by flash login."
    flashAuthRequestStatus(flashAuthRequestId: String!): FlashAuthRequest!
    "A flash login request, for the approval page (apiKey always null)."
    flashAuthRequest(flashAuthRequestId: String!): FlashAuthRequest!
    "One of the caller's apps, by id or name."
    flashApp(flashAppId: String!): FlashApp
    "One of the caller's apps, by name: a NOT_FOUND error ('app not found') when it has none."
    flashAppByName(flashAppName: String!): FlashApp
    flashDeployment(flashAppId: String!, deploymentId: String!): FlashDeployment
    flashEnvironment(flashEnvironmentId: String!): FlashEnvironment
    flashEnvironmentByName(input: FlashEnvironmentByNameInput!): FlashEnvironment
    flashBuild(flashBuildId: String!): FlashBuild
    "The CPU flavors (input.id: that one only)."
    cpuFlavors(input: CpuFlavorInput): [CpuFlavor!]!
  }

  extend type Mutation {
    "Starts a flash login; needs no key. Open {console}/flash/login?request={id} to decide it."
    createFlashAuthRequest: FlashAuthRequest!
    "Approves a waiting flash login: its first poll then gets a key of the caller's account (the caller's READ, WRITE and RUN scopes, no longer-lived than the caller's key)."
    approveFlashAuthRequest(flashAuthRequestId: String!): FlashAuthRequest!
    denyFlashAuthRequest(flashAuthRequestId: String!): FlashAuthRequest!
    createFlashApp(input: CreateFlashAppInput!): FlashApp!
    createFlashEnvironment(input: CreateFlashEnvironmentInput!): FlashEnvironment!
    prepareFlashArtifactUpload(input: PrepareFlashArtifactUploadInput!): FlashArtifactUpload!
    finalizeFlashArtifactUpload(input: FinalizeFlashArtifactUploadInput!): FlashBuild!
    "Replaces a flash build's manifest (flash records the endpoints it made there)."
    updateFlashBuildManifest(input: UpdateFlashBuildManifestInput!): FlashBuild!
    "A gantry deploy build: starts the deploy workflow (poll flashDeployment). A flash build: made the environment's at once (flash then writes its endpoints with saveEndpoint)."
    deployBuildToEnvironment(input: DeployBuildToEnvironmentInput!): FlashDeployment!
    "Deletes the app, its environments' endpoints and its artifacts; answers true."
    deleteFlashApp(flashAppId: String!): Boolean
    "Deletes the environment and its endpoints; answers true."
    deleteFlashEnvironment(flashEnvironmentId: String!): Boolean
  }
`;
