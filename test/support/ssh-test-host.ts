/**
 * A real SSH host on this machine for tests: Debian's OpenSSH server started by hand on a loopback
 * port with its own host key and authorized key, in front of the machine's Podman. Tests talk to it
 * exactly as the platform talks to a rented GPU box (ssh2 + `podman ...` over exec).
 */
import { spawn, spawnSync, type ChildProcess, type SpawnSyncReturns } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { freeLoopbackPort } from './local-port.ts';

/**
 * What a test host needs from Debian. podman pulls in conmon, containernetworking-plugins and
 * iptables; runc is named so that apt does not pick crun for podman's `crun | runc` dependency
 * (crun cannot apply this machine's cgroup v1 layout). Recommends (buildah, slirp4netns,
 * fuse-overlayfs, uidmap, catatonit) are left out: rootful podman with the kernel's overlayfs needs
 * none of them.
 */
export const HOST_PACKAGES = ['openssh-server', 'podman', 'runc'] as const;

/** Podman settings this machine needs, as a drop-in so an administrator's containers.conf survives. */
export const CONTAINERS_CONF_PATH = '/etc/containers/containers.conf.d/50-gantry.conf';
export const CONTAINERS_CONF = [
  '# Written by Gantry (test/support/ssh-test-host.ts).',
  '[containers]',
  '# The default nofile=1048576 ulimit exceeds the hard limit here; runc then fails with EPERM.',
  'default_ulimits = []',
  '',
  '[engine]',
  '# crun fails on this cgroup v1 layout; runc works.',
  'runtime = "runc"',
  '# No systemd as PID 1, so no systemd cgroup manager.',
  'cgroup_manager = "cgroupfs"',
  '',
].join('\n');

export interface SshTestHost {
  host: string;
  port: number;
  user: string;
  /** The user's ed25519 private key, OpenSSH format. */
  privateKey: string;
  /** The user's public key line, as in authorized_keys. */
  publicKey: string;
  /** `SHA256:...` fingerprint of the host key, the format `ssh-keygen -lf` prints. */
  hostKeySha256: string;
  /** Directory holding the keys and sshd's config; removed by stop(). */
  dir: string;
  stop(): Promise<void>;
}

function installedPackages(names: readonly string[]): Set<string> {
  const r = spawnSync('dpkg-query', ['-W', '-f=${Package} ${db:Status-Abbrev}\n', ...names], { encoding: 'utf8' });
  const installed = new Set<string>();
  for (const line of (r.stdout ?? '').split('\n')) {
    const [pkg, status] = line.trim().split(/\s+/);
    // `ii` = desired install, currently installed.
    if (pkg && status === 'ii') installed.add(pkg.split(':')[0]!);
  }
  return installed;
}

/**
 * Installs the Debian packages that are missing (no-op, a few milliseconds, when all are there).
 * Waits for the dpkg lock so that parallel test files do not fail on each other.
 */
export function ensureHostPackages(
  packages: readonly string[] = HOST_PACKAGES,
  log: (msg: string) => void = console.error,
): void {
  const have = installedPackages(packages);
  const missing = packages.filter((p) => !have.has(p));
  if (missing.length === 0) return;
  if (process.getuid?.() !== 0)
    throw new Error(
      `missing Debian packages ${missing.join(' ')}; install them as root (apt-get install ${missing.join(' ')})`,
    );
  log(`Installing Debian packages: ${missing.join(' ')}`);
  // The tests start their own sshd and dockerd: a package's system service (sshd on port 22, a
  // dockerd on /var/run/docker.sock that the host probe would take for every host's runtime) must
  // not start. A machine without a policy-rc.d gets one that refuses for the install's duration.
  const policy = '/usr/sbin/policy-rc.d';
  const ownPolicy = !existsSync(policy);
  if (ownPolicy) writeFileSync(policy, '#!/bin/sh\nexit 101\n', { mode: 0o755 });
  try {
    installMissing(missing);
  } finally {
    if (ownPolicy) rmSync(policy, { force: true });
  }
}

function installMissing(missing: string[]): void {
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  const install = (): SpawnSyncReturns<string> =>
    spawnSync('apt-get', ['-o', 'DPkg::Lock::Timeout=600', 'install', '-y', '--no-install-recommends', ...missing], {
      env,
      encoding: 'utf8',
    });
  let r = install();
  if (r.status !== 0) {
    // A fresh machine often has no (or stale) package lists.
    const u = spawnSync('apt-get', ['-o', 'DPkg::Lock::Timeout=600', 'update'], { env, encoding: 'utf8' });
    if (u.status !== 0) throw new Error(`apt-get update failed: ${u.stderr}`);
    r = install();
  }
  if (r.status !== 0) throw new Error(`apt-get install ${missing.join(' ')} failed: ${r.stderr}`);
  const still = missing.filter((p) => !installedPackages([p]).has(p));
  if (still.length) throw new Error(`apt-get did not install ${still.join(' ')}`);
}

/** Writes the Podman drop-in config when it is absent or different. Returns whether it wrote. */
export function ensureContainersConf(file = CONTAINERS_CONF_PATH): boolean {
  if (existsSync(file) && readFileSync(file, 'utf8') === CONTAINERS_CONF) return false;
  mkdirSync(path.dirname(file), { recursive: true });
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, CONTAINERS_CONF);
  // rename is atomic, so a podman starting at the same moment never reads half a file.
  renameSync(tmp, file);
  return true;
}

/** Packages plus Podman config: everything the machine needs before a test host can start. */
export function prepareTestHostMachine(log?: (msg: string) => void): void {
  ensureHostPackages(HOST_PACKAGES, log);
  ensureContainersConf();
}

/** OpenSSH's fingerprint of a public key line (`ssh-ed25519 AAAA... comment`). */
export function sshFingerprint(publicKeyLine: string): string {
  const blob = publicKeyLine.trim().split(/\s+/)[1];
  if (!blob) throw new Error('not an OpenSSH public key line');
  return `SHA256:${createHash('sha256').update(Buffer.from(blob, 'base64')).digest('base64').replace(/=+$/, '')}`;
}

function keygen(file: string, comment: string): void {
  const r = spawnSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', comment, '-f', file], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`ssh-keygen failed: ${r.stderr}`);
}

/**
 * A test host's keys in `dir`: its host key, and a client key that alone may log in
 * (authorized_keys), as sshdConfig(dir) names them.
 */
export function sshKeysIn(
  dir: string,
  hostComment: string,
): { publicKey: string; privateKey: string; hostKeySha256: string } {
  keygen(path.join(dir, 'ssh_host_ed25519_key'), hostComment);
  keygen(path.join(dir, 'id_ed25519'), 'gantry-test-client');
  const publicKey = readFileSync(path.join(dir, 'id_ed25519.pub'), 'utf8').trim();
  writeFileSync(path.join(dir, 'authorized_keys'), `${publicKey}\n`, { mode: 0o600 });
  return {
    publicKey,
    privateKey: readFileSync(path.join(dir, 'id_ed25519'), 'utf8'),
    hostKeySha256: sshFingerprint(readFileSync(path.join(dir, 'ssh_host_ed25519_key.pub'), 'utf8')),
  };
}

/** True once something on the port speaks SSH (sends its `SSH-2.0-` banner). */
export function answersSsh(port: number, host = '127.0.0.1'): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    const done = (ok: boolean): void => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1000, () => done(false));
    socket.once('error', () => done(false));
    socket.once('data', (chunk) => done(chunk.toString('latin1').startsWith('SSH-')));
  });
}

/** An sshd_config for a test host: root login with the keys of sshKeysIn(dir) only. */
export function sshdConfig(
  dir: string,
  port: number,
  opts: { listenAddress?: string; sessionPath?: string; sessionEnv?: Record<string, string> } = {},
): string {
  const { listenAddress = '127.0.0.1', sessionPath, sessionEnv = {} } = opts;
  const env = Object.entries(sessionEnv).map(([k, v]) => {
    if (!/^[A-Z_][A-Z0-9_]*$/.test(k) || /[\s"]/.test(v)) throw new Error(`cannot set ${k}=${v} for sessions`);
    return `${k}=${v}`;
  });
  if (sessionPath) env.unshift(`PATH=${sessionPath}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin`);
  return [
    `Port ${port}`,
    `ListenAddress ${listenAddress}`,
    `HostKey ${path.join(dir, 'ssh_host_ed25519_key')}`,
    `PidFile ${path.join(dir, 'sshd.pid')}`,
    `AuthorizedKeysFile ${path.join(dir, 'authorized_keys')}`,
    'PermitRootLogin prohibit-password',
    'PubkeyAuthentication yes',
    'PasswordAuthentication no',
    'KbdInteractiveAuthentication no',
    'UsePAM no',
    // The key files live under /tmp, which is world-writable: StrictModes would refuse them.
    'StrictModes no',
    // Tests open many channels at once on one connection and many connections at once.
    'MaxSessions 64',
    'MaxStartups 64:30:128',
    'ClientAliveInterval 15',
    'Subsystem sftp internal-sftp',
    'LogLevel ERROR',
    // A host's own tools (a GPU host's nvidia-smi) ahead of the system's, and its own variables (a
    // Docker host's DOCKER_HOST), for every session.
    ...(env.length > 0 ? [`SetEnv ${env.join(' ')}`] : []),
    '',
  ].join('\n');
}

export interface StartSshTestHostOptions {
  /** Skip the package/containers.conf check (the caller did it). */
  skipPrepare?: boolean;
  log?: (msg: string) => void;
  /** A folder searched first for commands in every session (test/support/gpu-test-host.ts). */
  sessionPath?: string;
  /** Variables set in every session (test/support/docker-test-host.ts: DOCKER_HOST). */
  sessionEnv?: Record<string, string>;
}

/**
 * Starts `sshd -D` on a free loopback port, root login with the generated key only. The server
 * process is killed on stop() and, as a last resort, when this process exits.
 */
export async function startSshTestHost(options: StartSshTestHostOptions = {}): Promise<SshTestHost> {
  if (!options.skipPrepare) prepareTestHostMachine(options.log);
  // sshd's privilege-separation directory; normally made by the init script.
  mkdirSync('/run/sshd', { recursive: true, mode: 0o755 });
  const dir = mkdtempSync(path.join(tmpdir(), 'gantry-sshd-'));
  try {
    const { publicKey, privateKey, hostKeySha256 } = sshKeysIn(dir, 'gantry-test-host');

    // The port is free when picked but may be taken before sshd binds it: try a few.
    let lastError = '';
    for (let attempt = 0; attempt < 5; attempt++) {
      const port = await freeLoopbackPort();
      const configFile = path.join(dir, 'sshd_config');
      writeFileSync(
        configFile,
        sshdConfig(dir, port, { sessionPath: options.sessionPath, sessionEnv: options.sessionEnv }),
      );
      const check = spawnSync('/usr/sbin/sshd', ['-t', '-f', configFile], { encoding: 'utf8' });
      if (check.status !== 0) throw new Error(`sshd rejected its config: ${check.stderr}`);
      // sshd must be started by absolute path: it re-executes itself for every connection.
      const child = spawn('/usr/sbin/sshd', ['-D', '-e', '-f', configFile], { stdio: ['ignore', 'ignore', 'pipe'] });
      let stderr = '';
      child.stderr?.on('data', (c: Buffer) => {
        if (stderr.length < 64 * 1024) stderr += c.toString();
      });
      const deadline = Date.now() + 10_000;
      let up = false;
      while (Date.now() < deadline && child.exitCode === null && child.signalCode === null) {
        if (await answersSsh(port)) {
          up = true;
          break;
        }
        await sleep(50);
      }
      if (up) return running(child, dir, { port, privateKey, publicKey, hostKeySha256 });
      child.kill('SIGKILL');
      lastError = stderr || `sshd did not answer on 127.0.0.1:${port} within 10 s`;
      if (!/address already in use/i.test(stderr)) break;
    }
    throw new Error(`sshd did not start: ${lastError}`);
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
}

function running(
  child: ChildProcess,
  dir: string,
  keys: { port: number; privateKey: string; publicKey: string; hostKeySha256: string },
): SshTestHost {
  const killOnExit = (): void => {
    child.kill('SIGKILL');
  };
  process.once('exit', killOnExit);
  let stopped: Promise<void> | undefined;
  return {
    host: '127.0.0.1',
    user: 'root',
    dir,
    ...keys,
    stop() {
      stopped ??= (async () => {
        process.removeListener('exit', killOnExit);
        if (child.exitCode === null && child.signalCode === null) {
          const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
          // The listener exits on SIGTERM; sessions already open keep their own processes until
          // their clients disconnect, as on any SSH server.
          child.kill('SIGTERM');
          const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
          await exited;
          clearTimeout(timer);
        }
        rmSync(dir, { recursive: true, force: true });
      })();
      return stopped;
    },
  };
}
