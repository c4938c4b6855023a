import type { Pod, Template } from '../../generated/prisma/client.ts';
import { WorkflowNotFoundError } from '@temporalio/client';
import { drainWorker, workerWorkflowId } from '../../contracts/workflows.ts';
import { type Principal, requireAccountWide, requireScope } from '../accounts/auth.ts';
import type { DomainContext } from '../context.ts';
import { DomainError, inFieldNames, validationFailed } from '../errors.ts';
import { priceTable, type PriceTable } from '../billing/pricing.ts';
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
import { findPod, podRecord, withWorkers, type PodRecord, type PodRow } from './records.ts';
import {
  CreatePodBodySchema,
  PodActionBodySchema,
  UpdatePodBodySchema,
  podPorts,
  type PodActionName,
  type PodDeployInput,
  type PodStatus,
  type PodView,
} from './schemas.ts';

/*
 * The REST skin over the same operations, in the hosted REST v2 shape (the container fields
 * `image`, `args`, `disk`, `ports` array, `env` object and `registry` that templates and endpoints
 * share, plus `gpu {id, count}`, `cpu`, `mounts`). Create translates the body into the GraphQL
 * input and calls `deployPod`, so both skins keep one set of rules; the answer and its errors are
 * given back in REST's field names. Update (the hosted GraphQL has no pod update) and the state
 * actions live here too, and call the same rules and operations.
 */

/** What each status allows (the pod's `actions`); anything else is 409. */
const ACTIONS_BY_STATUS: Record<PodStatus, PodActionName[]> = {
  PROVISIONING: ['stop', 'terminate'],
  STARTING: ['stop', 'terminate'],
  RUNNING: ['stop', 'restart', 'terminate'],
  EXITED: ['start', 'terminate'],
  ERROR: ['start', 'terminate'],
  TERMINATED: [],
};

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
    ssh: {
      proxy: null,
      direct: ssh
        ? { host: ssh.ip, port: ssh.publicPort, username: 'root', command: `ssh root@${ssh.ip} -p ${ssh.publicPort}` }
        : null,
    },
    template: r.templateId,
    cost: row.desiredStatus === 'RUNNING' ? (r.costPerHr ?? 0) : 0,
    locked: false,
    globalNetworking: { enabled: false },
    runtime: r.runtime
      ? {
          uptime: r.runtime.uptimeInSeconds,
          gpus: r.runtime.gpus,
          ports: ports.map((p) => ({ private: p.privatePort, public: p.publicPort, type: p.type, ip: p.ip })),
        }
      : null,
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

/** REST `GET /v2/pods`: the account's pods, oldest first. */
export async function listPodViews(ctx: DomainContext, principal: Principal): Promise<PodView[]> {
  requireScope(principal, 'READ');
  requireAccountWide(principal);
  const rows = await ctx.db.pod.findMany({
    where: { accountId: principal.accountId, desiredStatus: { not: 'TERMINATED' } },
    include: withWorkers,
    orderBy: { createdAt: 'asc' },
  });
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
  const created = await inFieldNames(restFieldPaths(network !== undefined), () => deployPod(ctx, principal, input));
  return podView(await findPod(ctx, principal, created.id), priceTable(ctx.settings.pricesFile));
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
): Promise<PodView> {
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
  return podView(await findPod(ctx, principal, podId), priceTable(ctx.settings.pricesFile));
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
): Promise<PodView | null> {
  requireScope(principal, 'WRITE');
  requireAccountWide(principal);
  const { action } = validate(PodActionBodySchema, body);
  const row = await findPod(ctx, principal, podId);
  const status = podStatus(row, podRecord(row, priceTable(ctx.settings.pricesFile)));
  const allowed = ACTIONS_BY_STATUS[status];
  if (!allowed.includes(action))
    throw new DomainError('conflict', `the pod is ${status}: it allows ${allowed.join(', ')}, not ${action}`);
  if (action === 'terminate') {
    await terminatePod(ctx, principal, { podId });
    return null;
  }
  if (action === 'stop') await stopPod(ctx, principal, { podId });
  else if (action === 'start') await resumePod(ctx, principal, { podId });
  else await restartPodContainer(ctx, podId, 'restarted by its owner');
  return podView(await findPod(ctx, principal, podId), priceTable(ctx.settings.pricesFile));
}
