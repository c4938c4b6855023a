/**
 * Hosts: the machines workers run on, reached over SSH. Operators register them through the admin
 * API or a config file (GANTRY_HOSTS_FILE); each host has a workflow (`host:<id>`) that probes it,
 * keeps its status and drains it before removal. Private keys are sealed at rest and never returned.
 */
import { WorkflowNotFoundError } from '@temporalio/client';
// ssh2 is CommonJS: its `utils` is reachable only through the default export under Node's ESM loader.
import ssh2 from 'ssh2';
import { Type, type Static } from 'typebox';
import type { Host } from '../../generated/prisma/client.ts';
import {
  hostWorkflowId,
  probeHostNow,
  removeHost,
  type HostProbeResult,
  type HostWorkflow,
} from '../../contracts/workflows.ts';
import { gantryMemo, gantrySearchAttributes } from '../../contracts/search-attributes.ts';
import { requireScope, type Principal } from '../accounts/auth.ts';
import type { DomainContext } from '../context.ts';
import { DomainError, forbidden, notFound, validationFailed } from '../errors.ts';
import { isUniqueViolation } from '../shared/db.ts';
import { newId } from '../shared/ids.ts';
import { validate } from '../shared/validation.ts';
import { liveWorker } from '../workers/status.ts';

export const Fingerprint = Type.String({
  pattern: '^(SHA256:)?[A-Za-z0-9+/]{43}=?$',
  description: 'OpenSSH SHA-256 host key fingerprint, as `ssh-keygen -lf` prints it',
});
export const Labels = Type.Record(Type.String({ minLength: 1, maxLength: 128 }), Type.String({ maxLength: 1024 }));

export const CreateHostSchema = Type.Object(
  {
    name: Type.Optional(
      Type.String({ minLength: 1, maxLength: 191, description: 'unique; default `user@address:port`' }),
    ),
    address: Type.String({
      minLength: 1,
      maxLength: 253,
      description: 'DNS name or IP address the platform reaches over SSH',
    }),
    port: Type.Optional(Type.Integer({ minimum: 1, maximum: 65535, default: 22 })),
    user: Type.Optional(
      Type.String({ minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9_][A-Za-z0-9_.-]*$', default: 'root' }),
    ),
    privateKey: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 32768,
        description: 'OpenSSH or PEM private key (write-only; sealed at rest)',
      }),
    ),
    useAgent: Type.Optional(Type.Boolean({ description: 'authenticate with the SSH agent instead of a stored key' })),
    hostKeySha256: Type.Optional(Fingerprint),
    dataCenterId: Type.String({ minLength: 1, maxLength: 64 }),
    labels: Type.Optional(Labels),
    maxWorkers: Type.Optional(Type.Integer({ minimum: 0, description: 'most workers placed on this host' })),
  },
  { additionalProperties: false },
);
export type CreateHostInput = Static<typeof CreateHostSchema>;

export const UpdateHostSchema = Type.Object(
  {
    labels: Type.Optional(Labels),
    dataCenterId: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
    maxWorkers: Type.Optional(
      Type.Union([Type.Integer({ minimum: 0 }), Type.Null()], {
        description: 'most workers placed here; null: no limit',
      }),
    ),
  },
  {
    additionalProperties: false,
    minProperties: 1,
    description: "labels replace the host's labels; workers already placed stay where they are",
  },
);

export const ProbeHostSchema = Type.Object(
  { acceptHostKey: Type.Optional(Fingerprint) },
  {
    additionalProperties: false,
    description: 'acceptHostKey re-pins a host whose key changed (after checking it out of band)',
  },
);

/** Hosts are the platform's, not an account's: only the admin account's ADMIN keys reach them. */
function requireHostAdmin(principal: Principal): void {
  requireScope(principal, 'ADMIN');
  if (!principal.isAdmin) throw forbidden('hosts are managed with a key of the admin account');
}

/** Refuses what cannot be connected with, before anything is stored. */
export function checkCredentials(input: { privateKey?: string; useAgent?: boolean }, at: string): void {
  if (input.useAgent) {
    throw validationFailed([`${at}.useAgent: SSH agent authentication is not available; give privateKey`]);
  }
  if (!input.privateKey) throw validationFailed([`${at}: missing property 'privateKey'`]);
  const parsed = ssh2.utils.parseKey(input.privateKey);
  if (parsed instanceof Error)
    throw validationFailed([
      `${at}.privateKey: not a private key this server can use (${parsed.message}); passphrase-protected keys are not supported`,
    ]);
  if (Array.isArray(parsed) || parsed.isPrivateKey?.() === false)
    throw validationFailed([`${at}.privateKey: give the private key, not the public one`]);
}

export const normalizePin = (fp: string | undefined): string | null =>
  fp ? `SHA256:${fp.replace(/^SHA256:/, '').replace(/=$/, '')}` : null;

/** What live workers hold on a host: how many, and which GPUs. */
export interface LiveOnHost {
  workers: number;
  gpuUuids: string[];
}

async function liveOnHosts(ctx: DomainContext, hostIds: string[]): Promise<Map<string, LiveOnHost>> {
  const rows = await ctx.db.worker.findMany({
    where: { hostId: { in: hostIds }, ...liveWorker },
    select: { hostId: true, gpuUuids: true },
  });
  const out = new Map<string, LiveOnHost>();
  for (const r of rows) {
    const live = out.get(r.hostId ?? '') ?? { workers: 0, gpuUuids: [] };
    live.workers++;
    live.gpuUuids.push(...r.gpuUuids);
    out.set(r.hostId ?? '', live);
  }
  return out;
}

/** A host as the domain knows it: its row and what live workers hold on it. */
export interface HostModel {
  row: Host;
  live: LiveOnHost;
}

/** A fresh one each time: liveOnHosts fills its own entries in place, so none is shared. */
const nothingLive = (): LiveOnHost => ({ workers: 0, gpuUuids: [] });

async function loadHost(ctx: DomainContext, id: string): Promise<HostModel> {
  const row = await ctx.db.host.findUnique({ where: { id } });
  if (!row) throw notFound('host');
  return { row, live: (await liveOnHosts(ctx, [id])).get(id) ?? nothingLive() };
}

/** Starts the host's workflow unless it runs. */
export async function ensureHostWorkflow(ctx: DomainContext, hostId: string): Promise<void> {
  const host = await ctx.db.host.findUnique({ where: { id: hostId }, select: { name: true } });
  await ctx.temporal.workflow.start<HostWorkflow>('hostWorkflow', {
    workflowId: hostWorkflowId(hostId),
    taskQueue: ctx.taskQueue,
    args: [{ hostId }],
    typedSearchAttributes: gantrySearchAttributes('host', { hostId }),
    memo: gantryMemo({ hostName: host?.name }),
    workflowIdConflictPolicy: 'USE_EXISTING',
  });
}

/** Probes through the host's workflow (so that probes of one host never overlap) and waits for it. */
async function probeThroughWorkflow(
  ctx: DomainContext,
  hostId: string,
  acceptHostKey?: string,
): Promise<HostProbeResult> {
  await ensureHostWorkflow(ctx, hostId);
  const handle = ctx.temporal.workflow.getHandle(hostWorkflowId(hostId));
  return handle.executeUpdate(probeHostNow, { args: [acceptHostKey ? { acceptHostKey } : {}] });
}

/** Registers a host and probes it; answers the host as the probe found it (READY, UNREACHABLE, ...). */
export async function createHost(ctx: DomainContext, principal: Principal, body: unknown): Promise<HostModel> {
  requireHostAdmin(principal);
  const input = validate(CreateHostSchema, body);
  checkCredentials(input, '$');
  const port = input.port ?? 22;
  const user = input.user ?? 'root';
  const id = newId();
  try {
    await ctx.db.host.create({
      data: {
        id,
        name: input.name ?? `${user}@${input.address}:${port}`,
        address: input.address,
        port,
        user,
        privateKey: new Uint8Array(ctx.secrets.seal(input.privateKey!)),
        dataCenterId: input.dataCenterId,
        labels: input.labels ?? {},
        maxWorkers: input.maxWorkers ?? null,
        hostKeySha256: normalizePin(input.hostKeySha256),
        source: 'api',
      },
    });
  } catch (err) {
    if (isUniqueViolation(err))
      throw new DomainError(
        'conflict',
        `a host named '${input.name ?? `${user}@${input.address}:${port}`}' already exists`,
      );
    throw err;
  }
  await probeThroughWorkflow(ctx, id);
  return loadHost(ctx, id);
}

/**
 * Changes what placement reads of a host registered through the API: its labels (such as
 * `gantry.io/cpu-overcommit`), data center and worker limit. Hosts of the hosts file or
 * GANTRY_LOCAL_HOST are changed there: every start applies those again.
 */
export async function updateHost(
  ctx: DomainContext,
  principal: Principal,
  id: string,
  body: unknown,
): Promise<HostModel> {
  requireHostAdmin(principal);
  const input = validate(UpdateHostSchema, body);
  const host = await ctx.db.host.findUnique({ where: { id }, select: { name: true, source: true } });
  if (!host) throw notFound('host');
  if (host.source !== 'api')
    throw new DomainError(
      'conflict',
      `the host '${host.name}' comes from ${host.source === 'local' ? 'GANTRY_LOCAL_HOST (its labels: GANTRY_LOCAL_HOST_LABELS)' : 'the hosts file (GANTRY_HOSTS_FILE)'}, which every start applies again: change it there`,
    );
  await ctx.db.host.update({
    where: { id },
    data: {
      ...(input.labels !== undefined ? { labels: input.labels } : {}),
      ...(input.dataCenterId !== undefined ? { dataCenterId: input.dataCenterId } : {}),
      ...(input.maxWorkers !== undefined ? { maxWorkers: input.maxWorkers } : {}),
    },
  });
  return loadHost(ctx, id);
}

export async function listHosts(ctx: DomainContext, principal: Principal): Promise<HostModel[]> {
  requireHostAdmin(principal);
  const rows = await ctx.db.host.findMany({ orderBy: { createdAt: 'asc' } });
  const live = await liveOnHosts(
    ctx,
    rows.map((r) => r.id),
  );
  return rows.map((row) => ({ row, live: live.get(row.id) ?? nothingLive() }));
}

export async function getHost(ctx: DomainContext, principal: Principal, id: string): Promise<HostModel> {
  requireHostAdmin(principal);
  return loadHost(ctx, id);
}

/** Probes now; `acceptHostKey` re-pins a host whose key changed. */
export async function probeHostOnDemand(
  ctx: DomainContext,
  principal: Principal,
  id: string,
  body: unknown,
): Promise<HostModel> {
  requireHostAdmin(principal);
  const input = validate(ProbeHostSchema, body ?? {});
  if (!(await ctx.db.host.findUnique({ where: { id }, select: { id: true } }))) throw notFound('host');
  await probeThroughWorkflow(ctx, id, input.acceptHostKey);
  return loadHost(ctx, id);
}

/**
 * Removes a host: no new workers go there at once; its workers drain (their endpoints replace them
 * elsewhere) and then the record goes. Answers whether it is already gone.
 */
export async function deleteHost(
  ctx: DomainContext,
  principal: Principal,
  id: string,
): Promise<{ removed: boolean; host?: HostModel }> {
  requireHostAdmin(principal);
  const host = await ctx.db.host.findUnique({ where: { id } });
  if (!host) throw notFound('host');
  await ctx.db.host.update({
    where: { id },
    data: { status: 'DISABLED', statusReason: 'being removed: its workers drain first' },
  });
  const live = (await liveOnHosts(ctx, [id])).get(id)?.workers ?? 0;
  if (live === 0) {
    await ctx.db.host.deleteMany({ where: { id } });
    await ctx.temporal.workflow
      .getHandle(hostWorkflowId(id))
      .terminate('host removed')
      .catch((err: unknown) => {
        if (!(err instanceof WorkflowNotFoundError)) throw err;
      });
    return { removed: true };
  }
  await ensureHostWorkflow(ctx, id);
  await ctx.temporal.workflow.getHandle(hostWorkflowId(id)).signal(removeHost);
  return { removed: false, host: await loadHost(ctx, id) };
}
