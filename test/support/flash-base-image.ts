/**
 * A base for Gantry's flash runtime image on this machine, where containers reach no registry and
 * container builds no PyPI: the Debian-made Python base (python-base-image.ts) with the packages of
 * the pinned flash client set (runpod-flash, runpod and their dependencies,
 * test/fixtures/flash-client/requirements.txt) installed by this machine's pip for that Python into
 * its dist-packages. The platform then builds the flash runtime on it (sdk/python/Containerfile with MODULE=gantry.flash
 * installs nothing the base can import), as an operator of hosts without PyPI would
 * (docs/apps.md, "Runtime images"). Built once per machine, named by a hash of what went in.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { pipInstallForHost } from '../../activities/runtime-packages.ts';
import { imageBuildLockPath, releaseBuildLock, tryBuildLock } from '../../infra/build-lock.ts';
import { ensurePythonBaseImage, PODMAN_FLAGS, pythonBaseImageName } from './python-base-image.ts';
import { FLASH_CLIENT_REQUIREMENTS } from './python-clients.ts';
import { runForOutput } from './run-output.ts';

/** Bump when the steps below change in a way the hashed inputs do not show. */
const RECIPE = 1;

const tail = (text: string) => text.trim().split('\n').slice(-20).join('\n');

/**
 * `localhost/gantry-flash-base:<version>-<hash>`, built first when missing; the name to give
 * GANTRY_FLASH_RUNTIME_BASE_IMAGE. flash builds for 3.10, 3.11 or 3.12 (3.12 unless told
 * otherwise); of those, Debian ships 3.11, which flash is then told to build for
 * (`--python-version 3.11`).
 */
export async function ensureFlashBaseImage(
  version: '3.11' = '3.11',
  log: (msg: string) => void = (m) => console.error(m),
): Promise<string> {
  await ensurePythonBaseImage(version);
  const base = pythonBaseImageName(version);
  const baseId = spawnSync('podman', ['image', 'inspect', '--format', '{{.Id}}', base], { encoding: 'utf8' }).stdout;
  const hash = createHash('sha256')
    .update(JSON.stringify({ RECIPE, baseId: baseId.trim() }))
    .update(readFileSync(FLASH_CLIENT_REQUIREMENTS))
    .digest('hex')
    .slice(0, 12);
  const name = `localhost/gantry-flash-base:${version}-${hash}`;
  if (spawnSync('podman', ['image', 'exists', name]).status === 0) return name;
  const lock = imageBuildLockPath(name);
  while (!tryBuildLock(lock, 20 * 60_000)) await sleep(500);
  try {
    if (spawnSync('podman', ['image', 'exists', name]).status === 0) return name;
    const started = Date.now();
    log(`Building ${name} (pip install of the flash client set for Python ${version}, then podman build)`);
    const work = mkdtempSync(path.join(tmpdir(), 'gantry-flash-base-'));
    try {
      // As the platform installs a runtime's packages for a host (activities/runtime-packages.ts).
      let r = await runForOutput(
        'python3',
        pipInstallForHost(path.join(work, 'site'), version, ['-r', FLASH_CLIENT_REQUIREMENTS]),
      );
      if (r.status !== 0) throw new Error(`pip install for ${name} failed: ${tail(r.output)}`);
      // Debian's Python reads /usr/local/lib/python3.X/dist-packages.
      writeFileSync(
        path.join(work, 'Containerfile'),
        `FROM ${base}\nCOPY site /usr/local/lib/python${version}/dist-packages\n`,
      );
      r = await runForOutput('podman', [...PODMAN_FLAGS, 'build', '--quiet', '--tag', name, work]);
      if (r.status !== 0) throw new Error(`podman build ${name} failed: ${tail(r.output)}`);
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
    log(`Built ${name} in ${((Date.now() - started) / 1000).toFixed(1)} s`);
    return name;
  } finally {
    releaseBuildLock(lock);
  }
}
