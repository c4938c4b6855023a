import { isIP } from 'node:net';
import { Type, type Static } from 'typebox';
import type { Host, Pod, Prisma, Template, Worker } from '../../generated/prisma/client.ts';
import { WorkflowNotFoundError } from '@temporalio/client';
import { drainWorker, podChanged, podWorkflowId, workerWorkflowId, type PodWorkflow } from '../../contracts/workflows.ts';
import { gantryMemo, gantrySearchAttributes } from '../../contracts/search-attributes.ts';
import { requireScope, type Principal } from '../accounts/auth.ts';
import type { DomainContext } from '../context.ts';
import { DomainError, notFound, validationFailed } from '../errors.ts';
import { gpuTypeId as gpuTypeIdOf } from '../catalog/gpu-pools.ts';
import { newId } from '../shared/ids.ts';
import { gpuRate, priceTable, type PriceTable } from '../billing/pricing.ts';
import { isUniqueViolation, registryBindingProblems, requireAccountWide } from '../registries/registries.ts';
import { validate } from '../shared/validation.ts';
import { volumeReferenceProblems } from '../network-volumes/network-volumes.ts';
import { liveWorker } from '../workers/status.ts';
import { ArgsSchema, EnvListSchema, EnvSchema, ImageSchema, MountPathSchema } from '../containers/fields.ts';

/**
 * Pods (GraphQL; REST at the end of this file): long-running containers on a host, run by the
 * same worker machinery as endpoint workers. Each pod has a workflow `pod:<podId>`
 * (workflows/pod.ts) that keeps one worker while the pod's desired status is RUNNING. The row is
 * the truth: every change is committed here first, then the workflow is told (a signal that starts
 * it if need be) before the request is answered.
 *
 * Pods belong to the whole account: a key limited to some endpoints does not reach them.
 */

// ---------------------------------------------------------------- input shapes

/** Container env files take POSIX names only (hostctl/containers.ts envFile). */

/** Most ports one pod may expose (each takes a host port). */
const MAX_PORTS = 32;

/**
 * `podFindAndDeployOnDemand` input: the spec's common fields plus `templateId`. The hosted service's
 * other placement and billing options (cloud type, minimum vCPUs and memory, SSH and Jupyter
 * start-up, ...) are accepted so that existing clients work, and have no effect here.
 */
export const PodDeployInputSchema = Type.Object(
  {
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 191, description: 'unique within the account' })),
    imageName: Type.Optional(ImageSchema),
    templateId: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    dockerArgs: Type.Optional(ArgsSchema),
    containerDiskInGb: Type.Optional(Type.Integer({ minimum: 1, maximum: 4096 })),
    volumeInGb: Type.Optional(Type.Integer({ minimum: 0, maximum: 4096 })),
    volumeMountPath: Type.Optional(MountPathSchema),
    env: Type.Optional(EnvListSchema),
    ports: Type.Optional(Type.String({ maxLength: 1024 })),
    gpuTypeId: Type.Optional(Type.String({ minLength: 1, maxLength: 191 })),
    gpuCount: Type.Optional(Type.Integer({ minimum: 0, maximum: 64 })),
    containerRegistryAuthId: Type.Optional(Type.String({ maxLength: 200 })),
    networkVolumeId: Type.Optional(Type.String({ maxLength: 200 })),
    // Accepted for compatibility, no effect.
    cloudType: Type.Optional(Type.String({ maxLength: 64 })),
    dataCenterId: Type.Optional(Type.String({ maxLength: 200 })),
    countryCode: Type.Optional(Type.String({ maxLength: 64 })),
    minVcpuCount: Type.Optional(Type.Integer()),
    minMemoryInGb: Type.Optional(Type.Integer()),
    startSsh: Type.Optional(Type.Boolean()),
    startJupyter: Type.Optional(Type.Boolean()),
    supportPublicIp: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);
export type PodDeployInput = Static<typeof PodDeployInputSchema>;

const PodIdInputSchema = Type.Object({ podId: Type.String({ minLength: 1 }) }, { additionalProperties: false });
const PodResumeInputSchema = Type.Object({ podId: Type.String({ minLength: 1 }), gpuCount: Type.Optional(Type.Integer({ minimum: 0, maximum: 64 })) }, { additionalProperties: false });

/** A pod's `ports` string (`8888/http,22/tcp`) as entries, in order: the order its host ports are handed out in. */
export const podPorts = (ports: string): Array<{ port: number; protocol: 'http' | 'tcp' | 'udp' }> =>
  ports
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean)
    .map((entry) => {
      const [port = '', protocol = 'tcp'] = entry.split('/');
      return { port: Number(port), protocol: protocol === 'http' || protocol === 'udp' ? protocol : 'tcp' };
    });

// ---------------------------------------------------------------- the GraphQL record

export interface PodRuntimePort {
  ip: string;
  isIpPublic: boolean;
  privatePort: number;
  publicPort: number;
  type: string;
}

export interface PodRecord {
  id: string;
  name: string;
  imageName: string;
  desiredStatus: Pod['desiredStatus'];
  lastStatusChange: string;
  dockerArgs: string;
  /** `KEY=VALUE` strings, as the hosted service lists a pod's environment. */
  env: string[];
  ports: string;
  gpuCount: number;
  gpuTypeId: string | null;
  containerDiskInGb: number;
  volumeInGb: number;
  volumeMountPath: string;
  templateId: string | null;
  containerRegistryAuthId: string | null;
  machineId: string | null;
  machine: { podHostId: string; gpuDisplayName: string | null; gpuTypeId: string | null; location: string } | null;
  costPerHr: number | null;
  uptimeSeconds: number;
  /** Null while the pod's container is not running. */
  runtime: { uptimeInSeconds: number; ports: PodRuntimePort[]; gpus: Array<{ id: string }> } | null;
}


type PodRow = Pod & { workers: Array<Worker & { host: Host | null }> };

/** Loopback, private, link-local and shared ranges; a host name counts as not public (unknown). */
function isPublicAddress(address: string): boolean {
  const kind = isIP(address);
  if (kind === 4) {
    const [a = 0, b = 0] = address.split('.').map(Number);
    return !(a === 10 || a === 127 || a === 0 || (a === 172 && b >= 16 && b < 32) || (a === 192 && b === 168) || (a === 169 && b === 254) || (a === 100 && b >= 64 && b < 128));
  }
  if (kind === 6) return !/^(::1$|fc|fd|fe80)/i.test(address);
  return false;
}

function podRecord(row: PodRow, prices: PriceTable, now = Date.now()): PodRecord {
  // The newest live worker: at most one, except for a moment while a replacement starts.
  const worker = row.workers.at(-1);
  const host = worker?.host ?? null;
  const running = !!worker && !!host && !!worker.readyAt && (worker.status === 'RUNNING' || worker.status === 'IDLE');
  const uptime = running ? Math.max(0, Math.floor((now - worker.readyAt!.getTime()) / 1000)) : 0;
  const gpuType = worker?.gpuTypeId ?? row.gpuTypeId;
  return {
    id: row.id,
    name: row.name,
    imageName: row.imageName,
    desiredStatus: row.desiredStatus,
    lastStatusChange: (running ? worker.readyAt! : row.updatedAt).toISOString(),
    dockerArgs: row.dockerArgs,
    env: Object.entries(row.env as Record<string, string>).map(([k, v]) => `${k}=${v}`),
    ports: row.ports,
    gpuCount: row.gpuCount,
    gpuTypeId: row.gpuTypeId,
    containerDiskInGb: row.containerDiskInGb,
    volumeInGb: row.volumeInGb,
    volumeMountPath: row.volumeMountPath,
    templateId: row.templateId,
    containerRegistryAuthId: row.registryId,
    machineId: host?.id ?? null,
    machine: host && worker ? { podHostId: worker.id, gpuDisplayName: worker.gpuTypeId, gpuTypeId: worker.gpuTypeId, location: host.dataCenterId } : null,
    costPerHr: row.gpuCount > 0 && gpuType ? Math.round(gpuRate(prices, gpuType).podPerHour * row.gpuCount * 1e4) / 1e4 : null,
    uptimeSeconds: uptime,
    runtime: running
      ? {
          uptimeInSeconds: uptime,
          ports: worker.hostPort
            ? podPorts(row.ports).map((p, i) => ({ ip: host.address, isIpPublic: isPublicAddress(host.address), privatePort: p.port, publicPort: worker.hostPort! + i, type: p.protocol }))
            : [],
          gpus: worker.gpuUuids.map((id) => ({ id })),
        }
      : null,
  };
}

const withWorkers = { workers: { where: liveWorker, include: { host: true }, orderBy: { createdAt: 'asc' as const } } };

/** The caller's pod; others' pods and terminated ones are not found. */
async function findPod(ctx: DomainContext, principal: Principal, podId: string): Promise<PodRow> {
  const row = await ctx.db.pod.findFirst({ where: { id: podId, accountId: principal.accountId, desiredStatus: { not: 'TERMINATED' } }, include: withWorkers });
  if (!row) throw notFound('pod');
  return row;
}

// ---------------------------------------------------------------- rules

function portProblems(ports: string): string[] {
  const problems: string[] = [];
  const entries = ports
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean);
  const seen = new Set<string>();
  for (const entry of entries) {
    const m = /^([0-9]{1,5})\/(http|tcp|udp)$/.exec(entry);
    if (!m || Number(m[1]) < 1 || Number(m[1]) > 65535) problems.push(`$.ports: '${entry}' is not port/protocol with a port 1-65535 and protocol http, tcp or udp`);
    else if (seen.has(`${m[1]}/${m[2] === 'udp' ? 'udp' : 'tcp'}`)) problems.push(`$.ports: port ${m[1]} is listed twice`);
    if (m) seen.add(`${m[1]}/${m[2] === 'udp' ? 'udp' : 'tcp'}`);
  }
  if (entries.length > MAX_PORTS) problems.push(`$.ports: at most ${MAX_PORTS} ports`);
  return problems;
}

/**
 * A GPU pod must fit on one registered host: of the asked-for type (any type when none is named),
 * `gpuCount` cards on one machine. Whether they are free now is placement's business (the pod
 * waits for them); asking for more than any host has could never be placed.
 */
async function gpuProblems(ctx: DomainContext, gpuTypeId: string | null, gpuCount: number): Promise<string[]> {
  if (gpuCount === 0) return gpuTypeId ? ['$.gpuTypeId: a pod with gpuCount 0 runs on CPUs only; leave gpuTypeId out or ask for at least one GPU'] : [];
  const hosts = await ctx.db.host.findMany({ where: { status: { not: 'DISABLED' } }, select: { gpus: true } });
  const perHost = hosts.map((h) => ((h.gpus ?? []) as Array<{ name: string }>).filter((g) => !gpuTypeId || gpuTypeIdOf(g.name) === gpuTypeId).length);
  const most = Math.max(0, ...perHost);
  if (gpuTypeId && most === 0) return [`$.gpuTypeId: no registered host has a GPU of type '${gpuTypeId}' (the gpuTypes query lists the types there are)`];
  if (most < gpuCount) {
    const what = gpuTypeId ? `GPUs of type '${gpuTypeId}'` : 'GPUs';
    return [`$.gpuCount: ${gpuCount} ${what} asked for, but no registered host has more than ${most}`];
  }
  return [];
}

function envProblems(env: Record<string, string>): string[] {
  return Object.entries(env)
    .filter(([, v]) => /[\r\n\0]/.test(v))
    .map(([k]) => `$.env: the value of '${k}' holds a line break or NUL, which a container environment cannot carry`);
}

// ---------------------------------------------------------------- the workflow

const WORKFLOW_CALL_BUDGET_MS = 8_000;

/** Starts the pod's workflow if it is not running and tells it to read the row again. */
async function tellWorkflow(ctx: DomainContext, podId: string): Promise<void> {
  // Search attributes and memo count only when this starts the workflow (its workers inherit them).
  const pod = await ctx.db.pod.findUnique({ where: { id: podId }, select: { accountId: true, name: true } });
  await ctx.temporal.withDeadline(Date.now() + WORKFLOW_CALL_BUDGET_MS, () =>
    ctx.temporal.workflow.signalWithStart<PodWorkflow, []>('podWorkflow', {
      workflowId: podWorkflowId(podId),
      taskQueue: ctx.taskQueue,
      args: [{ podId }],
      typedSearchAttributes: gantrySearchAttributes('pod', { podId, accountId: pod?.accountId }),
      memo: gantryMemo({ podName: pod?.name }),
      signal: podChanged,
      signalArgs: [],
    }),
  );
}

/** Saves a change of what the pod should be (where its row still matches `where`), tells its workflow, and answers the pod. */
async function changePod(
  ctx: DomainContext,
  principal: Principal,
  podId: string,
  where: Prisma.PodWhereInput,
  data: Prisma.PodUpdateManyMutationInput,
): Promise<PodRecord> {
  await ctx.db.pod.updateMany({ where: { id: podId, ...where }, data });
  try {
    await tellWorkflow(ctx, podId);
  } catch {
    throw new DomainError('unavailable', 'the change is saved but has not reached the pod yet (Temporal did not answer in time); repeat the request to apply it');
  }
  return podRecord(await findPod(ctx, principal, podId), priceTable(ctx.settings.pricesFile));
}

// ---------------------------------------------------------------- operations

/** GraphQL `podFindAndDeployOnDemand`: a new pod, RUNNING; answered once its row and workflow exist. */
export async function deployPod(ctx: DomainContext, principal: Principal, input: unknown): Promise<PodRecord> {
  requireScope(principal, 'WRITE');
  requireAccountWide(principal);
  const i = validate(PodDeployInputSchema, input);
  const problems: string[] = [];

  let template: Template | null = null;
  if (i.templateId) {
    template = await ctx.db.template.findFirst({ where: { id: i.templateId, accountId: principal.accountId } });
    if (!template) problems.push(`$.templateId: no template '${i.templateId}'`);
  }
  const imageName = i.imageName ?? template?.imageName;
  if (!imageName) problems.push("$.imageName: required (or a templateId whose template names the image)");
  const dockerArgs = i.dockerArgs ?? template?.dockerArgs ?? '';
  const ports = (i.ports ?? template?.ports ?? '')
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean)
    .join(',');
  problems.push(...portProblems(ports));
  // The template's environment, with the request's variables over it.
  const env: Record<string, string> = { ...((template?.env ?? {}) as Record<string, string>) };
  const given = new Set<string>();
  for (const { key, value } of i.env ?? []) {
    if (given.has(key)) problems.push(`$.env: key '${key}' is given twice`);
    given.add(key);
    env[key] = value;
  }
  problems.push(...envProblems(env));
  const registryId = i.containerRegistryAuthId !== undefined ? i.containerRegistryAuthId || null : (template?.registryId ?? null);
  if (registryId) problems.push(...(await registryBindingProblems(ctx.db, principal.accountId, registryId, imageName, '$.containerRegistryAuthId')));
  const networkVolumeId = i.networkVolumeId || null;
  if (networkVolumeId) problems.push(...(await volumeReferenceProblems(ctx, principal.accountId, [networkVolumeId], () => '$.networkVolumeId')));
  const gpuCount = i.gpuCount ?? 1;
  const gpuTypeId = i.gpuTypeId ?? null;
  problems.push(...(await gpuProblems(ctx, gpuTypeId, gpuCount)));
  if (problems.length > 0) throw validationFailed(problems);

  const id = newId();
  const name = i.name ?? `pod-${id}`;
  try {
    await ctx.db.pod.create({
      data: {
        id,
        accountId: principal.accountId,
        name,
        imageName: imageName!,
        dockerArgs,
        containerDiskInGb: i.containerDiskInGb ?? template?.containerDiskInGb ?? 10,
        // A network volume is the pod's volume: no volume of its own beside it.
        volumeInGb: networkVolumeId ? 0 : (i.volumeInGb ?? template?.volumeInGb ?? 0),
        networkVolumeId,
        volumeMountPath: i.volumeMountPath ?? template?.volumeMountPath ?? '/workspace',
        env,
        ports,
        gpuTypeId,
        gpuCount,
        templateId: template?.id ?? null,
        registryId,
        desiredStatus: 'RUNNING',
      },
    });
  } catch (err) {
    if (isUniqueViolation(err)) throw new DomainError('conflict', `a pod named '${name}' already exists`);
    throw err;
  }
  try {
    await tellWorkflow(ctx, id);
  } catch {
    // Nothing was promised yet: no pod rather than one that nothing runs.
    await ctx.db.pod.deleteMany({ where: { id } });
    throw new DomainError('unavailable', 'the pod could not be handed to its workflow (Temporal did not answer in time); nothing was created, try again');
  }
  return podRecord(await findPod(ctx, principal, id), priceTable(ctx.settings.pricesFile));
}

/** GraphQL `podStop`: the container goes, the pod stays (EXITED) and can be resumed. */
export async function stopPod(ctx: DomainContext, principal: Principal, input: unknown): Promise<PodRecord> {
  requireScope(principal, 'WRITE');
  requireAccountWide(principal);
  const { podId } = validate(PodIdInputSchema, input);
  await findPod(ctx, principal, podId);
  return changePod(ctx, principal, podId, { desiredStatus: 'RUNNING' }, { desiredStatus: 'EXITED' });
}

/** GraphQL `podResume`: RUNNING again on a new worker, optionally with another GPU count. */
export async function resumePod(ctx: DomainContext, principal: Principal, input: unknown): Promise<PodRecord> {
  requireScope(principal, 'WRITE');
  requireAccountWide(principal);
  const { podId, gpuCount } = validate(PodResumeInputSchema, input);
  const pod = await findPod(ctx, principal, podId);
  if (gpuCount !== undefined && gpuCount !== pod.gpuCount) {
    if (pod.desiredStatus === 'RUNNING') throw new DomainError('bad_request', `the pod is running with ${pod.gpuCount} GPUs; stop it before resuming it with another gpuCount`);
    const problems = await gpuProblems(ctx, pod.gpuTypeId, gpuCount);
    if (problems.length > 0) throw validationFailed(problems);
  }
  return changePod(ctx, principal, podId, { desiredStatus: { not: 'TERMINATED' } }, { desiredStatus: 'RUNNING', ...(gpuCount !== undefined ? { gpuCount } : {}) });
}

/**
 * GraphQL `podTerminate`: the pod is gone for its owner at once (not found from now on; its name is
 * free again); its workflow removes the container and then the row.
 */
export async function terminatePod(ctx: DomainContext, principal: Principal, input: unknown): Promise<void> {
  requireScope(principal, 'WRITE');
  requireAccountWide(principal);
  const { podId } = validate(PodIdInputSchema, input);
  await findPod(ctx, principal, podId);
  // The row stays until the container is gone; renamed so that the name can be used again meanwhile.
  await ctx.db.pod.updateMany({ where: { id: podId, desiredStatus: { not: 'TERMINATED' } }, data: { desiredStatus: 'TERMINATED', name: `${podId}~terminated` } });
  try {
    await tellWorkflow(ctx, podId);
  } catch {
    throw new DomainError('unavailable', 'the pod is terminated, but its workflow did not answer in time; it removes the container at its next check (within a minute of Temporal answering again)');
  }
}

/** GraphQL `pod(input: {podId})`. */
export async function getPod(ctx: DomainContext, principal: Principal, input: unknown): Promise<PodRecord> {
  requireScope(principal, 'READ');
  requireAccountWide(principal);
  const { podId } = validate(PodIdInputSchema, input);
  return podRecord(await findPod(ctx, principal, podId), priceTable(ctx.settings.pricesFile));
}

/** GraphQL `myself { pods }`. */
export async function listPods(ctx: DomainContext, principal: Principal): Promise<PodRecord[]> {
  requireScope(principal, 'READ');
  requireAccountWide(principal);
  const rows = await ctx.db.pod.findMany({ where: { accountId: principal.accountId, desiredStatus: { not: 'TERMINATED' } }, include: withWorkers, orderBy: { createdAt: 'asc' } });
  const now = Date.now();
  const prices = priceTable(ctx.settings.pricesFile);
  return rows.map((r) => podRecord(r, prices, now));
}

// ---------------------------------------------------------------- REST (/v2/pods)

/*
 * The REST skin over the same operations, in the hosted REST v2 shape (the container fields
 * `image`, `args`, `disk`, `ports` array, `env` object and `registry` that templates and endpoints
 * share, plus `gpu {id, count}`, `cpu`, `mounts`). Create translates the body into the GraphQL
 * input and calls `deployPod`, so both skins keep one set of rules; the answer and its errors are
 * given back in REST's field names. Update (the hosted GraphQL has no pod update) and the state
 * actions live here too, and call the same rules and operations.
 */

const RestPortSchema = Type.String({ pattern: '^[0-9]{1,5}/(http|tcp|udp)$', maxLength: 11, description: '`port/protocol`, e.g. `8888/http`' });
const RestPortsSchema = Type.Array(RestPortSchema, { maxItems: MAX_PORTS, description: `exposed ports, each published on a host port while the pod runs; at most ${MAX_PORTS}` });
const RestDiskSchema = Type.Integer({ minimum: 1, maximum: 4096, description: 'container disk in GB (ephemeral: a new container starts empty)' });
const RestRegistrySchema = Type.Union([Type.String({ minLength: 1, maxLength: 200 }), Type.Null()], { description: 'registry credential id, for private images' });
const RestPersistentMountSchema = Type.Object(
  {
    size: Type.Integer({ minimum: 1, maximum: 4096, description: 'GB (not enforced: volume quotas need XFS project quotas on the host)' }),
    path: MountPathSchema,
  },
  { additionalProperties: false, description: "a volume on the pod's host that survives stop, start and a replaced container; the pod stays on that host" },
);
const RestNetworkMountSchema = Type.Object(
  { volumeId: Type.String({ minLength: 1, maxLength: 200, description: 'a network volume of the account' }), path: MountPathSchema },
  { additionalProperties: false },
);
const RestMountsSchema = Type.Object(
  {
    persistent: Type.Optional(RestPersistentMountSchema),
    network: Type.Optional(Type.Array(RestNetworkMountSchema, { maxItems: 1, description: 'at most one network volume' })),
  },
  { additionalProperties: false, description: 'at most one of `persistent` and `network`' },
);
const CudaVersionSchema = Type.String({ pattern: '^[0-9]{1,4}\\.[0-9]{1,4}$', description: 'accepted, no effect' });

export const CreatePodBodySchema = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 191, description: 'unique within the account' }),
    image: Type.Optional(ImageSchema),
    args: Type.Optional(ArgsSchema),
    disk: Type.Optional(RestDiskSchema),
    ports: Type.Optional(RestPortsSchema),
    env: Type.Optional(EnvSchema),
    registry: Type.Optional(RestRegistrySchema),
    templateId: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: "a template of the account whose container settings fill what the body leaves out (`env` merged per key, the body's values winning)" })),
    gpu: Type.Optional(
      Type.Object(
        {
          id: Type.String({ minLength: 1, maxLength: 191, description: 'GPU type (GET /v2/catalog/gpus)' }),
          count: Type.Optional(Type.Integer({ minimum: 1, maximum: 64, description: 'GPUs on one host; default 1' })),
          allowedCudaVersions: Type.Optional(Type.Array(CudaVersionSchema, { maxItems: 64 })),
          minCudaVersion: Type.Optional(CudaVersionSchema),
        },
        { additionalProperties: false, description: 'a GPU pod: give exactly one of `gpu` and `cpu`' },
      ),
    ),
    cpu: Type.Optional(
      Type.Object(
        { id: Type.String({ minLength: 1, maxLength: 64 }), vcpuCount: Type.Integer({ minimum: 2, maximum: 1024 }) },
        { additionalProperties: false, description: 'a CPU pod (no GPU); the flavor and vCPU count are accepted and have no effect' },
      ),
    ),
    mounts: Type.Optional(RestMountsSchema),
    dataCenterIds: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 200 }), { maxItems: 64, description: 'accepted, no effect' })),
    cloud: Type.Optional(Type.Union([Type.Literal('SECURE'), Type.Literal('COMMUNITY')], { description: 'accepted, no effect' })),
    globalNetworking: Type.Optional(Type.Boolean({ description: 'accepted, no effect' })),
    startSsh: Type.Optional(Type.Boolean({ description: 'accepted, no effect' })),
    startJupyter: Type.Optional(Type.Boolean({ description: 'accepted, no effect' })),
  },
  { additionalProperties: false },
);

export const UpdatePodBodySchema = Type.Object(
  {
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 191 })),
    image: Type.Optional(ImageSchema),
    args: Type.Optional(ArgsSchema),
    disk: Type.Optional(RestDiskSchema),
    ports: Type.Optional(RestPortsSchema),
    env: Type.Optional(EnvSchema),
    registry: Type.Optional(RestRegistrySchema),
    templateId: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: "a template whose container settings apply as if given here (not its mounts); the body's fields win, `env` merged per key" })),
    mounts: Type.Optional(RestMountsSchema),
    locked: Type.Optional(Type.Boolean({ description: 'accepted, no effect' })),
    globalNetworking: Type.Optional(Type.Boolean({ description: 'accepted, no effect' })),
  },
  { additionalProperties: false },
);

const PodActionNameSchema = Type.Union([Type.Literal('start'), Type.Literal('stop'), Type.Literal('restart'), Type.Literal('terminate')]);
export const PodActionBodySchema = Type.Object({ action: PodActionNameSchema }, { additionalProperties: false });
export type PodActionName = Static<typeof PodActionNameSchema>;


/** What each status allows (the pod's `actions`); anything else is 409. */
const ACTIONS_BY_STATUS: Record<PodStatus, PodActionName[]> = {
  PROVISIONING: ['stop', 'terminate'],
  STARTING: ['stop', 'terminate'],
  RUNNING: ['stop', 'restart', 'terminate'],
  EXITED: ['start', 'terminate'],
  ERROR: ['start', 'terminate'],
  TERMINATED: [],
};

const NullableString = Type.Union([Type.String(), Type.Null()]);
const SshEndpointSchema = Type.Object({ host: Type.String(), port: Type.Integer(), username: Type.String(), command: Type.String() });

export const PodViewSchema = Type.Object({
  id: Type.String(),
  name: Type.String(),
  status: Type.Union([Type.Literal('PROVISIONING'), Type.Literal('STARTING'), Type.Literal('RUNNING'), Type.Literal('EXITED'), Type.Literal('ERROR'), Type.Literal('TERMINATED')], {
    description: 'PROVISIONING (waiting for a host), STARTING (image pull, container start), RUNNING (container up), EXITED (stopped)',
  }),
  desiredStatus: Type.Union([Type.Literal('RUNNING'), Type.Literal('EXITED'), Type.Literal('TERMINATED')], { description: 'what the owner asked for, as GraphQL shows it' }),
  actions: Type.Array(PodActionNameSchema, { description: 'the actions the current status allows' }),
  image: Type.String(),
  args: Type.String(),
  disk: Type.Integer(),
  ports: Type.Array(Type.String()),
  env: Type.Record(Type.String(), Type.String()),
  registry: NullableString,
  mounts: Type.Object({
    persistent: Type.Optional(Type.Object({ size: Type.Integer(), path: Type.String() })),
    network: Type.Optional(Type.Array(Type.Object({ volumeId: Type.String(), path: Type.String() }))),
  }),
  gpu: Type.Optional(
    Type.Object(
      { id: Type.Union([Type.String(), Type.Null()], { description: 'null: any type (a pod made without one, not yet placed)' }), count: Type.Integer() },
      { description: 'GPU pods only' },
    ),
  ),
  cloud: Type.Literal('SECURE'),
  dataCenterId: Type.Union([Type.String(), Type.Null()], { description: "the data center of the pod's host while it has one" }),
  cudaVersion: Type.Union([Type.String(), Type.Null()], { description: "the CUDA version the pod's host reports, when known" }),
  ssh: Type.Object({
    proxy: Type.Null({ description: 'no SSH proxy here' }),
    direct: Type.Union([SshEndpointSchema, Type.Null()], { description: 'the published `22/tcp` port while the pod runs (the image must run its own sshd)' }),
  }),
  template: NullableString,
  cost: Type.Number({ description: 'USD per hour while the pod should run (GPU price list); 0 when stopped and for CPU pods' }),
  locked: Type.Boolean({ description: 'always false' }),
  globalNetworking: Type.Object({ enabled: Type.Boolean({ description: 'always false' }) }),
  runtime: Type.Union([
    Type.Object({
      uptime: Type.Integer({ description: 'seconds since the container became ready' }),
      gpus: Type.Array(Type.Object({ id: Type.String({ description: 'GPU UUID' }) })),
      ports: Type.Array(Type.Object({ private: Type.Integer(), public: Type.Union([Type.Integer(), Type.Null()]), type: Type.String(), ip: NullableString })),
    }),
    Type.Null(),
  ]),
  createdAt: Type.String({ format: 'date-time' }),
  startedAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], { description: 'when the running container became ready' }),
  lastStatusChange: Type.String({ format: 'date-time' }),
});
export type PodView = Static<typeof PodViewSchema>;
export type PodStatus = PodView['status'];
export const PodListViewSchema = Type.Object({ pods: Type.Array(PodViewSchema) });

function podStatus(row: PodRow, record: PodRecord): PodStatus {
  if (row.desiredStatus === 'TERMINATED') return 'TERMINATED';
  if (row.desiredStatus === 'EXITED') return 'EXITED';
  if (record.runtime) return 'RUNNING';
  return row.workers.at(-1)?.hostId ? 'STARTING' : 'PROVISIONING';
}

/** The REST shape of a pod: the GraphQL record's facts under the REST names. */
function podView(row: PodRow, prices: PriceTable, now = Date.now()): PodView {
  const r = podRecord(row, prices, now);
  const status = podStatus(row, r);
  const worker = row.workers.at(-1);
  const ports = r.runtime?.ports ?? [];
  const ssh = ports.find((p) => p.privatePort === 22 && p.type === 'tcp');
  const cudaVersion = (worker?.host?.probe as { cudaVersion?: unknown } | null | undefined)?.cudaVersion;
  return {
    id: r.id,
    name: r.name,
    status,
    desiredStatus: r.desiredStatus,
    actions: ACTIONS_BY_STATUS[status],
    image: r.imageName,
    args: r.dockerArgs,
    disk: r.containerDiskInGb,
    ports: podPorts(r.ports).map((p) => `${p.port}/${p.protocol}`),
    env: row.env as Record<string, string>,
    registry: r.containerRegistryAuthId,
    mounts: {
      ...(r.volumeInGb > 0 ? { persistent: { size: r.volumeInGb, path: r.volumeMountPath } } : {}),
      ...(row.networkVolumeId ? { network: [{ volumeId: row.networkVolumeId, path: r.volumeMountPath }] } : {}),
    },
    ...(r.gpuCount > 0 ? { gpu: { id: r.gpuTypeId ?? worker?.gpuTypeId ?? null, count: r.gpuCount } } : {}),
    cloud: 'SECURE',
    dataCenterId: r.machine?.location ?? null,
    cudaVersion: typeof cudaVersion === 'string' ? cudaVersion : null,
    ssh: { proxy: null, direct: ssh ? { host: ssh.ip, port: ssh.publicPort, username: 'root', command: `ssh root@${ssh.ip} -p ${ssh.publicPort}` } : null },
    template: r.templateId,
    cost: row.desiredStatus === 'RUNNING' ? (r.costPerHr ?? 0) : 0,
    locked: false,
    globalNetworking: { enabled: false },
    runtime: r.runtime ? { uptime: r.runtime.uptimeInSeconds, gpus: r.runtime.gpus, ports: ports.map((p) => ({ private: p.privatePort, public: p.publicPort, type: p.type, ip: p.ip })) } : null,
    createdAt: row.createdAt.toISOString(),
    startedAt: r.runtime ? r.lastStatusChange : null,
    lastStatusChange: r.lastStatusChange,
  };
}

/** The GraphQL input fields that deployPod's rules name, as REST names them. */
function restFieldPaths(networkMount: boolean): Record<string, string> {
  return {
    imageName: 'image',
    dockerArgs: 'args',
    containerDiskInGb: 'disk',
    volumeInGb: 'mounts.persistent.size',
    volumeMountPath: networkMount ? 'mounts.network[0].path' : 'mounts.persistent.path',
    gpuTypeId: 'gpu.id',
    gpuCount: 'gpu.count',
    containerRegistryAuthId: 'registry',
    networkVolumeId: 'mounts.network[0].volumeId',
  };
}

/** Runs a GraphQL-shaped operation for REST: its validation failures name REST's fields. */
async function inRestTerms<T>(paths: Record<string, string>, run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (err) {
    if (!(err instanceof DomainError) || err.kind !== 'validation' || !err.errors) throw err;
    throw validationFailed(err.errors.map((e) => e.replace(/^\$\.([A-Za-z]+)/, (whole, field: string) => (paths[field] ? `$.${paths[field]}` : whole))));
  }
}

/** Only the keys whose value is defined. */
function definedOnly<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/**
 * Replaces the pod's container: its live workers drain, and the pod's workflow, finding none,
 * starts a new one from the pod's row as it is now. Each worker's workflow is told directly (a
 * worker whose workflow has already ended needs nothing).
 */
async function restartPodContainer(ctx: DomainContext, podId: string, reason: string): Promise<void> {
  const workers = await ctx.db.worker.findMany({ where: { podId, ...liveWorker }, select: { id: true } });
  try {
    await ctx.temporal.withDeadline(Date.now() + WORKFLOW_CALL_BUDGET_MS, () =>
      Promise.all(
        workers.map((w) =>
          ctx.temporal.workflow
            .getHandle(workerWorkflowId(w.id))
            .signal(drainWorker, { reason })
            .catch((err: unknown) => {
              if (!(err instanceof WorkflowNotFoundError)) throw err;
            }),
        ),
      ),
    );
  } catch {
    throw new DomainError('unavailable', "the pod's container could not be told to restart (Temporal did not answer in time); repeat with the restart action");
  }
}

/** REST `GET /v2/pods`: the account's pods, oldest first. */
export async function listPodViews(ctx: DomainContext, principal: Principal): Promise<PodView[]> {
  requireScope(principal, 'READ');
  requireAccountWide(principal);
  const rows = await ctx.db.pod.findMany({ where: { accountId: principal.accountId, desiredStatus: { not: 'TERMINATED' } }, include: withWorkers, orderBy: { createdAt: 'asc' } });
  const now = Date.now();
  const prices = priceTable(ctx.settings.pricesFile);
  return rows.map((r) => podView(r, prices, now));
}

/** REST `GET /v2/pods/{id}`. */
export async function getPodView(ctx: DomainContext, principal: Principal, podId: string): Promise<PodView> {
  requireScope(principal, 'READ');
  requireAccountWide(principal);
  return podView(await findPod(ctx, principal, podId), priceTable(ctx.settings.pricesFile));
}

/** REST `POST /v2/pods`: the body as `podFindAndDeployOnDemand`'s input, through `deployPod`. */
export async function createPod(ctx: DomainContext, principal: Principal, body: unknown): Promise<PodView> {
  requireScope(principal, 'WRITE');
  requireAccountWide(principal);
  const b = validate(CreatePodBodySchema, body);
  const problems: string[] = [];
  if (!b.gpu === !b.cpu) problems.push('$.gpu: give exactly one of gpu (a GPU pod) and cpu (a CPU pod)');
  const network = b.mounts?.network?.[0];
  if (b.mounts?.persistent && b.mounts.network?.length) problems.push('$.mounts: a pod has a persistent mount or a network mount, not both');
  if (problems.length > 0) throw validationFailed(problems);
  const input: PodDeployInput = definedOnly({
    name: b.name,
    imageName: b.image,
    templateId: b.templateId,
    dockerArgs: b.args,
    containerDiskInGb: b.disk,
    volumeInGb: b.mounts?.persistent?.size,
    volumeMountPath: b.mounts?.persistent?.path ?? network?.path,
    env: b.env ? Object.entries(b.env).map(([key, value]) => ({ key, value })) : undefined,
    ports: b.ports?.join(','),
    gpuTypeId: b.gpu?.id,
    gpuCount: b.gpu ? (b.gpu.count ?? 1) : 0,
    // deployPod reads an empty id as "no credential", over the template's.
    containerRegistryAuthId: b.registry === null ? '' : b.registry,
    networkVolumeId: network?.volumeId,
    cloudType: b.cloud,
    startSsh: b.startSsh,
    startJupyter: b.startJupyter,
  });
  const created = await inRestTerms(restFieldPaths(network !== undefined), () => deployPod(ctx, principal, input));
  return podView(await findPod(ctx, principal, created.id), priceTable(ctx.settings.pricesFile));
}

/**
 * REST `PATCH /v2/pods/{id}`: the fields present change, the others keep their values. A change of
 * the container's settings (anything but `name`) restarts a running pod's container with them, as
 * the restart action does; a stopped pod gets them at its next start. The kind of mount is fixed
 * when the pod is made (its size and path may change), and so is its network volume.
 */
export async function updatePod(ctx: DomainContext, principal: Principal, podId: string, body: unknown): Promise<PodView> {
  requireScope(principal, 'WRITE');
  requireAccountWide(principal);
  const b = validate(UpdatePodBodySchema, body);
  const pod = await findPod(ctx, principal, podId);
  const problems: string[] = [];

  let template: Template | null = null;
  if (b.templateId) {
    template = await ctx.db.template.findFirst({ where: { id: b.templateId, accountId: principal.accountId } });
    if (!template) problems.push(`$.templateId: no template '${b.templateId}'`);
  }
  const ports = b.ports ? b.ports.join(',') : template?.ports;
  if (ports !== undefined) problems.push(...portProblems(ports));
  const env = b.env || template ? { ...((template?.env ?? {}) as Record<string, string>), ...b.env } : undefined;
  if (env) problems.push(...envProblems(env));

  const { persistent, network } = b.mounts ?? {};
  if (persistent && pod.volumeInGb === 0) problems.push('$.mounts.persistent: the pod was made without a persistent mount; the kind of mount is fixed when a pod is made');
  if (network) {
    if (network.length === 0) problems.push("$.mounts.network: a pod's network volume cannot be removed");
    else if (!pod.networkVolumeId) problems.push('$.mounts.network: the pod was made without a network volume; the kind of mount is fixed when a pod is made');
    else if (network[0]!.volumeId !== pod.networkVolumeId) problems.push("$.mounts.network[0].volumeId: a pod's network volume cannot be changed");
  }

  const data = definedOnly({
    name: b.name,
    imageName: b.image ?? template?.imageName,
    dockerArgs: b.args ?? template?.dockerArgs,
    containerDiskInGb: b.disk ?? template?.containerDiskInGb,
    ports,
    env,
    registryId: b.registry !== undefined ? b.registry : template ? template.registryId : undefined,
    volumeInGb: persistent?.size,
    volumeMountPath: persistent?.path ?? network?.[0]?.path,
  });
  // A credential is bound to one registry: the image and the credential the pod will have must agree.
  const registryId = data.registryId !== undefined ? data.registryId : pod.registryId;
  if (registryId && (data.registryId !== undefined || data.imageName !== undefined)) {
    problems.push(...(await registryBindingProblems(ctx.db, principal.accountId, registryId, data.imageName ?? pod.imageName, '$.registry')));
  }
  if (problems.length > 0) throw validationFailed(problems);

  const sameEnv = (a: Record<string, string>, b2: Record<string, string>) => JSON.stringify(Object.entries(a).sort()) === JSON.stringify(Object.entries(b2).sort());
  const containerChanged = Object.entries(data).some(([k, v]) => {
    if (k === 'name') return false;
    if (k === 'env') return !sameEnv(v as Record<string, string>, pod.env as Record<string, string>);
    return v !== pod[k as keyof Pod];
  });
  try {
    await ctx.db.pod.updateMany({ where: { id: podId, desiredStatus: { not: 'TERMINATED' } }, data });
  } catch (err) {
    if (isUniqueViolation(err)) throw new DomainError('conflict', `a pod named '${b.name ?? ''}' already exists`);
    throw err;
  }
  if (containerChanged && pod.desiredStatus === 'RUNNING') await restartPodContainer(ctx, podId, 'the pod was updated; its container restarts with the new settings');
  return podView(await findPod(ctx, principal, podId), priceTable(ctx.settings.pricesFile));
}

/**
 * REST `POST /v2/pods/{id}/action` (and `/stop`, `/start`): a state change the pod's status allows
 * (409 otherwise), through the operations GraphQL uses. Answers the pod, or null once terminated.
 */
export async function podAction(ctx: DomainContext, principal: Principal, podId: string, body: unknown): Promise<PodView | null> {
  requireScope(principal, 'WRITE');
  requireAccountWide(principal);
  const { action } = validate(PodActionBodySchema, body);
  const row = await findPod(ctx, principal, podId);
  const status = podStatus(row, podRecord(row, priceTable(ctx.settings.pricesFile)));
  const allowed = ACTIONS_BY_STATUS[status];
  if (!allowed.includes(action)) throw new DomainError('conflict', `the pod is ${status}: it allows ${allowed.join(', ')}, not ${action}`);
  if (action === 'terminate') {
    await terminatePod(ctx, principal, { podId });
    return null;
  }
  if (action === 'stop') await stopPod(ctx, principal, { podId });
  else if (action === 'start') await resumePod(ctx, principal, { podId });
  else await restartPodContainer(ctx, podId, 'restarted by its owner');
  return podView(await findPod(ctx, principal, podId), priceTable(ctx.settings.pricesFile));
}
