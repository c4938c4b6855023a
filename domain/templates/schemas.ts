import { Type, type Static } from 'typebox';
import { ArgsSchema, EnvListSchema, EnvSchema, ImageSchema, MountPathSchema } from '../containers/fields.ts';

/** The shapes of templates: REST /v2/templates bodies and views, GraphQL `saveTemplate` input and record. */

const PortSchema = Type.String({
  pattern: '^[0-9]{1,5}/(http|tcp|udp)$',
  maxLength: 11,
  description: '`port/protocol`, e.g. `8000/http`',
});

// No comma: the path goes into the runtime's `--mount type=volume,...,target=<path>` list.

const PersistentMountSchema = Type.Object(
  {
    size: Type.Integer({ minimum: 1, maximum: 4096, description: 'host-local persistent volume in GB' }),
    path: MountPathSchema,
  },
  { additionalProperties: false },
);

const templateBodyFields = {
  image: ImageSchema,
  args: ArgsSchema,
  disk: Type.Integer({ minimum: 1, maximum: 4096, description: 'container disk in GB (ephemeral)' }),
  ports: Type.Array(PortSchema, { maxItems: 64 }),
  env: EnvSchema,
  registry: Type.Union([Type.String({ minLength: 1, maxLength: 200 }), Type.Null()], {
    description: 'registry credential id, for private images',
  }),
  serverless: Type.Boolean({ description: 'for serverless workers (true) or pods (false)' }),
  readme: Type.String({ maxLength: 65536 }),
};

export const CreateTemplateSchema = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 191, description: 'unique within the account' }),
    image: templateBodyFields.image,
    args: Type.Optional(templateBodyFields.args),
    disk: Type.Optional(templateBodyFields.disk),
    ports: Type.Optional(templateBodyFields.ports),
    env: Type.Optional(templateBodyFields.env),
    registry: Type.Optional(templateBodyFields.registry),
    mounts: Type.Optional(
      Type.Object(
        { persistent: Type.Optional(PersistentMountSchema) },
        { additionalProperties: false, description: 'a host-local persistent volume (pod templates only)' },
      ),
    ),
    serverless: Type.Optional(templateBodyFields.serverless),
    readme: Type.Optional(templateBodyFields.readme),
  },
  { additionalProperties: false },
);

export const UpdateTemplateSchema = Type.Object(
  {
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 191 })),
    image: Type.Optional(templateBodyFields.image),
    args: Type.Optional(templateBodyFields.args),
    disk: Type.Optional(templateBodyFields.disk),
    ports: Type.Optional(templateBodyFields.ports),
    env: Type.Optional(templateBodyFields.env),
    registry: Type.Optional(templateBodyFields.registry),
    mounts: Type.Optional(
      Type.Object(
        { persistent: Type.Optional(Type.Union([PersistentMountSchema, Type.Null()])) },
        { additionalProperties: false, description: 'omitted or `{}` keeps the mount; `persistent: null` removes it' },
      ),
    ),
    serverless: Type.Optional(templateBodyFields.serverless),
    readme: Type.Optional(templateBodyFields.readme),
  },
  { additionalProperties: false },
);

/** `saveTemplate` input: with `id` it changes that template (fields left out keep their values), without it creates one. */
export const SaveTemplateInputSchema = Type.Object(
  {
    id: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    name: Type.String({ minLength: 1, maxLength: 191 }),
    imageName: templateBodyFields.image,
    dockerArgs: Type.Optional(templateBodyFields.args),
    containerDiskInGb: Type.Optional(templateBodyFields.disk),
    volumeInGb: Type.Optional(Type.Integer({ minimum: 0, maximum: 4096 })),
    volumeMountPath: Type.Optional(MountPathSchema),
    env: Type.Optional(EnvListSchema),
    ports: Type.Optional(Type.String({ maxLength: 1024, description: 'comma-separated `port/protocol` entries' })),
    isServerless: Type.Optional(Type.Boolean()),
    readme: Type.Optional(templateBodyFields.readme),
    containerRegistryAuthId: Type.Optional(Type.Union([Type.String({ maxLength: 200 }), Type.Null()])),
    // The hosted API's common input fields of pods and templates: a pod deployed from the template without
    // its own gpuTypeId or gpuCount takes these. An empty gpuTypeId clears it.
    gpuTypeId: Type.Optional(
      Type.String({ maxLength: 191, description: 'GPU type (the gpuTypes query lists them); empty: none' }),
    ),
    gpuCount: Type.Optional(Type.Integer({ minimum: 0, maximum: 64, description: 'GPUs per pod; 0: a CPU pod' })),
    // The hosted service's Python client sends both on every template. Accepted: SSH start-up is the
    // image's own business here; a public template (shared with every account) is refused.
    startSsh: Type.Optional(Type.Boolean()),
    isPublic: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);
export type SaveTemplateInput = Static<typeof SaveTemplateInputSchema>;
