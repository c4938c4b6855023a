/**
 * What a type's resolvers get as their parent, where that is not the GraphQL type itself: the type
 * without the fields its own resolvers compute (./resolvers.ts, ./resolvers-flash.ts). Named as
 * codegen's mappers in ./codegen.ts, so a resolver returning one of these is checked against it.
 */
import type { CpuFlavor, FlashApp, FlashDeployment, FlashEnvironment, GpuType, User } from './generated-types.ts';

/** A User as its resolvers get it (./shapes/user.ts): an account's own fields; the lists are User's resolvers'. */
export type UserParent = Omit<
  User,
  'endpoint' | 'endpoints' | 'flashApps' | 'containerRegistryCreds' | 'networkVolumes' | 'podTemplates' | 'pods'
>;

/** A gpuTypes entry (./shapes/gpu-type.ts): lowestPrice is computed per request (its input). */
export type GpuTypeParent = Omit<GpuType, 'lowestPrice'>;

export type FlashEnvironmentParent = Omit<FlashEnvironment, 'networkVolumes'>;

export type FlashAppParent = Omit<FlashApp, 'flashBuilds' | 'flashEnvironments'> & {
  flashEnvironments: FlashEnvironmentParent[];
};

export type FlashDeploymentParent = Omit<FlashDeployment, 'activeArtifact'>;

export type CpuFlavorParent = Omit<CpuFlavor, 'specifics'>;
