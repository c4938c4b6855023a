/**
 * Container runtime commands on a host, over SSH. Docker and Podman share this command surface;
 * where their output formats differ (listing labels) the commands use forms both understand.
 *
 * Secrets never appear on a command line (the host's process list and logs would show them): the
 * registry password and the container environment (which holds the worker's own credential) travel
 * over stdin into files that only root can read and that are removed when the command ends.
 */
import { isHostLocalImage, registryOf } from './image-references.ts';
import { shellJoin, shellQuote, type ExecResult, type SshPool, type SshTarget } from './ssh.ts';

export type RuntimeName = 'podman' | 'docker';

/** Where and how to run container commands. */
export interface HostHandle {
  hostId: string;
  target: SshTarget;
  runtime: RuntimeName;
}

/** Labels every managed container carries, so that state can be rebuilt from the host after a crash. */
export const LABELS = {
  endpoint: 'gantry.endpoint',
  worker: 'gantry.worker',
  release: 'gantry.release',
  /** The Host row the container was started for: two Gantry installations sharing a machine never touch each other's. */
  host: 'gantry.host',
} as const;

export const containerNameOf = (workerId: string): string => `gantry-${workerId}`;

export interface ContainerSpec {
  name: string;
  image: string;
  /** Arguments after the image (replace the image's CMD); empty keeps it. */
  args: string[];
  env: Record<string, string>;
  /**
   * Variables whose values may hold line breaks, which an env file cannot carry (a pod's
   * `PUBLIC_KEY`, the account's SSH keys one a line): given as `--env` on the command line, so
   * public values only, never secrets.
   */
  publicEnv?: Record<string, string>;
  labels: Record<string, string>;
  /** The bridge network the container joins: its account's (hostctl/networks.ts). */
  network: string;
  /**
   * The host address published ports are bound to (where Gantry reaches them); never all of the
   * host's addresses, which would let anyone who reaches the host past the proxy's key check.
   */
  publishAddress: string;
  /** Container ports published on random host ports: `8000/tcp`. */
  publish: string[];
  /** `hostPort:containerPort` published on a fixed host port. */
  publishFixed: string[];
  gpuUuids: string[];
  gpuMethod: 'cdi' | 'docker-gpus' | 'none';
  /** Container disk in GB, applied only where the storage driver supports quotas. */
  diskGb: number | undefined;
  /** CPU endpoints' flavor: vCPUs and memory the container may use. */
  cpus?: number;
  memoryGb?: number;
  /** Named volumes (created on first use, kept when the container goes) and where they are mounted. */
  volumes?: Array<{ name: string; path: string }>;
  /** Host directories (made when missing) and where they are mounted: network volumes on shared storage. */
  binds?: Array<{ source: string; path: string }>;
}

export { isHostLocalImage, registryOf } from './image-references.ts';

/** The `.env` file content: KEY=VALUE lines, read literally by both runtimes (no quotes, no expansion). */
export function envFile(env: Record<string, string>): string {
  const lines: string[] = [];
  for (const [key, value] of Object.entries(env)) {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(key)) throw new Error(`environment variable name '${key}' is not valid`);
    if (/[\r\n\0]/.test(value))
      throw new Error(`environment variable ${key} holds a line break or NUL, which container env files cannot carry`);
    lines.push(`${key}=${value}`);
  }
  return lines.join('\n') + '\n';
}

/** `run` arguments (after the runtime's name), except the env file. */
export function runArgs(spec: ContainerSpec, envFilePath: string): string[] {
  const args = [
    'run',
    '--detach',
    '--name',
    spec.name,
    '--restart',
    'no',
    '--pull',
    'never',
    '--env-file',
    envFilePath,
  ];
  for (const [k, v] of Object.entries(spec.publicEnv ?? {})) {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(k)) throw new Error(`environment variable name '${k}' is not valid`);
    if (v.includes('\0')) throw new Error(`environment variable ${k} holds a NUL`);
    args.push('--env', `${k}=${v}`);
  }
  for (const [k, v] of Object.entries(spec.labels)) args.push('--label', `${k}=${v}`);
  // Always a bridge network (the account's), never the host's: a tenant's container must not reach
  // what listens on the host's loopback (PostgreSQL, Temporal). Raw sockets go too: with them a
  // container could forge packets to 127.0.0.1 that a bridge with route_localnet would deliver.
  args.push('--network', spec.network, '--cap-drop', 'NET_RAW');
  const bind = spec.publishAddress.includes(':') ? `[${spec.publishAddress}]` : spec.publishAddress;
  for (const p of spec.publish) args.push('--publish', `${bind}::${p}`);
  for (const p of spec.publishFixed) args.push('--publish', `${bind}:${p}`);
  if (spec.gpuUuids.length > 0) {
    if (spec.gpuMethod === 'cdi') for (const uuid of spec.gpuUuids) args.push('--device', `nvidia.com/gpu=${uuid}`);
    // Docker reads --gpus as CSV: several devices need the value itself in double quotes.
    else if (spec.gpuMethod === 'docker-gpus')
      args.push(
        '--gpus',
        spec.gpuUuids.length === 1 ? `device=${spec.gpuUuids[0]}` : `"device=${spec.gpuUuids.join(',')}"`,
      );
    else throw new Error('the host cannot pass GPUs to containers');
  }
  if (spec.diskGb !== undefined) args.push('--storage-opt', `size=${spec.diskGb}G`);
  if (spec.cpus !== undefined) args.push('--cpus', String(spec.cpus));
  if (spec.memoryGb !== undefined) args.push('--memory', `${spec.memoryGb}g`);
  for (const v of spec.volumes ?? []) args.push('--mount', `type=volume,source=${v.name},target=${v.path}`);
  for (const b of spec.binds ?? []) args.push('--mount', `type=bind,source=${b.source},target=${b.path}`);
  // `--` ends the runtime's options: the image (checked against the reference grammar when it was
  // written) can never be read as one, and what follows it is the container's own command.
  args.push('--', spec.image, ...spec.args);
  return args;
}

/**
 * Runs `body` (a shell fragment that may use "$f", a private file holding stdin) on the host, and
 * removes the file afterwards whatever happens. Secrets reach the file without touching a command line.
 */
function withStdinFile(body: string): string {
  return `umask 077; f=$(mktemp) || exit 97; trap 'rm -f "$f"' EXIT; cat > "$f" || exit 97; ${body}`;
}

const ENV_FILE_SLOT = '\0env-file\0';

export class ContainerCommandError extends Error {
  override readonly name = 'ContainerCommandError';
}

function failure(what: string, r: ExecResult): ContainerCommandError {
  const detail = (r.stderr.trim() || r.stdout.trim()).split('\n').slice(-5).join('\n').slice(-1500);
  return new ContainerCommandError(`${what} failed (exit ${r.code ?? r.signal}): ${detail}`);
}

/** The value of an image's label, or undefined when the image or the label is not there. */
export async function imageLabel(
  pool: SshPool,
  h: HostHandle,
  image: string,
  label: string,
): Promise<string | undefined> {
  const format = `{{ index .Config.Labels ${JSON.stringify(label)} }}`;
  const r = await pool.exec(h.target, shellJoin([h.runtime, 'image', 'inspect', '--format', format, '--', image]), {
    timeoutMs: 60_000,
  });
  const value = r.stdout.trim();
  return r.code === 0 && value !== '' && value !== '<no value>' ? value : undefined;
}

export async function imagePresent(pool: SshPool, h: HostHandle, image: string): Promise<boolean> {
  const cmd =
    h.runtime === 'podman'
      ? shellJoin(['podman', 'image', 'exists', '--', image])
      : `${shellJoin(['docker', 'image', 'inspect', '--', image])} >/dev/null 2>&1`;
  const r = await pool.exec(h.target, cmd, { timeoutMs: 60_000 });
  return r.code === 0;
}

export interface RegistryLoginSecret {
  username: string;
  password: string;
  /** The registry host the credential is bound to: it is never sent anywhere else (null: nowhere). */
  registry: string | null;
}

/**
 * Makes the image ready for a container of the tenant that named it. An image in the host's store
 * is no proof that this tenant may run it (another tenant may have pulled it with their own
 * credential), so every image is pulled before each start, with the tenant's credential or
 * anonymously: the registry decides, for a tag and for a digest alike, and a failed pull fails the
 * start (as Kubernetes' AlwaysPullImages). Layers already there are not fetched again. The one
 * exception is `localhost/`: images built or loaded on the host itself (Gantry's runtime images,
 * the operator's own), which no registry serves and any tenant may name.
 *
 * With a login, the credential lives only in a temporary auth file used by this one pull (another
 * tenant's pull on the same host never sees it).
 */
export async function ensureImage(
  pool: SshPool,
  h: HostHandle,
  image: string,
  login: RegistryLoginSecret | undefined,
  options: { timeoutMs: number; signal?: AbortSignal },
): Promise<'host-local' | 'pulled'> {
  if (isHostLocalImage(image) && !login) {
    if (await imagePresent(pool, h, image)) return 'host-local';
    throw new ContainerCommandError(
      `the image ${image} is not on this host: localhost/ images are built or loaded on the host itself, never pulled`,
    );
  }
  let r: ExecResult;
  if (login) {
    const registry = registryOf(image);
    if (login.registry === null)
      throw new ContainerCommandError(`pulling ${image}: the registry credential is not bound to a registry yet`);
    if (registry !== login.registry)
      throw new ContainerCommandError(
        `pulling ${image}: the registry credential is bound to ${login.registry}, not ${registry}`,
      );
    const body =
      h.runtime === 'podman'
        ? `podman login --authfile "$f" --username ${shellQuote(login.username)} --password-stdin -- ${shellQuote(registry)} < "$f.pw" && podman pull --quiet --authfile "$f" -- ${shellQuote(image)}`
        : `docker --config "$d" login --username ${shellQuote(login.username)} --password-stdin -- ${shellQuote(registry)} < "$f.pw" && docker --config "$d" pull --quiet -- ${shellQuote(image)}`;
    // stdin holds the password; it is moved aside so the auth file path is free for the runtime.
    const script = `umask 077; d=$(mktemp -d) || exit 97; f="$d/auth.json"; trap 'rm -rf "$d"' EXIT; cat > "$f.pw" || exit 97; ${body}`;
    r = await pool.exec(h.target, script, {
      stdin: login.password,
      timeoutMs: options.timeoutMs,
      signal: options.signal,
    });
  } else {
    r = await pool.exec(h.target, shellJoin([h.runtime, 'pull', '--quiet', '--', image]), {
      timeoutMs: options.timeoutMs,
      signal: options.signal,
    });
  }
  if (r.code === 0) return 'pulled';
  throw failure(`pulling ${image} (an image already on the host is not used in its place)`, r);
}

/**
 * Builds `image` on the host from a build context sent as a tar over stdin (so the host needs
 * nothing but its container runtime): unpacked into a temporary directory, built, removed.
 * Concurrent builds of one image on one host each finish with the same tag.
 */
export async function buildImage(
  pool: SshPool,
  h: HostHandle,
  image: string,
  context: Buffer,
  buildArgs: Record<string, string>,
  options: { timeoutMs: number; signal?: AbortSignal; labels?: Record<string, string> },
): Promise<void> {
  const args = [
    ...Object.entries(buildArgs).flatMap(([k, v]) => ['--build-arg', `${k}=${v}`]),
    ...Object.entries(options.labels ?? {}).flatMap(([k, v]) => ['--label', `${k}=${v}`]),
  ];
  const build = shellJoin([h.runtime, 'build', '--quiet', ...args, '--tag', image, '--', '.']);
  const script = `d=$(mktemp -d) || exit 97; trap 'rm -rf "$d"' EXIT; tar -x -C "$d" || exit 98; cd "$d" && ${build}`;
  const r = await pool.exec(h.target, script, { stdin: context, timeoutMs: options.timeoutMs, signal: options.signal });
  if (r.code !== 0) throw failure(`building ${image}`, r);
}

/** Starts the container; returns its id. The environment goes through a private env file. */
export async function runContainer(pool: SshPool, h: HostHandle, spec: ContainerSpec): Promise<string> {
  // Bind sources must exist: a network volume's directory is made on its first use.
  const dirs = (spec.binds ?? []).map((b) => b.source);
  const mkdir = dirs.length > 0 ? `${shellJoin(['mkdir', '-p', '--', ...dirs])} || exit 96; ` : '';
  const cmd = withStdinFile(
    `${mkdir}${h.runtime} ${runArgs(spec, ENV_FILE_SLOT)
      .map((a) => (a === ENV_FILE_SLOT ? '"$f"' : shellQuote(a)))
      .join(' ')}`,
  );
  const r = await pool.exec(h.target, cmd, { stdin: envFile(spec.env), timeoutMs: 120_000 });
  if (r.code !== 0) throw failure(`starting container ${spec.name}`, r);
  const id = r.stdout.trim().split('\n').pop() ?? '';
  if (!/^[0-9a-f]{12,64}$/.test(id))
    throw new ContainerCommandError(`starting container ${spec.name}: unexpected output ${r.stdout.slice(0, 200)}`);
  return id;
}

export interface ContainerState {
  id: string;
  /** created, running, paused, exited, dead, ... */
  status: string;
  exitCode: number;
  running: boolean;
  /** Bytes in the container's writable layer (what it wrote outside its volumes), when asked for. */
  writtenBytes?: number;
}

/**
 * The container's state, or null when there is no such container. `withSize` also measures its
 * writable layer (the runtime walks it: not free, so callers ask now and then).
 */
export async function inspectContainer(
  pool: SshPool,
  h: HostHandle,
  name: string,
  options: { withSize?: boolean } = {},
): Promise<ContainerState | null> {
  const format = `{{.Id}}|{{.State.Status}}|{{.State.ExitCode}}|{{.State.Running}}${options.withSize ? '|{{.SizeRw}}' : ''}`;
  const r = await pool.exec(
    h.target,
    shellJoin([
      h.runtime,
      'inspect',
      '--type',
      'container',
      ...(options.withSize ? ['--size'] : []),
      '--format',
      format,
      '--',
      name,
    ]),
    {
      timeoutMs: 60_000,
    },
  );
  if (r.code !== 0) {
    if (/no such (object|container)/i.test(r.stderr)) return null;
    throw failure(`inspecting ${name}`, r);
  }
  const [id = '', status = '', exitCode = '0', running = 'false', size] = r.stdout.trim().split('|');
  const written = size !== undefined && /^[0-9]+$/.test(size) ? Number(size) : undefined;
  return {
    id,
    status,
    exitCode: Number(exitCode),
    running: running === 'true',
    ...(written !== undefined ? { writtenBytes: written } : {}),
  };
}

/**
 * Freezes every process of the container (the cgroup freezer): its memory, its GPUs' memory and its
 * open sockets stay as they are until `unpauseContainer`. Already paused is fine.
 */
export async function pauseContainer(pool: SshPool, h: HostHandle, name: string): Promise<void> {
  const r = await pool.exec(h.target, shellJoin([h.runtime, 'pause', '--', name]), { timeoutMs: 60_000 });
  if (r.code !== 0 && !/already paused/i.test(r.stderr)) throw failure(`pausing ${name}`, r);
}

/** Thaws a container frozen by `pauseContainer`; one that runs already is fine. */
export async function unpauseContainer(pool: SshPool, h: HostHandle, name: string): Promise<void> {
  const r = await pool.exec(h.target, shellJoin([h.runtime, 'unpause', '--', name]), { timeoutMs: 60_000 });
  if (r.code !== 0 && !/not paused/i.test(r.stderr)) throw failure(`thawing ${name}`, r);
}

/** Stops (SIGTERM, then SIGKILL after graceSec) and removes the container; a missing one is fine. */
export async function removeContainer(pool: SshPool, h: HostHandle, name: string, graceSec: number): Promise<void> {
  const q = shellQuote(name);
  const cmd = `${h.runtime} stop --time ${Math.max(0, Math.floor(graceSec))} -- ${q} >/dev/null 2>&1; out=$(${h.runtime} rm --force -- ${q} 2>&1) || { case "$out" in *[Nn]'o such container'*) exit 0;; *) echo "$out" >&2; exit 1;; esac; }`;
  const r = await pool.exec(h.target, cmd, { timeoutMs: (graceSec + 60) * 1000 });
  if (r.code !== 0) throw failure(`removing ${name}`, r);
}

/**
 * A pod's persistent volume: a named volume on the host that holds it. The host row's id is in the
 * name so that a host's reconcile tells its own volumes from those of other installations.
 */
export const podVolumePrefix = (hostId: string): string => `gantry-pod-${hostId}-`;
export const podVolumeName = (hostId: string, podId: string): string => `${podVolumePrefix(hostId)}${podId}`;

/** Removes a directory tree on the host (a deleted network volume's data on shared storage); a missing one is fine. */
export async function removeDirectory(pool: SshPool, h: HostHandle, dir: string, timeoutMs = 600_000): Promise<void> {
  const r = await pool.exec(h.target, shellJoin(['rm', '-rf', '--', dir]), { timeoutMs });
  if (r.code !== 0) throw failure(`removing ${dir}`, r);
}

/** Removes a named volume and its data; a missing one is fine. */
export async function removeVolume(pool: SshPool, h: HostHandle, name: string, timeoutMs = 60_000): Promise<void> {
  const r = await pool.exec(h.target, shellJoin([h.runtime, 'volume', 'rm', '--force', '--', name]), { timeoutMs });
  if (r.code !== 0) throw failure(`removing volume ${name}`, r);
}

/** Names of the host's volumes that start with the prefix. */
export async function listVolumes(pool: SshPool, h: HostHandle, prefix: string): Promise<string[]> {
  const r = await pool.exec(h.target, shellJoin([h.runtime, 'volume', 'ls', '--quiet']), { timeoutMs: 60_000 });
  if (r.code !== 0) throw failure('listing volumes', r);
  return r.stdout
    .split('\n')
    .map((l) => l.trim())
    .filter((name) => name.startsWith(prefix));
}

export interface ManagedContainer {
  id: string;
  name: string;
  workerId: string;
  endpointId: string;
  release: string;
}

/** Containers on the host that this Gantry installation started for the given Host row. */
export async function listManagedContainers(pool: SshPool, h: HostHandle): Promise<ManagedContainer[]> {
  // `inspect` formats Config.Labels the same way in both runtimes (ps does not).
  const format = `{{.Id}}\t{{.Name}}\t{{index .Config.Labels "${LABELS.worker}"}}\t{{index .Config.Labels "${LABELS.endpoint}"}}\t{{index .Config.Labels "${LABELS.release}"}}`;
  // One inspect for all; if one went away since the listing, one each (skipping the missing).
  const inspect = `${h.runtime} inspect --type container --format ${shellQuote(format)} --`;
  const cmd = `ids=$(${h.runtime} ps --all --quiet --no-trunc --filter ${shellQuote(`label=${LABELS.host}=${h.hostId}`)}) || exit 1; [ -z "$ids" ] && exit 0; out=$(${inspect} $ids 2>/dev/null) && { printf '%s\n' "$out"; exit 0; }; for id in $ids; do ${inspect} "$id" 2>/dev/null; done; exit 0`;
  const r = await pool.exec(h.target, cmd, { timeoutMs: 60_000 });
  if (r.code !== 0) throw failure('listing containers', r);
  return r.stdout
    .split('\n')
    .filter((l) => l.trim())
    .map((line) => {
      const [id = '', name = '', workerId = '', endpointId = '', release = ''] = line.split('\t');
      return { id, name: name.replace(/^\//, ''), workerId, endpointId, release };
    });
}

/** The last lines of a container's output (for the reason a worker failed). */
export async function containerLogTail(pool: SshPool, h: HostHandle, name: string, lines: number): Promise<string> {
  const r = await pool.exec(h.target, `${shellJoin([h.runtime, 'logs', '--tail', String(lines), '--', name])} 2>&1`, {
    timeoutMs: 30_000,
    maxOutputBytes: 64 * 1024,
  });
  return r.code === 0 ? r.stdout.trim() : '';
}

/** The command that prints (and with follow, keeps printing) a container's output with timestamps. */
export function logsCommand(
  runtime: RuntimeName,
  name: string,
  options: { follow: boolean; tail?: number; since?: string },
): string {
  const args: string[] = [runtime, 'logs', '--timestamps'];
  if (options.follow) args.push('--follow');
  if (options.tail !== undefined) args.push('--tail', String(options.tail));
  if (options.since !== undefined) args.push('--since', options.since);
  args.push('--', name);
  return shellJoin(args);
}
