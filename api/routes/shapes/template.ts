import { Type, type Static } from 'typebox';
import type { Template } from '../../../generated/prisma/client.ts';
import { portList } from '../../../domain/templates/index.ts';

/** A template in REST v2 (`/v2/templates`): the container fields under the names endpoints and pods share. */
export const TemplateSchema = Type.Object({
  id: Type.String(),
  name: Type.String(),
  image: Type.String(),
  args: Type.String(),
  disk: Type.Integer(),
  mounts: Type.Object({ persistent: Type.Optional(Type.Object({ size: Type.Integer(), path: Type.String() })) }),
  ports: Type.Array(Type.String()),
  env: Type.Record(Type.String(), Type.String()),
  registry: Type.Union([Type.String(), Type.Null()]),
  serverless: Type.Boolean(),
  public: Type.Boolean({ description: 'always false: templates are private to their account' }),
  readme: Type.String(),
  createdAt: Type.String({ format: 'date-time' }),
  updatedAt: Type.String({ format: 'date-time' }),
});
export const TemplateListSchema = Type.Object({ templates: Type.Array(TemplateSchema) });

export function templateView(t: Template): Static<typeof TemplateSchema> {
  return {
    id: t.id,
    name: t.name,
    image: t.imageName,
    args: t.dockerArgs,
    disk: t.containerDiskInGb,
    mounts: t.volumeInGb > 0 ? { persistent: { size: t.volumeInGb, path: t.volumeMountPath } } : {},
    ports: portList(t.ports),
    env: t.env as Record<string, string>,
    registry: t.registryId,
    serverless: t.isServerless,
    public: false,
    readme: t.readme,
    createdAt: t.createdAt.toISOString(),
    updatedAt: t.updatedAt.toISOString(),
  };
}
