import { Type, type Static } from 'typebox';
import type { NetworkVolume } from '../generated/prisma/client.ts';
import { requireScope, type Principal } from './auth.ts';
import { knownDataCenterIds } from './catalog.ts';
import type { DomainContext } from './context.ts';
import { DomainError, notFound, validationFailed } from './errors.ts';
import { newId } from './ids.ts';
import { isUniqueViolation, requireAccountWide } from './registries.ts';
import { validate } from './validation.ts';

/**
 * Network volumes: named storage in one data center that endpoints (networkVolumes) and pods
 * mount. A volume lives in a data center some registered host belongs to; its size only grows.
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

export const NetworkVolumeSchema = Type.Object({
  id: Type.String(),
  name: Type.String(),
  size: Type.Integer({ description: 'GB' }),
  dataCenter: Type.String(),
  type: Type.Literal('STANDARD'),
  createdAt: Type.String({ format: 'date-time' }),
});
export type NetworkVolumeView = Static<typeof NetworkVolumeSchema>;
export const NetworkVolumeListSchema = Type.Object({ networkVolumes: Type.Array(NetworkVolumeSchema) });

export function networkVolumeView(v: NetworkVolume): NetworkVolumeView {
  return { id: v.id, name: v.name, size: v.size, dataCenter: v.dataCenterId, type: 'STANDARD', createdAt: v.createdAt.toISOString() };
}

const conflict = (name: string): DomainError => new DomainError('conflict', `a network volume named '${name}' already exists`);

export async function createNetworkVolume(ctx: DomainContext, principal: Principal, body: unknown): Promise<NetworkVolumeView> {
  requireScope(principal, 'WRITE');
  requireAccountWide(principal);
  const input = validate(CreateNetworkVolumeSchema, body);
  const known = await knownDataCenterIds(ctx);
  if (!known.includes(input.dataCenter)) {
    throw validationFailed([`$.dataCenter: unknown data center '${input.dataCenter}'${known.length > 0 ? `; known: ${known.join(', ')}` : '; no host is registered yet'}`]);
  }
  try {
    const row = await ctx.db.networkVolume.create({
      data: { id: newId(), accountId: principal.accountId, name: input.name, size: input.size, dataCenterId: input.dataCenter },
    });
    return networkVolumeView(row);
  } catch (err) {
    if (isUniqueViolation(err)) throw conflict(input.name);
    throw err;
  }
}

async function findOwned(ctx: DomainContext, principal: Principal, id: string): Promise<NetworkVolume> {
  const row = await ctx.db.networkVolume.findFirst({ where: { id, accountId: principal.accountId } });
  if (!row) throw notFound('network volume');
  return row;
}

export async function getNetworkVolume(ctx: DomainContext, principal: Principal, id: string): Promise<NetworkVolumeView> {
  requireScope(principal, 'READ');
  requireAccountWide(principal);
  return networkVolumeView(await findOwned(ctx, principal, id));
}

export async function listNetworkVolumes(ctx: DomainContext, principal: Principal): Promise<NetworkVolumeView[]> {
  requireScope(principal, 'READ');
  requireAccountWide(principal);
  const rows = await ctx.db.networkVolume.findMany({ where: { accountId: principal.accountId }, orderBy: { createdAt: 'asc' } });
  return rows.map(networkVolumeView);
}

/** Renames and/or grows a volume; shrinking is refused (400): stored data would not fit. */
export async function updateNetworkVolume(ctx: DomainContext, principal: Principal, id: string, body: unknown): Promise<NetworkVolumeView> {
  requireScope(principal, 'WRITE');
  requireAccountWide(principal);
  const input = validate(UpdateNetworkVolumeSchema, body);
  try {
    const row = await ctx.db.$transaction(async (tx) => {
      const existing = await tx.networkVolume.findFirst({ where: { id, accountId: principal.accountId } });
      if (!existing) throw notFound('network volume');
      if (input.size !== undefined && input.size < existing.size) {
        throw new DomainError('bad_request', `size cannot shrink: the volume has ${existing.size} GB, asked for ${input.size} GB`);
      }
      return tx.networkVolume.update({ where: { id }, data: { ...(input.name !== undefined ? { name: input.name } : {}), ...(input.size !== undefined ? { size: input.size } : {}) } });
    });
    return networkVolumeView(row);
  } catch (err) {
    if (isUniqueViolation(err)) throw conflict(input.name ?? '');
    throw err;
  }
}

/** Deletes a volume; refused (400) while a live endpoint mounts it. */
export async function deleteNetworkVolume(ctx: DomainContext, principal: Principal, id: string): Promise<void> {
  requireScope(principal, 'WRITE');
  requireAccountWide(principal);
  await ctx.db.$transaction(async (tx) => {
    const row = await tx.networkVolume.findFirst({ where: { id, accountId: principal.accountId }, select: { id: true } });
    if (!row) throw notFound('network volume');
    const endpoints = await tx.endpoint.findMany({ where: { networkVolumeIds: { has: id }, deletingAt: null }, select: { id: true }, take: 5 });
    if (endpoints.length > 0) throw new DomainError('bad_request', `network volume is in use by endpoint ${endpoints.map((e) => e.id).join(', ')}`);
    await tx.networkVolume.delete({ where: { id } });
  });
}
