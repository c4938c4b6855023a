import type { Endpoint } from '../../generated/prisma/client.ts';
import { Prisma } from '../../generated/prisma/client.ts';
import { specProblems } from '../../contracts/workflows.ts';
import { type Principal, requireAccountWide, requireEndpointAccess, requireScope } from '../accounts/auth.ts';
import { registryBindingProblems } from '../registries/registries.ts';
import type { DomainContext } from '../context.ts';
import { CreateEndpointSchema, UpdateEndpointSchema, type ReleaseDiffEntry } from './schemas.ts';
import { signalDeletion, tellEndpointWorkflow, WORKFLOW_CALL_BUDGET_MS } from './workflow-signals.ts';
import { startImagePrepull } from './image-prepull.ts';
import { DomainError, notFound, validationFailed } from '../errors.ts';
import { isGpuPoolId } from '../catalog/gpu-pools.ts';
import { newId } from '../shared/ids.ts';
import { cpuInstanceProblems, DEFAULT_CPU_INSTANCE, type CpuInstance } from '../catalog/cpu-instances.ts';
import { volumeReferenceProblems } from '../network-volumes/network-volumes.ts';
import { validate } from '../shared/validation.ts';
import { isUniqueViolation } from '../shared/db.ts';

/**
 * Base URL of a load-balancing endpoint: `https://<id>.<GANTRY_LB_DOMAIN>` when a wildcard domain
 * routes to the API, else the path-based proxy under the public URL.
 */
export function loadBalancerBaseUrl(endpointId: string, publicUrl: string, lbDomain: string | undefined): string {
  const domain = lbDomain?.trim().replace(/^\.+|\.+$/g, '');
  if (!domain) return `${publicUrl}/lb/${endpointId}`;
  // An HTTPS public URL on a port of its own is the API serving TLS there, wildcard names included.
  const pub = URL.canParse(publicUrl) ? new URL(publicUrl) : undefined;
  const port = pub?.protocol === 'https:' && pub.port ? `:${pub.port}` : '';
  return `https://${endpointId}.${domain}${port}`;
}

const unavailable = (detail: string): DomainError => new DomainError('unavailable', detail);

/**
 * How an endpoint's workers are sized when the REST body cannot say it: GraphQL `saveEndpoint`
 * names a CPU instance (`instanceIds`); REST makes a CPU endpoint of the default size when `gpu`
 * is left out, and keeps `cpu` read-only (docs/endpoints.md "CPU endpoints").
 */
export interface EndpointComputeOptions {
  cpuInstance?: CpuInstance;
  /** A deploy chooses the ids of the endpoints it makes before it makes them (service discovery). */
  id?: string;
  /** The app environment and resource a deploy makes the endpoint for. */
  app?: { environmentId: string; resource: string };
  /**
   * GraphQL `saveEndpoint(id, type)`: the endpoint's new type. REST's PATCH body has no `type` (the
   * spec's table names none); the change is a new release, so every worker is replaced by one of
   * the new kind.
   */
  type?: Endpoint['type'];
}

const cpuColumns = (cpu: CpuInstance | null) => ({
  cpuFlavorId: cpu?.flavorId ?? null,
  cpuVcpuCount: cpu?.vcpus ?? null,
  cpuMemoryGb: cpu?.memoryGb ?? null,
});

function checkCpuInstance(cpu: CpuInstance, at: string): void {
  const problems = cpuInstanceProblems(cpu);
  if (problems.length > 0) throw validationFailed(problems.map((p) => `${at}: ${p}`));
}

export async function createEndpoint(
  ctx: DomainContext,
  principal: Principal,
  body: unknown,
  options: EndpointComputeOptions = {},
): Promise<Endpoint> {
  requireScope(principal, 'WRITE');
  // A new endpoint uses the account's registry credentials and templates: not for a key limited to some endpoints.
  requireAccountWide(principal);
  const input = validate(CreateEndpointSchema, body);
  if (input.cpu !== undefined) {
    throw new DomainError(
      'bad_request',
      '`cpu` is read-only: leave `gpu` out to make a CPU endpoint (its size is shown in `cpu`), or name a CPU instance with GraphQL saveEndpoint(instanceIds)',
    );
  }
  if (input.gpu && options.cpuInstance) throw validationFailed(['$.gpu: a CPU endpoint has no GPUs']);
  const cpu = input.gpu ? null : (options.cpuInstance ?? DEFAULT_CPU_INSTANCE);
  if (cpu) checkCpuInstance(cpu, '$.instanceIds');
  const workers = input.workers ?? { min: 0, max: 3 };
  const scaling = input.scaling ?? { type: 'QUEUE_DELAY' as const, value: 4, idleTimeout: 5 };
  const id = options.id ?? newId();
  const data = {
    id,
    accountId: principal.accountId,
    appEnvironmentId: options.app?.environmentId ?? null,
    appResource: options.app?.resource ?? null,
    name: input.name,
    type: input.type ?? 'QUEUE_BASED',
    image: input.image,
    args: input.args ?? '',
    disk: input.disk ?? 10,
    ports: input.ports ?? [],
    env: input.env ?? {},
    registryId: input.registry ?? null,
    gpuPools: input.gpu?.pools ?? [],
    gpuCount: input.gpu ? (input.gpu.count ?? 1) : null,
    ...cpuColumns(cpu),
    workersMin: workers.min,
    workersMax: workers.max,
    scalerType: scaling.type,
    scalerValue: scaling.value,
    idleTimeout: scaling.idleTimeout,
    dataCenterIds: input.dataCenterIds ?? [],
    networkVolumeIds: input.networkVolumes ?? [],
    timeoutMs: input.timeout ?? 600_000,
    flashboot: input.flashboot ?? 'OFF',
  } satisfies Prisma.EndpointUncheckedCreateInput;

  const problems = specProblems({ endpointId: id, ...data, releaseVersion: 1 });
  if (problems.length > 0) throw validationFailed(problems.map((p) => `$: ${p}`));
  const refProblems = await referenceProblems(ctx, principal, {
    registry: data.registryId,
    image: data.image,
    networkVolumes: data.networkVolumeIds,
    gpuPools: data.gpuPools,
  });
  if (refProblems.length > 0) throw validationFailed(refProblems);

  let endpoint: Endpoint;
  try {
    endpoint = await ctx.db.$transaction(async (tx) => {
      const created = await tx.endpoint.create({ data });
      await tx.release.create({
        data: {
          id: newId(),
          endpointId: id,
          version: 1,
          image: data.image,
          args: data.args,
          disk: data.disk,
          ports: data.ports,
          env: data.env,
          registryId: data.registryId,
          status: 'COMPLETED',
        },
      });
      return created;
    });
  } catch (err) {
    if (isUniqueViolation(err)) {
      throw new DomainError('conflict', `an endpoint named '${input.name}' already exists`);
    }
    throw err;
  }
  // Its image on the best hosts ahead of the first call (never fails the request), while the workflow is told.
  const prepull = startImagePrepull(ctx, endpoint);
  // Acknowledged only once both the row and the workflow exist; a crash in between is mended at start-up.
  try {
    await tellEndpointWorkflow(ctx, endpoint);
    await prepull;
  } catch {
    throw unavailable(
      'the endpoint is saved but its workflow has not started yet (Temporal did not answer in time); it starts with the next change of the endpoint or the next API start',
    );
  }
  return endpoint;
}

/**
 * The caller's endpoint unless it is being deleted. One prepared statement on the job runtime's
 * node-postgres pool (JobStore.rows) where the process has one (Prisma's client was the largest
 * part of a GET's CPU), else Prisma; every column comes back as Prisma reads it (none is mapped,
 * JSON is parsed, timestamps are UTC).
 */
export async function findOwned(ctx: DomainContext, principal: Principal, id: string): Promise<Endpoint> {
  const e = await readLiveEndpoint(ctx, id);
  if (!e || e.accountId !== principal.accountId) throw notFound('endpoint');
  requireEndpointAccess(principal, id);
  return e;
}

async function readLiveEndpoint(ctx: DomainContext, id: string): Promise<Endpoint | undefined> {
  const store = ctx.jobs?.store;
  return store
    ? (await store.rows<Endpoint>('SELECT * FROM "Endpoint" WHERE id = $1 AND "deletingAt" IS NULL', [id]))[0]
    : ((await ctx.db.endpoint.findFirst({ where: { id, deletingAt: null } })) ?? undefined);
}

/**
 * findOwned for reads: the row this process remembers while it follows changes (a trigger notifies
 * every change of an `Endpoint` row at commit, and this process's own writes forget theirs before
 * they answer), else read. Across API processes a read trails a write by the notification's
 * delivery at most; a process that stops hearing changes reads every row again.
 */
async function findOwnedForRead(ctx: DomainContext, principal: Principal, id: string): Promise<Endpoint> {
  const rows = ctx.records?.followsChanges ? ctx.records.endpointRows : undefined;
  const e = rows ? await rows.get(id, () => readLiveEndpoint(ctx, id)) : await readLiveEndpoint(ctx, id);
  if (!e || e.accountId !== principal.accountId) throw notFound('endpoint');
  requireEndpointAccess(principal, id);
  return e;
}

/** This process's own write of an endpoint row: forgotten before the write is answered (read-your-writes). */
export function forgetEndpoint(ctx: DomainContext, id: string): void {
  ctx.records?.endpointRows.delete(id);
}

export async function getEndpoint(ctx: DomainContext, principal: Principal, id: string): Promise<Endpoint> {
  requireScope(principal, 'READ');
  return findOwnedForRead(ctx, principal, id);
}

/** The caller's endpoints (those its key may reach), oldest first. */
export async function listEndpoints(ctx: DomainContext, principal: Principal): Promise<Endpoint[]> {
  requireScope(principal, 'READ');
  const rows = await ctx.db.endpoint.findMany({
    where: {
      accountId: principal.accountId,
      deletingAt: null,
      ...(principal.endpointIds.length > 0 ? { id: { in: [...principal.endpointIds] } } : {}),
    },
    orderBy: { createdAt: 'asc' },
  });
  return rows;
}

/** Ids the body names that must exist in the caller's account (or in the pool list). */
async function referenceProblems(
  ctx: DomainContext,
  principal: Principal,
  refs: { registry?: string | null; image?: string; networkVolumes?: readonly string[]; gpuPools?: readonly string[] },
): Promise<string[]> {
  const problems: string[] = [];
  refs.gpuPools?.forEach((pool, i) => {
    if (!isGpuPoolId(pool)) problems.push(`$.gpu.pools[${i}]: unknown GPU pool '${pool}'`);
  });
  if (refs.registry)
    problems.push(
      ...(await registryBindingProblems(ctx.db, principal.accountId, refs.registry, refs.image, '$.registry')),
    );
  if (refs.networkVolumes)
    problems.push(
      ...(await volumeReferenceProblems(
        ctx,
        principal.accountId,
        refs.networkVolumes,
        (i) => `$.networkVolumes[${i}]`,
      )),
    );
  return problems;
}

/**
 * The shared container configuration: a change of any of these makes a new release. So does a
 * change of the network volumes or of the type (updateEndpoint): running workers cannot take a
 * mount, or become another kind, in place.
 */
const CONTAINER_FIELDS = ['image', 'args', 'disk', 'ports', 'env', 'registry'] as const;
type ContainerField = (typeof CONTAINER_FIELDS)[number];

function containerValue(
  e: Pick<Endpoint, 'image' | 'args' | 'disk' | 'ports' | 'env' | 'registryId'>,
  field: ContainerField,
): unknown {
  return field === 'registry' ? e.registryId : e[field];
}

/** JSON with object keys sorted: equal configurations compare equal whatever their key order. */
function canonical(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    v && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(
          Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
        )
      : v,
  );
}

type ContainerConfig = Pick<Endpoint, 'image' | 'args' | 'disk' | 'ports' | 'registryId'> & {
  env: Prisma.InputJsonValue;
};

/**
 * Release N+1 of an endpoint whose row `tx` holds locked: the releases before it superseded, the
 * new one rolling out with `config`. Answers its version; the caller sets the row's.
 */
async function createRelease(
  tx: Prisma.TransactionClient,
  row: Pick<Endpoint, 'id' | 'currentReleaseVersion'>,
  config: ContainerConfig,
  changes: ReleaseDiffEntry[],
): Promise<number> {
  const newest = await tx.release.aggregate({ where: { endpointId: row.id }, _max: { version: true } });
  const version = Math.max(newest._max.version ?? 0, row.currentReleaseVersion) + 1;
  const finishedAt = new Date();
  await tx.release.updateMany({
    where: { endpointId: row.id, status: 'ROLLING_OUT' },
    data: { status: 'SUPERSEDED', finishedAt },
  });
  await tx.release.updateMany({ where: { endpointId: row.id, status: 'COMPLETED' }, data: { status: 'SUPERSEDED' } });
  await tx.release.create({
    data: {
      id: newId(),
      endpointId: row.id,
      version,
      ...config,
      changes: changes as Prisma.InputJsonValue,
      status: 'ROLLING_OUT',
    },
  });
  return version;
}

/**
 * A rolling release of each endpoint with its configuration unchanged and `change` as the reason
 * (an app environment's new build, docs/apps.md "Releases": the workers run the environment's
 * active build and only new workers fetch it). Endpoints being deleted are left alone.
 */
export async function rollEndpoints(
  ctx: DomainContext,
  endpointIds: string[],
  change: ReleaseDiffEntry,
): Promise<void> {
  for (const id of endpointIds) {
    const rolled = await ctx.db.$transaction(async (tx) => {
      const locked = await tx.$queryRaw<
        Array<{ id: string }>
      >`SELECT id FROM "Endpoint" WHERE id = ${id} AND "deletingAt" IS NULL FOR UPDATE`;
      if (locked.length === 0) return undefined;
      const row = await tx.endpoint.findUniqueOrThrow({ where: { id } });
      const config = { ...containerConfigOf(row), env: row.env as Prisma.InputJsonValue };
      const version = await createRelease(tx, row, config, [change]);
      return tx.endpoint.update({ where: { id }, data: { currentReleaseVersion: version } });
    });
    forgetEndpoint(ctx, id);
    if (!rolled) continue;
    const prepull = startImagePrepull(ctx, rolled);
    try {
      await tellEndpointWorkflow(ctx, rolled);
      await prepull;
    } catch {
      throw unavailable(
        `the new build is active but endpoint ${id} has not been told yet (Temporal did not answer in time); repeat the request to roll it`,
      );
    }
  }
}

const containerConfigOf = (e: Endpoint): Omit<ContainerConfig, 'env'> => ({
  image: e.image,
  args: e.args,
  disk: e.disk,
  ports: e.ports,
  registryId: e.registryId,
});

/**
 * PATCH /v2/serverless/{id}: only what the body names changes. The row (and, for a change of the
 * container, the network volumes or the type, release N+1) is committed first, in one transaction, after the domain's rules
 * (specProblems) passed; then the workflow is told to read the row again (`endpointChanged`).
 *
 * If Temporal does not take the signal in time, the answer is 503 and the row keeps the change: it
 * is the truth. The workflow catches up when the request is repeated, on the next change of the
 * endpoint, or when an API process starts (reconcileEndpointWorkflows tells every workflow to
 * read its row).
 */
export async function updateEndpoint(
  ctx: DomainContext,
  principal: Principal,
  id: string,
  body: unknown,
  options: EndpointComputeOptions = {},
): Promise<Endpoint> {
  requireScope(principal, 'WRITE');
  const current = await findOwned(ctx, principal, id);
  const input = validate(UpdateEndpointSchema, body);
  if (input.cpu !== undefined)
    throw new DomainError(
      'bad_request',
      "`cpu` is read-only: a CPU endpoint's size is named with GraphQL saveEndpoint(instanceIds); `gpu` moves an endpoint to GPUs",
    );
  if (input.gpu && options.cpuInstance) throw validationFailed(['$.gpu: a CPU endpoint has no GPUs']);
  if (options.cpuInstance) checkCpuInstance(options.cpuInstance, '$.instanceIds');
  if (options.type && options.type !== current.type) await typeChangeProblems(ctx, current, options.type);
  // The credential and the image are checked together whenever either changes.
  const registry =
    input.registry !== undefined ? input.registry : input.image !== undefined ? current.registryId : undefined;
  const refProblems = await referenceProblems(ctx, principal, {
    registry,
    image: input.image ?? current.image,
    networkVolumes: input.networkVolumes,
    gpuPools: input.gpu?.pools,
  });
  if (refProblems.length > 0) throw validationFailed(refProblems);

  let after: Endpoint;
  try {
    after = await ctx.db.$transaction(async (tx) => {
      // Changes of one endpoint apply one after another: release numbers and diffs stay exact.
      const locked = await tx.$queryRaw<
        Array<{ id: string }>
      >`SELECT id FROM "Endpoint" WHERE id = ${id} AND "deletingAt" IS NULL FOR UPDATE`;
      if (locked.length === 0) throw notFound('endpoint');
      const row = await tx.endpoint.findUniqueOrThrow({ where: { id } });
      const data = {
        name: input.name ?? row.name,
        image: input.image ?? row.image,
        args: input.args ?? row.args,
        disk: input.disk ?? row.disk,
        ports: input.ports ?? row.ports,
        env: (input.env ?? row.env) as Prisma.InputJsonValue,
        registryId: input.registry !== undefined ? input.registry : row.registryId,
        // Compute is placement: new workers get it, running ones keep theirs until replaced.
        gpuPools: options.cpuInstance ? [] : (input.gpu?.pools ?? row.gpuPools),
        gpuCount: options.cpuInstance ? null : input.gpu ? (input.gpu.count ?? row.gpuCount ?? 1) : row.gpuCount,
        ...(options.cpuInstance ? cpuColumns(options.cpuInstance) : input.gpu ? cpuColumns(null) : {}),
        workersMin: input.workers?.min ?? row.workersMin,
        workersMax: input.workers?.max ?? row.workersMax,
        scalerType: input.scaling?.type ?? row.scalerType,
        scalerValue: input.scaling?.value ?? row.scalerValue,
        idleTimeout: input.scaling?.idleTimeout ?? row.idleTimeout,
        dataCenterIds: input.dataCenterIds ?? row.dataCenterIds,
        networkVolumeIds: input.networkVolumes ?? row.networkVolumeIds,
        timeoutMs: input.timeout ?? row.timeoutMs,
        flashboot: input.flashboot ?? row.flashboot,
        type: options.type ?? row.type,
        currentReleaseVersion: row.currentReleaseVersion,
      } satisfies Prisma.EndpointUncheckedUpdateInput;
      const problems = specProblems({ endpointId: id, ...data, releaseVersion: data.currentReleaseVersion });
      if (problems.length > 0) throw validationFailed(problems.map((p) => `$: ${p}`));

      // GPU changes are placement, like data centers: the autoscaler places new workers on the new
      // pools, and the Release keeps the container configuration only (docs/endpoints.md "Autoscaling and releases").
      const next = {
        image: data.image,
        args: data.args,
        disk: data.disk,
        ports: data.ports,
        env: data.env,
        registryId: data.registryId,
      };
      const changes: ReleaseDiffEntry[] = [];
      for (const field of CONTAINER_FIELDS) {
        const old = containerValue(row, field);
        const now = containerValue(next as Endpoint, field);
        if (canonical(old) !== canonical(now)) changes.push({ field, old, new: now });
      }
      // Workers mount the endpoint's volumes when they start, and are of its type: either change
      // replaces them (a release), or running workers would stay without the volume, or of the old kind.
      if (canonical(row.networkVolumeIds) !== canonical(data.networkVolumeIds))
        changes.push({ field: 'networkVolumes', old: row.networkVolumeIds, new: data.networkVolumeIds });
      if (row.type !== data.type) changes.push({ field: 'type', old: row.type, new: data.type });
      if (changes.length > 0) data.currentReleaseVersion = await createRelease(tx, row, next, changes);
      return tx.endpoint.update({ where: { id }, data });
    });
  } catch (err) {
    if (isUniqueViolation(err)) {
      throw new DomainError('conflict', `an endpoint named '${input.name ?? ''}' already exists`);
    }
    throw err;
  }
  forgetEndpoint(ctx, id);

  const reachesWorkflow =
    input.workers !== undefined ||
    input.scaling !== undefined ||
    input.timeout !== undefined ||
    input.flashboot !== undefined ||
    after.currentReleaseVersion !== current.currentReleaseVersion ||
    CONTAINER_FIELDS.some((f) => input[f] !== undefined);
  // A new release: its image on the best hosts ahead of its workers (never fails the request).
  const prepull =
    after.currentReleaseVersion !== current.currentReleaseVersion ? startImagePrepull(ctx, after) : undefined;
  if (reachesWorkflow) {
    try {
      await tellEndpointWorkflow(ctx, after);
    } catch {
      throw unavailable(
        'the change is saved but has not reached the running endpoint yet (Temporal did not answer in time); repeat the request to apply it',
      );
    }
  }
  await prepull;
  return after;
}

/**
 * Whether `e` may become `type` now. Its workers are replaced by a release; what would be stranded
 * is refused: a queue-based endpoint with unfinished jobs (no load-balancing worker takes a job),
 * or one published as a public model (a model runs on a queue).
 */
async function typeChangeProblems(ctx: DomainContext, e: Endpoint, type: Endpoint['type']): Promise<void> {
  if (type !== 'LOAD_BALANCING') return;
  const [jobs, models] = await Promise.all([
    ctx.db.job.count({ where: { endpointId: e.id, status: { in: ['IN_QUEUE', 'IN_PROGRESS'] } } }),
    ctx.db.publicModel.count({ where: { endpointId: e.id } }),
  ]);
  const problems: string[] = [];
  if (jobs > 0)
    problems.push(
      `$.type: the endpoint has ${jobs} queued or running job(s), which no load-balancing worker would take; let them finish (or purge the queue) before changing it to LB`,
    );
  if (models > 0)
    problems.push('$.type: the endpoint is published as a public model, which runs on a queue; unpublish it first');
  if (problems.length > 0) throw validationFailed(problems);
}

/** The error of a job cancelled because its endpoint was deleted. */
export const ENDPOINT_DELETED = 'the endpoint was deleted';

/**
 * DELETE /v2/serverless/{id}: marks the endpoint as being deleted (reads answer 404 from then on),
 * cancels its queued jobs, and signals its workflow, which drains the workers and removes the row.
 * Repeating it while the deletion runs sends the signal again (and answers 204).
 */
export async function deleteEndpoint(ctx: DomainContext, principal: Principal, id: string): Promise<void> {
  requireScope(principal, 'WRITE');
  const e = await ctx.db.endpoint.findFirst({
    where: { id, accountId: principal.accountId },
    select: { id: true, accountId: true, name: true },
  });
  if (!e) throw notFound('endpoint');
  requireEndpointAccess(principal, id);
  const now = new Date();
  // A public model follows its endpoint: unpublished with the deletion, so the catalogue never
  // lists a model that cannot run (docs/public-models.md).
  const models = await ctx.db.publicModel.findMany({ where: { endpointId: id }, select: { id: true } });
  await ctx.db.$transaction([
    ctx.db.publicModel.deleteMany({ where: { endpointId: id } }),
    ctx.db.endpoint.updateMany({ where: { id, deletingAt: null }, data: { deletingAt: now } }),
    // Queued jobs are cancelled with the reason; their workflows are told (signalDueAt: the API's
    // signal sweep, and the endpoint workflow before it removes the row) and end at once.
    ctx.db.job.updateMany({
      where: { endpointId: id, status: 'IN_QUEUE' },
      data: { status: 'CANCELLED', error: ENDPOINT_DELETED, completedAt: now, seq: { increment: 1 }, signalDueAt: now },
    }),
  ]);
  forgetEndpoint(ctx, id);
  for (const m of models) ctx.records?.models.delete(m.id);
  try {
    await signalDeletion(ctx, e, Date.now() + WORKFLOW_CALL_BUDGET_MS);
  } catch {
    throw unavailable(
      'the deletion is recorded but the endpoint workflow did not answer in time; repeat the request, or it completes when the API next starts',
    );
  }
}
