/**
 * A GPU host for tests, on a machine without GPUs: the SSH test host (ssh-test-host.ts) whose
 * sessions find stand-ins of the NVIDIA tools first on their PATH, and a CDI spec for this
 * machine's Podman. A test fixture, not a way to run GPU work:
 * - `nvidia-smi` prints a captured real answer (test/fixtures/nvidia-smi), with each GPU's UUID made
 *   unique to this host so that two such hosts never name one device; or fails as a host whose
 *   driver is not loaded does;
 * - `nvidia-ctk` answers `--version` and `cdi list` as the NVIDIA Container Toolkit does;
 * - the CDI spec is laid out as `nvidia-ctk cdi generate` writes it (kind `nvidia.com/gpu`, a device
 *   per index, per UUID and `all`, the control nodes and `NVIDIA_VISIBLE_DEVICES=void` for every
 *   container), but its device nodes are stand-ins this module makes: character devices with
 *   /dev/null's numbers, so Podman really resolves and injects `--device nvidia.com/gpu=<uuid>` and a
 *   container sees `/dev/nvidia<index>` of its own GPUs, and nothing reaches hardware.
 * The spec lives in /var/run/cdi (runtime-generated specs) while the host runs and is removed by stop().
 *
 * With `runtime: 'docker'` the host is a Docker host instead (test/support/docker-test-host.ts: a
 * dockerd of its own, DOCKER_HOST in every session) with Docker 20.10's GPU path, `--gpus`, in
 * place of CDI (which Docker reads from version 25 on): no spec and no `nvidia-ctk`, but stand-ins
 * of the toolkit's `nvidia-container-cli` (answers `--version`, which the probe reads) and
 * `nvidia-container-runtime-hook`, which dockerd finds on its PATH and adds as the prestart hook
 * of every container that asks for GPUs. The hook stand-in writes down each container's id and its
 * `NVIDIA_VISIBLE_DEVICES` (what dockerd made of `--gpus device=<uuid>`), refuses a device this host
 * does not have, and makes `/dev/nvidia<index>` of each GPU asked for and the control nodes in the
 * container, with /dev/null's numbers, as the real hook (through `nvidia-container-cli configure`)
 * makes the real ones. It does not mount driver libraries or touch a device cgroup.
 */
import { randomUUID } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startTestDockerd, type TestDockerd } from './docker-test-host.ts';
import { startSshTestHost, type SshTestHost } from './ssh-test-host.ts';

const FIXTURES = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'fixtures', 'nvidia-smi');
export const CDI_DIR = '/var/run/cdi';
const SPEC_PREFIX = 'gantry-test-gpus-';

export interface StandInGpu {
  index: number;
  name: string;
  memoryMb: number;
  uuid: string;
  driverVersion: string;
}

export interface GpuTestHost extends SshTestHost {
  /** The GPUs its nvidia-smi reports (none when it fails). */
  gpus: StandInGpu[];
  /** The CDI spec file written for it (none on a Docker host). */
  cdiSpec: string;
  /** A Docker host's daemon. */
  dockerd?: TestDockerd;
  /** A Docker host's hook record: a line `<container id> <NVIDIA_VISIBLE_DEVICES>` per container given GPUs. */
  hookLog?: string;
}

export interface GpuTestHostOptions {
  /** The spec's `cdiVersion` (0.5.0, what current toolkits write for these edits). */
  cdiVersion?: string;
  /** What nvidia-smi's header says the driver supports. */
  cudaVersion?: string;
  /** The container runtime its sessions find (Podman unless told). */
  runtime?: 'podman' | 'docker';
  /** Images a Docker host's daemon gets from this machine's Podman. */
  images?: string[];
}

/** Removes the specs of GPU test hosts whose test process is gone (a run killed before its cleanup). */
function removeLeftoverSpecs(): void {
  let names: string[] = [];
  try {
    names = readdirSync(CDI_DIR);
  } catch {
    return;
  }
  for (const name of names) {
    const pid = Number(new RegExp(`^${SPEC_PREFIX}(\\d+)-`).exec(name)?.[1]);
    if (!pid) continue;
    try {
      process.kill(pid, 0);
    } catch {
      rmSync(path.join(CDI_DIR, name), { force: true });
    }
  }
}

function readGpus(fixture: string): { gpus: StandInGpu[]; failure?: string } {
  const text = readFileSync(path.join(FIXTURES, fixture), 'utf8');
  if (!fixture.endsWith('.csv')) return { gpus: [], failure: text };
  const gpus = text
    .split('\n')
    .filter((l) => l.trim())
    .map((line, index) => {
      const [name, memory, , driverVersion] = line.split(',').map((f) => f.trim());
      return {
        index,
        name: name!,
        memoryMb: Number(memory),
        uuid: `GPU-${randomUUID()}`,
        driverVersion: driverVersion!,
      };
    });
  return { gpus };
}

const sh = (lines: string[]): string => ['#!/bin/sh', ...lines, ''].join('\n');

/** `'...'` for sh. */
const quote = (s: string): string => `'${s.replaceAll("'", `'\\''`)}'`;

function nvidiaSmi(dir: string, gpus: StandInGpu[], failure: string | undefined, cudaVersion: string): string {
  if (failure !== undefined) {
    writeFileSync(path.join(dir, 'nvidia-smi.out'), failure);
    // nvidia-smi's exit status when it cannot talk to the driver.
    return sh([`cat ${quote(path.join(dir, 'nvidia-smi.out'))}`, 'exit 9']);
  }
  const csv = gpus.map((g) => `${g.name}, ${g.memoryMb}, ${g.uuid}, ${g.driverVersion}`).join('\n') + '\n';
  writeFileSync(path.join(dir, 'nvidia-smi.csv'), csv);
  const driver = gpus[0]?.driverVersion ?? '';
  return sh([
    'case "$*" in',
    `  *--query-gpu=*) cat ${quote(path.join(dir, 'nvidia-smi.csv'))} ;;`,
    `  *) echo '| NVIDIA-SMI ${driver}    Driver Version: ${driver}    CUDA Version: ${cudaVersion}  |' ;;`,
    'esac',
  ]);
}

function nvidiaCtk(gpus: StandInGpu[]): string {
  // No GPUs (a driver that is not loaded): no spec was written, so nothing to list.
  const devices = gpus.length > 0 ? [...gpus.map((g) => String(g.index)), ...gpus.map((g) => g.uuid), 'all'] : [];
  return sh([
    'case "$*" in',
    '  *--version*) echo "NVIDIA Container Toolkit CLI version 1.17.8" ;;',
    `  "cdi list") echo 'INFO[0000] Found ${devices.length} CDI devices' >&2; printf '%s\\n' ${devices.map((d) => quote(`nvidia.com/gpu=${d}`)).join(' ')} ;;`,
    '  *) echo "nvidia-ctk stand-in: $* is not answered" >&2; exit 1 ;;',
    'esac',
  ]);
}

/** The NVIDIA Container Toolkit's CLI, as far as the probe asks it. */
function nvidiaContainerCli(): string {
  return sh([
    'case "$*" in',
    "  *--version*) printf 'cli-version: 1.17.8\\nlib-version: 1.17.8\\n' ;;",
    '  *) echo "nvidia-container-cli stand-in: $* is not answered" >&2; exit 1 ;;',
    'esac',
  ]);
}

/** The prestart hook dockerd runs for `--gpus` (see the module's comment); `list` is nvidia-smi's CSV. */
function nvidiaContainerRuntimeHook(list: string, log: string): string {
  return sh([
    '[ "$1" = prestart ] || { echo "nvidia-container-runtime-hook stand-in: only prestart is answered" >&2; exit 1; }',
    // The OCI state on stdin: the container's id, its init process and its bundle (config.json).
    'state=$(cat)',
    `field() { printf '%s' "$state" | sed -n "s/.*\\"$1\\":\\"\\{0,1\\}\\([^\\",}]*\\).*/\\1/p"; }`,
    'id=$(field id); pid=$(field pid); bundle=$(field bundle)',
    'config="$bundle/config.json"',
    `root=$(sed -n 's/.*"root":{"path":"\\([^"]*\\)".*/\\1/p' "$config")`,
    'case $root in /*) ;; *) root="$bundle/$root" ;; esac',
    `visible=$(sed -n 's/.*"NVIDIA_VISIBLE_DEVICES=\\([^"]*\\)".*/\\1/p' "$config")`,
    'nodes="nvidiactl nvidia-uvm nvidia-uvm-tools"',
    "for d in $(printf '%s' \"$visible\" | tr , ' '); do",
    `  i=$(awk -F', ' -v d="$d" '$3 == d { print NR - 1 }' ${quote(list)})`,
    '  [ -n "$i" ] || { echo "nvidia-container-runtime-hook stand-in: no GPU $d on this host" >&2; exit 1; }',
    '  nodes="$nodes nvidia$i"',
    'done',
    `printf '%s %s\\n' "$id" "$visible" >> ${quote(log)}`,
    // In the container's mount namespace, before it pivots into its root.
    'exec nsenter --target "$pid" --mount -- sh -c \'r=$1; shift; for n; do mknod -m 666 "$r/dev/$n" c 1 3 || exit 1; done\' sh "$root" $nodes',
  ]);
}

/** The spec, as JSON (a YAML subset the runtimes read alike), in nvidia-ctk's layout. */
function cdiSpec(gpus: StandInGpu[], nodes: string, cdiVersion: string): string {
  const node = (name: string) => ({ path: `/dev/${name}`, hostPath: path.join(nodes, name) });
  const edits = (list: StandInGpu[]) => ({ deviceNodes: list.map((g) => node(`nvidia${g.index}`)) });
  return JSON.stringify(
    {
      cdiVersion,
      kind: 'nvidia.com/gpu',
      devices: [
        ...gpus.map((g) => ({ name: String(g.index), containerEdits: edits([g]) })),
        ...gpus.map((g) => ({ name: g.uuid, containerEdits: edits([g]) })),
        { name: 'all', containerEdits: edits(gpus) },
      ],
      containerEdits: {
        env: ['NVIDIA_VISIBLE_DEVICES=void'],
        deviceNodes: [node('nvidia-uvm'), node('nvidia-uvm-tools'), node('nvidiactl')],
      },
    },
    null,
    2,
  );
}

/** Starts a GPU test host whose nvidia-smi answers with `fixture` (a file of test/fixtures/nvidia-smi). */
export async function startGpuTestHost(fixture: string, options: GpuTestHostOptions = {}): Promise<GpuTestHost> {
  removeLeftoverSpecs();
  const docker = options.runtime === 'docker';
  const dir = mkdtempSync(path.join(tmpdir(), 'gantry-gpu-host-'));
  const bin = path.join(dir, 'bin');
  const nodes = path.join(dir, 'dev');
  mkdirSync(bin);
  mkdirSync(nodes);
  const { gpus, failure } = readGpus(fixture);
  const hookLog = path.join(dir, 'nvidia-container-runtime-hook.log');
  const tools: Record<string, string> = {
    'nvidia-smi': nvidiaSmi(dir, gpus, failure, options.cudaVersion ?? '13.0'),
    ...(docker
      ? {
          'nvidia-container-cli': nvidiaContainerCli(),
          'nvidia-container-runtime-hook': nvidiaContainerRuntimeHook(path.join(dir, 'nvidia-smi.csv'), hookLog),
        }
      : { 'nvidia-ctk': nvidiaCtk(gpus) }),
  };
  for (const [name, script] of Object.entries(tools)) {
    writeFileSync(path.join(bin, name), script);
    chmodSync(path.join(bin, name), 0o755);
  }
  for (const name of [...gpus.map((g) => `nvidia${g.index}`), 'nvidia-uvm', 'nvidia-uvm-tools', 'nvidiactl']) {
    // /dev/null's numbers: reads end at once, writes vanish.
    const r = spawnSync('mknod', ['-m', '666', path.join(nodes, name), 'c', '1', '3'], { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`mknod ${name} failed: ${r.stderr}`);
  }
  mkdirSync(CDI_DIR, { recursive: true });
  const spec = path.join(CDI_DIR, `${SPEC_PREFIX}${process.pid}-${path.basename(dir)}.json`);
  if (gpus.length > 0 && !docker) writeFileSync(spec, cdiSpec(gpus, nodes, options.cdiVersion ?? '0.5.0'));
  let dockerd: TestDockerd | undefined;
  let ssh: SshTestHost;
  try {
    if (docker) {
      dockerd = await startTestDockerd({ path: bin });
      dockerd.loadImages(options.images ?? []);
    }
    ssh = await startSshTestHost({
      sessionPath: bin,
      ...(dockerd ? { sessionEnv: { DOCKER_HOST: dockerd.dockerHost } } : {}),
    });
  } catch (err) {
    await dockerd?.stop();
    rmSync(spec, { force: true });
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  return {
    ...ssh,
    gpus,
    cdiSpec: docker ? '' : spec,
    ...(dockerd ? { dockerd, hookLog } : {}),
    async stop() {
      await ssh.stop();
      await dockerd?.stop();
      rmSync(spec, { force: true });
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
