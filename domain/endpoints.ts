import { WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import type { Endpoint } from '../generated/prisma/client.ts';
import { Prisma } from '../generated/prisma/client.ts';
import type { endpointWorkflow } from '../workflows/endpoint.ts';
import { endpointWorkflowId, specProblems, type EndpointSpec } from '../workflows/types.ts';
import { requireEndpointAccess, requireScope, type Principal } from './auth.ts';
import type { DomainContext } from './context.ts';
import { CreateEndpointSchema, type EndpointView } from './endpoint-schemas.ts';
import { DomainError, notFound, validationFailed } from './errors.ts';
import { newId } from './ids.ts';
import { validate } from './validation.ts';

export function endpointView(e: Endpoint, publicUrl: string): EndpointView {
  return {
    id: e.id,
    name: e.name,
    type: e.type,
    requestUrls:
      e.type === 'QUEUE_BASED'
        ? { run: `${publicUrl}/v2/${e.id}/run`, runSync: `${publicUrl}/v2/${e.id}/runsync` }
        : { base: `${publicUrl}/lb/${e.id}` },
    image: e.image,
    args: e.args,
    disk: e.disk,
    ports: e.ports,
    env: e.env as Record<string, string>,
    registry: e.registryId,
    gpu: e.gpuPools.length > 0 ? { pools: e.gpuPools, count: e.gpuCount ?? 1 } : null,
    cpu: e.cpuFlavorId ? { id: e.cpuFlavorId, vcpuCount: e.cpuVcpuCount ?? 2, memory: e.cpuMemoryGb ?? 1 } : null,
    workers: { min: e.workersMin, max: e.workersMax },
    scaling: { type: e.scalerType, value: e.scalerValue, idleTimeout: e.idleTimeout },
    dataCenterIds: e.dataCenterIds,
    networkVolumes: e.networkVolumeIds,
    timeout: e.timeoutMs,
    flashboot: e.flashboot,
    createdAt: e.createdAt.toISOString(),
  };
}

export function endpointSpec(e: Endpoint): EndpointSpec {
  return {
    endpointId: e.id,
    workersMin: e.workersMin,
    workersMax: e.workersMax,
    scalerType: e.scalerType,
    scalerValue: e.scalerValue,
    idleTimeout: e.idleTimeout,
    timeoutMs: e.timeoutMs,
    releaseVersion: e.currentReleaseVersion,
  };
}

/**
 * Starts the endpoint's workflow if it is not running. Idempotent: a start after a crash between the
 * database commit and the workflow start (or a second API process) finds the running one.
 */
export async function ensureEndpointWorkflow(ctx: DomainContext, endpointId: string): Promise<void> {
  try {
    await ctx.temporal.workflow.start<typeof endpointWorkflow>('endpointWorkflow', {
      workflowId: endpointWorkflowId(endpointId),
      taskQueue: ctx.taskQueue,
      args: [{ endpointId }],
      workflowIdConflictPolicy: 'USE_EXISTING',
      workflowIdReusePolicy: 'REJECT_DUPLICATE',
    });
  } catch (err) {
    // A completed run with this id means the endpoint was deleted: nothing to start.
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
  }
}

/** Starts the workflow of every live endpoint that lacks one (run at process start). */
export async function reconcileEndpointWorkflows(ctx: DomainContext): Promise<number> {
  const live = await ctx.db.endpoint.findMany({ where: { deletingAt: null }, select: { id: true } });
  for (const { id } of live) await ensureEndpointWorkflow(ctx, id);
  return live.length;
}

export async function createEndpoint(ctx: DomainContext, principal: Principal, body: unknown): Promise<EndpointView> {
  requireScope(principal, 'WRITE');
  const input = validate(CreateEndpointSchema, body);
  if (input.cpu !== undefined) {
    throw new DomainError('bad_request', 'creating or updating CPU endpoints is unsupported through the REST API');
  }
  const workers = input.workers ?? { min: 0, max: 3 };
  const scaling = input.scaling ?? { type: 'QUEUE_DELAY' as const, value: 4, idleTimeout: 5 };
  const id = newId();
  const data = {
    id,
    accountId: principal.accountId,
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
  if (data.registryId) {
    const registry = await ctx.db.registryCredential.findFirst({ where: { id: data.registryId, accountId: principal.accountId } });
    if (!registry) throw validationFailed([`$.registry: no registry credential '${data.registryId}'`]);
  }

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
    if (err instanceof Prisma.PrismaClientKnownRequestError && err.code === 'P2002') {
      throw new DomainError('conflict', `an endpoint named '${input.name}' already exists`);
    }
    throw err;
  }
  // Acknowledged only once both the row and the workflow exist; a crash in between is mended at start-up.
  await ensureEndpointWorkflow(ctx, id);
  return endpointView(endpoint, ctx.publicUrl);
}

async function findOwned(ctx: DomainContext, principal: Principal, id: string): Promise<Endpoint> {
  const e = await ctx.db.endpoint.findFirst({ where: { id, accountId: principal.accountId, deletingAt: null } });
  if (!e) throw notFound('endpoint');
  requireEndpointAccess(principal, id);
  return e;
}

export async function getEndpoint(ctx: DomainContext, principal: Principal, id: string): Promise<EndpointView> {
  requireScope(principal, 'READ');
  return endpointView(await findOwned(ctx, principal, id), ctx.publicUrl);
}

export async function listEndpoints(ctx: DomainContext, principal: Principal): Promise<EndpointView[]> {
  requireScope(principal, 'READ');
  const rows = await ctx.db.endpoint.findMany({
    where: {
      accountId: principal.accountId,
      deletingAt: null,
      ...(principal.endpointIds.length > 0 ? { id: { in: [...principal.endpointIds] } } : {}),
    },
    orderBy: { createdAt: 'asc' },
  });
  return rows.map((e) => endpointView(e, ctx.publicUrl));
}
