/**
 * What a host has to offer, read over SSH in one round trip: CPUs, memory, disk where container
 * images live, the container runtime, GPU passthrough support and the GPUs themselves.
 */
import { describeGpu, type GpuPoolId } from '../domain/catalog/index.ts';
import { execOk, type SshConnection } from '../hostctl/ssh.ts';

export interface NvidiaGpu {
  name: string;
  memoryMb: number;
  uuid: string;
  driverVersion: string;
}

export class NvidiaSmiParseError extends Error {
  override readonly name = 'NvidiaSmiParseError';
}

/**
 * Parses `nvidia-smi --query-gpu=name,memory.total,uuid,driver_version --format=csv,noheader,nounits`.
 * Strict: a line that is not a GPU (a driver error message, "[N/A]" memory) throws, because
 * silently dropping a card would under-report the host.
 */
export function parseNvidiaSmi(csv: string): NvidiaGpu[] {
  const gpus: NvidiaGpu[] = [];
  for (const raw of csv.split(/\r?\n/)) {
    const line = raw.trim();
    if (!line) continue;
    const fields = line.split(',').map((f) => f.trim());
    if (fields.length < 4) throw new NvidiaSmiParseError(`not an nvidia-smi GPU line: ${line}`);
    // Names have no commas today; if one ever does, the last three fields are still fixed.
    const [memory, uuid, driverVersion] = fields.slice(-3) as [string, string, string];
    const name = fields.slice(0, -3).join(', ');
    const memoryMb = Number(memory);
    if (!name || !/^\d+$/.test(memory) || !Number.isSafeInteger(memoryMb))
      throw new NvidiaSmiParseError(`bad memory.total in: ${line}`);
    if (!/^(GPU|MIG)-[0-9a-fA-F-]+$/.test(uuid)) throw new NvidiaSmiParseError(`bad uuid in: ${line}`);
    if (!/^\d+(\.\d+)*$/.test(driverVersion)) throw new NvidiaSmiParseError(`bad driver_version in: ${line}`);
    gpus.push({ name, memoryMb, uuid, driverVersion });
  }
  return gpus;
}

export type ContainerRuntimeName = 'docker' | 'podman';

export interface ContainerRuntimeInfo {
  name: ContainerRuntimeName;
  path: string;
  /** First line of `<runtime> --version`. */
  versionText: string;
  /** Dotted version number from versionText. */
  version: string | undefined;
  /** `docker` on PATH that is Podman's docker-compatible wrapper. */
  podmanWrapper: boolean;
  /** The engine answered (`docker version` reached the daemon, `podman info` worked). */
  usable: boolean;
  /** Where images and containers are stored. */
  rootDir: string | undefined;
  /** Docker only: the OCI runtimes the daemon knows (`nvidia` means `--gpus` works). */
  dockerRuntimes: string[];
  /** Storage driver (overlay, overlay2, btrfs, zfs, vfs, ...). */
  storageDriver: string | undefined;
  /** File system under the storage and its mount options (`xfs rw,prjquota`). */
  storageFs: string | undefined;
  /** Docker only: whether the daemon's rules keep its networks apart. */
  walls?: DockerWalls;
}

/**
 * How a worker's container disk size is enforced on the host: the runtime's `--storage-opt size=`
 * where its storage can (overlay on XFS mounted with project quotas; Docker's btrfs and zfs
 * drivers), else a watchdog that measures the writable layer and stops a worker over its size.
 */
// A type, not an interface: it is stored as JSON (Host.probe).
export type DiskLimit = {
  method: 'storage-opt' | 'watchdog';
  why: string;
};

export function diskLimitOf(
  runtime: Pick<ContainerRuntimeInfo, 'name' | 'storageDriver' | 'storageFs'> | undefined,
): DiskLimit {
  if (!runtime) return { method: 'watchdog', why: 'no container runtime' };
  const driver = runtime.storageDriver ?? 'unknown';
  const [fsType = 'unknown', options = ''] = (runtime.storageFs ?? '').trim().split(/\s+/);
  const quotas = /(^|,)(prjquota|pquota)(,|$)/.test(options);
  if (/^overlay2?$/.test(driver) && fsType === 'xfs' && quotas)
    return { method: 'storage-opt', why: `${driver} on xfs with project quotas` };
  if (runtime.name === 'docker' && (driver === 'btrfs' || driver === 'zfs'))
    return { method: 'storage-opt', why: `docker's ${driver} driver` };
  return {
    method: 'watchdog',
    why: `${runtime.name}'s ${driver} storage on ${fsType}${fsType === 'xfs' && !quotas ? ' without project quotas' : ''} has no size option`,
  };
}

/**
 * Whether a Docker daemon keeps Gantry's networks apart: the walls between tenants on a Docker host
 * are the daemon's own iptables rules (hostctl/networks.ts), read here from the nat table of each
 * iptables backend the host has (Docker writes to the one its `iptables` is, as Gantry does).
 * - `iptables: 'off'`: the listing worked and has no `DOCKER` chain: the daemon runs with
 *   `--iptables=false` (or is rootless, its rules in a namespace of its own), so its bridges are not
 *   isolated from each other and one tenant's container reaches another's.
 * - `userlandProxy: true`: the nat OUTPUT jump to `DOCKER` skips `127.0.0.0/8`, which libnetwork
 *   writes only with its userland proxy on (no hairpin NAT). Then a packet from a bridge to a
 *   published port of the host is not DNAT'ed (the chain RETURNs for every bridge) but delivered
 *   to docker-proxy, which opens its own connection to the container from the host: past the
 *   isolation of networks, so any tenant's container reaches every published port (checked on
 *   20.10: test/integration/docker-walls.test.ts). `--userland-proxy=false` closes it. undefined
 *   until the daemon has a bridge network (`--bridge=none` and none made yet).
 */
// A type, not an interface: it is stored as JSON (Host.probe).
export type DockerWalls = {
  iptables: 'on' | 'off' | 'unknown';
  userlandProxy: boolean | undefined;
  /** What keeps the daemon from walling tenants apart, and how to fix it; undefined when nothing known does. */
  problem: string | undefined;
};

/** Reads DockerWalls from the probe's `firewall=` and `nat:<backend>=` lines of a Docker runtime. */
export function dockerWallsOf(kv: Map<string, string>): DockerWalls {
  const driver = /"Driver"\s*:\s*"([^"]*)"/.exec(kv.get('firewall') ?? '')?.[1];
  const listings = [...kv.entries()]
    .filter(([k, v]) => k.startsWith('nat:') && v !== 'unreadable')
    .map(([, v]) => v.split(';').map((l) => l.trim()));
  // Docker's nftables firewall backend (newer daemons, opt-in) writes no iptables rules: not judged here.
  if ((driver && !driver.startsWith('iptables')) || listings.length === 0)
    return { iptables: 'unknown', userlandProxy: undefined, problem: undefined };
  const rules = listings.flat();
  if (!rules.includes('-N DOCKER'))
    return {
      iptables: 'off',
      userlandProxy: undefined,
      problem:
        'the Docker daemon manages no iptables rules (it runs with --iptables=false, or rootless): its bridge networks are not isolated from each other, so one tenant\'s containers could reach another\'s; run dockerd with iptables on (the default: remove "iptables": false from /etc/docker/daemon.json) and restart it',
    };
  const jumps = rules.filter((r) => /^-A OUTPUT .*-j DOCKER$/.test(r));
  const userlandProxy = jumps.length === 0 ? undefined : jumps.some((r) => /! -d 127\.0\.0\.0\/8/.test(r));
  return {
    iptables: 'on',
    userlandProxy,
    problem: userlandProxy
      ? "the Docker daemon's userland proxy is on: docker-proxy answers a published port for containers on every network, so one tenant's container reaches another's published ports through the host's address, past Docker's isolation of networks; set \"userland-proxy\": false in /etc/docker/daemon.json (or dockerd --userland-proxy=false) and restart the daemon"
      : undefined,
  };
}

export interface GpuPassthrough {
  /** How workers get GPUs: CDI device names (`--device nvidia.com/gpu=<uuid>`), or Docker's `--gpus`. */
  method: 'cdi' | 'docker-gpus' | 'none';
  nvidiaCtkVersion: string | undefined;
  nvidiaContainerCliVersion: string | undefined;
  /** CDI spec files found in /etc/cdi and /var/run/cdi. */
  cdiSpecs: string[];
  /** `nvidia-ctk cdi list` output: `nvidia.com/gpu=0`, `nvidia.com/gpu=GPU-...`, `nvidia.com/gpu=all`. */
  cdiDevices: string[];
  /** Each spec's `cdiVersion` and `kind`, as far as the probe could read them. */
  cdiSpecVersions: Array<{ file: string; version: string | undefined; kind: string | undefined }>;
  /**
   * The GPU UUIDs each spec file names (undefined where the probe did not read them). Workers get
   * `--device nvidia.com/gpu=<uuid>`: a spec that names none of this host's GPUs (stale after a GPU
   * or driver change, or another machine's) resolves nothing for them.
   */
  cdiSpecGpus: Record<string, string[]> | undefined;
  /** What is missing when method is 'none' but GPUs are present. */
  hint: string | undefined;
}

export interface ProbedGpu extends NvidiaGpu {
  gpuTypeId: string;
  pool: GpuPoolId | undefined;
}

export interface HostProbe {
  hostname: string;
  kernel: string;
  arch: string;
  os: string | undefined;
  /** uid of the SSH user (rootless Podman and the docker group change what can be done). */
  uid: number | undefined;
  cpuCount: number;
  memoryMb: number;
  memoryAvailableMb: number | undefined;
  /** Free and total space of the file system holding the runtime's storage (or / without one). */
  diskPath: string;
  diskFreeGb: number;
  diskTotalGb: number;
  /** The runtime to use: a Docker engine that answers, else Podman. */
  containerRuntime: ContainerRuntimeInfo | undefined;
  /** How container disk sizes are enforced with that runtime. */
  diskLimit: DiskLimit;
  runtimes: ContainerRuntimeInfo[];
  gpuPassthrough: GpuPassthrough;
  gpus: ProbedGpu[];
  /** Highest CUDA version the driver supports (nvidia-smi's header). */
  cudaVersion: string | undefined;
  /** nvidia-smi is there but failed (driver not loaded, version mismatch). */
  gpuError: string | undefined;
}

const MARK = '@@gantry-probe:';

/**
 * POSIX sh, read by `sh -s` from stdin so that no quoting passes through the login shell. Every
 * part is best effort: a missing tool leaves its section empty. `timeout` keeps a hung Docker
 * daemon or driver from hanging the probe.
 */
export const PROBE_SCRIPT = String.raw`
s() { printf '\n${MARK}%s\n' "$1"; }
t() { if command -v timeout >/dev/null 2>&1; then timeout "$@"; else shift; "$@"; fi; }
s nproc; nproc 2>/dev/null || getconf _NPROCESSORS_ONLN
s meminfo; grep -E '^(MemTotal|MemAvailable):' /proc/meminfo
s uname; uname -n; uname -r; uname -m
s os; ( . /etc/os-release 2>/dev/null && echo "$PRETTY_NAME" )
s uid; id -u
s disk:/; df -Pk / 2>/dev/null | tail -n 1
for rt in docker podman; do
  p=$(command -v "$rt" 2>/dev/null) || continue
  s "runtime:$rt"
  echo "path=$p"
  echo "version=$("$rt" --version 2>/dev/null | head -n 1)"
  if [ "$rt" = docker ]; then
    if sv=$(t 15 docker version --format '{{.Server.Version}}' 2>/dev/null) && [ -n "$sv" ]; then
      echo "usable=1"
      root=$(t 15 docker info --format '{{.DockerRootDir}}' 2>/dev/null)
      echo "root=$root"
      echo "runtimes=$(t 15 docker info --format '{{range $k, $v := .Runtimes}}{{$k}} {{end}}' 2>/dev/null)"
      echo "driver=$(t 15 docker info --format '{{.Driver}}' 2>/dev/null)"
      # Docker's walls between networks are its own iptables rules (dockerWallsOf): the nat table's
      # DOCKER chain and the jumps to it, as each iptables backend here lists them.
      echo "firewall=$(t 15 docker info --format '{{json .FirewallBackend}}' 2>/dev/null)"
      for ipt in iptables iptables-nft iptables-legacy; do
        command -v "$ipt" >/dev/null 2>&1 || continue
        # Listing a legacy table makes it: a legacy nat table that is not there has no rules to read.
        case $("$ipt" -V 2>/dev/null) in *nf_tables*) ;; *)
          [ -r /proc/net/ip_tables_names ] || { echo "nat:$ipt=unreadable"; continue; }
          grep -qx nat /proc/net/ip_tables_names || { echo "nat:$ipt="; continue; } ;;
        esac
        if n=$(t 15 "$ipt" -w 5 -t nat -S 2>/dev/null); then
          echo "nat:$ipt=$(printf '%s\n' "$n" | grep -E -- '^-N DOCKER$|-j DOCKER$' | tr '\n' ';')"
        else echo "nat:$ipt=unreadable"; fi
      done
    fi
  else
    if root=$(t 30 podman info --format '{{.Store.GraphRoot}}' 2>/dev/null) && [ -n "$root" ]; then
      echo "usable=1"
      echo "root=$root"
      echo "driver=$(t 30 podman info --format '{{.Store.GraphDriverName}}' 2>/dev/null)"
    fi
  fi
  if [ -n "$root" ]; then
    d=$root; while [ ! -e "$d" ] && [ "$d" != / ]; do d=$(dirname "$d"); done
    echo "disk=$(df -Pk "$d" 2>/dev/null | tail -n 1)"
    fs=$(findmnt -n -o FSTYPE,OPTIONS --target "$d" 2>/dev/null | head -n 1); [ -n "$fs" ] || fs=$(stat -f -c %T "$d" 2>/dev/null)
    echo "fs=$fs"
  fi
  root=
done
s nvidia-ctk; command -v nvidia-ctk >/dev/null 2>&1 && nvidia-ctk --version 2>/dev/null | head -n 1
s nvidia-container-cli; command -v nvidia-container-cli >/dev/null 2>&1 && nvidia-container-cli --version 2>/dev/null | head -n 1
s cdi-specs; for f in /etc/cdi/*.yaml /etc/cdi/*.json /var/run/cdi/*.yaml /var/run/cdi/*.json; do [ -f "$f" ] && echo "$f"; done
s cdi-spec-versions; for f in /etc/cdi/*.yaml /etc/cdi/*.json /var/run/cdi/*.yaml /var/run/cdi/*.json; do [ -f "$f" ] && printf '%s\t%s\t%s\n' "$f" "$(sed -n 's/.*cdiVersion"\{0,1\}[[:space:]]*:[[:space:]]*"\{0,1\}\([0-9][0-9.]*\).*/\1/p' "$f" | head -n 1)" "$(sed -n 's/^[[:space:]{"]*kind"\{0,1\}[[:space:]]*:[[:space:]]*"\{0,1\}\([^",[:space:]]*\).*/\1/p' "$f" | head -n 1)"; done
s cdi-spec-gpus; for f in /etc/cdi/*.yaml /etc/cdi/*.json /var/run/cdi/*.yaml /var/run/cdi/*.json; do [ -f "$f" ] && printf '%s\t%s\n' "$f" "$(grep -o 'GPU-[0-9a-fA-F-]\{36\}' "$f" | sort -u | tr '\n' ' ')"; done
s cdi-devices; command -v nvidia-ctk >/dev/null 2>&1 && t 30 nvidia-ctk cdi list 2>/dev/null | grep -E '^[a-z0-9.-]+/[a-z0-9-]+=' 
if command -v nvidia-smi >/dev/null 2>&1; then
  s nvidia-smi; t 60 nvidia-smi --query-gpu=name,memory.total,uuid,driver_version --format=csv,noheader,nounits 2>&1
  rc=$?
  s nvidia-smi-exit; echo "$rc"
  s cuda; t 60 nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9.]*\).*/\1/p' | head -n 1
fi
s end
exit 0
`;

function sections(output: string): Map<string, string> {
  const map = new Map<string, string>();
  let current: string | undefined;
  let lines: string[] = [];
  const flush = (): void => {
    if (current !== undefined) map.set(current, lines.join('\n').trim());
  };
  for (const line of output.split('\n')) {
    if (line.startsWith(MARK)) {
      flush();
      current = line.slice(MARK.length).trim();
      lines = [];
    } else lines.push(line);
  }
  flush();
  return map;
}

function keyValues(text: string): Map<string, string> {
  const map = new Map<string, string>();
  for (const line of text.split('\n')) {
    const i = line.indexOf('=');
    if (i > 0) map.set(line.slice(0, i), line.slice(i + 1).trim());
  }
  return map;
}

/** `df -Pk` data line → [available KiB, total KiB]. */
function dfLine(line: string | undefined): { freeKb: number; totalKb: number; mount: string } | undefined {
  const f = line?.trim().split(/\s+/);
  if (!f || f.length < 6) return undefined;
  const totalKb = Number(f[1]);
  const freeKb = Number(f[3]);
  if (!Number.isFinite(totalKb) || !Number.isFinite(freeKb)) return undefined;
  return { totalKb, freeKb, mount: f.slice(5).join(' ') };
}

const gb = (kb: number): number => Math.round((kb / 1024 / 1024) * 10) / 10;

function firstVersion(text: string): string | undefined {
  return /(\d+\.\d+(?:\.\d+)?)/.exec(text)?.[1];
}

/** `a > b` for dotted versions (`0.6.0` > `0.5.0`). */
function versionAbove(a: string, b: string): boolean {
  const x = a.split('.').map(Number);
  const y = b.split('.').map(Number);
  for (let i = 0; i < Math.max(x.length, y.length); i++) {
    if ((x[i] ?? 0) !== (y[i] ?? 0)) return (x[i] ?? 0) > (y[i] ?? 0);
  }
  return false;
}

/**
 * The newest CDI spec version a runtime reads, where it is known to be older than what current
 * NVIDIA toolkits may write: Podman before 4.6 carries container-device-interface 0.5 and refuses
 * later specs (seen on 4.3.1: a 0.6.0 spec's devices are "unresolvable").
 */
function cdiReadable(runtime: ContainerRuntimeInfo | undefined): { runtime: string; max: string } | undefined {
  if (runtime?.name !== 'podman' || !runtime.version) return undefined;
  return versionAbove('4.6', runtime.version) ? { runtime: `Podman ${runtime.version}`, max: '0.5.0' } : undefined;
}

/** A section of the probe's output by name; '' when the probe printed none. */
type Section = (name: string) => string;

/** Turns the probe script's output into a HostProbe. Pure, so recorded outputs can be tested. */
export function parseProbeOutput(output: string): HostProbe {
  const sec = sections(output);
  if (!sec.has('end')) throw new Error('host probe output is incomplete (the probe script did not finish)');
  const get: Section = (name) => sec.get(name) ?? '';

  const machine = parseMachine(get);
  const { runtimes, disks } = parseRuntimes(sec, get);
  const containerRuntime = chooseRuntime(runtimes);
  const { gpus, gpuError } = parseGpus(sec, get);
  return {
    ...machine,
    ...diskOf(get('disk:/'), containerRuntime, disks),
    containerRuntime,
    diskLimit: diskLimitOf(containerRuntime),
    runtimes,
    gpuPassthrough: gpuPassthroughOf(parseCdi(sec, get), containerRuntime, gpus),
    gpus,
    cudaVersion: get('cuda') || undefined,
    gpuError,
  };
}

/** The machine itself: names, CPUs, memory and the SSH user's uid. */
function parseMachine(
  get: Section,
): Pick<HostProbe, 'hostname' | 'kernel' | 'arch' | 'os' | 'uid' | 'cpuCount' | 'memoryMb' | 'memoryAvailableMb'> {
  const cpuCount = Number.parseInt(get('nproc'), 10);
  const mem = new Map([...get('meminfo').matchAll(/^(\w+):\s+(\d+)\s*kB/gm)].map((m) => [m[1]!, Number(m[2])]));
  const [hostname = '', kernel = '', arch = ''] = get('uname')
    .split('\n')
    .map((l) => l.trim());
  const uid = Number.parseInt(get('uid'), 10);
  return {
    hostname,
    kernel,
    arch,
    os: get('os') || undefined,
    uid: Number.isFinite(uid) ? uid : undefined,
    cpuCount: Number.isFinite(cpuCount) ? cpuCount : 0,
    memoryMb: Math.floor((mem.get('MemTotal') ?? 0) / 1024),
    memoryAvailableMb: mem.has('MemAvailable') ? Math.floor(mem.get('MemAvailable')! / 1024) : undefined,
  };
}

type DiskUsage = ReturnType<typeof dfLine>;

/** The container runtimes on PATH (`runtime:<name>` sections), and the disk under each one's storage. */
function parseRuntimes(
  sec: Map<string, string>,
  get: Section,
): { runtimes: ContainerRuntimeInfo[]; disks: Map<string, DiskUsage> } {
  const runtimes: ContainerRuntimeInfo[] = [];
  const disks = new Map<string, DiskUsage>();
  for (const name of ['docker', 'podman'] as const) {
    if (!sec.has(`runtime:${name}`)) continue;
    const kv = keyValues(get(`runtime:${name}`));
    const versionText = kv.get('version') ?? '';
    const rootDir = kv.get('root') || undefined;
    if (rootDir) disks.set(rootDir, dfLine(kv.get('disk')));
    runtimes.push({
      name,
      path: kv.get('path') ?? name,
      versionText,
      version: firstVersion(versionText),
      podmanWrapper: name === 'docker' && /podman/i.test(versionText),
      usable: kv.get('usable') === '1',
      rootDir,
      dockerRuntimes: (kv.get('runtimes') ?? '').split(/\s+/).filter(Boolean),
      storageDriver: kv.get('driver') || undefined,
      storageFs: kv.get('fs') || undefined,
      ...(name === 'docker' && kv.get('usable') === '1' && !/podman/i.test(versionText)
        ? { walls: dockerWallsOf(kv) }
        : {}),
    });
  }
  return { runtimes, disks };
}

/** The runtime to use: a Docker engine that answers (not Podman's wrapper), else Podman. */
function chooseRuntime(runtimes: readonly ContainerRuntimeInfo[]): ContainerRuntimeInfo | undefined {
  const realDocker = runtimes.find((r) => r.name === 'docker' && r.usable && !r.podmanWrapper);
  const podman = runtimes.find((r) => r.name === 'podman' && r.usable);
  return realDocker ?? podman;
}

/** Free and total space under the runtime's storage, or under / without one. */
function diskOf(
  rootDfLine: string,
  containerRuntime: ContainerRuntimeInfo | undefined,
  disks: ReadonlyMap<string, DiskUsage>,
): Pick<HostProbe, 'diskPath' | 'diskFreeGb' | 'diskTotalGb'> {
  const rootDisk = dfLine(rootDfLine);
  const runtimeDisk = containerRuntime?.rootDir ? disks.get(containerRuntime.rootDir) : undefined;
  const disk = runtimeDisk ?? rootDisk;
  return {
    diskPath: runtimeDisk ? containerRuntime!.rootDir! : '/',
    diskFreeGb: disk ? gb(disk.freeKb) : 0,
    diskTotalGb: disk ? gb(disk.totalKb) : 0,
  };
}

/** The GPUs nvidia-smi lists, each with its type and pool; or why nvidia-smi could not list them. */
function parseGpus(sec: Map<string, string>, get: Section): Pick<HostProbe, 'gpus' | 'gpuError'> {
  let gpus: ProbedGpu[] = [];
  let gpuError: string | undefined;
  if (sec.has('nvidia-smi')) {
    const exitCode = Number.parseInt(get('nvidia-smi-exit'), 10);
    if (exitCode !== 0) gpuError = `nvidia-smi exited with ${exitCode}: ${get('nvidia-smi').slice(0, 500)}`;
    else {
      try {
        gpus = parseNvidiaSmi(get('nvidia-smi')).map((g) => {
          const d = describeGpu(g.name, g.memoryMb);
          return { ...g, gpuTypeId: d.gpuTypeId, pool: d.pool };
        });
      } catch (err) {
        gpuError = err instanceof Error ? err.message : String(err);
      }
    }
  }
  return { gpus, gpuError };
}

/** What the probe found of NVIDIA's container toolkit and CDI: GpuPassthrough less its judgement. */
type CdiFindings = Omit<GpuPassthrough, 'method' | 'hint'>;

const nonEmptyLines = (text: string): string[] =>
  text
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean);

/** The toolkit's versions, the CDI spec files with their versions, kinds and GPUs, and the CDI devices. */
function parseCdi(sec: Map<string, string>, get: Section): CdiFindings {
  const cdiSpecs = nonEmptyLines(get('cdi-specs'));
  const cdiDevices = nonEmptyLines(get('cdi-devices'));
  const nvidiaCtkVersion = firstVersion(get('nvidia-ctk'));
  const nvidiaContainerCliVersion = firstVersion(get('nvidia-container-cli'));
  const cdiSpecVersions = get('cdi-spec-versions')
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => {
      const [file = '', version, kind] = l.split('\t').map((f) => f.trim());
      return { file, version: version || undefined, kind: kind || undefined };
    });
  const cdiSpecGpus = sec.has('cdi-spec-gpus')
    ? Object.fromEntries(
        get('cdi-spec-gpus')
          .split('\n')
          .filter((l) => l.trim())
          .map((l) => {
            const [file = '', uuids = ''] = l.split('\t');
            return [file.trim(), uuids.split(/\s+/).filter(Boolean)];
          }),
      )
    : undefined;
  return { nvidiaCtkVersion, nvidiaContainerCliVersion, cdiSpecs, cdiDevices, cdiSpecVersions, cdiSpecGpus };
}

/** Whether the runtime gets NVIDIA devices through CDI, and what keeps it from that. */
interface NvidiaCdi {
  usable: boolean;
  /** This host's NVIDIA specs that are newer than the runtime reads. */
  tooNew: CdiFindings['cdiSpecVersions'];
  /** The newest spec version the runtime reads, where it is known to be an old one. */
  readable: ReturnType<typeof cdiReadable>;
  /** This host's GPUs that no readable NVIDIA spec names (only where the probe read the specs' GPUs). */
  unnamed: ProbedGpu[];
}

function nvidiaCdiOf(
  cdi: CdiFindings,
  containerRuntime: ContainerRuntimeInfo | undefined,
  gpus: readonly ProbedGpu[],
): NvidiaCdi {
  const { cdiSpecGpus, cdiSpecVersions, cdiDevices, cdiSpecs } = cdi;
  const gpuUuids = new Set(gpus.map((g) => g.uuid));
  // Where the probe read which GPUs each spec names, only specs naming this host's GPUs count.
  const ours = (file: string): boolean => !cdiSpecGpus || (cdiSpecGpus[file] ?? []).some((u) => gpuUuids.has(u));
  const nvidiaSpecs = cdiSpecVersions.filter(
    (s) => (s.kind === 'nvidia.com/gpu' || /nvidia/i.test(s.file)) && ours(s.file),
  );
  const readable = cdiReadable(containerRuntime);
  const tooNew = readable ? nvidiaSpecs.filter((s) => s.version && versionAbove(s.version, readable.max)) : [];
  const unnamed = cdiSpecGpus
    ? gpus.filter((g) => !nvidiaSpecs.some((s) => !tooNew.includes(s) && (cdiSpecGpus[s.file] ?? []).includes(g.uuid)))
    : [];
  const usable = cdiSpecGpus
    ? gpus.length > 0 && unnamed.length === 0
    : (cdiDevices.some((d) => d.startsWith('nvidia.com/gpu=')) || cdiSpecs.some((f) => /nvidia/i.test(f))) &&
      // Specs the runtime cannot read leave it no devices (Podman then refuses them as unresolvable).
      !(nvidiaSpecs.length > 0 && tooNew.length === nvidiaSpecs.length);
  return { usable, tooNew, readable, unnamed };
}

/** How workers get GPUs with the chosen runtime, and what to install or fix when they cannot. */
function gpuPassthroughOf(
  cdi: CdiFindings,
  containerRuntime: ContainerRuntimeInfo | undefined,
  gpus: readonly ProbedGpu[],
): GpuPassthrough {
  const nvidiaCdi = nvidiaCdiOf(cdi, containerRuntime, gpus);
  let method: GpuPassthrough['method'] = 'none';
  if (
    containerRuntime?.name === 'docker' &&
    (containerRuntime.dockerRuntimes.includes('nvidia') || cdi.nvidiaContainerCliVersion)
  )
    method = 'docker-gpus';
  else if (containerRuntime?.name === 'podman' && nvidiaCdi.usable) method = 'cdi';
  else if (containerRuntime?.name === 'docker' && nvidiaCdi.usable) method = 'cdi';
  const hint = method === 'none' && gpus.length > 0 ? passthroughHint(cdi, nvidiaCdi, containerRuntime) : undefined;
  return {
    method,
    nvidiaCtkVersion: cdi.nvidiaCtkVersion,
    nvidiaContainerCliVersion: cdi.nvidiaContainerCliVersion,
    cdiSpecs: cdi.cdiSpecs,
    cdiDevices: cdi.cdiDevices,
    cdiSpecVersions: cdi.cdiSpecVersions,
    cdiSpecGpus: cdi.cdiSpecGpus,
    hint,
  };
}

/** What is missing for GPU passthrough on a host with GPUs. */
function passthroughHint(
  { cdiSpecGpus, cdiSpecVersions, nvidiaCtkVersion }: CdiFindings,
  { tooNew, readable, unnamed }: NvidiaCdi,
  containerRuntime: ContainerRuntimeInfo | undefined,
): string {
  return tooNew.length > 0 && readable
    ? `the CDI spec ${tooNew.map((s) => `${s.file} is version ${s.version}`).join(', ')}, newer than ${readable.runtime} reads (${readable.max} at most): upgrade ${containerRuntime!.name}, or write the spec with a toolkit whose specs it reads`
    : cdiSpecGpus && cdiSpecVersions.some((s) => s.kind === 'nvidia.com/gpu' || /nvidia/i.test(s.file))
      ? `no CDI spec in /etc/cdi or /var/run/cdi names GPU ${unnamed.map((g) => g.uuid).join(', ')}: regenerate it with \`nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml\``
      : nvidiaCtkVersion
        ? 'NVIDIA Container Toolkit is installed but no CDI spec was found: run `nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml`'
        : 'install the NVIDIA Container Toolkit (nvidia-container-toolkit) so containers can use the GPUs';
}

/** Probes a host over an open connection. */
export async function probeHost(conn: SshConnection, options: { timeoutMs?: number } = {}): Promise<HostProbe> {
  const result = await execOk(conn, 'sh -s', { stdin: PROBE_SCRIPT, timeoutMs: options.timeoutMs ?? 120_000 });
  return parseProbeOutput(result.stdout);
}
