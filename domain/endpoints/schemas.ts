import { Type, type Static } from 'typebox';
import { ArgsSchema, EnvSchema, ImageSchema } from '../containers/fields.ts';

/** Schemas of the REST Endpoint resource and its sub-objects (docs/endpoints.md, the /v2/openapi.json document). */

export const EndpointTypeSchema = Type.Union([Type.Literal('QUEUE_BASED'), Type.Literal('LOAD_BALANCING')]);
export const ScalerTypeSchema = Type.Union([Type.Literal('QUEUE_DELAY'), Type.Literal('REQUEST_COUNT')]);
/** What FlashBoot does, for the OpenAPI document and the GraphQL schema alike (docs/endpoints.md, "FlashBoot"). */
export const FLASHBOOT_DESCRIPTION =
  'FlashBoot: OFF removes a worker idle past idleTimeout. FLASHBOOT and PRIORITY_FLASHBOOT freeze it on its host instead ' +
  '(STANDBY: its process, memory, loaded model and GPUs kept; no job; not billed), and the next scale-up of the endpoint ' +
  'thaws it in well under a second before it starts any container. At most workers.max standbys per endpoint; a ' +
  'standby serves only its endpoint and release, and a new release, OFF or deleting the endpoint ends it. A worker of ' +
  'any endpoint or account that needs the room evicts standbys: FLASHBOOT ones before PRIORITY_FLASHBOOT ones, the ' +
  'oldest first, never a running or starting worker. A FLASHBOOT standby is removed after flashbootStandbySec ' +
  '(default 3600 s); a PRIORITY_FLASHBOOT one stays until it is evicted or its release ends.';

export const FlashBootSchema = Type.Union(
  [Type.Literal('OFF'), Type.Literal('FLASHBOOT'), Type.Literal('PRIORITY_FLASHBOOT')],
  { description: FLASHBOOT_DESCRIPTION },
);

/** A port 1-65535 and a protocol: anything else is a `--publish` the runtime refuses on every start. */
const Port = Type.String({
  pattern:
    '^(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])/(?:http|tcp|udp)$',
  maxLength: 11,
  description: '`port/protocol` with a port 1-65535, e.g. `8000/http`',
});

/** Lists and ids a tenant writes are bounded: every entry becomes a row value or a command word. */
const MAX_LIST = 64;
const Ref = (description?: string) =>
  Type.String({ minLength: 1, maxLength: 200, ...(description ? { description } : {}) });
const Pools = Type.Array(Ref(), {
  minItems: 1,
  maxItems: MAX_LIST,
  description: 'GPU pool ids from GET /v2/catalog/gpus',
});

export const GpuConfigSchema = Type.Object(
  {
    pools: Pools,
    count: Type.Optional(Type.Integer({ minimum: 1, default: 1 })),
  },
  { additionalProperties: false },
);

export const WorkersSchema = Type.Object(
  { min: Type.Integer({ minimum: 0 }), max: Type.Integer({ minimum: 0 }) },
  { additionalProperties: false },
);

export const ScalingSchema = Type.Object(
  {
    type: ScalerTypeSchema,
    value: Type.Number({ minimum: 0.5 }),
    idleTimeout: Type.Integer({ minimum: 0, description: 'seconds before an idle worker is removed' }),
  },
  { additionalProperties: false },
);

/** The shared container configuration (templates, pods, endpoints): changing it makes a new release. */
const containerFields = {
  image: ImageSchema,
  args: Type.Optional(ArgsSchema),
  disk: Type.Optional(Type.Integer({ minimum: 1, description: 'container disk in GB' })),
  ports: Type.Optional(Type.Array(Port, { maxItems: MAX_LIST })),
  env: Type.Optional(EnvSchema),
  registry: Type.Optional(Type.Union([Ref("registry credential id; its registry must be the image's"), Type.Null()])),
};

export const CreateEndpointSchema = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 191 }),
    type: Type.Optional(EndpointTypeSchema),
    ...containerFields,
    gpu: Type.Optional(GpuConfigSchema),
    // Accepted by the schema so that the refusal is a clear rule, not an "unknown property".
    cpu: Type.Optional(Type.Unknown()),
    workers: Type.Optional(WorkersSchema),
    scaling: Type.Optional(ScalingSchema),
    dataCenterIds: Type.Optional(Type.Array(Ref(), { maxItems: MAX_LIST })),
    networkVolumes: Type.Optional(Type.Array(Ref(), { maxItems: MAX_LIST })),
    timeout: Type.Optional(Type.Integer({ minimum: 1000, description: 'per-request execution timeout, ms' })),
    flashboot: Type.Optional(FlashBootSchema),
  },
  { additionalProperties: false },
);
export type CreateEndpointInput = Static<typeof CreateEndpointSchema>;

/**
 * PATCH /v2/serverless/{id} body: every property optional, unknown ones rejected.
 * `workers` and `scaling` may carry only the members that change; no defaults are filled in, so
 * an omitted member stays as it is (`gpu.count` included).
 */
export const UpdateEndpointSchema = Type.Object(
  {
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 191 })),
    gpu: Type.Optional(
      Type.Object(
        {
          pools: Pools,
          count: Type.Optional(Type.Integer({ minimum: 1 })),
        },
        { additionalProperties: false },
      ),
    ),
    // Read-only: accepted by the schema so that the refusal is a clear rule, not an "unknown property".
    cpu: Type.Optional(
      Type.Unknown({
        description:
          "read-only: a body with it is 400. A CPU endpoint takes the other fields (`gpu` moves it to GPUs); its size is GraphQL saveEndpoint(instanceIds)'s",
      }),
    ),
    workers: Type.Optional(
      Type.Object(
        { min: Type.Optional(Type.Integer({ minimum: 0 })), max: Type.Optional(Type.Integer({ minimum: 0 })) },
        { additionalProperties: false },
      ),
    ),
    scaling: Type.Optional(
      Type.Object(
        {
          type: Type.Optional(ScalerTypeSchema),
          value: Type.Optional(Type.Number({ minimum: 0.5 })),
          idleTimeout: Type.Optional(
            Type.Integer({ minimum: 0, description: 'seconds before an idle worker is removed' }),
          ),
        },
        { additionalProperties: false },
      ),
    ),
    dataCenterIds: Type.Optional(
      Type.Array(Ref(), { maxItems: MAX_LIST, description: 'empty: the scheduler chooses' }),
    ),
    networkVolumes: Type.Optional(Type.Array(Ref(), { maxItems: MAX_LIST })),
    timeout: Type.Optional(Type.Integer({ minimum: 1000, description: 'per-request execution timeout, ms' })),
    flashboot: Type.Optional(FlashBootSchema),
    image: Type.Optional(ImageSchema),
    args: containerFields.args,
    disk: containerFields.disk,
    ports: containerFields.ports,
    env: containerFields.env,
    registry: containerFields.registry,
  },
  { additionalProperties: false },
);
export type UpdateEndpointInput = Static<typeof UpdateEndpointSchema>;

export const EndpointIdParamsSchema = Type.Object({ id: Ref('endpoint id') });

/** What changed between two releases: one entry per container field, values as JSON. */
export const ReleaseDiffEntrySchema = Type.Object({
  field: Type.String(),
  old: Type.Unknown(),
  new: Type.Unknown(),
});
export type ReleaseDiffEntry = Static<typeof ReleaseDiffEntrySchema>;
