import { Type, type Static } from 'typebox';

/** Schemas of the REST Endpoint resource (spec "Endpoint", "Sub-objects and enumerations"). */

export const EndpointTypeSchema = Type.Union([Type.Literal('QUEUE_BASED'), Type.Literal('LOAD_BALANCING')]);
export const ScalerTypeSchema = Type.Union([Type.Literal('QUEUE_DELAY'), Type.Literal('REQUEST_COUNT')]);
export const FlashBootSchema = Type.Union([Type.Literal('OFF'), Type.Literal('FLASHBOOT'), Type.Literal('PRIORITY_FLASHBOOT')]);

const Port = Type.String({ pattern: '^[0-9]{1,5}/(http|tcp|udp)$', description: '`port/protocol`, e.g. `8000/http`' });

export const GpuConfigSchema = Type.Object(
  {
    pools: Type.Array(Type.String({ minLength: 1 }), { minItems: 1, description: 'GPU pool ids from GET /v2/catalog/gpus' }),
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
  image: Type.String({ minLength: 1 }),
  args: Type.Optional(Type.String()),
  disk: Type.Optional(Type.Integer({ minimum: 1, description: 'container disk in GB' })),
  ports: Type.Optional(Type.Array(Port)),
  env: Type.Optional(Type.Record(Type.String(), Type.String())),
  registry: Type.Optional(Type.Union([Type.String({ minLength: 1 }), Type.Null()])),
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
    dataCenterIds: Type.Optional(Type.Array(Type.String({ minLength: 1 }))),
    networkVolumes: Type.Optional(Type.Array(Type.String({ minLength: 1 }))),
    timeout: Type.Optional(Type.Integer({ minimum: 1000, description: 'per-request execution timeout, ms' })),
    flashboot: Type.Optional(FlashBootSchema),
  },
  { additionalProperties: false },
);
export type CreateEndpointInput = Static<typeof CreateEndpointSchema>;

const QueueBasedUrls = Type.Object({ run: Type.String({ format: 'uri' }), runSync: Type.String({ format: 'uri' }) }, { additionalProperties: false });
const LoadBalancingUrls = Type.Object({ base: Type.String({ format: 'uri' }) }, { additionalProperties: false });

export const EndpointSchema = Type.Object({
  id: Type.String(),
  name: Type.String(),
  type: EndpointTypeSchema,
  requestUrls: Type.Union([QueueBasedUrls, LoadBalancingUrls]),
  image: Type.String(),
  args: Type.String(),
  disk: Type.Integer(),
  ports: Type.Array(Type.String()),
  env: Type.Record(Type.String(), Type.String()),
  registry: Type.Union([Type.String(), Type.Null()]),
  gpu: Type.Union([Type.Object({ pools: Type.Array(Type.String()), count: Type.Integer() }), Type.Null()]),
  cpu: Type.Union([Type.Object({ id: Type.String(), vcpuCount: Type.Integer(), memory: Type.Integer() }), Type.Null()]),
  workers: WorkersSchema,
  scaling: ScalingSchema,
  dataCenterIds: Type.Array(Type.String()),
  networkVolumes: Type.Array(Type.String()),
  timeout: Type.Integer(),
  flashboot: FlashBootSchema,
  createdAt: Type.String({ format: 'date-time' }),
});
export type EndpointView = Static<typeof EndpointSchema>;

export const EndpointListSchema = Type.Object({ endpoints: Type.Array(EndpointSchema) });
