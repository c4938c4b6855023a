import { Type, type Static } from 'typebox';
import type { DataCenterModel, DataCenterSettingsModel } from '../../../domain/catalog/index.ts';
import { AvailabilitySchema, CountSchema } from './gpu-type.ts';

/** A data center in REST v2 (`/v2/catalog/datacenters`): its region, settings, hosts and GPU stock. */
export const RegionSchema = Type.Union([
  Type.Literal('NORTH_AMERICA'),
  Type.Literal('SOUTH_AMERICA'),
  Type.Literal('EUROPE'),
  Type.Literal('ASIA'),
  Type.Literal('MIDDLE_EAST'),
  Type.Literal('AFRICA'),
  Type.Literal('OCEANIA'),
  Type.Literal('ANTARCTICA'),
  Type.Literal('UNKNOWN'),
]);

const ResourceAvailabilitySchema = Type.Object({
  id: Type.String(),
  name: Type.String(),
  availability: AvailabilitySchema,
});

export const DataCenterSchema = Type.Object({
  id: Type.String({ description: 'the dataCenterId hosts were registered with' }),
  name: Type.String(),
  region: RegionSchema,
  country: Type.Union([Type.String(), Type.Null()], {
    description: 'ISO 3166-1 alpha-2, as the operator set it; GraphQL `locations` places workers by it',
  }),
  globalNetwork: Type.Boolean(),
  networkVolumeTypes: Type.Array(Type.Union([Type.Literal('STANDARD'), Type.Literal('HIGH_PERFORMANCE')]), {
    description: 'empty: network volumes cannot be made here (several hosts and no shared storage)',
  }),
  compliance: Type.Array(Type.String()),
  hosts: Type.Object(
    { total: Type.Integer(), ready: Type.Integer() },
    { description: 'registered hosts here, and how many are READY' },
  ),
  gpus: CountSchema,
  gpuAvailability: Type.Optional(Type.Array(ResourceAvailabilitySchema)),
});
export type DataCenterView = Static<typeof DataCenterSchema>;
export const DataCenterListSchema = Type.Object({ dataCenters: Type.Array(DataCenterSchema) });

/** The REST shape of a data center, from the domain's model. */
export function dataCenterView(dc: DataCenterModel): DataCenterView {
  const view: DataCenterView = {
    id: dc.id,
    name: dc.id,
    region: dc.region,
    country: dc.settings?.country ?? null,
    globalNetwork: false,
    networkVolumeTypes: dc.networkVolumes ? ['STANDARD'] : [],
    compliance: [],
    hosts: { total: dc.hosts.total, ready: dc.hosts.ready },
    gpus: { total: dc.gpus.total, available: dc.gpus.available },
  };
  // Left out when the data center has no GPU.
  if (dc.gpuAvailability && dc.gpuAvailability.length > 0)
    view.gpuAvailability = dc.gpuAvailability.map((g) => ({
      id: g.gpuTypeId,
      name: g.name,
      availability: g.availability,
    }));
  return view;
}

/** A data center's settings in REST v2 (`/v2/hosts/datacenters`, the platform admin's). */
export const DataCenterSettingsViewSchema = Type.Object({
  id: Type.String(),
  country: Type.Union([Type.String(), Type.Null()]),
  networkVolumePath: Type.Union([Type.String(), Type.Null()]),
  /** What network volumes there are: on the shared path, on the single host, or not possible. */
  networkVolumes: Type.Union([Type.Literal('shared-path'), Type.Literal('single-host'), Type.Literal('unavailable')]),
  hosts: Type.Integer({ minimum: 0 }),
  source: Type.String({ description: 'api, file (GANTRY_HOSTS_FILE), or none (named by hosts only)' }),
});
export const DataCenterSettingsListSchema = Type.Object({ dataCenters: Type.Array(DataCenterSettingsViewSchema) });

export function dataCenterSettingsView(m: DataCenterSettingsModel): Static<typeof DataCenterSettingsViewSchema> {
  return {
    id: m.id,
    country: m.row?.country ?? null,
    networkVolumePath: m.row?.networkVolumePath ?? null,
    networkVolumes: m.networkVolumes,
    hosts: m.hosts,
    source: m.row?.source ?? 'none',
  };
}
