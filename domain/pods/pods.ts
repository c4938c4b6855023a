import type { Prisma, Template } from '../../generated/prisma/client.ts';
import { podChanged, podWorkflowId, type PodWorkflow } from '../../contracts/workflows.ts';
import { gantryMemo, gantrySearchAttributes } from '../../contracts/search-attributes.ts';
import { type Principal, requireAccountWide, requireScope } from '../accounts/auth.ts';
import type { DomainContext } from '../context.ts';
import { DomainError, validationFailed } from '../errors.ts';
import { gpuTypeId as gpuTypeIdOf } from '../catalog/gpu-pools.ts';
import { requireCpuInstanceId } from '../catalog/cpu-instances.ts';
import { newId } from '../shared/ids.ts';
import { priceTable } from '../billing/pricing.ts';
import { registryBindingProblems } from '../registries/registries.ts';
import { isUniqueViolation } from '../shared/db.ts';
import { validate } from '../shared/validation.ts';
import { volumeReferenceProblems } from '../network-volumes/network-volumes.ts';
import { findPod, loadPod, podModel, withWorkers, type PodModel } from './model.ts';
import {
  CpuPodDeployInputSchema,
  HOSTED_CPU_BASE_TEMPLATE,
  MAX_PORTS,
  PodDeployInputSchema,
  PodIdInputSchema,
  PodResumeInputSchema,
} from './schemas.ts';

/**
 * Pods (the GraphQL operations; updates.ts holds REST v2's create, update and actions): long-running containers on a host, run by the
 * same worker machinery as endpoint workers. Each pod has a workflow `pod:<podId>`
 * (workflows/pod.ts) that keeps one worker while the pod's desired status is RUNNING. The row is
 * the truth: every change is committed here first, then the workflow is told (a signal that starts
 * it if need be) before the request is answered.
 *
 * Pods belong to the whole account: a key limited to some endpoints does not reach them.
 */

export function portProblems(ports: string): string[] {
  const problems: string[] = [];
  const entries = ports
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean);
  const seen = new Set<string>();
  for (const entry of entries) {
    const m = /^([0-9]{1,5})\/(http|tcp|udp)$/.exec(entry);
    if (!m || Number(m[1]) < 1 || Number(m[1]) > 65535)
      problems.push(`$.ports: '${entry}' is not port/protocol with a port 1-65535 and protocol http, tcp or udp`);
    else if (seen.has(`${m[1]}/${m[2] === 'udp' ? 'udp' : 'tcp'}`))
      problems.push(`$.ports: port ${m[1]} is listed twice`);
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
  if (gpuCount === 0)
    return gpuTypeId
      ? ['$.gpuTypeId: a pod with gpuCount 0 runs on CPUs only; leave gpuTypeId out or ask for at least one GPU']
      : [];
  const hosts = await ctx.db.host.findMany({ where: { status: { not: 'DISABLED' } }, select: { gpus: true } });
  const perHost = hosts.map(
    (h) =>
      ((h.gpus ?? []) as Array<{ name: string }>).filter((g) => !gpuTypeId || gpuTypeIdOf(g.name) === gpuTypeId).length,
  );
  const most = Math.max(0, ...perHost);
  if (gpuTypeId && most === 0)
    return [
      `$.gpuTypeId: no registered host has a GPU of type '${gpuTypeId}' (the gpuTypes query lists the types there are)`,
    ];
  if (most < gpuCount) {
    const what = gpuTypeId ? `GPUs of type '${gpuTypeId}'` : 'GPUs';
    return [`$.gpuCount: ${gpuCount} ${what} asked for, but no registered host has more than ${most}`];
  }
  return [];
}

/**
 * A pod starts from a pod template: a serverless template (isServerless true) is for endpoint
 * workers, and the hosted service refuses it for a pod as well (422).
 */
export function podTemplateProblems(template: Pick<Template, 'id' | 'isServerless'>): string[] {
  return template.isServerless
    ? [
        `$.templateId: template '${template.id}' is a serverless template (isServerless true); a pod starts from a pod template (isServerless false)`,
      ]
    : [];
}

export function envProblems(env: Record<string, string>): string[] {
  return Object.entries(env)
    .filter(([, v]) => /[\r\n\0]/.test(v))
    .map(([k]) => `$.env: the value of '${k}' holds a line break or NUL, which a container environment cannot carry`);
}

export const WORKFLOW_CALL_BUDGET_MS = 8_000;

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
): Promise<PodModel> {
  await ctx.db.pod.updateMany({ where: { id: podId, ...where }, data });
  try {
    await tellWorkflow(ctx, podId);
  } catch {
    throw new DomainError(
      'unavailable',
      'the change is saved but has not reached the pod yet (Temporal did not answer in time); repeat the request to apply it',
    );
  }
  return loadPod(ctx, principal, podId);
}

/** GraphQL `podFindAndDeployOnDemand`: a new pod, RUNNING; answered once its row and workflow exist. */
export async function deployPod(ctx: DomainContext, principal: Principal, input: unknown): Promise<PodModel> {
  requireScope(principal, 'WRITE');
  requireAccountWide(principal);
  const i = validate(PodDeployInputSchema, input);
  const problems: string[] = [];

  let template: Template | null = null;
  if (i.templateId) {
    template = await ctx.db.template.findFirst({ where: { id: i.templateId, accountId: principal.accountId } });
    if (!template) problems.push(`$.templateId: no template '${i.templateId}'`);
    else problems.push(...podTemplateProblems(template));
  }
  const imageName = i.imageName ?? template?.imageName;
  if (!imageName) problems.push('$.imageName: required (or a templateId whose template names the image)');
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
  const registryId =
    i.containerRegistryAuthId !== undefined ? i.containerRegistryAuthId || null : (template?.registryId ?? null);
  if (registryId)
    problems.push(
      ...(await registryBindingProblems(
        ctx.db,
        principal.accountId,
        registryId,
        imageName,
        '$.containerRegistryAuthId',
      )),
    );
  const networkVolumeId = i.networkVolumeId || null;
  if (networkVolumeId)
    problems.push(
      ...(await volumeReferenceProblems(ctx, principal.accountId, [networkVolumeId], () => '$.networkVolumeId')),
    );
  // The template's GPUs where the input names none; its GPU type only for a pod that has GPUs.
  const gpuCount = i.gpuCount ?? template?.gpuCount ?? 1;
  const gpuTypeId = i.gpuTypeId ?? (gpuCount > 0 ? (template?.gpuTypeId ?? null) : null);
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
        // CPU pods ignore a CUDA constraint, as the hosted service's do.
        allowedCudaVersions: gpuCount > 0 ? (i.allowedCudaVersions ?? []) : [],
        minCudaVersion: gpuCount > 0 ? (i.minCudaVersion ?? null) : null,
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
    throw new DomainError(
      'unavailable',
      'the pod could not be handed to its workflow (Temporal did not answer in time); nothing was created, try again',
    );
  }
  return loadPod(ctx, principal, id);
}

/** GraphQL `deployCpuPod`: a pod without GPUs, in the hosted service's CPU-pod vocabulary. */
export async function deployCpuPod(ctx: DomainContext, principal: Principal, input: unknown): Promise<PodModel> {
  requireScope(principal, 'WRITE');
  const i = validate(CpuPodDeployInputSchema, input);
  const { instanceId, ...pod } = i;
  if (instanceId !== undefined) requireCpuInstanceId('$.instanceId', instanceId);
  if (pod.templateId === HOSTED_CPU_BASE_TEMPLATE && pod.imageName) delete pod.templateId;
  return deployPod(ctx, principal, { ...pod, gpuCount: 0 });
}

/** GraphQL `podStop`: the container goes, the pod stays (EXITED) and can be resumed. */
export async function stopPod(ctx: DomainContext, principal: Principal, input: unknown): Promise<PodModel> {
  requireScope(principal, 'WRITE');
  requireAccountWide(principal);
  const { podId } = validate(PodIdInputSchema, input);
  await findPod(ctx, principal, podId);
  return changePod(ctx, principal, podId, { desiredStatus: 'RUNNING' }, { desiredStatus: 'EXITED' });
}

/** GraphQL `podResume`: RUNNING again on a new worker, optionally with another GPU count. */
export async function resumePod(ctx: DomainContext, principal: Principal, input: unknown): Promise<PodModel> {
  requireScope(principal, 'WRITE');
  requireAccountWide(principal);
  const { podId, gpuCount } = validate(PodResumeInputSchema, input);
  const pod = await findPod(ctx, principal, podId);
  if (gpuCount !== undefined && gpuCount !== pod.gpuCount) {
    if (pod.desiredStatus === 'RUNNING')
      throw new DomainError(
        'bad_request',
        `the pod is running with ${pod.gpuCount} GPUs; stop it before resuming it with another gpuCount`,
      );
    const problems = await gpuProblems(ctx, pod.gpuTypeId, gpuCount);
    if (problems.length > 0) throw validationFailed(problems);
  }
  return changePod(
    ctx,
    principal,
    podId,
    { desiredStatus: { not: 'TERMINATED' } },
    { desiredStatus: 'RUNNING', ...(gpuCount !== undefined ? { gpuCount } : {}) },
  );
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
  await ctx.db.pod.updateMany({
    where: { id: podId, desiredStatus: { not: 'TERMINATED' } },
    data: { desiredStatus: 'TERMINATED', name: `${podId}~terminated` },
  });
  try {
    await tellWorkflow(ctx, podId);
  } catch {
    throw new DomainError(
      'unavailable',
      'the pod is terminated, but its workflow did not answer in time; it removes the container at its next check (within a minute of Temporal answering again)',
    );
  }
}

/** GraphQL `pod(input: {podId})`. */
export async function getPod(ctx: DomainContext, principal: Principal, input: unknown): Promise<PodModel> {
  requireScope(principal, 'READ');
  requireAccountWide(principal);
  const { podId } = validate(PodIdInputSchema, input);
  return loadPod(ctx, principal, podId);
}

/** GraphQL `myself { pods }`. */
export async function listPods(ctx: DomainContext, principal: Principal): Promise<PodModel[]> {
  requireScope(principal, 'READ');
  requireAccountWide(principal);
  const rows = await ctx.db.pod.findMany({
    where: { accountId: principal.accountId, desiredStatus: { not: 'TERMINATED' } },
    include: withWorkers,
    orderBy: { createdAt: 'asc' },
  });
  const now = Date.now();
  const prices = priceTable(ctx.settings.pricesFile);
  return rows.map((r) => podModel(r, prices, now));
}
