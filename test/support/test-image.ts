/**
 * A small container image for tests, built on this machine without any registry: a root filesystem
 * holding this machine's node binary and the shared libraries it links, imported with `podman
 * import`. There is no shell in it: commands run in exec form (`node -e ...`, `node /app/x.js`).
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  chmodSync,
  copyFileSync,
  cpSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensureContainersConf, ensureHostPackages } from './ssh-test-host.ts';
import { imageBuildLockPath, releaseBuildLock, tryBuildLock } from '../../infra/build-lock.ts';

export const DEFAULT_TEST_IMAGE = 'localhost/gantry-test-worker:1';
/** Image label holding a hash of what went in, so a changed app directory or node rebuilds. */
const CONTENT_LABEL = 'io.gantry.test-image.content';

export interface TestImageOptions {
  /** Directory of JS (or any) files copied to /app in the image. */
  appDir?: string;
  /** Default command, exec form. Defaults to `node /app/index.js` when the app has one, else `node`. */
  cmd?: string[];
  /** Podman binary (default: `podman` on PATH). */
  podman?: string;
  log?: (msg: string) => void;
}

export interface TestImage {
  name: string;
  /** False when an up-to-date image was already there. */
  built: boolean;
  ms: number;
}

function run(cmd: string, args: string[], what: string): string {
  const r = spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  if (r.error) throw new Error(`${what}: ${r.error.message}`);
  if (r.status !== 0) throw new Error(`${what} failed (exit ${r.status}): ${r.stderr.trim()}`);
  return r.stdout;
}

/** Absolute paths of the shared libraries (and the loader) `ldd` lists for a binary. */
export function sharedLibraries(binary: string): string[] {
  const out = run('ldd', [binary], `ldd ${binary}`);
  const libs = new Set<string>();
  for (const line of out.split('\n')) {
    // "libm.so.6 => /lib/x86_64-linux-gnu/libm.so.6 (0x...)" or "/lib64/ld-linux-x86-64.so.2 (0x...)"
    const m = /(?:=>\s*)?(\/\S+)\s+\(0x[0-9a-f]+\)/.exec(line);
    if (m?.[1]) libs.add(m[1]);
  }
  if (libs.size === 0) throw new Error(`ldd listed no libraries for ${binary}; is it statically linked?`);
  return [...libs];
}

function listFiles(dir: string, base = dir): string[] {
  return readdirSync(dir, { withFileTypes: true })
    .flatMap((e) => {
      const full = path.join(dir, e.name);
      return e.isDirectory() ? listFiles(full, base) : [path.relative(base, full)];
    })
    .sort();
}

function contentHash(node: string, appDir: string | undefined, cmd: string[]): string {
  const h = createHash('sha256');
  const st = statSync(node);
  // The node binary is large; its path, size and mtime identify it well enough.
  h.update(`${node}\0${st.size}\0${st.mtimeMs}\0${JSON.stringify(cmd)}\0`);
  if (appDir) {
    for (const rel of listFiles(appDir)) {
      h.update(`${rel}\0`);
      h.update(readFileSync(path.join(appDir, rel)));
    }
  }
  return h.digest('hex').slice(0, 32);
}

/** The image's id and content label, when an image of that name exists. */
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

/** Lays out the image's root filesystem in `root`. */
function buildRootfs(root: string, node: string, appDir: string | undefined): void {
  for (const d of ['usr/bin', 'etc', 'tmp', 'app', 'root', 'proc', 'sys', 'dev'])
    mkdirSync(path.join(root, d), { recursive: true });
  chmodSync(path.join(root, 'tmp'), 0o1777);
  copyFileSync(node, path.join(root, 'usr/bin/node'));
  chmodSync(path.join(root, 'usr/bin/node'), 0o755);
  for (const lib of sharedLibraries(node)) {
    // Copy each library to the path the binary asks for, resolving the host's symlinks; the
    // loader path (/lib64/ld-linux-x86-64.so.2) is baked into the binary and must exist as is.
    const target = path.join(root, lib);
    mkdirSync(path.dirname(target), { recursive: true });
    copyFileSync(realpathSync(lib), target);
    chmodSync(target, 0o755);
  }
  writeFileSync(
    path.join(root, 'etc/passwd'),
    'root:x:0:0:root:/root:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n',
  );
  writeFileSync(path.join(root, 'etc/group'), 'root:x:0:\nnogroup:x:65534:\n');
  // glibc >= 2.34 has the files and dns NSS modules built in; this makes the lookup order explicit.
  writeFileSync(path.join(root, 'etc/nsswitch.conf'), 'passwd: files\ngroup: files\nhosts: files dns\n');
  if (appDir) cpSync(appDir, path.join(root, 'app'), { recursive: true });
}

/**
 * Builds the test worker image once per content (skips when an image of that name with the same
 * content label exists). Returns how long it took.
 */
export function ensureTestWorkerImage(name: string = DEFAULT_TEST_IMAGE, options: TestImageOptions = {}): TestImage {
  const started = Date.now();
  if (!options.podman) {
    ensureHostPackages(['podman', 'runc'], options.log);
    ensureContainersConf();
  }
  const podman = options.podman ?? 'podman';
  const node = realpathSync(process.execPath);
  const appDir = options.appDir ? path.resolve(options.appDir) : undefined;
  const hasIndex = appDir ? listFiles(appDir).includes('index.js') : false;
  const cmd = options.cmd ?? (hasIndex ? ['node', '/app/index.js'] : ['node']);
  const hash = contentHash(node, appDir, cmd);
  if (existingImage(podman, name)?.label === hash) return { name, built: false, ms: Date.now() - started };

  // Test files run in parallel and may ask for the same image at once: one builds, the others wait.
  const lock = imageBuildLockPath(name);
  while (!tryBuildLock(lock, 5 * 60_000)) spawnSync('sleep', ['0.2']);
  const work = mkdtempSync(path.join(tmpdir(), 'gantry-image-'));
  try {
    const previous = existingImage(podman, name);
    if (previous?.label === hash) return { name, built: false, ms: Date.now() - started };
    options.log?.(`Building test image ${name}`);
    const root = path.join(work, 'rootfs');
    buildRootfs(root, node, appDir);
    const tarball = path.join(work, 'rootfs.tar');
    run('tar', ['--numeric-owner', '--owner=0', '--group=0', '-C', root, '-cf', tarball, '.'], 'tar of the image root');
    const changes = [
      `CMD ${JSON.stringify(cmd)}`,
      'WORKDIR /app',
      'ENV PATH=/usr/local/bin:/usr/bin:/bin',
      `LABEL ${CONTENT_LABEL}=${hash}`,
    ];
    run(podman, ['import', ...changes.flatMap((c) => ['--change', c]), tarball, name], `podman import ${name}`);
    // The replaced image lost its name; drop it unless a container still uses it.
    if (previous?.id) spawnSync(podman, ['rmi', previous.id], { stdio: 'ignore' });
  } finally {
    rmSync(work, { recursive: true, force: true });
    releaseBuildLock(lock);
  }
  return { name, built: true, ms: Date.now() - started };
}

const fixtures = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'fixtures');

/** The orchestration test worker (test/fixtures/orchestration-worker) as an image, built once per machine. */
export const ORCHESTRATION_WORKER_IMAGE = 'localhost/gantry-orchestration-worker:1';

export function ensureOrchestrationWorkerImage(): string {
  ensureTestWorkerImage(ORCHESTRATION_WORKER_IMAGE, { appDir: path.join(fixtures, 'orchestration-worker') });
  return ORCHESTRATION_WORKER_IMAGE;
}

export const LB_WORKER_DIR = path.join(fixtures, 'lb-worker');

/** The lb-worker fixture as a local image (HTTP on PORT, /ping, WebSocket echo). */
export const LB_WORKER_IMAGE = 'localhost/gantry-lb-worker:1';

/** Builds LB_WORKER_IMAGE unless it is there: the image has node only, so `ws` travels in its app directory. */
export function ensureLbWorkerImage(): string {
  const repoRoot = path.join(fixtures, '..', '..');
  const appDir = mkdtempSync(path.join(tmpdir(), 'gantry-lb-app-'));
  try {
    cpSync(LB_WORKER_DIR, appDir, { recursive: true });
    mkdirSync(path.join(appDir, 'node_modules'));
    cpSync(path.join(repoRoot, 'node_modules/ws'), path.join(appDir, 'node_modules/ws'), { recursive: true });
    ensureTestWorkerImage(LB_WORKER_IMAGE, { appDir });
  } finally {
    rmSync(appDir, { recursive: true, force: true });
  }
  return LB_WORKER_IMAGE;
}
