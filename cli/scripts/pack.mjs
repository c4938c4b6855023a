// `npm pack` hooks. prepare: compile src/ to dist/ and copy the Python package (the scanner, the
// decorators, the runtime) into python/, so the packed CLI needs neither the repository nor tsx.
// clean: remove both again, so the repository keeps running the TypeScript source (bin/gantry.mjs
// prefers dist/ when it exists).
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const cliRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const sdk = path.resolve(cliRoot, '..', 'sdk', 'python');
const dist = path.join(cliRoot, 'dist');
const python = path.join(cliRoot, 'python');

function clean() {
  rmSync(dist, { recursive: true, force: true });
  rmSync(python, { recursive: true, force: true });
}

function prepare() {
  clean();
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  const r = spawnSync(process.execPath, [tsc, '-p', path.join(cliRoot, 'tsconfig.build.json')], { stdio: 'inherit' });
  if (r.status !== 0) throw new Error(`tsc failed (exit ${r.status ?? r.signal})`);
  if (!existsSync(path.join(sdk, 'gantry'))) throw new Error(`no Python package at ${sdk}/gantry`);
  mkdirSync(python, { recursive: true });
  const skip = (p) =>
    !p
      .split(path.sep)
      .some(
        (part) => part === '__pycache__' || part === 'tests' || part.endsWith('.pyc') || part.endsWith('.egg-info'),
      );
  cpSync(path.join(sdk, 'gantry'), path.join(python, 'gantry'), { recursive: true, filter: skip });
  // What pip needs to install the package from the copy (`gantry-sdk @ file://…/python`), and the
  // Containerfile `gantry deploy --preview` builds its local runtime image from.
  for (const file of ['pyproject.toml', 'README.md', 'LICENSE', 'Containerfile']) {
    if (existsSync(path.join(sdk, file))) cpSync(path.join(sdk, file), path.join(python, file));
  }
}

const task = process.argv[2];
if (task === 'prepare') prepare();
else if (task === 'clean') clean();
else {
  console.error('usage: node scripts/pack.mjs prepare|clean');
  process.exit(2);
}
