import { readFileSync, existsSync } from 'node:fs';
import { homedir, userInfo } from 'node:os';
import path from 'node:path';
import { WorkflowUpdateStage } from '@temporalio/client';
import { Type, type Static } from 'typebox';
import { parse as parseYaml } from 'yaml';
import { hostWorkflowId, probeHostNow } from '../../contracts/workflows.ts';
import type { DomainContext } from '../context.ts';
import {
  applyDataCenterEntries,
  DataCenterFileEntrySchema,
  type DataCenterFileEntry,
} from '../catalog/data-centers.ts';
import { DomainError } from '../errors.ts';
import { newId } from '../shared/ids.ts';
import { validate } from '../shared/validation.ts';
import { Fingerprint, Labels, checkCredentials, ensureHostWorkflow, normalizePin } from './hosts.ts';

/** Hosts configured at start: the hosts file (`GANTRY_HOSTS_FILE`) and the local machine (`GANTRY_LOCAL_HOST`), applied by every API process. */

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
  {
    dataCenters: Type.Optional(Type.Array(DataCenterFileEntrySchema)),
    hosts: Type.Optional(Type.Array(HostsFileEntrySchema)),
  },
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
    if (err instanceof DomainError)
      throw new Error(`GANTRY_HOSTS_FILE ${file}: ${(err.errors ?? [err.message]).join('; ')}`);
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
    if (e.privateKey && e.privateKeyFile)
      throw new Error(`GANTRY_HOSTS_FILE ${file}: $[${i}]: give privateKey or privateKeyFile, not both`);
    const privateKey = e.privateKeyFile
      ? readFileSync(path.resolve(path.dirname(file), e.privateKeyFile), 'utf8')
      : e.privateKey;
    try {
      checkCredentials({ privateKey, useAgent: e.useAgent }, `$[${i}]`);
    } catch (err) {
      if (err instanceof DomainError)
        throw new Error(`GANTRY_HOSTS_FILE ${file}: ${(err.errors ?? [err.message]).join('; ')}`);
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
export async function applyHostEntries(
  ctx: DomainContext,
  entries: HostsFileEntry[],
  source: 'file' | 'local',
): Promise<string[]> {
  const ids: string[] = [];
  for (const e of entries) {
    const port = e.port ?? 22;
    const user = e.user ?? 'root';
    const existing = await ctx.db.host.findUnique({ where: { name: e.name } });
    const sameKey = existing?.privateKey ? ctx.secrets.open(existing.privateKey) === e.privateKey : false;
    const connectionChanged =
      !existing || existing.address !== e.address || existing.port !== port || existing.user !== user || !sameKey;
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
        data: {
          ...fields,
          ...(e.hostKeySha256
            ? { hostKeySha256: normalizePin(e.hostKeySha256) }
            : connectionChanged && existing.address !== e.address
              ? { hostKeySha256: null }
              : {}),
        },
      });
    } else {
      id = newId();
      await ctx.db.host.create({
        data: {
          id,
          name: e.name,
          ...fields,
          privateKey: new Uint8Array(ctx.secrets.seal(e.privateKey!)),
          hostKeySha256: normalizePin(e.hostKeySha256),
        },
      });
    }
    await ensureHostWorkflow(ctx, id);
    if (connectionChanged && existing) {
      await ctx.temporal.workflow
        .getHandle(hostWorkflowId(id))
        .startUpdate(probeHostNow, { args: [{}], waitForStage: WorkflowUpdateStage.ACCEPTED });
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
  /** GANTRY_LOCAL_HOST_LABELS: applied at every start, as a hosts file's are. */
  labels?: Record<string, string> | undefined;
}

/** GANTRY_LOCAL_HOST_LABELS: host labels as a JSON object (the hosts file's `labels`), or undefined. */
export function parseLocalHostLabels(raw: string | undefined): Record<string, string> | undefined {
  if (raw === undefined || raw.trim() === '') return undefined;
  let labels: unknown;
  try {
    labels = JSON.parse(raw);
  } catch {
    labels = undefined;
  }
  try {
    return validate(Labels, labels);
  } catch {
    throw new Error(
      `GANTRY_LOCAL_HOST_LABELS must be a JSON object of string values ({"gantry.io/cpu-overcommit": "4"}), got ${JSON.stringify(raw)}`,
    );
  }
}

/** The local machine as a host: its own sshd, reached on loopback. */
export function localHostEntry(local: LocalHostSettings): HostsFileEntry {
  const keyFile =
    local.keyFile ??
    ['id_ed25519', 'id_ecdsa', 'id_rsa'].map((f) => path.join(homedir(), '.ssh', f)).find((f) => existsSync(f)) ??
    path.join(homedir(), '.ssh', 'id_ed25519');
  if (!existsSync(keyFile))
    throw new Error(`GANTRY_LOCAL_HOST=1: no private key at ${keyFile} (set GANTRY_LOCAL_HOST_KEY)`);
  if (!Number.isInteger(local.port) || local.port < 1 || local.port > 65535)
    throw new Error('GANTRY_LOCAL_HOST_PORT must be a port number');
  return {
    name: 'local',
    address: '127.0.0.1',
    port: local.port,
    user: local.user ?? userInfo().username,
    privateKey: readFileSync(keyFile, 'utf8'),
    dataCenterId: local.dataCenterId,
    ...(local.labels ? { labels: local.labels } : {}),
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
