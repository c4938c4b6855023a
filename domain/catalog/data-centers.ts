import { Type, type Static } from 'typebox';
import type { DataCenter, NetworkVolume } from '../../generated/prisma/client.ts';
import { requireScope, type Principal } from '../accounts/auth.ts';
import type { DomainContext } from '../context.ts';
import { forbidden, notFound, validationFailed } from '../errors.ts';
import { validate } from '../shared/validation.ts';

/**
 * Data centers as the operator describes them (hosts configuration, or the admin API): a country,
 * which GraphQL `locations` places workers by, and where the data center's hosts mount shared
 * storage for network volumes. Hosts name their data center; a data center without settings has no
 * country (no `locations` list reaches it) and shared storage only if it has a single host.
 */

/** ISO 3166-1 alpha-2; stored upper case. */
export const CountrySchema = Type.String({
  pattern: '^[A-Za-z]{2}$',
  description: 'ISO 3166-1 alpha-2 country code, e.g. US',
});

/**
 * An absolute directory; no commas (it becomes a `--mount source=` value) and no control characters.
 * Every host of the data center must mount the same shared storage there.
 */
export const NetworkVolumePathSchema = Type.String({
  pattern: '^/[^,\\u0000-\\u001f\\u007f]*$',
  maxLength: 1024,
  description:
    'absolute path of a directory on storage that every host of the data center mounts at that same path (NFS, CephFS, ...)',
});

export const DataCenterIdSchema = Type.String({ minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9][A-Za-z0-9._-]*$' });

export const DataCenterSettingsSchema = Type.Object(
  {
    country: Type.Optional(Type.Union([CountrySchema, Type.Null()])),
    networkVolumePath: Type.Optional(Type.Union([NetworkVolumePathSchema, Type.Null()])),
  },
  { additionalProperties: false },
);

export const DataCenterFileEntrySchema = Type.Object(
  {
    id: DataCenterIdSchema,
    country: Type.Optional(CountrySchema),
    networkVolumePath: Type.Optional(NetworkVolumePathSchema),
  },
  { additionalProperties: false },
);
export type DataCenterFileEntry = Static<typeof DataCenterFileEntrySchema>;

/** A data center's settings as the domain answers them: its row (none when named by hosts only) and its hosts. */
export interface DataCenterSettingsModel {
  id: string;
  row: DataCenter | null;
  hosts: number;
  /** What network volumes there are: on the shared path, on the single host, or not possible. */
  networkVolumes: 'shared-path' | 'single-host' | 'unavailable';
}

/** Where a network volume's data lives, or why it cannot live anywhere. */
export type VolumeStorage =
  | { kind: 'shared-path'; dataCenterId: string; path: string }
  | { kind: 'host'; dataCenterId: string; hostId: string }
  | { kind: 'none'; dataCenterId: string; reason: string };

/**
 * A volume's storage: the data center's shared path when it has one; else the host it is bound to
 * (a single-host data center without shared storage); else, when its data center has exactly one
 * host, that host (bindTo says so: the caller records it); else nowhere.
 */
export function volumeStorage(
  volume: Pick<NetworkVolume, 'dataCenterId' | 'hostId'>,
  dataCenter: Pick<DataCenter, 'networkVolumePath'> | null | undefined,
  hostIdsInDataCenter: readonly string[],
): VolumeStorage & { bindTo?: string } {
  const dc = volume.dataCenterId;
  if (volume.hostId) return { kind: 'host', dataCenterId: dc, hostId: volume.hostId };
  if (dataCenter?.networkVolumePath)
    return { kind: 'shared-path', dataCenterId: dc, path: dataCenter.networkVolumePath };
  if (hostIdsInDataCenter.length === 1)
    return { kind: 'host', dataCenterId: dc, hostId: hostIdsInDataCenter[0]!, bindTo: hostIdsInDataCenter[0]! };
  return {
    kind: 'none',
    dataCenterId: dc,
    reason:
      hostIdsInDataCenter.length === 0
        ? `data center ${dc} has no host (a volume without shared storage lives on its data center's single host)`
        : `data center ${dc} has ${hostIdsInDataCenter.length} hosts and no shared storage for network volumes (its networkVolumePath is not set)`,
  };
}

/** The directory of a volume on shared storage, and the named volume of one on a single host. */
export const sharedVolumeDir = (path: string, volumeId: string): string =>
  `${path.replace(/\/+$/, '')}/gantry-nv-${volumeId}`;
export const hostVolumePrefix = (hostId: string): string => `gantry-nv-${hostId}-`;
export const hostVolumeName = (hostId: string, volumeId: string): string => `${hostVolumePrefix(hostId)}${volumeId}`;

/** Where endpoint workers see their network volume (the hosted service's path). */
export const ENDPOINT_VOLUME_MOUNT = '/runpod-volume';

/** Settings and host ids of the given data centers (all when undefined). */
export async function dataCenterFacts(
  db: DomainContext['db'],
  ids?: readonly string[],
): Promise<{ settings: Map<string, DataCenter>; hostIds: Map<string, string[]> }> {
  const [rows, hosts] = await Promise.all([
    db.dataCenter.findMany({ where: ids ? { id: { in: [...ids] } } : {} }),
    db.host.findMany({
      where: ids ? { dataCenterId: { in: [...ids] } } : {},
      select: { id: true, dataCenterId: true },
      orderBy: { createdAt: 'asc' },
    }),
  ]);
  const hostIds = new Map<string, string[]>();
  for (const h of hosts) hostIds.set(h.dataCenterId, [...(hostIds.get(h.dataCenterId) ?? []), h.id]);
  return { settings: new Map(rows.map((r) => [r.id, r])), hostIds };
}

function requireHostAdmin(principal: Principal): void {
  requireScope(principal, 'ADMIN');
  if (!principal.isAdmin) throw forbidden('data centers are managed with a key of the admin account');
}

function settingsModel(id: string, row: DataCenter | undefined, hosts: number): DataCenterSettingsModel {
  return {
    id,
    row: row ?? null,
    hosts,
    networkVolumes: row?.networkVolumePath ? 'shared-path' : hosts === 1 ? 'single-host' : 'unavailable',
  };
}

/** Every data center that has settings or hosts. */
export async function listDataCenterSettings(
  ctx: DomainContext,
  principal: Principal,
): Promise<DataCenterSettingsModel[]> {
  requireHostAdmin(principal);
  const { settings, hostIds } = await dataCenterFacts(ctx.db);
  const ids = [...new Set([...settings.keys(), ...hostIds.keys()])].sort();
  return ids.map((id) => settingsModel(id, settings.get(id), hostIds.get(id)?.length ?? 0));
}

export async function getDataCenterSettings(
  ctx: DomainContext,
  principal: Principal,
  id: string,
): Promise<DataCenterSettingsModel> {
  requireHostAdmin(principal);
  const { settings, hostIds } = await dataCenterFacts(ctx.db, [id]);
  if (!settings.has(id) && !hostIds.has(id)) throw notFound('data center');
  return settingsModel(id, settings.get(id), hostIds.get(id)?.length ?? 0);
}

/**
 * Sets a data center's country and shared-storage path (PUT: what the body leaves out is cleared).
 * The path is not checked on the hosts here: a worker whose directory cannot be made fails to start
 * with the runtime's message.
 */
export async function putDataCenterSettings(
  ctx: DomainContext,
  principal: Principal,
  id: string,
  body: unknown,
  source: 'api' | 'file' = 'api',
): Promise<DataCenterSettingsModel> {
  requireHostAdmin(principal);
  const idProblems = validateId(id);
  if (idProblems.length > 0) throw validationFailed(idProblems);
  const input = validate(DataCenterSettingsSchema, body ?? {});
  await saveSettings(
    ctx,
    id,
    { country: input.country ?? null, networkVolumePath: input.networkVolumePath ?? null },
    source,
  );
  return getDataCenterSettings(ctx, principal, id);
}

function validateId(id: string): string[] {
  try {
    validate(DataCenterIdSchema, id);
    return [];
  } catch {
    return ['$params.id: a data center id is 1-64 letters, digits, dots, dashes and underscores'];
  }
}

async function saveSettings(
  ctx: DomainContext,
  id: string,
  s: { country: string | null; networkVolumePath: string | null },
  source: string,
): Promise<void> {
  const data = {
    country: s.country?.toUpperCase() ?? null,
    networkVolumePath: s.networkVolumePath?.replace(/(.)\/+$/, '$1') ?? null,
    source,
  };
  await ctx.db.dataCenter.upsert({ where: { id }, create: { id, ...data }, update: data });
}

/** GANTRY_HOSTS_FILE's `dataCenters`: applied at every start, the file winning over the API. */
export async function applyDataCenterEntries(
  ctx: DomainContext,
  entries: readonly DataCenterFileEntry[],
): Promise<void> {
  for (const e of entries)
    await saveSettings(
      ctx,
      e.id,
      { country: e.country ?? null, networkVolumePath: e.networkVolumePath ?? null },
      'file',
    );
}
