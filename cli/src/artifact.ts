import { createHash } from 'node:crypto';
import { createReadStream, existsSync, rmSync } from 'node:fs';
import {
  copyFile,
  cp,
  lstat,
  mkdir,
  mkdtemp,
  readdir,
  readFile,
  rename,
  rm,
  rmdir,
  stat,
  writeFile,
} from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { create as createTar } from 'tar';
import { CliError } from './errors.ts';
import { formatBytes, progress, spinnerEnabled } from './output.ts';
import { isPythonVersion, PYTHON_VERSIONS, readProjectConfig, type PythonVersion } from './project.ts';
import { interpreterVersion, lastMeaningfulLine, projectPython, runProgram, sdkRoot } from './python.ts';
import { checkRuntimeImports, listedPackages, PREINSTALLED, preinstalledLeftOut } from './runtime-packages.ts';
import { projectFiles, scanProject, type Resource } from './scan.ts';

/** Whole artifact, uncompressed (docs/apps.md: 1.5 GB). */
export const MAX_ARTIFACT_BYTES = 1_500_000_000;

/** Only so tests can reach the limit without building gigabytes. */
function artifactLimit(): number {
  const override = process.env.GANTRY_MAX_ARTIFACT_BYTES;
  if (override === undefined || override === '') return MAX_ARTIFACT_BYTES;
  const n = Number(override);
  if (!Number.isInteger(n) || n <= 0)
    throw new CliError(`GANTRY_MAX_ARTIFACT_BYTES must be a positive whole number of bytes, not '${override}'.`);
  return n;
}

/** Wheels the runtime can load: CPython on x86-64 Linux with glibc (docs/apps.md). */
const PIP_PLATFORMS = ['manylinux2014_x86_64', 'manylinux_2_28_x86_64'];

export interface Manifest {
  format: 1;
  pythonVersion: PythonVersion;
  fingerprint: string;
  resources: Resource[];
  excluded: string[];
  createdAt: string;
}

export interface BuildOptions {
  projectDir: string;
  output: string;
  /** false: --no-deps (pip installs only what is listed, not what that needs). */
  deps: boolean;
  exclude: string[];
  pythonVersion?: string;
  /**
   * `gantry dev`: a folder that keeps the installed deps/ between builds, so a build whose
   * dependencies did not change (only a resource's configuration did) skips pip. `reuse`: copy it
   * in instead of installing; otherwise it is refilled from this build's install.
   */
  depsCache?: { dir: string; reuse: boolean };
}

export interface BuildResult {
  path: string;
  size: number;
  sha256: string;
  /** Bytes of the files inside, the figure the 1.5 GB limit applies to. */
  contentBytes: number;
  manifest: Manifest;
}

/** PEP 503 names: `Foo_Bar.baz` and `foo-bar-baz` are one package. */
export const normalisePackageName = (name: string): string =>
  name
    .trim()
    .toLowerCase()
    .replace(/[-_.]+/g, '-');

/** The distribution a requirement line names (`six==1.17.0`, `pkg[extra] @ url`), if it names one. */
export function requirementName(line: string): string | undefined {
  const m = /^\s*([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)/.exec(line);
  return m ? normalisePackageName(m[1]!) : undefined;
}

const sortBytes = (a: string, b: string): number => Buffer.compare(Buffer.from(a), Buffer.from(b));

export async function buildArtifact(opts: BuildOptions): Promise<BuildResult> {
  const projectDir = path.resolve(opts.projectDir);
  const output = path.resolve(opts.output);
  const python = projectPython(projectDir);

  let step = progress('Scanning the project for resources');
  const { resources, imports } = await scanProject(python, projectDir);
  checkRuntimeImports(resources, imports, await listedPackages(projectDir, resources, requirementName));
  // The platform checks these against the runtime images (domain/apps/runtime-images.ts).
  for (const r of resources) r.preinstalledImports = (imports[r.file] ?? []).filter((m) => PREINSTALLED.includes(m));
  const pythonVersion = await choosePythonVersion(opts.pythonVersion, resources, projectDir, python);
  step.succeed(
    `Found ${resources.length} resource${resources.length === 1 ? '' : 's'} (${resources.map((r) => r.name).join(', ')}); Python ${pythonVersion}`,
  );

  // work/artifact/ becomes the tarball; work/ also holds pip's rewritten requirements file.
  const work = await mkdtemp(path.join(tmpdir(), 'gantry-build-'));
  const staging = path.join(work, 'artifact');
  const partial = `${output}.${process.pid}.partial`;
  // Ctrl+C during pip would otherwise leave the whole staging tree in the temp folder.
  const interrupted = (signal: NodeJS.Signals): void => {
    try {
      rmSync(partial, { force: true });
      rmSync(work, { recursive: true, force: true, maxRetries: 3 });
    } finally {
      process.exit(signal === 'SIGINT' ? 130 : 143);
    }
  };
  process.once('SIGINT', interrupted);
  process.once('SIGTERM', interrupted);
  try {
    step = progress('Copying the source files');
    const src = await copySources(python, projectDir, output, path.join(staging, 'src'));
    step.succeed(`Copied ${src.files.length} source file${src.files.length === 1 ? '' : 's'}`);

    const excluded = [
      ...new Set([...preinstalledLeftOut(resources), ...opts.exclude.map(normalisePackageName).filter(Boolean)]),
    ];
    const deps = path.join(staging, 'deps');
    const cache = opts.depsCache;
    if (cache?.reuse && existsSync(cache.dir)) {
      await cp(cache.dir, deps, { recursive: true, verbatimSymlinks: true });
    } else {
      await installDependencies({
        projectDir,
        python,
        pythonVersion,
        resources,
        excluded,
        target: deps,
        listFile: path.join(work, 'requirements.txt'),
        withDeps: opts.deps,
      });
      await removeDistributions(deps, new Set(excluded));
      if (cache) {
        await rm(cache.dir, { recursive: true, force: true });
        await cp(deps, cache.dir, { recursive: true, verbatimSymlinks: true });
      }
    }
    await copyGantryPackage(deps);

    const manifest: Manifest = {
      format: 1,
      pythonVersion,
      fingerprint: src.fingerprint,
      resources,
      excluded,
      createdAt: src.date.toISOString(),
    };
    await writeFile(path.join(staging, 'manifest.json'), `${JSON.stringify(manifest, null, 2)}\n`);

    const entries = await walk(staging);
    const contentBytes = entries.reduce((sum, e) => sum + (e.isDir ? 0 : e.size), 0);
    const limit = artifactLimit();
    if (contentBytes > limit) throw new CliError(await overLimitMessage(contentBytes, limit, deps, excluded));

    step = progress('Writing the artifact');
    await mkdir(path.dirname(output), { recursive: true });
    try {
      // Sorted entries, one fixed mtime, no owner or device fields: the same input gives the same bytes.
      await createTar(
        { cwd: staging, file: partial, gzip: true, portable: true, mtime: src.date, noDirRecurse: true },
        entries.map((e) => e.rel),
      );
      await rename(partial, output);
    } finally {
      await rm(partial, { force: true });
    }
    const size = (await stat(output)).size;
    const sha256 = await sha256File(output);
    step.succeed(`Wrote ${path.relative(process.cwd(), output) || output} (${formatBytes(size)})`);
    return { path: output, size, sha256, contentBytes, manifest };
  } finally {
    process.off('SIGINT', interrupted);
    process.off('SIGTERM', interrupted);
    await rm(work, { recursive: true, force: true });
  }
}

/**
 * --python-version, else the one version the resources and gantry.toml agree on, else the local
 * interpreter's: the flag overrides declarations and detection (docs/apps.md "Build").
 */
async function choosePythonVersion(
  flag: string | undefined,
  resources: Resource[],
  projectDir: string,
  python: string,
): Promise<PythonVersion> {
  if (flag !== undefined) {
    if (!isPythonVersion(flag))
      throw new CliError(`--python-version must be one of ${PYTHON_VERSIONS.join(', ')}, not '${flag}'.`);
    return flag;
  }
  const declared = new Map<string, string[]>();
  const configured = readProjectConfig(projectDir).pythonVersion;
  if (configured) declared.set(configured, ['gantry.toml']);
  for (const r of resources) {
    if (!r.pythonVersion) continue;
    declared.set(r.pythonVersion, [...(declared.get(r.pythonVersion) ?? []), r.name]);
  }
  if (declared.size > 1) {
    const which = [...declared].map(([v, who]) => `${v} (${who.join(', ')})`).join(', ');
    throw new CliError(
      `The project asks for different Python versions: ${which}; make them agree or pass --python-version.`,
    );
  }
  const [only] = declared.keys();
  if (only !== undefined) {
    if (!isPythonVersion(only))
      throw new CliError(`Python ${only} is not offered; use one of ${PYTHON_VERSIONS.join(', ')}.`);
    return only;
  }
  const local = await interpreterVersion(python);
  if (!isPythonVersion(local)) {
    throw new CliError(
      `The local Python (${python}) is ${local}, which the runtime does not offer; pass --python-version (${PYTHON_VERSIONS.join(', ')}) or set python_version in gantry.toml.`,
    );
  }
  return local;
}

/**
 * Copies what the ignore rules let through into src/ and fingerprints it: sha256 over the sorted
 * (path, NUL, content, NUL). `.env` is left out here too, whatever the ignore file says: its values
 * are for the CLI only. So is the artifact being written, when it is inside the project.
 */
async function copySources(
  python: string,
  projectDir: string,
  output: string,
  dest: string,
): Promise<{ files: string[]; fingerprint: string; date: Date }> {
  const outputRel = path.relative(projectDir, output).split(path.sep).join('/');
  const files = (await projectFiles(python, projectDir))
    .filter((rel) => path.posix.basename(rel) !== '.env' && rel !== outputRel)
    .sort(sortBytes);
  const hash = createHash('sha256');
  let newest = 0;
  for (const rel of files) {
    const from = path.join(projectDir, ...rel.split('/'));
    const to = path.join(dest, ...rel.split('/'));
    await mkdir(path.dirname(to), { recursive: true });
    await copyFile(from, to);
    newest = Math.max(newest, (await stat(from)).mtimeMs);
    hash.update(rel).update('\0');
    for await (const chunk of createReadStream(to)) hash.update(chunk as Buffer);
    hash.update('\0');
  }
  await mkdir(dest, { recursive: true });
  return { files, fingerprint: hash.digest('hex'), date: buildDate(newest) };
}

/**
 * The artifact's one timestamp: SOURCE_DATE_EPOCH when set (the reproducible-builds convention),
 * else the newest source file's modification time. Never "now", or two builds of the same project
 * would differ in their bytes.
 */
function buildDate(newestMtimeMs: number): Date {
  const epoch = process.env.SOURCE_DATE_EPOCH;
  if (epoch && /^\d+$/.test(epoch)) return new Date(Number(epoch) * 1000);
  return new Date(Math.floor(newestMtimeMs / 1000) * 1000);
}

interface InstallInput {
  projectDir: string;
  python: string;
  pythonVersion: PythonVersion;
  resources: Resource[];
  excluded: string[];
  target: string;
  listFile: string;
  withDeps: boolean;
}

/**
 * pip, for the target platform rather than this machine: binary wheels only, for CPython X on
 * manylinux x86-64. The requirements file is rewritten first: the `gantry-sdk` line is for local
 * use (the package is copied in from the CLI instead) and excluded packages are not downloaded.
 */
async function installDependencies(input: InstallInput): Promise<void> {
  const excluded = new Set(input.excluded);
  const keep = (name: string | undefined): boolean =>
    name === undefined || (name !== 'gantry-sdk' && !excluded.has(name));

  const requirementsFile = path.join(input.projectDir, 'requirements.txt');
  const lines = existsSync(requirementsFile)
    ? rewriteRequirements(await readFile(requirementsFile, 'utf8'), input.projectDir, keep)
    : [];
  const fromResources = [...new Set(input.resources.flatMap((r) => r.dependencies ?? []))].filter((d) =>
    keep(requirementName(d)),
  );
  await mkdir(input.target, { recursive: true });
  if (!lines.some((l) => l.trim() && !l.trim().startsWith('#')) && fromResources.length === 0) return;

  const listFile = input.listFile;
  await writeFile(listFile, `${[...lines, ...fromResources].join('\n')}\n`);
  const args = [
    '-m',
    'pip',
    'install',
    '--target',
    input.target,
    ...PIP_PLATFORMS.flatMap((p) => ['--platform', p]),
    '--only-binary=:all:',
    '--python-version',
    input.pythonVersion,
    '--implementation',
    'cp',
    // .pyc files carry timestamps (and the runtime compiles what it imports anyway).
    '--no-compile',
    '--disable-pip-version-check',
    '--no-input',
    '--progress-bar',
    'off',
    '--no-warn-script-location',
    ...(input.withDeps ? [] : ['--no-deps']),
    '-r',
    listFile,
  ];
  const step = progress(`Installing dependencies for Python ${input.pythonVersion} (pip)`);
  const r = await runProgram(input.python, args, {
    cwd: input.projectDir,
    // As variables, not flags: a pip too old to know one ignores it instead of failing.
    env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1', PIP_REQUIRE_VIRTUALENV: '0', PIP_ROOT_USER_ACTION: 'ignore' },
    onLine: spinnerEnabled() ? (line) => step.update(`Installing dependencies: ${line.slice(0, 70)}`) : undefined,
  });
  if (r.code !== 0) {
    step.fail();
    throw new CliError(
      `pip could not install the dependencies for Python ${input.pythonVersion} (binary wheels for manylinux x86-64 only): ${lastMeaningfulLine(r.stderr || r.stdout)}`,
    );
  }
  step.succeed('Installed the dependencies');
}

/**
 * requirements.txt without the lines `keep` refuses, its continuation lines joined and its
 * relative `-r`/`-c` paths made absolute (the rewritten file lives elsewhere).
 */
export function rewriteRequirements(
  text: string,
  projectDir: string,
  keep: (name: string | undefined) => boolean,
): string[] {
  const joined = text.replace(/\\\r?\n/g, ' ');
  const out: string[] = [];
  for (const raw of joined.split(/\r?\n/)) {
    const line = raw.trim();
    if (!line || line.startsWith('#')) continue;
    const include = /^(-r|-c|--requirement|--constraint)(?:\s+|=)(\S+)(.*)$/.exec(line);
    if (include) {
      const target = include[2]!;
      out.push(
        `${include[1]} ${path.isAbsolute(target) || /^[a-z]+:\/\//i.test(target) ? target : path.resolve(projectDir, target)}${include[3]}`,
      );
      continue;
    }
    if (line.startsWith('-')) {
      out.push(line);
      continue;
    }
    if (keep(requirementName(line))) out.push(line);
  }
  return out;
}

interface Distribution {
  name: string;
  distInfo: string;
  /** Absolute paths of its files (from RECORD), inside deps/. */
  files: string[];
}

/** The first field of a RECORD line (CSV: quoted when it holds a comma). */
function recordPath(line: string): string | undefined {
  if (!line.trim()) return undefined;
  if (!line.startsWith('"')) return line.split(',')[0];
  let out = '';
  for (let i = 1; i < line.length; i++) {
    const c = line[i]!;
    if (c === '"') {
      if (line[i + 1] === '"') {
        out += '"';
        i++;
      } else return out;
    } else out += c;
  }
  return out;
}

async function distributions(deps: string): Promise<Distribution[]> {
  const found: Distribution[] = [];
  const names = existsSync(deps) ? await readdir(deps) : [];
  for (const entry of names.filter((n) => n.endsWith('.dist-info')).sort(sortBytes)) {
    const distInfo = path.join(deps, entry);
    let name = entry.slice(0, -'.dist-info'.length).split('-')[0]!;
    try {
      const metadata = await readFile(path.join(distInfo, 'METADATA'), 'utf8');
      name = /^Name:\s*(.+)$/m.exec(metadata)?.[1]?.trim() ?? name;
    } catch {
      // No METADATA: the folder name has the name.
    }
    const files: string[] = [];
    try {
      const record = await readFile(path.join(distInfo, 'RECORD'), 'utf8');
      for (const line of record.split(/\r?\n/)) {
        const rel = recordPath(line);
        if (!rel) continue;
        const abs = path.resolve(deps, rel);
        // Script entries point outside (../../bin); only what lies in deps/ is ours to count or delete.
        if (abs.startsWith(deps + path.sep)) files.push(abs);
      }
    } catch {
      // No RECORD: only the folders named after the package can be found.
    }
    found.push({ name: normalisePackageName(name), distInfo, files });
  }
  return found;
}

/** Deletes excluded packages from deps/: the files their RECORD lists, folders left empty, their dist-info, folders named after them. */
async function removeDistributions(deps: string, excluded: Set<string>): Promise<void> {
  const dists = await distributions(deps);
  for (const d of dists.filter((x) => excluded.has(x.name))) {
    const dirs = new Set<string>();
    for (const f of d.files) {
      await rm(f, { force: true, recursive: true });
      for (let dir = path.dirname(f); dir.startsWith(deps + path.sep); dir = path.dirname(dir)) dirs.add(dir);
    }
    // Deepest first, so a folder is tried after everything in it.
    for (const dir of [...dirs].sort((a, b) => b.length - a.length)) await rmdir(dir).catch(() => undefined);
    await rm(d.distInfo, { recursive: true, force: true });
  }
  for (const name of excluded) {
    const module = name.replace(/-/g, '_');
    for (const dir of new Set([name, module, `${module}.libs`]))
      await rm(path.join(deps, dir), { recursive: true, force: true });
  }
}

/** The runtime imports `gantry` from deps/: the CLI's own copy, so both sides speak the same version. */
async function copyGantryPackage(deps: string): Promise<void> {
  const target = path.join(deps, 'gantry');
  await rm(target, { recursive: true, force: true });
  await cp(path.join(sdkRoot(), 'gantry'), target, {
    recursive: true,
    filter: (from) => !from.split(path.sep).includes('__pycache__') && !from.endsWith('.pyc'),
  });
}

interface Entry {
  rel: string;
  abs: string;
  isDir: boolean;
  size: number;
}

/** Every folder and file under root, '/'-separated, in byte order (a folder before its contents). */
async function walk(root: string): Promise<Entry[]> {
  const out: Entry[] = [];
  const visit = async (dir: string, prefix: string): Promise<void> => {
    for (const d of await readdir(dir, { withFileTypes: true })) {
      const abs = path.join(dir, d.name);
      const rel = prefix ? `${prefix}/${d.name}` : d.name;
      const st = await lstat(abs);
      out.push({ rel, abs, isDir: st.isDirectory(), size: st.isDirectory() ? 0 : st.size });
      if (st.isDirectory()) await visit(abs, rel);
    }
  };
  await visit(root, '');
  return out.sort((a, b) => sortBytes(a.rel, b.rel));
}

/** Sizes of what is in deps/: per distribution, and per top-level entry for files no RECORD claims. */
async function packageSizes(deps: string): Promise<Array<{ name: string; bytes: number }>> {
  const sizes = new Map<string, number>();
  const owned = new Set<string>();
  for (const d of await distributions(deps)) {
    let bytes = 0;
    for (const f of [...d.files, ...(await walk(d.distInfo)).map((e) => e.abs)]) {
      if (owned.has(f)) continue;
      owned.add(f);
      bytes += await lstat(f).then(
        (s) => (s.isDirectory() ? 0 : s.size),
        () => 0,
      );
    }
    sizes.set(d.name, (sizes.get(d.name) ?? 0) + bytes);
  }
  for (const e of existsSync(deps) ? await walk(deps) : []) {
    if (e.isDir || owned.has(e.abs)) continue;
    const top = e.rel.split('/')[0]!;
    sizes.set(top, (sizes.get(top) ?? 0) + e.size);
  }
  return [...sizes].map(([name, bytes]) => ({ name, bytes })).sort((a, b) => b.bytes - a.bytes);
}

async function overLimitMessage(total: number, limit: number, deps: string, excluded: string[]): Promise<string> {
  const largest = (await packageSizes(deps)).slice(0, 5);
  const listed = largest.map((p) => `${p.name} (${formatBytes(p.bytes)})`).join(', ');
  return (
    `The artifact would hold ${formatBytes(total)}, over the ${formatBytes(limit)} limit; the largest packages in deps/ are ${listed || 'none'}` +
    `: leave out the ones the runtime does not need with --exclude NAME,NAME (already excluded: ${excluded.join(', ')}).`
  );
}

async function sha256File(file: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}
