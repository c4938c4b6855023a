/**
 * A walled Docker host for tests: a network namespace of the test's own, holding a dockerd that
 * manages iptables there (Docker's isolation of user-defined bridges, its NAT for published ports,
 * and Gantry's egress chains all live in that namespace's tables, never this machine's) and an
 * OpenSSH server, so that everything Gantry runs over SSH (`docker ...`, the network scripts'
 * `iptables`) acts on that namespace, as on a machine of its own.
 *
 * Wiring: a veth pair, `<outside>/24` on this machine's side (the API listens there, where the
 * host's containers reach it: GANTRY_PUBLIC_URL) and `<address>/24` plus `<otherAddress>/24` on the
 * host's side (SSH on port 22 of `address`, where Gantry publishes ports; `otherAddress` is the
 * host's address that nothing may answer on). The outside end is named `br-gdw...`, so that the
 * other security tests, which probe every address of this machine but skip container bridges
 * (test/support/container-probe.ts), leave this test's transient address alone: one gone
 * mid-probe would be routed off the machine, where every port looks open.
 *
 * Beside it, a stand-in cloud metadata service: an HTTP server on 169.254.169.254:80 in a third
 * namespace, reachable from the host's namespace through a veth of its own (`169.254.169.253/30`).
 *
 * The daemon's `ip netns exec` is not used for dockerd: it remounts /sys, hiding the cgroup mounts
 * (dockerd then fails, "Devices cgroup isn't mounted"); `nsenter --net` enters the network only.
 */
import { execFile, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { startTestDockerd, type TestDockerd } from './docker-test-host.ts';
import {
  answersSsh,
  ensureHostPackages,
  HOST_PACKAGES,
  sshdConfig,
  sshKeysIn,
  type SshTestHost,
} from './ssh-test-host.ts';

/** Namespaces are `gdw<test pid>x<random>`: a run killed before its cleanup is found by its pid. */
const NAME = /^gdw(\d+)x[0-9a-f]{4}(md)?$/;
const SOCKETS = '/run/gantry-test-docker-netns';

export interface DockerNetnsHost extends SshTestHost {
  /** The host's network namespace (`ip netns`). */
  netns: string;
  /** This machine's address on the veth: where the API must listen for the host's containers. */
  outside: string;
  /** The host's second address, on which nothing is published. */
  otherAddress: string;
  /** The stand-in metadata service: `http://169.254.169.254/`, answering `instance-credentials`. */
  metadataUrl: string;
  dockerd: TestDockerd;
  /** Replaces the daemon (same socket; `images`, default the host's, loaded again): its containers and networks go. */
  restartDocker(options: { iptables?: boolean; userlandProxy?: boolean; images?: string[] }): Promise<void>;
  /** Runs a command in the host's namespace. */
  inside(args: string[]): { status: number | null; stdout: string; stderr: string };
}

function run(cmd: string, args: string[]): string {
  const r = spawnSync(cmd, args, { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed: ${r.stderr}`);
  return r.stdout;
}

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/** Kills what runs in the namespace (this test's own processes: sshd, the stand-in) and removes it. */
function removeNamespace(ns: string): void {
  const pids = spawnSync('ip', ['netns', 'pids', ns], { encoding: 'utf8' }).stdout.split('\n').filter(Boolean);
  for (const pid of pids) {
    try {
      process.kill(Number(pid), 'SIGKILL');
    } catch {
      // gone already
    }
  }
  spawnSync('ip', ['netns', 'del', ns]);
}

/** Namespaces of test processes that are gone (their daemons are docker-test-host.ts's to remove). */
function removeLeftovers(): void {
  const list = JSON.parse(spawnSync('ip', ['-j', 'netns', 'list'], { encoding: 'utf8' }).stdout || '[]') as {
    name: string;
  }[];
  for (const { name } of list) {
    const owner = Number(NAME.exec(name)?.[1]);
    if (owner && !alive(owner)) removeNamespace(name);
  }
}

/** True once something at `host:port` speaks SSH. */
/** A free /24 in 10.250.0.0/16 for the veth (not in this machine's routes). */
function freeSubnet(): string {
  const routes = run('ip', ['-4', 'route', 'show']);
  for (let i = 0; i < 50; i++) {
    const net = `10.250.${Math.floor(Math.random() * 256)}`;
    if (!routes.includes(`${net}.`)) return net;
  }
  throw new Error('no free 10.250.x.0/24 for the Docker test host');
}

/**
 * Starts the namespace, its dockerd (iptables on, userland proxy off unless told: the configuration
 * Gantry accepts), the metadata stand-in and sshd, and loads `images` from this machine's Podman.
 */
export async function startDockerNetnsHost(
  options: { images?: string[]; userlandProxy?: boolean; log?: (msg: string) => void } = {},
): Promise<DockerNetnsHost> {
  ensureHostPackages(HOST_PACKAGES, options.log);
  removeLeftovers();
  const ns = `gdw${process.pid}x${randomBytes(2).toString('hex')}`;
  const md = `${ns}md`;
  const net = freeSubnet();
  const [outside, address, otherAddress] = [`${net}.1`, `${net}.2`, `${net}.3`];
  const dir = mkdtempSync(path.join(tmpdir(), 'gantry-docker-netns-'));
  const socket = path.join(SOCKETS, ns, 'docker.sock');
  const children: ChildProcess[] = [];
  let dockerd: TestDockerd | undefined;
  const killOnExit = (): void => {
    for (const c of children) c.kill('SIGKILL');
  };
  process.once('exit', killOnExit);
  const stop = async (): Promise<void> => {
    process.removeListener('exit', killOnExit);
    for (const c of children) c.kill('SIGKILL');
    await dockerd?.stop();
    removeNamespace(md);
    removeNamespace(ns);
    rmSync(dir, { recursive: true, force: true });
    rmSync(path.dirname(socket), { recursive: true, force: true });
  };
  const inside = (args: string[]) => {
    const r = spawnSync('nsenter', [`--net=/run/netns/${ns}`, ...args], { encoding: 'utf8' });
    return { status: r.status, stdout: r.stdout ?? '', stderr: r.stderr ?? '' };
  };
  const inNs = (name: string, args: string[]) => run('ip', ['netns', 'exec', name, ...args]);
  try {
    run('ip', ['netns', 'add', ns]);
    run('ip', ['netns', 'add', md]);
    // This machine <-> the host.
    const outer = `br-gdw${randomBytes(3).toString('hex')}`;
    run('ip', ['link', 'add', outer, 'type', 'veth', 'peer', 'name', 'gdw0', 'netns', ns]);
    run('ip', ['addr', 'add', `${outside}/24`, 'dev', outer]);
    run('ip', ['link', 'set', outer, 'up']);
    inNs(ns, ['ip', 'addr', 'add', `${address}/24`, 'dev', 'gdw0']);
    inNs(ns, ['ip', 'addr', 'add', `${otherAddress}/24`, 'dev', 'gdw0']);
    inNs(ns, ['ip', 'link', 'set', 'gdw0', 'up']);
    inNs(ns, ['ip', 'link', 'set', 'lo', 'up']);
    inNs(ns, ['ip', 'route', 'add', 'default', 'via', outside, 'src', address]);
    // The host <-> the metadata stand-in.
    run('ip', ['link', 'add', 'gdwmd', 'netns', ns, 'type', 'veth', 'peer', 'name', 'md0', 'netns', md]);
    inNs(ns, ['ip', 'addr', 'add', '169.254.169.253/30', 'dev', 'gdwmd']);
    inNs(ns, ['ip', 'link', 'set', 'gdwmd', 'up']);
    inNs(md, ['ip', 'addr', 'add', '169.254.169.254/30', 'dev', 'md0']);
    inNs(md, ['ip', 'link', 'set', 'md0', 'up']);
    inNs(md, ['ip', 'route', 'add', 'default', 'via', '169.254.169.253']);
    const server = spawn(
      'nsenter',
      [
        `--net=/run/netns/${md}`,
        process.execPath,
        '-e',
        "require('http').createServer((q, r) => r.end('instance-credentials')).listen(80, '169.254.169.254', () => console.log('listening'))",
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    children.push(server);
    await new Promise<void>((resolve, reject) => {
      server.stdout!.on('data', (d: Buffer) => d.toString().includes('listening') && resolve());
      server.once('exit', (code) => reject(new Error(`metadata stand-in exited (${code})`)));
      setTimeout(() => reject(new Error('metadata stand-in not up in 10 s')), 10_000).unref();
    });

    mkdirSync(path.dirname(socket), { recursive: true, mode: 0o700 });
    const startDocker = async (o: { iptables?: boolean; userlandProxy?: boolean; images?: string[] }) => {
      const d = await startTestDockerd({
        netns: ns,
        iptables: o.iptables ?? true,
        userlandProxy: o.userlandProxy ?? false,
        socket,
        ...(options.log ? { log: options.log } : {}),
      });
      d.loadImages(o.images ?? options.images ?? []);
      return d;
    };
    dockerd = await startDocker({ userlandProxy: options.userlandProxy ?? false });

    // sshd in the namespace (its own port space: port 22 of the host's address).
    const keys = sshKeysIn(dir, 'gantry-docker-netns-host');
    const config = path.join(dir, 'sshd_config');
    writeFileSync(
      config,
      sshdConfig(dir, 22, { listenAddress: address, sessionEnv: { DOCKER_HOST: `unix://${socket}` } }),
    );
    mkdirSync('/run/sshd', { recursive: true, mode: 0o755 });
    const sshd = spawn('nsenter', [`--net=/run/netns/${ns}`, '/usr/sbin/sshd', '-D', '-e', '-f', config], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    children.push(sshd);
    let sshdErr = '';
    sshd.stderr!.on('data', (c: Buffer) => (sshdErr += c.toString()));
    const deadline = Date.now() + 10_000;
    while (!(await answersSsh(22, address))) {
      if (sshd.exitCode !== null || Date.now() > deadline) throw new Error(`sshd did not start: ${sshdErr}`);
      await sleep(50);
    }

    const host: DockerNetnsHost = {
      host: address,
      port: 22,
      user: 'root',
      privateKey: keys.privateKey,
      publicKey: keys.publicKey,
      hostKeySha256: keys.hostKeySha256,
      dir,
      netns: ns,
      outside,
      otherAddress,
      metadataUrl: 'http://169.254.169.254/',
      dockerd,
      async restartDocker(o) {
        await dockerd?.stop();
        dockerd = undefined;
        // Docker leaves its chains behind when it stops; the next daemon starts as after a reboot.
        const flush = inside([
          'sh',
          '-c',
          'for t in filter nat mangle; do iptables -w 10 -t $t -F && iptables -w 10 -t $t -X || exit 1; done; iptables -w 10 -P FORWARD ACCEPT',
        ]);
        if (flush.status !== 0) throw new Error(`flushing the host's iptables failed: ${flush.stderr}`);
        dockerd = await startDocker(o);
        host.dockerd = dockerd;
      },
      inside,
      stop,
    };
    return host;
  } catch (err) {
    await stop();
    throw err;
  }
}

/** The node script a probe runs: 'open', an error code, or the HTTP status and body. */
function probeScript(target: string): string {
  return target.startsWith('http')
    ? `fetch(${JSON.stringify(target)}, { signal: AbortSignal.timeout(3000) }).then(async (r) => console.log(r.status, (await r.text()).slice(0, 100)), (e) => console.log('error ' + (e.cause?.code ?? e.name)))`
    : `const [h, p] = ${JSON.stringify(target.split(':'))}; const s = require('net').connect({ host: h, port: Number(p), timeout: 3000 });
       s.on('connect', () => { console.log('open'); s.destroy(); }); s.on('error', (e) => console.log(e.code)); s.on('timeout', () => { console.log('timeout'); s.destroy(); });`;
}

/**
 * A TCP connect (or, for http URLs, a GET) from inside a running container of `dockerd`, or from a
 * fresh container of `image` on `network` (`{ image, network }`): asynchronous, as a platform in
 * this process may have to answer it.
 */
export async function dockerProbe(
  dockerd: TestDockerd,
  from: string | { image: string; network: string },
  target: string,
): Promise<string> {
  const args =
    typeof from === 'string'
      ? ['exec', from, 'node', '-e', probeScript(target)]
      : [
          'run',
          '--rm',
          '--network',
          from.network,
          '--cap-drop',
          'NET_RAW',
          '--',
          from.image,
          'node',
          '-e',
          probeScript(target),
        ];
  const r = await promisify(execFile)('docker', args, {
    env: { ...process.env, DOCKER_HOST: dockerd.dockerHost },
    encoding: 'utf8',
    timeout: 60_000,
  }).catch((e: { stdout?: string; stderr?: string }) => e);
  return (r.stdout || r.stderr || '').trim();
}
