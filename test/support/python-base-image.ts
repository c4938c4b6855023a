/**
 * Python base images for Gantry's runtime image, built on this machine without any registry:
 * `debootstrap --variant=minbase` of the Debian release that ships the wanted Python (bookworm:
 * 3.11, trixie: 3.13) with only `python3` and `ca-certificates`, then `tar | podman import`. Other
 * versions (3.10, 3.12) come from no Debian release here: an operator names a base image that has
 * them (docs/apps.md, "Runtime images"), and the suite covers the two Debian ships.
 * The platform builds the runtime image on top (sdk/python/Containerfile, BASE_IMAGE
 * `localhost/gantry-python:<version>`); there is no pip in here because artifacts carry their
 * dependencies.
 *
 * The bookworm debootstrap here handles trixie too (checked: its scripts/trixie exists and
 * debian-archive-keyring 2023.3+deb12u2 holds the trixie release keys, so the Release files are
 * verified as usual). The mirror is the one apt on this machine already uses (debian-mirror.ts).
 */
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { debianMirror } from './debian-mirror.ts';
import { ensureContainersConf, ensureHostPackages } from './ssh-test-host.ts';
import { imageBuildLockPath, releaseBuildLock, tryBuildLock } from '../../infra/build-lock.ts';

export type PythonBaseVersion = '3.11' | '3.13';

/** The Debian release whose `python3` is each version. */
export const PYTHON_BASE_SUITES: Readonly<Record<PythonBaseVersion, string>> = {
  '3.11': 'bookworm',
  '3.13': 'trixie',
};
/** What goes in besides minbase: the interpreter, and CA certificates for the artifact's HTTPS URL. */
export const PYTHON_BASE_PACKAGES = ['python3', 'ca-certificates'] as const;

/** Podman's global flags for this machine (crun and the systemd cgroup manager do not work here). */
export const PODMAN_FLAGS = ['--runtime', 'runc', '--cgroup-manager', 'cgroupfs'] as const;

/** Image label holding a hash of the recipe, so a changed recipe rebuilds. */
const CONTENT_LABEL = 'io.gantry.python-base.content';
/** Bump when the steps below change in a way the hashed inputs do not show. */
const RECIPE = 1;
/** Directories of the root filesystem that a runtime never reads (apt's caches and lists, docs for humans). */
const TRIM = ['var/cache/apt', 'var/lib/apt/lists', 'usr/share/man', 'usr/share/info', 'usr/share/locale', 'var/log'];

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

export function pythonBaseImageName(version: PythonBaseVersion, extraPackages: readonly string[] = []): string {
  return `localhost/gantry-python:${[version, ...extraPackages].join('-')}`;
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

function tail(text: string, lines = 30): string {
  return text.trim().split('\n').slice(-lines).join('\n');
}

function contentHash(version: PythonBaseVersion, mirror: string, extra: readonly string[]): string {
  const recipe = {
    RECIPE,
    version,
    suite: PYTHON_BASE_SUITES[version],
    packages: [...PYTHON_BASE_PACKAGES, ...extra],
    mirror,
    trim: TRIM,
  };
  return createHash('sha256').update(JSON.stringify(recipe)).digest('hex').slice(0, 32);
}

function existingImage(podman: string, name: string): { id: string; label: string } | undefined {
  if (spawnSync(podman, ['image', 'exists', name]).status !== 0) return undefined;
  const r = spawnSync(
    podman,
    ['image', 'inspect', '--format', `{{.Id}} {{ index .Labels "${CONTENT_LABEL}" }}`, name],
    { encoding: 'utf8' },
  );
  if (r.status !== 0) return undefined;
  const [id = '', label = ''] = r.stdout.trim().split(/\s+/);
  return { id, label };
}

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

async function debootstrap(
  version: PythonBaseVersion,
  root: string,
  mirror: string,
  extra: readonly string[],
): Promise<void> {
  const suite = PYTHON_BASE_SUITES[version];
  const r = await run('debootstrap', [
    '--variant=minbase',
    `--include=${[...PYTHON_BASE_PACKAGES, ...extra].join(',')}`,
    suite,
    root,
    mirror,
  ]);
  if (r.status !== 0) {
    let detail = tail(`${r.stdout}\n${r.stderr}`);
    try {
      // debootstrap keeps the real reason (a download, a dpkg step) in its own log.
      detail += `\n--- debootstrap.log ---\n${tail(readFileSync(path.join(root, 'debootstrap/debootstrap.log'), 'utf8'))}`;
    } catch {
      // no log: the output above is all there is
    }
    throw new Error(`debootstrap ${suite} from ${mirror} failed (exit ${r.status}):\n${detail}`);
  }
}

/** Deletes the files under dir, keeping its directories and apt's lock files (apt expects both). */
function emptyTree(dir: string): void {
  let entries;
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch {
    return;
  }
  for (const e of entries) {
    const full = path.join(dir, e.name);
    if (e.isDirectory()) emptyTree(full);
    else if (e.name !== 'lock') rmSync(full, { force: true });
  }
}

function trim(root: string): void {
  for (const dir of TRIM) emptyTree(path.join(root, dir));
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
  const name = pythonBaseImageName(version, extra);
  if (!(version in PYTHON_BASE_SUITES))
    throw new Error(`no Python base image recipe for ${version}; known: ${Object.keys(PYTHON_BASE_SUITES).join(', ')}`);
  const mirror = options.mirror ?? debianMirror();
  const log = options.log ?? ((msg: string) => console.error(msg));
  if (!options.podman) {
    ensureHostPackages(['podman', 'runc'], log);
    ensureContainersConf();
  }
  const podman = options.podman ?? 'podman';
  const hash = contentHash(version, mirror, extra);
  if (existingImage(podman, name)?.label === hash) return { name, built: false, ms: Date.now() - started };

  return withLock(name, async () => {
    const previous = existingImage(podman, name);
    if (previous?.label === hash) return { name, built: false, ms: Date.now() - started };
    if (process.getuid?.() !== 0)
      throw new Error(`building ${name} needs root (debootstrap creates a root filesystem)`);
    // debian-archive-keyring: debootstrap verifies the release against it.
    ensureHostPackages(['debootstrap', 'debian-archive-keyring'], log);
    log(`Building ${name} (debootstrap ${PYTHON_BASE_SUITES[version]} from ${mirror}; a few minutes when cold)`);
    const work = mkdtempSync(path.join(tmpdir(), 'gantry-python-base-'));
    try {
      const root = path.join(work, 'rootfs');
      await debootstrap(version, root, mirror, extra);
      trim(root);
      const changes = [
        'CMD ["python3"]',
        'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
        // What python:*-slim sets too: UTF-8 for stdio and open() whatever the host's locale.
        'ENV LANG=C.UTF-8',
        `LABEL ${CONTENT_LABEL}=${hash}`,
        `LABEL io.gantry.python-base.version=${version}`,
      ];
      // tar streams into podman import: no second copy of the root filesystem on disk.
      const script =
        'set -o pipefail; root="$1"; podman="$2"; name="$3"; shift 3; tar --numeric-owner -C "$root" -c . | "$podman" import "$@" - "$name" >/dev/null';
      const r = await run('bash', [
        '-c',
        script,
        'bash',
        root,
        podman,
        name,
        ...changes.flatMap((c) => ['--change', c]),
      ]);
      if (r.status !== 0) throw new Error(`tar | podman import ${name} failed (exit ${r.status}): ${tail(r.stderr)}`);
      // The replaced image lost its name; drop it unless a container still uses it.
      if (previous?.id) spawnSync(podman, ['rmi', previous.id], { stdio: 'ignore' });
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
    const ms = Date.now() - started;
    log(`Built ${name} in ${(ms / 1000).toFixed(1)} s`);
    return { name, built: true, ms };
  });
}
