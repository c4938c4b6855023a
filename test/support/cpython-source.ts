/**
 * CPython built from source for a Python base image whose version no Debian release ships (3.12:
 * bookworm has 3.11, trixie 3.13), on a machine whose container builds reach no registry.
 *
 * The source is the release tag of github.com/python/cpython as the Go module proxy serves it
 * (`@v/v3.12.14+incompatible.zip`: the tagged tree, without file modes), pinned by its sha256 and
 * cached under `~/.cache/gantry/cpython`. It is built on this machine, which must be the Debian
 * release the image is made of (bookworm): the interpreter and its extension modules link against
 * the same libraries the image's packages then carry. About two minutes on two cores.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, homedir } from 'node:os';
import path from 'node:path';
import { ensureHostPackages } from './ssh-test-host.ts';
import { runForOutput } from './run-output.ts';

export interface CpythonSource {
  /** The release tag. */
  tag: string;
  /** sha256 of the Go module proxy's zip of that tag. */
  sha256: string;
}

export const CPYTHON_SOURCES = {
  '3.12': { tag: 'v3.12.14', sha256: '1eb4c63c935290583758ea4a4d46e07bba6f192a8569f34854149b5c9da68b9d' },
} as const satisfies Record<string, CpythonSource>;
export type SourceBuiltPython = keyof typeof CPYTHON_SOURCES;

/** The Debian release the build links against: the one of this machine and of the image. */
export const CPYTHON_BUILD_SUITE = 'bookworm';

/** Libraries the interpreter's extension modules load (ssl, ctypes, sqlite3, readline, curses), in bookworm. */
export const CPYTHON_RUNTIME_PACKAGES = [
  'ca-certificates',
  'libssl3',
  'libffi8',
  'libsqlite3-0',
  'libreadline8',
  'libncursesw6',
] as const;

/** What the build needs on this machine: a compiler and the headers of the libraries above. */
const BUILD_PACKAGES = [
  'gcc',
  'make',
  'binutils',
  'libssl-dev',
  'libffi-dev',
  'zlib1g-dev',
  'libbz2-dev',
  'liblzma-dev',
  'libsqlite3-dev',
  'uuid-dev',
  'libreadline-dev',
  'libncurses-dev',
];

/**
 * Parts of the install a runtime never uses (the test suite, IDLE, Tk, the static library), and
 * modules left out: Tk needs X11 libraries, nis a deprecated RPC stack.
 */
const TRIM = ['lib/python{v}/test', 'lib/python{v}/idlelib', 'lib/python{v}/tkinter', 'lib/python{v}/turtledemo'];
const CONFIGURE_SKIP = ['py_cv_module__tkinter=n/a', 'py_cv_module_nis=n/a'];

async function must(what: string, cmd: string, args: readonly string[], cwd?: string): Promise<void> {
  const r = await runForOutput(cmd, args, { cwd, keepChars: 20_000 });
  if (r.status !== 0)
    throw new Error(`${what} failed (exit ${r.status}):\n${r.output.trim().split('\n').slice(-25).join('\n')}`);
}

/** The first proxy of GOPROXY (the Go tool's setting, so a mirror set for Go serves this too). */
function goProxy(): string {
  const first = (process.env.GOPROXY ?? '')
    .split(/[,|]/)
    .map((p) => p.trim())
    .find((p) => p && p !== 'direct' && p !== 'off');
  return (first ?? 'https://proxy.golang.org').replace(/\/+$/, '');
}

/** The source zip, downloaded once per machine and checked against its pinned sha256. */
async function sourceZip(source: CpythonSource): Promise<string> {
  const dir = path.join(process.env.XDG_CACHE_HOME || path.join(homedir(), '.cache'), 'gantry', 'cpython');
  const file = path.join(dir, `cpython-${source.tag}.zip`);
  const sha = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');
  if (existsSync(file) && sha(readFileSync(file)) === source.sha256) return file;
  const url = `${goProxy()}/github.com/python/cpython/@v/${source.tag}+incompatible.zip`;
  const res = await fetch(url, { signal: AbortSignal.timeout(300_000) });
  if (!res.ok) throw new Error(`CPython source ${url}: HTTP ${res.status}`);
  const bytes = Buffer.from(await res.arrayBuffer());
  if (sha(bytes) !== source.sha256)
    throw new Error(`CPython source ${url}: sha256 ${sha(bytes)}, expected ${source.sha256}`);
  mkdirSync(dir, { recursive: true });
  writeFileSync(`${file}.part`, bytes);
  renameSync(`${file}.part`, file);
  return file;
}

function hostSuite(): string | undefined {
  try {
    return /^VERSION_CODENAME=(.*)$/m.exec(readFileSync('/etc/os-release', 'utf8'))?.[1]?.trim();
  } catch {
    return undefined;
  }
}

/**
 * Builds CPython `version` with prefix /usr/local and installs it under root (a bookworm root
 * filesystem with CPYTHON_RUNTIME_PACKAGES). work is a scratch directory the caller removes.
 */
export async function installCpythonFromSource(
  version: SourceBuiltPython,
  root: string,
  work: string,
  log: (msg: string) => void,
): Promise<void> {
  const suite = hostSuite();
  if (suite !== CPYTHON_BUILD_SUITE)
    throw new Error(
      `CPython ${version} is built on this machine for a ${CPYTHON_BUILD_SUITE} image, and this machine is ${suite ?? 'not Debian'}: build the base on Debian ${CPYTHON_BUILD_SUITE}, or load a Python ${version} image under its name`,
    );
  ensureHostPackages(BUILD_PACKAGES, log);
  const source = CPYTHON_SOURCES[version];
  const zip = await sourceZip(source);
  const src = path.join(work, 'src');
  await must('unpacking the CPython source', 'python3', ['-m', 'zipfile', '-e', zip, src]);
  const tree = path.join(src, 'github.com', 'python', `cpython@${source.tag}+incompatible`);
  const build = path.join(work, 'build');
  mkdirSync(build);
  // The zip keeps no file modes: configure and the scripts it runs are started through sh.
  await must(
    'CPython configure',
    'sh',
    [path.join(tree, 'configure'), '--prefix=/usr/local', '--with-ensurepip=no', ...CONFIGURE_SKIP],
    build,
  );
  await must('CPython make', 'make', [`-j${availableParallelism()}`], build);
  await must('CPython make install', 'make', ['install', `DESTDIR=${root}`], build);
  const prefix = path.join(root, 'usr/local');
  for (const t of TRIM) rmSync(path.join(prefix, t.replace('{v}', version)), { recursive: true, force: true });
  rmSync(path.join(prefix, `lib/libpython${version}.a`), { force: true });
  await must('trimming the install', 'sh', [
    '-c',
    'rm -f "$1"/lib/python*/config-*/libpython*.a; strip --strip-debug "$1/bin/python$2" "$1"/lib/python*/lib-dynload/*.so',
    'sh',
    prefix,
    version,
  ]);
}
