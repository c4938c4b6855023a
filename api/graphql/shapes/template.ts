import type { Template } from '../../../generated/prisma/client.ts';
import type { PodTemplate } from '../generated-types.ts';

/** GraphQL's `PodTemplate`, from the template's row. */
export function podTemplateNode(t: Template): PodTemplate {
  return {
    id: t.id,
    name: t.name,
    imageName: t.imageName,
    dockerArgs: t.dockerArgs,
    containerDiskInGb: t.containerDiskInGb,
    volumeInGb: t.volumeInGb,
    volumeMountPath: t.volumeMountPath,
    env: Object.entries(t.env as Record<string, string>).map(([key, value]) => ({ key, value })),
    ports: t.ports,
    isServerless: t.isServerless,
    isPublic: false,
    readme: t.readme,
    containerRegistryAuthId: t.registryId,
    gpuTypeId: t.gpuTypeId,
    gpuCount: t.gpuCount,
  };
}
