/**
 * The container engine side of `gantry deploy --preview`: finding Podman or Docker, running its
 * commands, removing what an earlier preview left, the runtime image and the extracted artifact.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { accessSync, constants, existsSync, readdirSync, readFileSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, readdir, rename, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { extract } from 'tar';
import type { BuildResult } from '../../artifact.ts';
import { CliError, describeError } from '../../errors.ts';
import { progress } from '../../output.ts';
import { sdkRoot } from '../../python.ts';

/** Marks everything a preview creates; its value is the app. */
export const LABEL = 'io.gantry.preview';
/** Which extracted artifact a container mounts, so a cleanup never deletes one a running preview uses. */
export const ARTIFACT_LABEL = 'io.gantry.preview.artifact';
const IMAGE_REPOSITORY = 'localhost/gantry-runtime-preview';
const DEFAULT_BASE_IMAGE = 'docker.io/library/python:{python}-slim';

export interface Engine {
  kind: 'podman' | 'docker';
  bin: string;
  /** Global flags placed before every subcommand (GANTRY_PODMAN_ARGS). */
  globalArgs: string[];
}

interface Exit {
  code: number;
  stdout: string;
  stderr: string;
}

// ---------------------------------------------------------------------------------------------
// The container engine

/** Podman when it is on PATH, else Docker: both take the same commands for what a preview needs. */
export function findEngine(): Engine {
  for (const kind of ['podman', 'docker'] as const) {
    const bin = onPath(kind);
    if (!bin) continue;
    // Podman's defaults (containers.conf) are right on most machines; GANTRY_PODMAN_ARGS is for
    // those where they are not, e.g. `--runtime runc --cgroup-manager cgroupfs`.
    const globalArgs = kind === 'podman' ? (process.env.GANTRY_PODMAN_ARGS ?? '').split(/\s+/).filter(Boolean) : [];
    return { kind, bin, globalArgs };
  }
  throw new CliError(
    '`gantry deploy --preview` runs the endpoints in local containers and needs Podman or Docker; neither podman nor docker is on PATH.',
  );
}

function onPath(name: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    if (!dir) continue;
    const file = path.join(dir, name);
    try {
      accessSync(file, constants.X_OK);
      return file;
    } catch {
      // not in this folder
    }
  }
  return undefined;
}

export function exec(engine: Engine, args: string[]): Promise<Exit> {
  return new Promise((resolve, reject) => {
    const child = spawn(engine.bin, [...engine.globalArgs, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.once('error', (e) => reject(new CliError(`Cannot run ${engine.bin}: ${e.message}.`)));
    child.once('close', (code, signal) => resolve({ code: code ?? (signal ? 128 : 1), stdout, stderr }));
  });
}

export const lastLines = (text: string, n = 15): string => text.trim().split('\n').slice(-n).join('\n');

export async function check(engine: Engine, args: string[]): Promise<string> {
  const r = await exec(engine, args);
  if (r.code !== 0)
    throw new CliError(
      `\`${engine.kind} ${args.slice(0, 2).join(' ')}\` failed (exit ${r.code}):\n${lastLines(r.stderr || r.stdout)}`,
    );
  return r.stdout;
}

export const words = (text: string): string[] => text.split(/\s+/).filter(Boolean);

/** Every container and network of an earlier preview of the app: left by a crash, a kill -9, or this run so far. */
export async function removeLabelled(engine: Engine, app: string): Promise<void> {
  const containers = words(await check(engine, ['ps', '-a', '-q', '--filter', `label=${LABEL}=${app}`]));
  if (containers.length > 0) await check(engine, ['rm', '-f', ...containers]);
  const networks = words(await check(engine, ['network', 'ls', '-q', '--filter', `label=${LABEL}=${app}`]));
  if (networks.length > 0) await check(engine, ['network', 'rm', ...networks]);
}

// ---------------------------------------------------------------------------------------------
// The runtime image: sdk/python/Containerfile on a Python base, built here, never pulled

/** The build context's files: the Containerfile and the gantry package, as the image gets them. */
function contextFiles(root: string): Array<{ rel: string; content: Buffer }> {
  const containerfile = path.join(root, 'Containerfile');
  if (!existsSync(containerfile))
    throw new CliError(
      `The runtime's Containerfile is missing from this installation (${containerfile}); reinstall the CLI.`,
    );
  const files = [{ rel: 'Containerfile', content: readFileSync(containerfile) }];
  const walk = (rel: string): void => {
    for (const e of readdirSync(path.join(root, rel), { withFileTypes: true })) {
      if (e.name === '__pycache__' || e.name.endsWith('.pyc')) continue;
      const child = `${rel}/${e.name}`;
      if (e.isDirectory()) walk(child);
      else if (e.isFile()) files.push({ rel: child, content: readFileSync(path.join(root, child)) });
    }
  };
  walk('gantry');
  return files.sort((a, b) => (a.rel < b.rel ? -1 : a.rel > b.rel ? 1 : 0));
}

/**
 * `localhost/gantry-runtime-preview:py<version>-<digest>`, built when missing. The digest covers the
 * context and the base image's name, so a changed runtime or another base is another image.
 */
export async function runtimeImage(engine: Engine, pythonVersion: string): Promise<{ name: string; built: boolean }> {
  const base = (process.env.GANTRY_PREVIEW_BASE_IMAGE || DEFAULT_BASE_IMAGE).replaceAll('{python}', pythonVersion);
  const files = contextFiles(sdkRoot());
  const hash = createHash('sha256').update(base).update('\0');
  for (const f of files) hash.update(f.rel).update('\0').update(f.content).update('\0');
  const name = `${IMAGE_REPOSITORY}:py${pythonVersion}-${hash.digest('hex').slice(0, 12)}`;
  if ((await exec(engine, ['image', 'inspect', name])).code === 0) return { name, built: false };

  const step = progress(`Building the runtime image ${name} on ${base}`);
  // A context of exactly the hashed files: the SDK folder also holds tests and build leftovers.
  const context = await mkdtemp(path.join(tmpdir(), 'gantry-preview-image-'));
  try {
    for (const f of files) {
      await mkdir(path.dirname(path.join(context, f.rel)), { recursive: true });
      await writeFile(path.join(context, f.rel), f.content);
    }
    const r = await exec(engine, [
      'build',
      '--build-arg',
      `BASE_IMAGE=${base}`,
      '-t',
      name,
      '-f',
      path.join(context, 'Containerfile'),
      context,
    ]);
    if (r.code !== 0) {
      step.fail(`Building ${name} failed`);
      throw new CliError(
        `Building the runtime image on ${base} failed (exit ${r.code}); set GANTRY_PREVIEW_BASE_IMAGE to a Python image you have ({python} is replaced by ${pythonVersion}):\n${lastLines(r.stderr || r.stdout)}`,
      );
    }
  } finally {
    await rm(context, { recursive: true, force: true });
  }
  step.succeed(`Built the runtime image ${name}`);
  return { name, built: true };
}

// ---------------------------------------------------------------------------------------------
// The artifact, extracted once per sha256 into .gantry/preview/ (builds ignore .gantry/)

export async function extractArtifact(engine: Engine, projectDir: string, built: BuildResult): Promise<string> {
  const root = path.join(projectDir, '.gantry', 'preview');
  const dir = path.join(root, built.sha256);
  if (!existsSync(dir)) {
    await mkdir(root, { recursive: true });
    // Extracted beside it and renamed into place: a half-extracted tree never has the final name.
    const partial = await mkdtemp(path.join(root, `.${built.sha256.slice(0, 12)}-`));
    try {
      await extract({ file: built.path, cwd: partial });
      // mkdtemp made it 0700: a container whose user is not this one (rootful engines, images
      // with a USER) must still read it.
      await chmod(partial, 0o755);
      await rename(partial, dir);
    } catch (err) {
      await rm(partial, { recursive: true, force: true });
      if (!existsSync(dir)) throw new CliError(`Cannot extract ${built.path} into ${dir}: ${describeError(err)}.`);
    }
  }
  // Older builds' trees add up (deps/ can be large): remove those no container of any preview mounts.
  for (const entry of await readdir(root)) {
    if (entry === built.sha256) continue;
    if (entry.startsWith('.')) {
      // Another run's extraction may be under way; one a day old was left by a killed run.
      const age = Date.now() - (await stat(path.join(root, entry))).mtimeMs;
      if (age > 86_400_000) await rm(path.join(root, entry), { recursive: true, force: true });
      continue;
    }
    if (words(await check(engine, ['ps', '-a', '-q', '--filter', `label=${ARTIFACT_LABEL}=${entry}`])).length > 0)
      continue;
    await rm(path.join(root, entry), { recursive: true, force: true });
  }
  return dir;
}
