/**
 * The Python base images the runtime image builds on, made here without a registry
 * (debootstrap + podman import), and the runtime image built on them from sdk/python/Containerfile
 * the way the platform builds it on a host.
 */
import { spawn, spawnSync } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ensurePythonBaseImage, PODMAN_FLAGS, type PythonBaseVersion } from '../support/python-base-image.ts';

const root = path.resolve(import.meta.dirname, '../..');
const sdkDir = path.join(root, 'sdk/python');

/** podman with this machine's flags, asynchronously: a build must not stall vitest's worker. */
function podman(args: string[], timeout = 300_000): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('podman', [...PODMAN_FLAGS, ...args], { stdio: ['ignore', 'pipe', 'pipe'], timeout });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.once('error', reject);
    child.once('close', (status) => resolve({ status, stdout, stderr }));
  });
}

describe.each<PythonBaseVersion>(['3.11', '3.13'])('Python %s', (version) => {
  it(
    'builds the base image once and runs its python3',
    async () => {
      const image = await ensurePythonBaseImage(version, { log: (m) => console.log(m) });
      console.log(`${image.name}: ${image.built ? 'built' : 'cached'} in ${(image.ms / 1000).toFixed(1)} s`);
      expect(image.name).toBe(`localhost/gantry-python:${version}`);
      /** python3 with `args` in a container of the image, without network. */
      const python = (...args: string[]) =>
        podman(['run', '--rm', '--network', 'none', image.name, 'python3', ...args]);
      const r = await python('--version');
      expect(r.status, r.stderr).toBe(0);
      expect(r.stdout.trim()).toMatch(new RegExp(`^Python ${version.replace('.', '\\.')}\\.\\d+$`));
      // CA certificates are there, so the artifact's HTTPS URL verifies.
      const certs = await python('-c', 'import ssl; print(ssl.create_default_context().cert_store_stats()["x509_ca"])');
      expect(Number(certs.stdout.trim())).toBeGreaterThan(50);
      // The standard library's extension modules find their libraries (Debian's packages of them).
      const modules = ['ssl', 'ctypes', 'sqlite3', 'bz2', 'lzma', 'zlib', 'uuid', 'decimal', 'hashlib', 'readline'];
      const imports = await python('-c', `import ${modules.join(', ')}; print("ok")`);
      expect([imports.status, imports.stdout.trim()], imports.stderr).toEqual([0, 'ok']);

      const again = await ensurePythonBaseImage(version);
      expect(again.built).toBe(false);
      expect(again.ms).toBeLessThan(10_000);
    },
    15 * 60_000,
  );

  it(
    'carries the runtime image, whose runtime names what is missing and whose SDK tests pass',
    async () => {
      const base = (await ensurePythonBaseImage(version)).name;
      const tag = `localhost/gantry-runtime-check:${version}`;
      try {
        const build = await podman([
          'build',
          '--build-arg',
          `BASE_IMAGE=${base}`,
          '-t',
          tag,
          '-f',
          path.join(sdkDir, 'Containerfile'),
          sdkDir,
        ]);
        expect(build.status, build.stderr).toBe(0);
        const run = await podman(['run', '--rm', '--network', 'none', tag]);
        expect(run.status).toBe(2);
        expect(run.stderr).toContain(
          'missing environment variables GANTRY_ARTIFACT_URL, GANTRY_ARTIFACT_SHA256, GANTRY_ARTIFACT_CACHE, GANTRY_RESOURCE',
        );
        // .containerignore keeps the tests out of the image.
        const listing = await podman([
          'run',
          '--rm',
          '--network',
          'none',
          tag,
          'python3',
          '-c',
          'import os; print(sorted(os.listdir("/opt/gantry")))',
        ]);
        expect(listing.stdout.trim()).toBe("['gantry']");
        // The SDK's own suite on this Python, mounted read-only.
        const tests = await podman([
          'run',
          '--rm',
          '--network',
          'none',
          '-e',
          'PYTHONDONTWRITEBYTECODE=1',
          '-v',
          `${sdkDir}:/sdk:ro`,
          '-w',
          '/sdk',
          tag,
          'python3',
          '-m',
          'unittest',
          'discover',
          '-b',
          '-s',
          'tests',
        ]);
        expect(tests.status, `${tests.stdout}\n${tests.stderr}`.slice(-4000)).toBe(0);
      } finally {
        spawnSync('podman', ['rmi', '--force', tag], { stdio: 'ignore' });
      }
    },
    15 * 60_000,
  );
});
