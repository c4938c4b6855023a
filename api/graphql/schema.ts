/** The GraphQL schema (spec "GraphQL API"): the hosted service's names, Gantry's data. */
export const typeDefs = /* GraphQL */ `
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

  "A worker of an endpoint, or a pod."
  type Pod {
    id: String!
    desiredStatus: PodDesiredStatus!
    lastStatusChange: String
    imageName: String
    machineId: String
  }

  type Endpoint {
    id: String!
    name: String!
    gpuIds: String!
    gpuCount: Int!
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
  }

  type GpuType {
    id: String!
    displayName: String!
    memoryInGb: Int!
    pool: String
    secureCloud: Boolean!
    communityCloud: Boolean!
    securePrice: Float
    serverlessPrice: Float
    maxGpuCount: Int!
    totalCount: Int!
    availableCount: Int!
  }

  type ContainerRegistryAuth {
    id: String!
    name: String!
  }

  type User {
    id: String!
    email: String
    endpoints: [Endpoint!]!
    podTemplates: [PodTemplate!]!
    containerRegistryCreds: [ContainerRegistryAuth!]!
    serverlessDiscount: ServerlessDiscount
  }

  input EndpointInput {
    id: String
    name: String!
    templateId: String!
    gpuIds: String!
    gpuCount: Int
    type: String
    idleTimeout: Int
    locations: String
    flashBootType: FlashBootType
    scalerType: String
    scalerValue: Float
    workersMin: Int
    workersMax: Int
    networkVolumeId: String
    executionTimeoutMs: Int
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
    volumeMountPath: String
    env: [EnvironmentVariableInput!]
    ports: String
    isServerless: Boolean
    readme: String
    containerRegistryAuthId: String
  }

  input SaveRegistryAuthInput {
    name: String!
    username: String!
    password: String!
  }

  input UpdateRegistryAuthInput {
    id: String!
    username: String!
    password: String!
  }

  type Query {
    myself: User!
    gpuTypes: [GpuType!]!
  }

  type Mutation {
    saveEndpoint(input: EndpointInput!): Endpoint!
    "Deletes an endpoint whose workersMin and workersMax are both 0; answers null."
    deleteEndpoint(id: String!): Boolean
    saveTemplate(input: SaveTemplateInput!): PodTemplate!
    "Deletes the named template of the caller's account; answers null."
    deleteTemplate(templateName: String!): Boolean
    saveRegistryAuth(input: SaveRegistryAuthInput!): ContainerRegistryAuth!
    updateRegistryAuth(input: UpdateRegistryAuthInput!): ContainerRegistryAuth!
    "Answers null."
    deleteRegistryAuth(registryAuthId: String!): Boolean
  }
`;
