/**
 * Hosts: the machines workers run on, reached over SSH. Operators register them through the admin
 * API or a config file (GANTRY_HOSTS_FILE); each host has a workflow (`host:<id>`) that probes it,
 * keeps its status and drains it before removal. Private keys are sealed at rest and never returned.
 */
import { readFileSync, existsSync } from 'node:fs';
import { homedir, userInfo } from 'node:os';
import path from 'node:path';
import { WorkflowNotFoundError, WorkflowUpdateStage } from '@temporalio/client';
// ssh2 is CommonJS: its `utils` is reachable only through the default export under Node's ESM loader.
import ssh2 from 'ssh2';
import { Type, type Static } from 'typebox';
import { parse as parseYaml } from 'yaml';
import type { Host } from '../../generated/prisma/client.ts';
import { Prisma } from '../../generated/prisma/client.ts';
import { logsCommand } from '../../hostctl/containers.ts';
import { sshTargetOf } from './access.ts';
import type { ExecStream, OutputLine } from '../../hostctl/ssh.ts';
import { hostWorkflowId, probeHostNow, removeHost, type HostProbeResult, type HostWorkflow } from '../../contracts/workflows.ts';
import { gantryMemo, gantrySearchAttributes } from '../../contracts/search-attributes.ts';
import { requireEndpointAccess, requireScope, type Principal } from '../accounts/auth.ts';
import type { DomainContext } from '../context.ts';
import { applyDataCenterEntries, DataCenterFileEntrySchema, type DataCenterFileEntry } from '../catalog/data-centers.ts';
import { DomainError, forbidden, notFound, validationFailed } from '../errors.ts';
import { newId } from '../shared/ids.ts';
import { validate } from '../shared/validation.ts';
import { isLiveWorker, liveWorker } from '../workers/status.ts';

const Fingerprint = Type.String({ pattern: '^(SHA256:)?[A-Za-z0-9+/]{43}=?$', description: 'OpenSSH SHA-256 host key fingerprint, as `ssh-keygen -lf` prints it' });
const Labels = Type.Record(Type.String({ minLength: 1, maxLength: 128 }), Type.String({ maxLength: 1024 }));

export const CreateHostSchema = Type.Object(
  {
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 191, description: 'unique; default `user@address:port`' })),
    address: Type.String({ minLength: 1, maxLength: 253, description: 'DNS name or IP address the platform reaches over SSH' }),
    port: Type.Optional(Type.Integer({ minimum: 1, maximum: 65535, default: 22 })),
    user: Type.Optional(Type.String({ minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9_][A-Za-z0-9_.-]*$', default: 'root' })),
    privateKey: Type.Optional(Type.String({ minLength: 1, maxLength: 32768, description: 'OpenSSH or PEM private key (write-only; sealed at rest)' })),
    useAgent: Type.Optional(Type.Boolean({ description: 'authenticate with the SSH agent instead of a stored key' })),
    hostKeySha256: Type.Optional(Fingerprint),
    dataCenterId: Type.String({ minLength: 1, maxLength: 64 }),
    labels: Type.Optional(Labels),
    maxWorkers: Type.Optional(Type.Integer({ minimum: 0, description: 'most workers placed on this host' })),
  },
  { additionalProperties: false },
);
export type CreateHostInput = Static<typeof CreateHostSchema>;

export const ProbeHostSchema = Type.Object(
  { acceptHostKey: Type.Optional(Fingerprint) },
  { additionalProperties: false, description: 'acceptHostKey re-pins a host whose key changed (after checking it out of band)' },
);

const HostGpuSchema = Type.Object({
  uuid: Type.String(),
  name: Type.String(),
  memoryMb: Type.Integer(),
  driverVersion: Type.String(),
  pool: Type.Union([Type.String(), Type.Null()]),
});

export const HostSchema = Type.Object({
  id: Type.String(),
  name: Type.String(),
  address: Type.String(),
  port: Type.Integer(),
  user: Type.String(),
  dataCenterId: Type.String(),
  labels: Labels,
  maxWorkers: Type.Union([Type.Integer(), Type.Null()]),
  source: Type.String({ description: 'api, file (GANTRY_HOSTS_FILE) or local (GANTRY_LOCAL_HOST)' }),
  status: Type.Union([Type.Literal('PENDING'), Type.Literal('READY'), Type.Literal('UNREACHABLE'), Type.Literal('HOST_KEY_MISMATCH'), Type.Literal('DISABLED')]),
  statusReason: Type.Union([Type.String(), Type.Null()]),
  hostKeySha256: Type.Union([Type.String(), Type.Null()]),
  cpuCount: Type.Union([Type.Integer(), Type.Null()]),
  memoryMb: Type.Union([Type.Integer(), Type.Null()]),
  diskFreeGb: Type.Union([Type.Integer(), Type.Null()]),
  containerRuntime: Type.Union([Type.String(), Type.Null()]),
  gpuMethod: Type.Union([Type.String(), Type.Null()]),
  gpus: Type.Array(HostGpuSchema),
  probe: Type.Union([Type.Record(Type.String(), Type.Unknown()), Type.Null()]),
  workers: Type.Integer({ description: 'live workers placed here' }),
  lastProbeAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  lastSeenAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  createdAt: Type.String({ format: 'date-time' }),
});
export type HostView = Static<typeof HostSchema>;
export const HostListSchema = Type.Object({ hosts: Type.Array(HostSchema) });

export function hostView(h: Host, liveWorkers: number): HostView {
  return {
    id: h.id,
    name: h.name,
    address: h.address,
    port: h.port,
    user: h.user,
    dataCenterId: h.dataCenterId,
    labels: h.labels as Record<string, string>,
    maxWorkers: h.maxWorkers,
    source: h.source,
    status: h.status,
    statusReason: h.statusReason,
    hostKeySha256: h.hostKeySha256,
    cpuCount: h.cpuCount,
    memoryMb: h.memoryMb,
    diskFreeGb: h.diskFreeGb,
    containerRuntime: h.containerRuntime,
    gpuMethod: h.gpuMethod,
    gpus: h.gpus as HostView['gpus'],
    probe: (h.probe as Record<string, unknown> | null) ?? null,
    workers: liveWorkers,
    lastProbeAt: h.lastProbeAt?.toISOString() ?? null,
    lastSeenAt: h.lastSeenAt?.toISOString() ?? null,
    createdAt: h.createdAt.toISOString(),
  };
}

/** Hosts are the platform's, not an account's: only the admin account's ADMIN keys reach them. */
function requireHostAdmin(principal: Principal): void {
  requireScope(principal, 'ADMIN');
  if (!principal.isAdmin) throw forbidden('hosts are managed with a key of the admin account');
}

/** Refuses what cannot be connected with, before anything is stored. */
function checkCredentials(input: { privateKey?: string; useAgent?: boolean }, at: string): void {
  if (input.useAgent) {
    throw validationFailed([`${at}.useAgent: SSH agent authentication is not available; give privateKey`]);
  }
  if (!input.privateKey) throw validationFailed([`${at}: missing property 'privateKey'`]);
  const parsed = ssh2.utils.parseKey(input.privateKey);
  if (parsed instanceof Error) throw validationFailed([`${at}.privateKey: not a private key this server can use (${parsed.message}); passphrase-protected keys are not supported`]);
  if (Array.isArray(parsed) || parsed.isPrivateKey?.() === false) throw validationFailed([`${at}.privateKey: give the private key, not the public one`]);
}

const normalizePin = (fp: string | undefined): string | null => (fp ? `SHA256:${fp.replace(/^SHA256:/, '').replace(/=$/, '')}` : null);

async function liveWorkerCounts(ctx: DomainContext, hostIds: string[]): Promise<Map<string, number>> {
  const groups = await ctx.db.worker.groupBy({ by: ['hostId'], where: { hostId: { in: hostIds }, ...liveWorker }, _count: { _all: true } });
  return new Map(groups.map((g) => [g.hostId ?? '', g._count._all]));
}

async function viewOf(ctx: DomainContext, id: string): Promise<HostView> {
  const h = await ctx.db.host.findUnique({ where: { id } });
  if (!h) throw notFound('host');
  return hostView(h, (await liveWorkerCounts(ctx, [id])).get(id) ?? 0);
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
async function probeThroughWorkflow(ctx: DomainContext, hostId: string, acceptHostKey?: string): Promise<HostProbeResult> {
  await ensureHostWorkflow(ctx, hostId);
  const handle = ctx.temporal.workflow.getHandle(hostWorkflowId(hostId));
  return handle.executeUpdate(probeHostNow, { args: [acceptHostKey ? { acceptHostKey } : {}] });
}

/** Registers a host and probes it; answers the host as the probe found it (READY, UNREACHABLE, ...). */
export async function createHost(ctx: DomainContext, principal: Principal, body: unknown): Promise<HostView> {
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
    if (err instanceof Prisma.PrismaClientKnownRequestError && err.code === 'P2002') throw new DomainError('conflict', `a host named '${input.name ?? `${user}@${input.address}:${port}`}' already exists`);
    throw err;
  }
  await probeThroughWorkflow(ctx, id);
  return viewOf(ctx, id);
}

export async function listHosts(ctx: DomainContext, principal: Principal): Promise<HostView[]> {
  requireHostAdmin(principal);
  const rows = await ctx.db.host.findMany({ orderBy: { createdAt: 'asc' } });
  const counts = await liveWorkerCounts(
    ctx,
    rows.map((r) => r.id),
  );
  return rows.map((h) => hostView(h, counts.get(h.id) ?? 0));
}

export async function getHost(ctx: DomainContext, principal: Principal, id: string): Promise<HostView> {
  requireHostAdmin(principal);
  return viewOf(ctx, id);
}

/** Probes now; `acceptHostKey` re-pins a host whose key changed. */
export async function probeHostOnDemand(ctx: DomainContext, principal: Principal, id: string, body: unknown): Promise<HostView> {
  requireHostAdmin(principal);
  const input = validate(ProbeHostSchema, body ?? {});
  if (!(await ctx.db.host.findUnique({ where: { id }, select: { id: true } }))) throw notFound('host');
  await probeThroughWorkflow(ctx, id, input.acceptHostKey);
  return viewOf(ctx, id);
}

/**
 * Removes a host: no new workers go there at once; its workers drain (their endpoints replace them
 * elsewhere) and then the record goes. Answers whether it is already gone.
 */
export async function deleteHost(ctx: DomainContext, principal: Principal, id: string): Promise<{ removed: boolean; host?: HostView }> {
  requireHostAdmin(principal);
  const host = await ctx.db.host.findUnique({ where: { id } });
  if (!host) throw notFound('host');
  await ctx.db.host.update({ where: { id }, data: { status: 'DISABLED', statusReason: 'being removed: its workers drain first' } });
  const live = (await liveWorkerCounts(ctx, [id])).get(id) ?? 0;
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
  return { removed: false, host: await viewOf(ctx, id) };
}

// ---------------------------------------------------------------- configuration at start

export const HostsFileEntrySchema = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 191 }),
    address: Type.String({ minLength: 1, maxLength: 253 }),
    port: Type.Optional(Type.Integer({ minimum: 1, maximum: 65535 })),
    user: Type.Optional(Type.String({ minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9_][A-Za-z0-9_.-]*$' })),
    privateKey: Type.Optional(Type.String({ minLength: 1 })),
    privateKeyFile: Type.Optional(Type.String({ minLength: 1, description: 'path, relative to the hosts file' })),
    useAgent: Type.Optional(Type.Boolean()),
    hostKeySha256: Type.Optional(Fingerprint),
    dataCenterId: Type.String({ minLength: 1, maxLength: 64 }),
    labels: Type.Optional(Labels),
    maxWorkers: Type.Optional(Type.Integer({ minimum: 0 })),
  },
  { additionalProperties: false },
);
/** A list of hosts, or an object with the hosts and the settings of their data centers. */
export const HostsFileSchema = Type.Array(HostsFileEntrySchema);
export const HostsFileObjectSchema = Type.Object(
  { dataCenters: Type.Optional(Type.Array(DataCenterFileEntrySchema)), hosts: Type.Optional(Type.Array(HostsFileEntrySchema)) },
  { additionalProperties: false },
);
export type HostsFileEntry = Static<typeof HostsFileEntrySchema>;

export interface HostsFile {
  dataCenters: DataCenterFileEntry[];
  hosts: HostsFileEntry[];
}

/**
 * Reads a hosts file (JSON or YAML, a superset of JSON): a list of hosts, or
 * `{dataCenters: [{id, country, networkVolumePath}], hosts: [...]}`.
 */
export function readHostsFile(file: string): HostsFile {
  let parsed: unknown;
  try {
    parsed = parseYaml(readFileSync(file, 'utf8'));
  } catch (err) {
    throw new Error(`GANTRY_HOSTS_FILE ${file}: ${err instanceof Error ? err.message : String(err)}`);
  }
  let entries: HostsFileEntry[];
  let dataCenters: DataCenterFileEntry[];
  try {
    if (Array.isArray(parsed ?? [])) {
      entries = validate(HostsFileSchema, parsed ?? []);
      dataCenters = [];
    } else {
      const content = validate(HostsFileObjectSchema, parsed);
      entries = content.hosts ?? [];
      dataCenters = content.dataCenters ?? [];
    }
  } catch (err) {
    if (err instanceof DomainError) throw new Error(`GANTRY_HOSTS_FILE ${file}: ${(err.errors ?? [err.message]).join('; ')}`);
    throw err;
  }
  const dcIds = new Set<string>();
  for (const dc of dataCenters) {
    if (dcIds.has(dc.id)) throw new Error(`GANTRY_HOSTS_FILE ${file}: data center '${dc.id}' appears twice`);
    dcIds.add(dc.id);
  }
  const names = new Set<string>();
  const hosts = entries.map((e, i) => {
    if (names.has(e.name)) throw new Error(`GANTRY_HOSTS_FILE ${file}: host name '${e.name}' appears twice`);
    names.add(e.name);
    if (e.privateKey && e.privateKeyFile) throw new Error(`GANTRY_HOSTS_FILE ${file}: $[${i}]: give privateKey or privateKeyFile, not both`);
    const privateKey = e.privateKeyFile ? readFileSync(path.resolve(path.dirname(file), e.privateKeyFile), 'utf8') : e.privateKey;
    try {
      checkCredentials({ privateKey, useAgent: e.useAgent }, `$[${i}]`);
    } catch (err) {
      if (err instanceof DomainError) throw new Error(`GANTRY_HOSTS_FILE ${file}: ${(err.errors ?? [err.message]).join('; ')}`);
      throw err;
    }
    return { ...e, privateKey, privateKeyFile: undefined };
  });
  return { dataCenters, hosts };
}

/**
 * Creates or updates hosts by name (the entry wins over what the API set), starts their
 * workflows, and asks for a probe where the connection changed. Hosts not in the file stay.
 */
export async function applyHostEntries(ctx: DomainContext, entries: HostsFileEntry[], source: 'file' | 'local'): Promise<string[]> {
  const ids: string[] = [];
  for (const e of entries) {
    const port = e.port ?? 22;
    const user = e.user ?? 'root';
    const existing = await ctx.db.host.findUnique({ where: { name: e.name } });
    const sameKey = existing?.privateKey ? ctx.secrets.open(existing.privateKey) === e.privateKey : false;
    const connectionChanged = !existing || existing.address !== e.address || existing.port !== port || existing.user !== user || !sameKey;
    const fields = {
      address: e.address,
      port,
      user,
      dataCenterId: e.dataCenterId,
      labels: e.labels ?? {},
      maxWorkers: e.maxWorkers ?? null,
      source,
      ...(sameKey ? {} : { privateKey: new Uint8Array(ctx.secrets.seal(e.privateKey!)) }),
    };
    let id: string;
    if (existing) {
      id = existing.id;
      await ctx.db.host.update({
        where: { id },
        data: { ...fields, ...(e.hostKeySha256 ? { hostKeySha256: normalizePin(e.hostKeySha256) } : connectionChanged && existing.address !== e.address ? { hostKeySha256: null } : {}) },
      });
    } else {
      id = newId();
      await ctx.db.host.create({ data: { id, name: e.name, ...fields, privateKey: new Uint8Array(ctx.secrets.seal(e.privateKey!)), hostKeySha256: normalizePin(e.hostKeySha256) } });
    }
    await ensureHostWorkflow(ctx, id);
    if (connectionChanged && existing) {
      await ctx.temporal.workflow.getHandle(hostWorkflowId(id)).startUpdate(probeHostNow, { args: [{}], waitForStage: WorkflowUpdateStage.ACCEPTED });
    }
    ids.push(id);
  }
  return ids;
}

/** The local machine as a host (GANTRY_LOCAL_HOST=1 and its GANTRY_LOCAL_HOST_* variables). */
export interface LocalHostSettings {
  port: number;
  user: string | undefined;
  keyFile: string | undefined;
  dataCenterId: string;
}

/** The local machine as a host: its own sshd, reached on loopback. */
export function localHostEntry(local: LocalHostSettings): HostsFileEntry {
  const keyFile = local.keyFile ?? ['id_ed25519', 'id_ecdsa', 'id_rsa'].map((f) => path.join(homedir(), '.ssh', f)).find((f) => existsSync(f)) ?? path.join(homedir(), '.ssh', 'id_ed25519');
  if (!existsSync(keyFile)) throw new Error(`GANTRY_LOCAL_HOST=1: no private key at ${keyFile} (set GANTRY_LOCAL_HOST_KEY)`);
  if (!Number.isInteger(local.port) || local.port < 1 || local.port > 65535) throw new Error('GANTRY_LOCAL_HOST_PORT must be a port number');
  return {
    name: 'local',
    address: '127.0.0.1',
    port: local.port,
    user: local.user ?? userInfo().username,
    privateKey: readFileSync(keyFile, 'utf8'),
    dataCenterId: local.dataCenterId,
  };
}

/** The hosts the configuration names at start (GANTRY_HOSTS_FILE, GANTRY_LOCAL_HOST). */
export interface HostsAtStart {
  hostsFile?: string | undefined;
  localHost?: LocalHostSettings | undefined;
}

/**
 * At start: the hosts of the hosts file, the local machine when asked for, and a workflow for
 * every registered host (mending any that a crash left without one).
 */
export async function applyHostConfig(ctx: DomainContext, hosts: HostsAtStart): Promise<void> {
  if (hosts.hostsFile) {
    const file = readHostsFile(hosts.hostsFile);
    await applyDataCenterEntries(ctx, file.dataCenters);
    await applyHostEntries(ctx, file.hosts, 'file');
  }
  if (hosts.localHost) await applyHostEntries(ctx, [localHostEntry(hosts.localHost)], 'local');
  const all = await ctx.db.host.findMany({ select: { id: true } });
  for (const { id } of all) await ensureHostWorkflow(ctx, id);
}

// ---------------------------------------------------------------- worker logs

export const WorkerLogsQuerySchema = Type.Object(
  {
    tail: Type.Optional(Type.String({ pattern: '^[0-9]{1,6}$', description: 'lines of the past to start with (default 100; ignored when resuming)' })),
    since: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'RFC 3339 time or Unix seconds: only lines after it' })),
    follow: Type.Optional(Type.Union([Type.Literal('true'), Type.Literal('false')], { description: 'keep streaming new lines (default true)' })),
  },
  { additionalProperties: false },
);

export interface WorkerLogLine {
  /** RFC 3339 time the runtime stamped on the line; also the SSE event id to resume from. */
  time: string;
  stream: 'stdout' | 'stderr';
  line: string;
}

export interface WorkerLogStream {
  lines: AsyncIterable<WorkerLogLine>;
  close(): Promise<void>;
}

/** Nanoseconds since the epoch of an RFC 3339 time with up to nine fraction digits (comparable). */
export function logTimeKey(time: string): bigint | undefined {
  const m = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2})$/.exec(time);
  if (!m) return undefined;
  const seconds = Date.parse(`${m[1]}${m[3]}`);
  if (Number.isNaN(seconds)) return undefined;
  return BigInt(seconds) * 1_000_000n + BigInt((m[2] ?? '').padEnd(9, '0'));
}

/**
 * Streams a worker's container output, read on its host over SSH (`<runtime> logs --timestamps`).
 * `lastEventId` (the SSE Last-Event-ID) resumes after that line.
 */
export async function openWorkerLogs(
  ctx: DomainContext,
  principal: Principal,
  endpointId: string,
  workerId: string,
  query: unknown,
  lastEventId: string | undefined,
): Promise<WorkerLogStream> {
  requireScope(principal, 'READ');
  const q = validate(WorkerLogsQuerySchema, query ?? {});
  const endpoint = await ctx.db.endpoint.findFirst({ where: { id: endpointId, accountId: principal.accountId, deletingAt: null }, select: { id: true } });
  if (!endpoint) throw notFound('endpoint');
  requireEndpointAccess(principal, endpointId);
  const worker = await ctx.db.worker.findFirst({ where: { id: workerId, endpointId }, include: { host: true } });
  if (!worker) throw notFound('worker');
  if (!worker.host || !worker.containerId || !isLiveWorker(worker.status)) {
    throw new DomainError('conflict', `the worker has no container to read logs from (status ${worker.status})`);
  }
  if (worker.host.status !== 'READY' && worker.host.status !== 'DISABLED') {
    throw new DomainError('unavailable', `host ${worker.host.name} is ${worker.host.status}${worker.host.statusReason ? `: ${worker.host.statusReason}` : ''}`);
  }
  let since: string | undefined;
  let after: bigint | undefined;
  if (lastEventId !== undefined) {
    after = logTimeKey(lastEventId);
    if (after === undefined) throw validationFailed(['Last-Event-ID: not a log line id']);
    since = lastEventId;
  } else if (q.since !== undefined) {
    if (/^\d+(\.\d+)?$/.test(q.since)) since = new Date(Number(q.since) * 1000).toISOString();
    else if (logTimeKey(q.since) !== undefined) since = q.since;
    else throw validationFailed(['$.since: must be an RFC 3339 time or Unix seconds']);
  }
  const tail = since === undefined ? Number(q.tail ?? 100) : q.tail !== undefined && lastEventId === undefined ? Number(q.tail) : undefined;

  const command = logsCommand((worker.host.containerRuntime ?? 'podman') as 'podman' | 'docker', worker.containerName ?? worker.containerId, {
    follow: q.follow !== 'false',
    ...(tail !== undefined ? { tail } : {}),
    ...(since !== undefined ? { since } : {}),
  });
  let stream: ExecStream;
  try {
    stream = await ctx.ssh.execStream(sshTargetOf(worker.host, ctx.secrets), command);
  } catch (err) {
    throw new DomainError('unavailable', `cannot reach host ${worker.host.name}: ${err instanceof Error ? err.message : String(err)}`);
  }
  async function* parsed(): AsyncGenerator<WorkerLogLine> {
    for await (const out of stream.lines as AsyncIterable<OutputLine>) {
      const space = out.line.indexOf(' ');
      const time = space > 0 ? out.line.slice(0, space) : out.line;
      const key = logTimeKey(time);
      // Not a runtime line (a message of the runtime itself): pass it on as stderr, untimed.
      if (key === undefined) {
        yield { time: '', stream: 'stderr', line: out.line };
        continue;
      }
      if (after !== undefined && key <= after) continue;
      yield { time, stream: out.stream, line: space > 0 ? out.line.slice(space + 1) : '' };
    }
  }
  return { lines: parsed(), close: () => stream.close() };
}
