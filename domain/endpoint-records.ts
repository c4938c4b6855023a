import { Type, type Static } from 'typebox';
import type { Endpoint } from '../generated/prisma/client.ts';
import { requireEndpointAccess, requireScope, type Principal } from './auth.ts';
import { requireAccountWide } from './registries.ts';
import type { DomainContext } from './context.ts';
import { createEndpoint, deleteEndpoint, updateEndpoint } from './endpoints.ts';
import { DomainError, notFound, validationFailed } from './errors.ts';
import { validate } from './validation.ts';

/**
 * The endpoint as the GraphQL API shows and saves it (spec "GraphQL endpoint record", `saveEndpoint`):
 * the same endpoints as REST, in the hosted service's GraphQL vocabulary. Every change goes through
 * createEndpoint / updateEndpoint / deleteEndpoint, so the rules and the workflow updates are REST's.
 */
export interface EndpointRecord {
  id: string;
  name: string;
  gpuIds: string;
  idleTimeout: number;
  locations: string;
  networkVolumeId: string | null;
  flashBootType: 'OFF' | 'FLASHBOOT' | 'PRIORITY_FLASHBOOT';
  scalerType: 'QUEUE_DELAY' | 'REQUEST_COUNT';
  scalerValue: number;
  templateId: string | null;
  workersMax: number;
  workersMin: number;
  type: 'QB' | 'LB';
  gpuCount: number;
  executionTimeoutMs: number;
}

export const LOCATIONS = ['CZ', 'FR', 'GB', 'NO', 'RO', 'US'] as const;

export const SaveEndpointInputSchema = Type.Object(
  {
    id: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    name: Type.String({ minLength: 1, maxLength: 191 }),
    templateId: Type.String({ minLength: 1, maxLength: 200 }),
    gpuIds: Type.String({ maxLength: 1024, pattern: '^\\s*-?[A-Z0-9_]+\\s*(,\\s*-?[A-Z0-9_]+\\s*)*$', description: 'GPU pool ids in order of preference, comma-separated' }),
    type: Type.Optional(Type.Union([Type.Literal('QB'), Type.Literal('LB')])),
    idleTimeout: Type.Optional(Type.Integer({ minimum: 0 })),
    locations: Type.Optional(Type.Union([Type.String({ maxLength: 1024 }), Type.Null()])),
    flashBootType: Type.Optional(Type.Union([Type.Literal('OFF'), Type.Literal('FLASHBOOT'), Type.Literal('PRIORITY_FLASHBOOT')])),
    scalerType: Type.Optional(Type.Union([Type.Literal('QUEUE_DELAY'), Type.Literal('REQUEST_COUNT')])),
    scalerValue: Type.Optional(Type.Number({ minimum: 0.5 })),
    workersMin: Type.Optional(Type.Integer({ minimum: 0 })),
    workersMax: Type.Optional(Type.Integer({ minimum: 0 })),
    networkVolumeId: Type.Optional(Type.Union([Type.String({ maxLength: 200 }), Type.Null()])),
    gpuCount: Type.Optional(Type.Integer({ minimum: 1 })),
    executionTimeoutMs: Type.Optional(Type.Integer({ minimum: 1000 })),
  },
  { additionalProperties: false },
);
export type SaveEndpointInput = Static<typeof SaveEndpointInputSchema>;

export function endpointRecord(e: Endpoint): EndpointRecord {
  return {
    id: e.id,
    name: e.name,
    gpuIds: e.gpuPools.join(','),
    idleTimeout: e.idleTimeout,
    locations: e.locations,
    networkVolumeId: e.networkVolumeIds[0] ?? null,
    flashBootType: e.flashboot,
    scalerType: e.scalerType,
    scalerValue: e.scalerValue,
    templateId: e.templateId,
    workersMax: e.workersMax,
    workersMin: e.workersMin,
    type: e.type === 'LOAD_BALANCING' ? 'LB' : 'QB',
    gpuCount: e.gpuCount ?? 1,
    executionTimeoutMs: e.timeoutMs,
  };
}

export async function listEndpointRecords(ctx: DomainContext, principal: Principal): Promise<EndpointRecord[]> {
  requireScope(principal, 'READ');
  const rows = await ctx.db.endpoint.findMany({
    where: { accountId: principal.accountId, deletingAt: null, ...(principal.endpointIds.length > 0 ? { id: { in: [...principal.endpointIds] } } : {}) },
    orderBy: { createdAt: 'asc' },
  });
  return rows.map(endpointRecord);
}

function normaliseLocations(locations: string | null | undefined): string | undefined {
  if (locations === undefined) return undefined;
  const list = (locations ?? '')
    .split(',')
    .map((l) => l.trim().toUpperCase())
    .filter(Boolean);
  const unknown = list.filter((l) => !(LOCATIONS as readonly string[]).includes(l));
  if (unknown.length > 0) throw validationFailed([`$.locations: unknown location ${unknown.join(', ')}; one of ${LOCATIONS.join(', ')}`]);
  return [...new Set(list)].join(',');
}

/** `saveEndpoint`: creates without `id`; with `id` changes the given fields (the template's container config on a template change). */
export async function saveEndpoint(ctx: DomainContext, principal: Principal, raw: unknown): Promise<EndpointRecord> {
  requireScope(principal, 'WRITE');
  const input = validate(SaveEndpointInputSchema, raw);
  if (input.id) requireEndpointAccess(principal, input.id);
  else requireAccountWide(principal);
  const locations = normaliseLocations(input.locations);
  const template = await ctx.db.template.findFirst({ where: { id: input.templateId, accountId: principal.accountId } });
  if (!template) throw validationFailed([`$.templateId: no template '${input.templateId}'`]);
  // Exclusions ("-ADA_24") narrow the pools the scheduler may choose; the stored list keeps the wanted ones.
  const pools = input.gpuIds
    .split(',')
    .map((p) => p.trim())
    .filter((p) => p && !p.startsWith('-'));
  if (pools.length === 0) throw validationFailed(['$.gpuIds: name at least one GPU pool']);
  const container = {
    image: template.imageName,
    args: template.dockerArgs,
    disk: template.containerDiskInGb,
    ports: template.ports.split(',').map((p) => p.trim()).filter(Boolean),
    env: template.env as Record<string, string>,
    registry: template.registryId,
  };

  let id = input.id;
  if (!id) {
    const created = await createEndpoint(ctx, principal, {
      name: input.name,
      type: input.type === 'LB' ? 'LOAD_BALANCING' : 'QUEUE_BASED',
      ...container,
      gpu: { pools, count: input.gpuCount ?? 1 },
      workers: { min: input.workersMin ?? 0, max: input.workersMax ?? 3 },
      scaling: { type: input.scalerType ?? 'QUEUE_DELAY', value: input.scalerValue ?? 4, idleTimeout: input.idleTimeout ?? 5 },
      networkVolumes: input.networkVolumeId ? [input.networkVolumeId] : [],
      flashboot: input.flashBootType ?? 'OFF',
      ...(input.executionTimeoutMs !== undefined ? { timeout: input.executionTimeoutMs } : {}),
    });
    id = created.id;
  } else {
    const current = await ctx.db.endpoint.findFirst({ where: { id, accountId: principal.accountId, deletingAt: null } });
    if (!current) throw notFound('endpoint');
    const workers = input.workersMin !== undefined || input.workersMax !== undefined ? { min: input.workersMin ?? current.workersMin, max: input.workersMax ?? current.workersMax } : undefined;
    const scaling =
      input.scalerType !== undefined || input.scalerValue !== undefined || input.idleTimeout !== undefined
        ? { type: input.scalerType ?? current.scalerType, value: input.scalerValue ?? current.scalerValue, idleTimeout: input.idleTimeout ?? current.idleTimeout }
        : undefined;
    await updateEndpoint(ctx, principal, id, {
      name: input.name,
      gpu: { pools, count: input.gpuCount ?? current.gpuCount ?? 1 },
      ...(template.id !== current.templateId ? container : {}),
      ...(workers ? { workers } : {}),
      ...(scaling ? { scaling } : {}),
      ...(input.networkVolumeId !== undefined ? { networkVolumes: input.networkVolumeId ? [input.networkVolumeId] : [] } : {}),
      ...(input.flashBootType !== undefined ? { flashboot: input.flashBootType } : {}),
      ...(input.executionTimeoutMs !== undefined ? { timeout: input.executionTimeoutMs } : {}),
    });
  }
  // The GraphQL-only fields.
  const row = await ctx.db.endpoint.update({
    where: { id },
    data: { templateId: template.id, ...(locations !== undefined ? { locations } : {}) },
  });
  return endpointRecord(row);
}

/** `deleteEndpoint`: only an endpoint scaled to zero (workersMin and workersMax both 0) may be deleted. */
export async function deleteEndpointScaledToZero(ctx: DomainContext, principal: Principal, id: string): Promise<void> {
  requireScope(principal, 'WRITE');
  const e = await ctx.db.endpoint.findFirst({ where: { id, accountId: principal.accountId, deletingAt: null } });
  if (!e) throw notFound('endpoint');
  if (e.workersMin !== 0 || e.workersMax !== 0) {
    throw new DomainError('bad_request', `endpoint ${id} has workersMin ${e.workersMin} and workersMax ${e.workersMax}; set both to 0 before deleting it`);
  }
  await deleteEndpoint(ctx, principal, id);
}
