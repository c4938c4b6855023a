import { Type, type Static } from 'typebox';
import type { Endpoint } from '../../generated/prisma/client.ts';
import { type Principal, requireAccountWide, requireEndpointAccess, requireScope } from '../accounts/auth.ts';
import type { DomainContext } from '../context.ts';
import { createEndpoint, deleteEndpoint, forgetEndpoint, updateEndpoint } from './endpoints.ts';
import { requireCpuInstanceId, smallestForOneVcpu, type CpuInstance } from '../catalog/cpu-instances.ts';
import { DomainError, notFound, validationFailed } from '../errors.ts';
import { validate } from '../shared/validation.ts';
import { InlineTemplateSchema, saveInlineTemplate } from './inline-template.ts';
import { checkFlashEndpointImage } from '../apps/runtime-check.ts';
import { isAssignedCountry } from './countries.ts';

/**
 * Endpoints saved in the hosted service's GraphQL vocabulary (`saveEndpoint`, `updateEndpointTemplate`,
 * `deleteEndpoint`: docs/graphql.md): the same endpoints as REST. Every change goes through
 * createEndpoint / updateEndpoint / deleteEndpoint, so the rules and the workflow updates are REST's.
 * Each answers the endpoint's row; api/graphql/shapes/endpoint.ts shows it.
 */

/** `12.4`: a CUDA major.minor version, as the hosted service's clients name them. */
const CUDA_VERSION = /^[0-9]{1,3}\.[0-9]{1,3}$/;

export const SaveEndpointInputSchema = Type.Object(
  {
    id: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    name: Type.String({ minLength: 1, maxLength: 191 }),
    templateId: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    template: Type.Optional(InlineTemplateSchema),
    flashEnvironmentId: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    minCudaVersion: Type.Optional(Type.Union([Type.String({ pattern: '^[0-9]{1,3}\\.[0-9]{1,3}$' }), Type.Null()])),
    workersPFBTarget: Type.Optional(Type.Integer({ minimum: 0, maximum: 1000 })),
    gpuIds: Type.Optional(
      Type.Union([
        Type.String({
          maxLength: 1024,
          pattern: '^\\s*(-?[A-Z0-9_]+\\s*(,\\s*-?[A-Z0-9_]+\\s*)*)?$',
          description: 'GPU pool ids in order of preference, comma-separated; empty (or CPU) for a CPU endpoint',
        }),
        Type.Null(),
      ]),
    ),
    instanceIds: Type.Optional(
      Type.Union([
        Type.Array(Type.String({ minLength: 1, maxLength: 64 }), {
          maxItems: 1,
          description: 'a CPU endpoint: its instance, `<flavor>-<vCPUs>-<memory GB>` such as cpu3c-2-4',
        }),
        Type.Null(),
      ]),
    ),
    type: Type.Optional(Type.Union([Type.Literal('QB'), Type.Literal('LB')])),
    idleTimeout: Type.Optional(Type.Integer({ minimum: 0 })),
    locations: Type.Optional(Type.Union([Type.String({ maxLength: 1024 }), Type.Null()])),
    flashBootType: Type.Optional(
      Type.Union([Type.Literal('OFF'), Type.Literal('FLASHBOOT'), Type.Literal('PRIORITY_FLASHBOOT')]),
    ),
    scalerType: Type.Optional(Type.Union([Type.Literal('QUEUE_DELAY'), Type.Literal('REQUEST_COUNT')])),
    scalerValue: Type.Optional(Type.Number({ minimum: 0.5 })),
    workersMin: Type.Optional(Type.Integer({ minimum: 0 })),
    workersMax: Type.Optional(Type.Integer({ minimum: 0 })),
    networkVolumeId: Type.Optional(Type.Union([Type.String({ maxLength: 200 }), Type.Null()])),
    gpuCount: Type.Optional(Type.Integer({ minimum: 1 })),
    executionTimeoutMs: Type.Optional(
      Type.Integer({
        minimum: 0,
        description: 'at least 1000; 0 (what the hosted flash tool sends when none is set): the default, 600 s',
      }),
    ),
    allowedCudaVersions: Type.Optional(
      Type.Union([
        Type.String({ maxLength: 256, description: 'CUDA versions, comma-separated (12.4,12.6); empty: any' }),
        Type.Null(),
      ]),
    ),
  },
  { additionalProperties: false },
);
export type SaveEndpointInput = Static<typeof SaveEndpointInputSchema>;

/** `12.4, 12.6` as a list; a version that is not one is refused. */
function parseCudaVersions(text: string | null | undefined): string[] | undefined {
  if (text === undefined) return undefined;
  const list = (text ?? '')
    .split(',')
    .map((v) => v.trim())
    .filter(Boolean);
  const bad = list.filter((v) => !CUDA_VERSION.test(v));
  if (bad.length > 0)
    throw validationFailed([`$.allowedCudaVersions: ${bad.join(', ')}: not a CUDA version such as 12.4`]);
  return [...new Set(list)];
}

/** The most entries a `locations` list may have (the hosted service has a few dozen data centers). */
export const MAX_LOCATIONS = 64;
/** The hosted service's data-center ids (US-CA-2, EUR-NO-1, CA-MTL-1), which its flash tool sends. */
const HOSTED_DATA_CENTER = /^[A-Z]{2,3}-[A-Z]{2,4}-[0-9]{1,2}$/;
const DATA_CENTER_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

/**
 * `locations`, comma-separated, as stored and answered: assigned ISO 3166-1 alpha-2 countries (upper case;
 * one no data center has yet is kept, and workers wait for it, saying so) and ids of this Gantry's
 * data centers (the operator's spelling): workers go to hosts in any of them. The hosted service's
 * data-center ids (its flash tool sends all of them for a GPU resource) that are not data centers
 * here are dropped, and the endpoint answers the locations it kept: they cannot constrain placement
 * to somewhere that does not exist. Anything else is refused.
 */
async function resolveLocations(ctx: DomainContext, locations: string | null | undefined): Promise<string | undefined> {
  if (locations === undefined) return undefined;
  const list = (locations ?? '')
    .split(',')
    .map((l) => l.trim())
    .filter(Boolean);
  if (list.length > MAX_LOCATIONS)
    throw validationFailed([`$.locations: at most ${MAX_LOCATIONS} entries, got ${list.length}`]);
  const others = list.filter((l) => !isAssignedCountry(l.toUpperCase()));
  const known = new Map<string, string>();
  if (others.some((l) => DATA_CENTER_ID.test(l))) {
    const [settings, hosts] = await Promise.all([
      ctx.db.dataCenter.findMany({ select: { id: true } }),
      ctx.db.host.findMany({ distinct: ['dataCenterId'], select: { dataCenterId: true } }),
    ]);
    for (const id of [...settings.map((d) => d.id), ...hosts.map((h) => h.dataCenterId)])
      known.set(id.toUpperCase(), id);
  }
  const kept: string[] = [];
  const bad: string[] = [];
  for (const entry of list) {
    const upper = entry.toUpperCase();
    if (isAssignedCountry(upper)) kept.push(upper);
    else if (known.has(upper)) kept.push(known.get(upper)!);
    else if (!HOSTED_DATA_CENTER.test(upper)) bad.push(entry);
  }
  if (bad.length > 0)
    throw validationFailed([
      `$.locations: ${bad
        .slice(0, 3)
        .map((b) => JSON.stringify(b.slice(0, 40)))
        .join(', ')}${bad.length > 3 ? ` and ${bad.length - 3} more` : ''}: ` +
        'neither an ISO 3166-1 alpha-2 country code (US, CZ, ...) nor a data center of this platform',
    ]);
  return [...new Set(kept)].join(',');
}

/** `saveEndpoint`: creates without `id`; with `id` changes the given fields (the template's container config on a template change). */
export async function saveEndpoint(ctx: DomainContext, principal: Principal, raw: unknown): Promise<Endpoint> {
  requireScope(principal, 'WRITE');
  const input = validate(SaveEndpointInputSchema, raw);
  if (input.id) requireEndpointAccess(principal, input.id);
  else requireAccountWide(principal);
  const locations = await resolveLocations(ctx, input.locations);
  const cudaVersions = parseCudaVersions(input.allowedCudaVersions);
  const { templateId, container, current, flashEnvironment } = await saveEndpointTemplate(ctx, principal, input);
  const { pools, cpuInstance } = saveEndpointCompute(input);
  const save: EndpointSave = {
    input,
    templateId,
    container,
    pools,
    cpuInstance,
    compute: cpuInstance ? { cpuInstance } : {},
    type: input.type === undefined ? undefined : input.type === 'LB' ? 'LOAD_BALANCING' : 'QUEUE_BASED',
    flashEnvironment,
  };
  const id = input.id
    ? await updateSavedEndpoint(ctx, principal, input.id, current, save)
    : await createSavedEndpoint(ctx, principal, save);
  // The GraphQL-only fields.
  const row = await ctx.db.endpoint.update({
    where: { id },
    data: {
      templateId,
      ...(locations !== undefined ? { locations } : {}),
      ...(cudaVersions !== undefined ? { allowedCudaVersions: cudaVersions } : {}),
      ...(input.minCudaVersion !== undefined ? { minCudaVersion: input.minCudaVersion } : {}),
    },
  });
  forgetEndpoint(ctx, id);
  return row;
}

/** What `saveEndpoint` creates or changes an endpoint with. */
interface EndpointSave {
  input: SaveEndpointInput;
  templateId: string;
  /** The template's container configuration. */
  container: Record<string, unknown>;
  /** The GPU pools asked for (exclusions left out). */
  pools: string[];
  cpuInstance: CpuInstance | undefined;
  compute: { cpuInstance?: CpuInstance };
  type: 'LOAD_BALANCING' | 'QUEUE_BASED' | undefined;
  flashEnvironment: string | undefined;
}

/**
 * `saveEndpoint`'s template (named, or saved from the inline one) and its container configuration,
 * with the endpoint saved again (`id`) and the flash environment the endpoint belongs to.
 */
async function saveEndpointTemplate(
  ctx: DomainContext,
  principal: Principal,
  input: SaveEndpointInput,
): Promise<{
  templateId: string;
  container: Record<string, unknown>;
  current: Endpoint | null;
  flashEnvironment: string | undefined;
}> {
  if (input.templateId === undefined && input.template === undefined)
    throw validationFailed(['$.templateId: name a template, or give one inline in template']);
  if (input.templateId !== undefined && input.template !== undefined)
    throw validationFailed(['$.template: give templateId or template, not both']);
  const flashEnvironment = input.flashEnvironmentId
    ? await appEnvironmentFor(ctx, principal, input.flashEnvironmentId)
    : undefined;
  const templateId = input.template ? await saveInlineTemplate(ctx, principal, input.template) : input.templateId;
  const template = await ctx.db.template.findFirst({ where: { id: templateId, accountId: principal.accountId } });
  if (!template) throw validationFailed([`$.templateId: no template '${templateId}'`]);
  // Endpoint workers start from a serverless template, as on the hosted service (which refuses a pod
  // template); an endpoint saved again with the template it already runs is left as it is.
  const current = input.id
    ? await ctx.db.endpoint.findFirst({ where: { id: input.id, accountId: principal.accountId, deletingAt: null } })
    : null;
  if (!template.isServerless && current?.templateId !== template.id)
    throw validationFailed([
      `$.templateId: template '${template.id}' is a pod template (isServerless false); an endpoint runs a serverless template (saveTemplate with isServerless: true)`,
    ]);
  // flash's images run as Gantry's flash runtime: a base no host can get is said now, not by idle workers.
  if (flashEnvironment)
    await checkFlashEndpointImage(
      ctx,
      { accountId: principal.accountId, appEnvironmentId: flashEnvironment },
      template.imageName,
      input.template ? '$.template.imageName' : '$.templateId',
    );
  const container = {
    image: template.imageName,
    args: template.dockerArgs,
    disk: template.containerDiskInGb,
    ports: template.ports
      .split(',')
      .map((p) => p.trim())
      .filter(Boolean),
    env: template.env as Record<string, string>,
    registry: template.registryId,
  };
  return { templateId: template.id, container, current, flashEnvironment };
}

/** `saveEndpoint`'s GPU pools or CPU instance: one or the other, and one of them for a new endpoint. */
function saveEndpointCompute(input: SaveEndpointInput): { pools: string[]; cpuInstance: CpuInstance | undefined } {
  // Exclusions ("-ADA_24") narrow the pools the scheduler may choose; the stored list keeps the wanted ones.
  const pools = (input.gpuIds ?? '')
    .split(',')
    .map((p) => p.trim())
    .filter((p) => p && !p.startsWith('-') && p !== 'CPU');
  const instanceId = input.instanceIds?.[0];
  let cpuInstance: CpuInstance | undefined;
  if (instanceId !== undefined) {
    if (pools.length > 0)
      throw validationFailed(['$.gpuIds: a CPU endpoint (instanceIds) names no GPU pools; leave gpuIds empty']);
    cpuInstance = smallestForOneVcpu(requireCpuInstanceId('$.instanceIds[0]', instanceId));
  } else if (pools.length === 0 && !input.id) {
    throw validationFailed(['$.gpuIds: name at least one GPU pool, or a CPU instance in instanceIds']);
  }
  return { pools, cpuInstance };
}

/** A new endpoint from `saveEndpoint`: what the input leaves out takes the hosted service's defaults. */
async function createSavedEndpoint(
  ctx: DomainContext,
  principal: Principal,
  { input, container, pools, cpuInstance, compute, type, flashEnvironment }: EndpointSave,
): Promise<string> {
  const created = await createEndpoint(
    ctx,
    principal,
    {
      name: input.name,
      type: type ?? 'QUEUE_BASED',
      ...container,
      ...(cpuInstance ? {} : { gpu: { pools, count: input.gpuCount ?? 1 } }),
      workers: { min: input.workersMin ?? 0, max: input.workersMax ?? 3 },
      scaling: {
        type: input.scalerType ?? 'QUEUE_DELAY',
        value: input.scalerValue ?? 4,
        idleTimeout: input.idleTimeout ?? 5,
      },
      networkVolumes: input.networkVolumeId ? [input.networkVolumeId] : [],
      flashboot: input.flashBootType ?? 'OFF',
      ...(input.executionTimeoutMs ? { timeout: input.executionTimeoutMs } : {}),
    },
    { ...compute, ...(flashEnvironment ? { app: { environmentId: flashEnvironment, resource: input.name } } : {}) },
  );
  return created.id;
}

/** An endpoint saved again (`id`): only the fields given change; the container config on a template change. */
async function updateSavedEndpoint(
  ctx: DomainContext,
  principal: Principal,
  id: string,
  current: Endpoint | null,
  { input, templateId, container, pools, cpuInstance, compute, type, flashEnvironment }: EndpointSave,
): Promise<string> {
  if (!current) throw notFound('endpoint');
  if (flashEnvironment && current.appEnvironmentId !== flashEnvironment)
    throw new DomainError(
      'conflict',
      `endpoint ${id} belongs to ${current.appEnvironmentId ? 'another' : 'no'} environment`,
    );
  // Saved again without gpuIds (or instanceIds), an endpoint keeps its pools or its CPU instance;
  // gpuIds that name no pool are refused.
  if (
    pools.length === 0 &&
    !cpuInstance &&
    !current.cpuFlavorId &&
    (input.gpuIds !== undefined || current.gpuPools.length === 0)
  )
    throw validationFailed(['$.gpuIds: name at least one GPU pool, or a CPU instance in instanceIds']);
  const workers =
    input.workersMin !== undefined || input.workersMax !== undefined
      ? { min: input.workersMin ?? current.workersMin, max: input.workersMax ?? current.workersMax }
      : undefined;
  // gpuCount alone changes the count of the pools the endpoint has (a CPU endpoint has no GPUs to count).
  const gpu =
    pools.length > 0
      ? { pools, count: input.gpuCount ?? current.gpuCount ?? 1 }
      : input.gpuCount !== undefined && !cpuInstance && current.gpuPools.length > 0
        ? { pools: current.gpuPools, count: input.gpuCount }
        : undefined;
  const scaling =
    input.scalerType !== undefined || input.scalerValue !== undefined || input.idleTimeout !== undefined
      ? {
          type: input.scalerType ?? current.scalerType,
          value: input.scalerValue ?? current.scalerValue,
          idleTimeout: input.idleTimeout ?? current.idleTimeout,
        }
      : undefined;
  await updateEndpoint(
    ctx,
    principal,
    id,
    {
      name: input.name,
      ...(gpu ? { gpu } : {}),
      // An inline template is the whole container configuration again (flash sends it on each change).
      ...(templateId !== current.templateId || input.template ? container : {}),
      ...(workers ? { workers } : {}),
      ...(scaling ? { scaling } : {}),
      ...(input.networkVolumeId !== undefined
        ? { networkVolumes: input.networkVolumeId ? [input.networkVolumeId] : [] }
        : {}),
      ...(input.flashBootType !== undefined ? { flashboot: input.flashBootType } : {}),
      ...(input.executionTimeoutMs ? { timeout: input.executionTimeoutMs } : {}),
    },
    // The type as REST cannot say it: a change is a new release (updateEndpoint).
    { ...compute, ...(type ? { type } : {}) },
  );
  return id;
}

/**
 * `flashEnvironmentId`: the caller's environment the new endpoint belongs to (its app's tools list
 * and delete it with the environment). Not one that runs a gantry deploy build: that deploy removes
 * the endpoints its manifest does not name.
 */
async function appEnvironmentFor(ctx: DomainContext, principal: Principal, environmentId: string): Promise<string> {
  const env = await ctx.db.appEnvironment.findFirst({
    where: { id: environmentId, app: { accountId: principal.accountId } },
    select: { id: true, currentBuildId: true },
  });
  if (!env) throw notFound('environment');
  const build = env.currentBuildId
    ? await ctx.db.build.findUnique({ where: { id: env.currentBuildId }, select: { kind: true } })
    : null;
  if (build?.kind === 'GANTRY')
    throw new DomainError('conflict', "this environment runs a gantry deploy build: its endpoints are the deploy's");
  return env.id;
}

/** `myself { endpoint(id) }`: the caller's endpoint, or null when it has none of that id. */
export async function findEndpoint(ctx: DomainContext, principal: Principal, id: string): Promise<Endpoint | null> {
  requireScope(principal, 'READ');
  if (principal.endpointIds.length > 0 && !principal.endpointIds.includes(id)) return null;
  const row = await ctx.db.endpoint.findFirst({ where: { id, accountId: principal.accountId, deletingAt: null } });
  return row;
}

/** The build an app endpoint's environment runs (GraphQL `Endpoint.activeBuildid`); null for other endpoints. */
export async function endpointActiveBuild(ctx: DomainContext, appEnvironmentId: string | null) {
  if (!appEnvironmentId) return null;
  const env = await ctx.db.appEnvironment.findUnique({
    where: { id: appEnvironmentId },
    select: { currentBuildId: true },
  });
  return env?.currentBuildId ?? null;
}

export const UpdateEndpointTemplateInputSchema = Type.Object(
  {
    endpointId: Type.String({ minLength: 1, maxLength: 200 }),
    templateId: Type.String({ minLength: 1, maxLength: 200 }),
  },
  { additionalProperties: false },
);

/** `updateEndpointTemplate`: the endpoint runs another template of the account's (a new release, rolled out). */
export async function updateEndpointTemplate(
  ctx: DomainContext,
  principal: Principal,
  raw: unknown,
): Promise<Endpoint> {
  requireScope(principal, 'WRITE');
  const input = validate(UpdateEndpointTemplateInputSchema, raw);
  requireEndpointAccess(principal, input.endpointId);
  const current = await ctx.db.endpoint.findFirst({
    where: { id: input.endpointId, accountId: principal.accountId, deletingAt: null },
  });
  if (!current) throw notFound('endpoint');
  const gpuIds = current.gpuPools.join(',');
  return saveEndpoint(ctx, principal, {
    id: current.id,
    name: current.name,
    templateId: input.templateId,
    ...(gpuIds ? { gpuIds } : {}),
  });
}

/** `deleteEndpoint`: an endpoint scaled to zero (workersMin and workersMax both 0), or one of an app environment. */
export async function deleteEndpointScaledToZero(ctx: DomainContext, principal: Principal, id: string): Promise<void> {
  requireScope(principal, 'WRITE');
  const e = await ctx.db.endpoint.findFirst({ where: { id, accountId: principal.accountId, deletingAt: null } });
  if (!e) throw notFound('endpoint');
  // An app environment's endpoint is its tools' to remove (flash undeploy deletes without scaling
  // down first, as gantry undeploy does): it drains like any deleted endpoint.
  if (e.appEnvironmentId === null && (e.workersMin !== 0 || e.workersMax !== 0)) {
    throw new DomainError(
      'bad_request',
      `endpoint ${id} has workersMin ${e.workersMin} and workersMax ${e.workersMax}; set both to 0 before deleting it`,
    );
  }
  await deleteEndpoint(ctx, principal, id);
}
