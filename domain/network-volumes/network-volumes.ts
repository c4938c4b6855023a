import { Type } from 'typebox';
import type { NetworkVolume } from '../../generated/prisma/client.ts';
import { type Principal, requireAccountWide, requireScope } from '../accounts/auth.ts';
import { knownDataCenterIds } from '../catalog/catalog.ts';
import type { DomainContext } from '../context.ts';
import { dataCenterFacts, volumeStorage } from '../catalog/data-centers.ts';
import { DomainError, notFound, validationFailed } from '../errors.ts';
import { newId } from '../shared/ids.ts';
import { isUniqueViolation } from '../shared/db.ts';
import { validate } from '../shared/validation.ts';

/**
 * Network volumes: named storage in one data center that endpoints (networkVolumes) and pods
 * (networkVolumeId) mount; their workers are placed only where the volume is. A volume lives on
 * its data center's shared storage (networkVolumePath, a directory per volume) or, in a data center
 * of a single host without shared storage, as a named volume on that host (data-centers.ts). Its
 * size only grows; it is recorded, not enforced (neither a shared directory nor a named volume has
 * a quota here). A deleted volume is gone for its owner at once; a host's reconcile removes its
 * data, then its row.
 */

const SizeSchema = Type.Integer({ minimum: 1, maximum: 4096, description: 'GB' });

export const CreateNetworkVolumeSchema = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 191, description: 'unique within the account' }),
    size: SizeSchema,
    dataCenter: Type.String({ minLength: 1, description: 'a data center id from GET /v2/catalog/datacenters' }),
    type: Type.Optional(Type.Literal('STANDARD', { description: 'storage tier; Gantry offers STANDARD only' })),
  },
  { additionalProperties: false },
);

export const UpdateNetworkVolumeSchema = Type.Object(
  {
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 191 })),
    size: Type.Optional(Type.Integer({ minimum: 1, maximum: 4096, description: 'GB; at least the current size' })),
  },
  { additionalProperties: false, minProperties: 1 },
);

const conflict = (name: string): DomainError =>
  new DomainError('conflict', `a network volume named '${name}' already exists`);

export async function createNetworkVolume(
  ctx: DomainContext,
  principal: Principal,
  body: unknown,
): Promise<NetworkVolume> {
  requireScope(principal, 'WRITE');
  requireAccountWide(principal);
  const input = validate(CreateNetworkVolumeSchema, body);
  const known = await knownDataCenterIds(ctx);
  if (!known.includes(input.dataCenter)) {
    throw validationFailed([
      `$.dataCenter: unknown data center '${input.dataCenter}'${known.length > 0 ? `; known: ${known.join(', ')}` : '; no host is registered yet'}`,
    ]);
  }
  const { settings, hostIds } = await dataCenterFacts(ctx.db, [input.dataCenter]);
  const storage = volumeStorage(
    { dataCenterId: input.dataCenter, hostId: null },
    settings.get(input.dataCenter),
    hostIds.get(input.dataCenter) ?? [],
  );
  if (storage.kind === 'none')
    throw validationFailed([`$.dataCenter: network volumes cannot be made there: ${storage.reason}`]);
  try {
    const row = await ctx.db.networkVolume.create({
      data: {
        id: newId(),
        accountId: principal.accountId,
        name: input.name,
        size: input.size,
        dataCenterId: input.dataCenter,
        hostId: storage.bindTo ?? null,
      },
    });
    return row;
  } catch (err) {
    if (isUniqueViolation(err)) throw conflict(input.name);
    throw err;
  }
}

async function findOwned(ctx: DomainContext, principal: Principal, id: string): Promise<NetworkVolume> {
  const row = await ctx.db.networkVolume.findFirst({ where: { id, accountId: principal.accountId, deletedAt: null } });
  if (!row) throw notFound('network volume');
  return row;
}

export async function getNetworkVolume(ctx: DomainContext, principal: Principal, id: string): Promise<NetworkVolume> {
  requireScope(principal, 'READ');
  requireAccountWide(principal);
  return findOwned(ctx, principal, id);
}

/**
 * The volume an endpoint of the caller names (GraphQL `Endpoint.networkVolume`), or null when it is
 * gone: readable by any key that may read the endpoint, endpoint-scoped ones too.
 */
export async function endpointNetworkVolume(
  ctx: DomainContext,
  principal: Principal,
  id: string,
): Promise<NetworkVolume | null> {
  requireScope(principal, 'READ');
  const row = await ctx.db.networkVolume.findFirst({ where: { id, accountId: principal.accountId, deletedAt: null } });
  return row;
}

export async function listNetworkVolumes(ctx: DomainContext, principal: Principal): Promise<NetworkVolume[]> {
  requireScope(principal, 'READ');
  requireAccountWide(principal);
  const rows = await ctx.db.networkVolume.findMany({
    where: { accountId: principal.accountId, deletedAt: null },
    orderBy: { createdAt: 'asc' },
  });
  return rows;
}

/** Renames and/or grows a volume; shrinking is refused (400): stored data would not fit. */
export async function updateNetworkVolume(
  ctx: DomainContext,
  principal: Principal,
  id: string,
  body: unknown,
): Promise<NetworkVolume> {
  requireScope(principal, 'WRITE');
  requireAccountWide(principal);
  const input = validate(UpdateNetworkVolumeSchema, body);
  try {
    const row = await ctx.db.$transaction(async (tx) => {
      const existing = await tx.networkVolume.findFirst({
        where: { id, accountId: principal.accountId, deletedAt: null },
      });
      if (!existing) throw notFound('network volume');
      if (input.size !== undefined && input.size < existing.size) {
        throw new DomainError(
          'bad_request',
          `size cannot shrink: the volume has ${existing.size} GB, asked for ${input.size} GB`,
        );
      }
      return tx.networkVolume.update({
        where: { id },
        data: {
          ...(input.name !== undefined ? { name: input.name } : {}),
          ...(input.size !== undefined ? { size: input.size } : {}),
        },
      });
    });
    return row;
  } catch (err) {
    if (isUniqueViolation(err)) throw conflict(input.name ?? '');
    throw err;
  }
}

/**
 * Deletes a volume; refused (400) while a live endpoint or pod mounts it. Its name is free at once;
 * its data goes at the next reconcile of a host that holds it.
 */
export async function deleteNetworkVolume(ctx: DomainContext, principal: Principal, id: string): Promise<void> {
  requireScope(principal, 'WRITE');
  requireAccountWide(principal);
  await ctx.db.$transaction(async (tx) => {
    // Locked: an endpoint or pod naming the volume checks it in a transaction of its own.
    const row = await tx.$queryRaw<
      Array<{ id: string }>
    >`SELECT id FROM "NetworkVolume" WHERE id = ${id} AND "accountId" = ${principal.accountId} AND "deletedAt" IS NULL FOR UPDATE`;
    if (row.length === 0) throw notFound('network volume');
    const endpoints = await tx.endpoint.findMany({
      where: { networkVolumeIds: { has: id } },
      select: { id: true },
      take: 5,
    });
    if (endpoints.length > 0)
      throw new DomainError(
        'bad_request',
        `network volume is in use by endpoint ${endpoints.map((e) => e.id).join(', ')}`,
      );
    const pods = await tx.pod.findMany({ where: { networkVolumeId: id }, select: { id: true }, take: 5 });
    if (pods.length > 0)
      throw new DomainError('bad_request', `network volume is in use by pod ${pods.map((p) => p.id).join(', ')}`);
    await tx.networkVolume.update({ where: { id }, data: { deletedAt: new Date(), name: `${id}~deleted` } });
  });
}

/**
 * What is wrong with the volumes an endpoint (networkVolumes) or pod (networkVolumeId) names: each
 * must be the caller's, and there can be at most one per data center (a worker mounts the volume of
 * the data center it runs in). `at` names the field in the messages.
 */
export async function volumeReferenceProblems(
  ctx: DomainContext,
  accountId: string,
  ids: readonly string[],
  at: (i: number) => string,
): Promise<string[]> {
  if (ids.length === 0) return [];
  const rows = await ctx.db.networkVolume.findMany({
    where: { id: { in: [...ids] }, accountId, deletedAt: null },
    select: { id: true, dataCenterId: true },
  });
  const byId = new Map(rows.map((v) => [v.id, v]));
  const problems: string[] = [];
  const dataCenters = new Map<string, string>();
  ids.forEach((id, i) => {
    const v = byId.get(id);
    if (!v) return void problems.push(`${at(i)}: no network volume '${id}'`);
    const other = dataCenters.get(v.dataCenterId);
    if (other && other !== id)
      problems.push(
        `${at(i)}: network volumes ${other} and ${id} are both in data center ${v.dataCenterId}; a worker mounts one, the volume of its data center`,
      );
    dataCenters.set(v.dataCenterId, id);
  });
  return problems;
}
