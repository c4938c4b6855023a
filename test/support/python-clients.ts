/**
 * A Python virtual environment with the hosted service's own Python package (`runpod`: its job API
 * client and its worker SDK) and Pillow, at the versions test/fixtures/image-model/requirements.txt
 * pins, from PyPI. Tests use it to run the image-model fixture worker and the playground's Python
 * snippet as users would. Built once per machine (about a minute) and cached by the content of the
 * requirements file. `requirements` names another pinned set for a venv of its own (the flash
 * client's: FLASH_CLIENT_REQUIREMENTS).
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, renameSync, rmSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { releaseBuildLock, tryBuildLock } from '../../infra/build-lock.ts';
import { loadConfig } from '../../infra/config.ts';
import { runForOutput } from './run-output.ts';

export const PYTHON_CLIENTS_REQUIREMENTS = path.join(
  path.dirname(fileURLToPath(import.meta.url)),
  '..',
  'fixtures',
  'image-model',
  'requirements.txt',
);

/** The hosted service's deploy tool (runpod-flash) with its dependencies, pinned. */
export const FLASH_CLIENT_REQUIREMENTS = path.join(
  path.dirname(fileURLToPath(import.meta.url)),
  '..',
  'fixtures',
  'flash-client',
  'requirements.txt',
);

/** The venv's python3, built first when missing. `python` is the interpreter the venv is made from (python3 on PATH). */
export async function ensurePythonClients(
  opts: { cacheDir?: string; python?: string; log?: (msg: string) => void; requirements?: string } = {},
): Promise<string> {
  const requirementsFile = opts.requirements ?? PYTHON_CLIENTS_REQUIREMENTS;
  const cacheDir = opts.cacheDir ?? loadConfig().cacheDir;
  const python = opts.python ?? 'python3';
  const log = opts.log ?? ((msg: string) => console.error(msg));
  const requirements = readFileSync(requirementsFile);
  const version = spawnSync(python, ['-c', 'import sys; print(sys.version_info[:2])'], {
    encoding: 'utf8',
  }).stdout.trim();
  const hash = createHash('sha256').update(requirements).update(version).digest('hex').slice(0, 16);
  const dir = path.join(cacheDir, `python-clients-${hash}`);
  const bin = path.join(dir, 'bin', 'python3');
  if (existsSync(bin)) return bin;
  const lock = `${dir}.lock`;
  while (!tryBuildLock(lock, 15 * 60_000)) await sleep(500);
  try {
    if (existsSync(bin)) return bin;
    log(`Building the Python clients venv (${path.relative(process.cwd(), requirementsFile)}) in ${dir}`);
    const started = Date.now();
    const work = `${dir}.building`;
    rmSync(work, { recursive: true, force: true });
    let r = await runForOutput(python, ['-m', 'venv', work]);
    if (r.status !== 0) throw new Error(`${python} -m venv failed: ${r.output.trim()}`);
    r = await runForOutput(path.join(work, 'bin', 'pip'), [
      'install',
      '--quiet',
      '--disable-pip-version-check',
      '--no-input',
      '-r',
      requirementsFile,
    ]);
    if (r.status !== 0)
      throw new Error(
        `pip install -r ${requirementsFile} failed: ${r.output.trim().split('\n').slice(-20).join('\n')}`,
      );
    // Built aside, then renamed: a half-built venv is never taken for a whole one. Only its python3
    // is used (console scripts' shebangs name the build path; the interpreter finds its venv itself).
    rmSync(dir, { recursive: true, force: true });
    renameSync(work, dir);
    log(`Built the Python clients venv in ${((Date.now() - started) / 1000).toFixed(1)} s`);
    return bin;
  } finally {
    releaseBuildLock(lock);
  }
}
