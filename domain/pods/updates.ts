import type { Pod, Template } from '../../generated/prisma/client.ts';
import { WorkflowNotFoundError } from '@temporalio/client';
import { drainWorker, workerWorkflowId } from '../../contracts/workflows.ts';
import { type Principal, requireAccountWide, requireScope } from '../accounts/auth.ts';
import type { DomainContext } from '../context.ts';
import { DomainError, inFieldNames, validationFailed } from '../errors.ts';
import { registryBindingProblems } from '../registries/registries.ts';
import { isUniqueViolation } from '../shared/db.ts';
import { validate } from '../shared/validation.ts';
import {
  WORKFLOW_CALL_BUDGET_MS,
  deployPod,
  envProblems,
  podTemplateProblems,
  portProblems,
  resumePod,
  stopPod,
  terminatePod,
} from './pods.ts';
import { liveWorker } from '../workers/status.ts';
import { findPod, loadPod, type PodModel } from './model.ts';
import { CreatePodBodySchema, PodActionBodySchema, UpdatePodBodySchema, type PodDeployInput } from './schemas.ts';

/*
 * Pod changes in the container-field vocabulary templates and endpoints share (`image`, `args`,
 * `disk`, `ports` array, `env` object, `registry`, plus `gpu {id, count}`, `cpu`, `mounts`), which
 * REST v2 speaks: create translates the body into deployPod's input, so both vocabularies keep one
 * set of rules, and its refusals name the body's fields. Update (the hosted GraphQL has no pod
 * update) and the state actions call the same rules and operations. Each answers the domain's
 * model of the pod (model.ts).
 */

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
    allowedCudaVersions: 'gpu.allowedCudaVersions',
    minCudaVersion: 'gpu.minCudaVersion',
    containerRegistryAuthId: 'registry',
    networkVolumeId: 'mounts.network[0].volumeId',
  };
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
    throw new DomainError(
      'unavailable',
      "the pod's container could not be told to restart (Temporal did not answer in time); repeat with the restart action",
    );
  }
}

/** REST `POST /v2/pods`: the body as `podFindAndDeployOnDemand`'s input, through `deployPod`. */
export async function createPod(ctx: DomainContext, principal: Principal, body: unknown): Promise<PodModel> {
  requireScope(principal, 'WRITE');
  requireAccountWide(principal);
  const b = validate(CreatePodBodySchema, body);
  const problems: string[] = [];
  if (!b.gpu === !b.cpu) problems.push('$.gpu: give exactly one of gpu (a GPU pod) and cpu (a CPU pod)');
  const network = b.mounts?.network?.[0];
  if (b.mounts?.persistent && b.mounts.network?.length)
    problems.push('$.mounts: a pod has a persistent mount or a network mount, not both');
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
    allowedCudaVersions: b.gpu?.allowedCudaVersions,
    minCudaVersion: b.gpu?.minCudaVersion,
    // deployPod reads an empty id as "no credential", over the template's.
    containerRegistryAuthId: b.registry === null ? '' : b.registry,
    networkVolumeId: network?.volumeId,
    cloudType: b.cloud,
    startSsh: b.startSsh,
    startJupyter: b.startJupyter,
  });
  return inFieldNames(restFieldPaths(network !== undefined), () => deployPod(ctx, principal, input));
}

/**
 * REST `PATCH /v2/pods/{id}`: the fields present change, the others keep their values. A change of
 * the container's settings (anything but `name`) restarts a running pod's container with them, as
 * the restart action does; a stopped pod gets them at its next start. The kind of mount is fixed
 * when the pod is made (its size and path may change), and so is its network volume.
 */
export async function updatePod(
  ctx: DomainContext,
  principal: Principal,
  podId: string,
  body: unknown,
): Promise<PodModel> {
  requireScope(principal, 'WRITE');
  requireAccountWide(principal);
  const b = validate(UpdatePodBodySchema, body);
  const pod = await findPod(ctx, principal, podId);
  const problems: string[] = [];

  let template: Template | null = null;
  if (b.templateId) {
    template = await ctx.db.template.findFirst({ where: { id: b.templateId, accountId: principal.accountId } });
    if (!template) problems.push(`$.templateId: no template '${b.templateId}'`);
    else problems.push(...podTemplateProblems(template));
  }
  const ports = b.ports ? b.ports.join(',') : template?.ports;
  if (ports !== undefined) problems.push(...portProblems(ports));
  const env = b.env || template ? { ...((template?.env ?? {}) as Record<string, string>), ...b.env } : undefined;
  if (env) problems.push(...envProblems(env));

  const { persistent, network } = b.mounts ?? {};
  if (persistent && pod.volumeInGb === 0)
    problems.push(
      '$.mounts.persistent: the pod was made without a persistent mount; the kind of mount is fixed when a pod is made',
    );
  if (network) {
    if (network.length === 0) problems.push("$.mounts.network: a pod's network volume cannot be removed");
    else if (!pod.networkVolumeId)
      problems.push(
        '$.mounts.network: the pod was made without a network volume; the kind of mount is fixed when a pod is made',
      );
    else if (network[0]!.volumeId !== pod.networkVolumeId)
      problems.push("$.mounts.network[0].volumeId: a pod's network volume cannot be changed");
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
    problems.push(
      ...(await registryBindingProblems(
        ctx.db,
        principal.accountId,
        registryId,
        data.imageName ?? pod.imageName,
        '$.registry',
      )),
    );
  }
  if (problems.length > 0) throw validationFailed(problems);

  const sameEnv = (a: Record<string, string>, b2: Record<string, string>) =>
    JSON.stringify(Object.entries(a).sort()) === JSON.stringify(Object.entries(b2).sort());
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
  if (containerChanged && pod.desiredStatus === 'RUNNING')
    await restartPodContainer(ctx, podId, 'the pod was updated; its container restarts with the new settings');
  return loadPod(ctx, principal, podId);
}

/**
 * REST `POST /v2/pods/{id}/action` (and `/stop`, `/start`): a state change the pod's status allows
 * (409 otherwise), through the operations GraphQL uses. Answers the pod, or null once terminated.
 */
export async function podAction(
  ctx: DomainContext,
  principal: Principal,
  podId: string,
  body: unknown,
): Promise<PodModel | null> {
  requireScope(principal, 'WRITE');
  requireAccountWide(principal);
  const { action } = validate(PodActionBodySchema, body);
  const { status, actions } = await loadPod(ctx, principal, podId);
  if (!actions.includes(action))
    throw new DomainError('conflict', `the pod is ${status}: it allows ${actions.join(', ')}, not ${action}`);
  if (action === 'terminate') {
    await terminatePod(ctx, principal, { podId });
    return null;
  }
  if (action === 'stop') await stopPod(ctx, principal, { podId });
  else if (action === 'start') await resumePod(ctx, principal, { podId });
  else await restartPodContainer(ctx, podId, 'restarted by its owner');
  return loadPod(ctx, principal, podId);
}
