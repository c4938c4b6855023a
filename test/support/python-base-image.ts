/**
 * Python base images for Gantry's runtime image, built on this machine without any registry by the
 * recipe hosts use (hostctl/python-base.ts: debootstrap of the Debian release that ships the wanted
 * Python, bookworm: 3.11, trixie: 3.13), run here with bash, with extra Debian packages when a test
 * wants a base that has some of a runtime image's packages (`python3-numpy`). The platform builds
 * the runtime image on top (sdk/python/Containerfile, BASE_IMAGE `localhost/gantry-python:<version>`).
 *
 * The bookworm debootstrap here handles trixie too (checked: its scripts/trixie exists and
 * debian-archive-keyring 2023.3+deb12u2 holds the trixie release keys, so the Release files are
 * verified as usual). The mirror is the one apt on this machine already uses (hostctl/apt-sources.ts).
 */
import { spawn, spawnSync } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { debianMirror } from '../../hostctl/apt-sources.ts';
import {
  pythonBaseImageName,
  pythonBaseRecipe,
  recipeHashCommand,
  type DebianPython,
} from '../../hostctl/python-base.ts';
import { ensureContainersConf, ensureHostPackages } from './ssh-test-host.ts';
import { imageBuildLockPath, releaseBuildLock, tryBuildLock } from '../../infra/build-lock.ts';

export { pythonBaseImageName };
export type PythonBaseVersion = DebianPython;

/** Podman's global flags for this machine (crun and the systemd cgroup manager do not work here). */
export const PODMAN_FLAGS = ['--runtime', 'runc', '--cgroup-manager', 'cgroupfs'] as const;

export interface PythonBaseImageOptions {
  /**
   * Debian packages to add (`python3-numpy`): a base that already has some of a runtime image's
   * packages. The image is then `localhost/gantry-python:<version>-<packages joined by ->`.
   */
  extraPackages?: readonly string[];
  /** Debian mirror for debootstrap (default: GANTRY_DEBIAN_MIRROR, else the one apt's sources name). */
  mirror?: string;
  /** Podman binary (default: `podman` on PATH, with the packages and config it needs ensured). */
  podman?: string;
  log?: (msg: string) => void;
}

export interface PythonBaseImage {
  name: string;
  /** False when an up-to-date image was already there. */
  built: boolean;
  ms: number;
}

interface Exit {
  status: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs a command without blocking the event loop: a cold build takes about a minute, and a test
 * runner (vitest's worker RPC) or a server in the same process must keep running meanwhile.
 */
function run(cmd: string, args: readonly string[], timeoutMs = 30 * 60_000): Promise<Exit> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], timeout: timeoutMs });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.once('error', (e) => reject(new Error(`${cmd}: ${e.message}`)));
    child.once('close', (status) => resolve({ status, stdout, stderr }));
  });
}

const recipeHashOf = (podman: string, name: string): string =>
  spawnSync('bash', ['-c', recipeHashCommand(podman, name)], { encoding: 'utf8' }).stdout.trim();

/** Parallel test files may want the same image at once: one builds, the others wait for it. */
async function withLock<T>(name: string, fn: () => Promise<T>): Promise<T> {
  const lock = imageBuildLockPath(name);
  // A cold debootstrap takes minutes; only a lock far older than that was left by a killed build.
  while (!tryBuildLock(lock, 30 * 60_000)) await sleep(500);
  try {
    return await fn();
  } finally {
    releaseBuildLock(lock);
  }
}

/**
 * Builds `localhost/gantry-python:<version>` unless an image of that name built from the same
 * recipe is there. Needs root (debootstrap); installs debootstrap, podman and runc when missing.
 */
export async function ensurePythonBaseImage(
  version: PythonBaseVersion,
  options: PythonBaseImageOptions = {},
): Promise<PythonBaseImage> {
  const started = Date.now();
  const extra = options.extraPackages ?? [];
  const log = options.log ?? ((msg: string) => console.error(msg));
  if (!options.podman) {
    ensureHostPackages(['podman', 'runc'], log);
    ensureContainersConf();
  }
  const podman = options.podman ?? 'podman';
  const recipe = pythonBaseRecipe(version, options.mirror ?? debianMirror(), podman, extra);
  const name = recipe.name;
  if (recipeHashOf(podman, name) === recipe.hash) return { name, built: false, ms: Date.now() - started };

  return withLock(name, async () => {
    if (recipeHashOf(podman, name) === recipe.hash) return { name, built: false, ms: Date.now() - started };
    // debian-archive-keyring: debootstrap verifies the release against it.
    ensureHostPackages(['debootstrap', 'debian-archive-keyring'], log);
    log(`Building ${name} (debootstrap; a few minutes when cold)`);
    const r = await run('bash', ['-c', recipe.script, 'bash', ...recipe.args]);
    if (r.status !== 0) throw new Error(`building ${name} failed (exit ${r.status}):\n${r.stderr.trim()}`);
    const ms = Date.now() - started;
    log(`Built ${name} in ${(ms / 1000).toFixed(1)} s`);
    return { name, built: true, ms };
  });
}
