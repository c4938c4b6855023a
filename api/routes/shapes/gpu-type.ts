import { Type, type Static } from 'typebox';
import type { GpuTypeModel } from '../../../domain/catalog/index.ts';

/** A GPU type in REST v2 (`/v2/catalog/gpus`): spec, list prices, and stock on the registered hosts. */
export const AvailabilitySchema = Type.Union(
  [Type.Literal('NONE'), Type.Literal('LOW'), Type.Literal('MEDIUM'), Type.Literal('HIGH')],
  {
    description:
      'NONE: nothing free; LOW: one unit or under a quarter free; MEDIUM: under half free; HIGH: half or more free',
  },
);

const DataCenterAvailabilitySchema = Type.Object({
  id: Type.String(),
  name: Type.String(),
  availability: AvailabilitySchema,
});

export const CountSchema = Type.Object(
  {
    total: Type.Integer({ description: 'units on READY hosts' }),
    available: Type.Integer({ description: 'units no live worker holds' }),
  },
  { description: 'Gantry: capacity of the registered hosts' },
);

export const GpuTypeSchema = Type.Object({
  id: Type.String({ description: 'GPU type id: the name nvidia-smi prints for the card' }),
  name: Type.String(),
  pool: Type.Union([Type.String(), Type.Null()], {
    description: 'serverless GPU pool id (gpu.pools of an endpoint); null when the card is in no pool',
  }),
  manufacturer: Type.Union([Type.Literal('NVIDIA'), Type.Literal('AMD'), Type.Literal('UNKNOWN')]),
  memory: Type.Integer({ description: 'VRAM in GB' }),
  secure: Type.Boolean({ description: 'offered by a READY host; false for a type of the pools no READY host has' }),
  community: Type.Boolean({ description: 'always false: Gantry runs one cloud, its own hosts' }),
  price: Type.Object(
    {
      secure: Type.Number({ description: 'pod price per GPU per hour, USD' }),
      community: Type.Number({ description: 'same as secure (one cloud)' }),
      serverless: Type.Optional(
        Type.Number({ description: 'serverless price per GPU per hour, USD; absent when the card is in no pool' }),
      ),
      serverlessPerSecond: Type.Optional(Type.Number({ description: 'serverless price per GPU per second, USD' })),
    },
    { description: 'list prices from the price table (GANTRY_PRICES_FILE); account discounts are not applied' },
  ),
  maxCount: Type.Object(
    {
      secure: Type.Integer({ description: 'most GPUs of this type on one READY host (0: none has it)' }),
      community: Type.Integer(),
    },
    { description: 'largest number of these GPUs one worker or pod can get (one host)' },
  ),
  count: CountSchema,
  availability: Type.Optional(AvailabilitySchema),
  dataCenters: Type.Optional(Type.Array(DataCenterAvailabilitySchema)),
});
export type GpuTypeView = Static<typeof GpuTypeSchema>;
export const GpuTypeListSchema = Type.Object({ gpus: Type.Array(GpuTypeSchema) });

/** The REST shape of a GPU type, from the domain's model. */
export function gpuTypeView(g: GpuTypeModel): GpuTypeView {
  const view: GpuTypeView = {
    id: g.id,
    name: g.name,
    pool: g.pool,
    manufacturer: 'NVIDIA',
    memory: g.memoryGb,
    // A type of the pools that no READY host has is listed with no stock (gpuTypes).
    secure: g.total > 0,
    community: false,
    price: {
      secure: g.rate.podPerHour,
      community: g.rate.podPerHour,
      ...(g.pool ? { serverless: g.rate.serverlessPerHour, serverlessPerSecond: g.rate.serverlessPerHour / 3600 } : {}),
    },
    maxCount: { secure: g.maxPerHost, community: 0 },
    count: { total: g.total, available: g.available },
  };
  if (g.availability) {
    // No data center has it: `dataCenters` left out, as the hosted service leaves it out when the
    // configuration is unavailable everywhere.
    if (g.availability.dataCenters.length > 0)
      view.dataCenters = g.availability.dataCenters.map((d) => ({
        id: d.id,
        name: d.id,
        availability: d.availability,
      }));
    view.availability = g.availability.overall;
  }
  return view;
}
