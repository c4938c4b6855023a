/**
 * A Docker Engine for tests: Debian's `docker.io` (dockerd 20.10), started by the test itself on a
 * socket of its own, beside this machine's Podman. An SSH test host whose sessions get `DOCKER_HOST`
 * pointing at it (test/support/gpu-test-host.ts, `runtime: 'docker'`) is a Docker host to the probe,
 * which prefers a Docker engine that answers; every other test host keeps finding no engine at
 * /var/run/docker.sock and stays a Podman host.
 *
 * The daemon runs with `--iptables=false --ip-masq=false --bridge=none`: it leaves the machine's
 * iptables (Podman's CNI rules, which the tenant-wall tests depend on) as they are, and has no
 * default bridge. Its user-defined bridges still work for what Gantry needs of them (a worker reaches
 * the listener on its network's gateway), but without Docker's own rules they are not isolated from
 * each other, and nothing is masqueraded: this engine tests Gantry's Docker commands, not Docker's
 * walls between tenants.
 *
 * Such a daemon is not a host Gantry uses unless told (activities/host-probe.ts, DockerWalls): so
 * starting one sets GANTRY_ALLOW_UNWALLED_DOCKER=true in this process's environment, which the
 * test platforms started afterwards read.
 *
 * With `netns` (test/support/docker-netns-host.ts) the daemon runs in that network namespace
 * instead and may manage iptables there (`iptables: true`): the walled Docker host, whose rules
 * never touch this machine's tables.
 *
 * Images come from Podman (`podman save | docker load`): no registry is needed.
 */
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { pruneNetworksScript } from '../../hostctl/networks.ts';
import { ensureHostPackages } from './ssh-test-host.ts';

/** dockerd, containerd, runc and docker-init; the `docker` 20.10 client comes with it. */
export const DOCKER_PACKAGES = ['docker.io'] as const;

/** Sockets, pid files and the daemon's exec root (tmpfs), one folder per daemon: `<test pid>-<random>`. */
const RUN_DIR = '/run/gantry-test-docker';
/** Image and container storage (disk), one folder per daemon, named as in RUN_DIR. */
const DATA_DIR = '/var/tmp/gantry-test-docker';

const SYSTEM_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

export interface TestDockerd {
  /** `unix:///run/gantry-test-docker/<id>/docker.sock`: what DOCKER_HOST must say. */
  dockerHost: string;
  /** Runs the docker client against this daemon. */
  docker(args: string[], input?: string): { status: number | null; stdout: string; stderr: string };
  /** Copies images from this machine's Podman into the daemon. */
  loadImages(images: string[]): void;
  /** Removes its containers and Gantry's networks (with their egress rules), stops it, removes its folders. */
  stop(): Promise<void>;
}

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/** Mount points at or under `dir`, deepest first. */
function mountsUnder(dir: string): string[] {
  return readFileSync('/proc/self/mounts', 'utf8')
    .split('\n')
    .map((l) => l.split(' ')[1] ?? '')
    .filter((m) => m === dir || m.startsWith(`${dir}/`))
    .sort((a, b) => b.length - a.length);
}

function removeTree(dir: string): void {
  for (const m of mountsUnder(dir)) spawnSync('umount', ['-l', m]);
  rmSync(dir, { recursive: true, force: true });
}

async function killAndWait(pid: number, graceMs: number): Promise<void> {
  if (!alive(pid)) return;
  process.kill(pid, 'SIGTERM');
  const deadline = Date.now() + graceMs;
  while (alive(pid) && Date.now() < deadline) await sleep(100);
  if (alive(pid)) process.kill(pid, 'SIGKILL');
  while (alive(pid)) await sleep(50);
}

const pidIn = (file: string): number | undefined => {
  const n = existsSync(file) ? Number(readFileSync(file, 'utf8').trim()) : NaN;
  return Number.isSafeInteger(n) && n > 0 ? n : undefined;
};

/** Stops and removes the daemons of test processes that are gone (a run killed before its cleanup). */
async function removeLeftoverDaemons(): Promise<void> {
  let names: string[] = [];
  try {
    names = readdirSync(RUN_DIR);
  } catch {
    return;
  }
  for (const name of names) {
    const owner = Number(/^(\d+)-/.exec(name)?.[1]);
    if (!owner || alive(owner)) continue;
    const run = path.join(RUN_DIR, name);
    for (const file of [path.join(run, 'docker.pid'), path.join(run, 'exec', 'containerd', 'containerd.pid')]) {
      const pid = pidIn(file);
      if (pid) await killAndWait(pid, 15_000);
    }
    removeTree(run);
    removeTree(path.join(DATA_DIR, name));
  }
}

/**
 * Starts dockerd, answering once its API does. `path` is searched first by the daemon: where it
 * finds `nvidia-container-runtime-hook`, its `--gpus` requests run that hook (a stand-in, there).
 */
export async function startTestDockerd(
  options: {
    path?: string;
    log?: (msg: string) => void;
    /** An `ip netns` namespace to run in (only its network: `ip netns exec` would hide the cgroup mounts). */
    netns?: string;
    /** The daemon manages iptables (its default; needs `netns`): isolated networks, NAT for published ports. */
    iptables?: boolean;
    /** With `iptables`: docker-proxy answers published ports (Docker's default) rather than hairpin NAT. */
    userlandProxy?: boolean;
    /** Where its API socket is (default: in its own run folder). */
    socket?: string;
  } = {},
): Promise<TestDockerd> {
  ensureHostPackages(DOCKER_PACKAGES, options.log);
  if (options.iptables && !options.netns)
    throw new Error("a test dockerd manages iptables only in a network namespace: it would rewrite this machine's");
  await removeLeftoverDaemons();
  const id = `${process.pid}-${randomBytes(4).toString('hex')}`;
  const run = path.join(RUN_DIR, id);
  const data = path.join(DATA_DIR, id);
  mkdirSync(run, { recursive: true, mode: 0o700 });
  mkdirSync(data, { recursive: true, mode: 0o700 });
  const socket = options.socket ?? path.join(run, 'docker.sock');
  const dockerHost = `unix://${socket}`;
  const env = { ...process.env, PATH: `${options.path ? `${options.path}:` : ''}${SYSTEM_PATH}` };
  const inNetns = (cmd: string, ...args: string[]): [string, string[]] =>
    options.netns ? ['nsenter', [`--net=/run/netns/${options.netns}`, cmd, ...args]] : [cmd, args];
  const [command, prefix] = inNetns('dockerd');
  if (!options.iptables) process.env.GANTRY_ALLOW_UNWALLED_DOCKER = 'true';
  const child = spawn(
    command,
    [
      ...prefix,
      '--host',
      dockerHost,
      '--data-root',
      data,
      '--exec-root',
      path.join(run, 'exec'),
      '--pidfile',
      path.join(run, 'docker.pid'),
      ...(options.iptables
        ? [`--userland-proxy=${options.userlandProxy ?? false}`]
        : ['--iptables=false', '--ip-masq=false', '--bridge=none']),
    ],
    { env, stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let stderr = '';
  child.stderr?.on('data', (c: Buffer) => {
    stderr = (stderr + c.toString()).slice(-16 * 1024);
  });
  const killOnExit = (): void => {
    child.kill('SIGKILL');
  };
  process.once('exit', killOnExit);

  const docker: TestDockerd['docker'] = (args, input) => {
    const r = spawnSync('docker', args, {
      env: { ...process.env, DOCKER_HOST: dockerHost },
      encoding: 'utf8',
      input,
      maxBuffer: 64 * 1024 * 1024,
    });
    return { status: r.status, stdout: r.stdout ?? '', stderr: r.stderr ?? '' };
  };

  let stopped: Promise<void> | undefined;
  const stop = (): Promise<void> =>
    (stopped ??= (async () => {
      process.removeListener('exit', killOnExit);
      if (child.exitCode === null && child.signalCode === null) {
        const ids = docker(['ps', '--all', '--quiet']).stdout.split('\n').filter(Boolean);
        if (ids.length) docker(['rm', '--force', ...ids]);
        // Gantry's networks go with their egress rules, as a host's reconcile removes them.
        const hosts = docker(['network', 'ls', '--format', '{{.Label "gantry.host"}}']).stdout.split('\n');
        for (const hostId of new Set(hosts.filter(Boolean)))
          spawnSync(...inNetns('sh', '-s'), {
            input: pruneNetworksScript('docker', hostId, []),
            env: { ...process.env, DOCKER_HOST: dockerHost },
          });
        docker(['network', 'prune', '--force']);
        if (child.pid) await killAndWait(child.pid, 20_000);
      }
      removeTree(run);
      removeTree(data);
    })());

  const deadline = Date.now() + 60_000;
  while (docker(['version', '--format', '{{.Server.Version}}']).status !== 0) {
    if (child.exitCode !== null || child.signalCode !== null || Date.now() > deadline) {
      await stop();
      throw new Error(`dockerd did not start: ${stderr.split('\n').slice(-10).join('\n')}`);
    }
    await sleep(200);
  }
  return {
    dockerHost,
    docker,
    loadImages(images) {
      for (const image of images) {
        const r = spawnSync(
          'bash',
          ['-c', 'set -o pipefail; podman save -- "$1" | docker load --quiet', 'bash', image],
          {
            env: { ...process.env, DOCKER_HOST: dockerHost },
            encoding: 'utf8',
          },
        );
        if (r.status !== 0) throw new Error(`loading ${image} into dockerd failed: ${r.stderr}`);
      }
    },
    stop,
  };
}
