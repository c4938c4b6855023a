/**
 * Python base images made from what a host can reach without any image registry: `debootstrap
 * --variant=minbase` of the Debian release that ships the wanted Python (bookworm: 3.11, trixie:
 * 3.13) with only `python3` and `ca-certificates`, from the Debian mirror the host's apt already
 * uses, imported into its container runtime as `localhost/gantry-python:<version>`. Hosts build it
 * when the runtime images' default base cannot be pulled (activities/runtime-image.ts), and
 * `npm run host-images` builds it on this machine (infra/host-images.ts); the tests build theirs
 * the same way. Other Pythons (3.10, 3.12) come from no Debian release: the operator names a base
 * that has them (docs/apps.md, "Runtime images").
 *
 * One recipe, a bash script: run over SSH on a host, or with bash on this machine. It needs root
 * (debootstrap makes a root filesystem) and debootstrap; without them it says so and what to do.
 */
import { createHash } from 'node:crypto';
import { HOST_APT_SOURCES_COMMAND, mirrorFromHostSources } from './apt-sources.ts';
import { ensureImage, imagePresent, isHostLocalImage, type HostHandle } from './containers.ts';
import { shellJoin } from './shell-quote.ts';
import type { SshPool } from './ssh.ts';

export type DebianPython = '3.11' | '3.13';

/** The Debian release whose `python3` is each version. */
export const DEBIAN_PYTHON_SUITES: Readonly<Record<DebianPython, string>> = {
  '3.11': 'bookworm',
  '3.13': 'trixie',
};

export const isDebianPython = (version: string): version is DebianPython => version in DEBIAN_PYTHON_SUITES;

/** What goes in besides minbase: the interpreter, and CA certificates for the artifact's HTTPS URL. */
const PACKAGES = ['python3', 'ca-certificates'] as const;
/** Directories of the root filesystem that a runtime never reads (apt's caches and lists, docs for humans). */
const TRIM = ['var/cache/apt', 'var/lib/apt/lists', 'usr/share/man', 'usr/share/info', 'usr/share/locale', 'var/log'];
/** Bump when the script changes in a way the hashed inputs do not show. */
const RECIPE = 2;
/**
 * The environment variable that marks an image with its recipe's hash. An ENV, not a LABEL:
 * `docker import --change` takes ENV on every Docker, and `{{.Config.Env}}` reads back on both runtimes.
 */
const RECIPE_ENV = 'GANTRY_PYTHON_BASE_RECIPE';

/** Exit codes of the script that name a missing prerequisite (the message says which). */
const NEEDS_ROOT = 90;
const NEEDS_DEBOOTSTRAP = 91;

export function pythonBaseImageName(version: DebianPython, extraPackages: readonly string[] = []): string {
  return `localhost/gantry-python:${[version, ...extraPackages].join('-')}`;
}

/** `localhost/gantry-python:<version>` names: the version, or undefined for any other image. */
export function pythonBaseOf(image: string): DebianPython | undefined {
  const m = /^localhost\/gantry-python:(3\.\d+)$/.exec(image);
  return m && isDebianPython(m[1]!) ? m[1] : undefined;
}

export interface PythonBaseRecipe {
  name: string;
  /** Marks the image (RECIPE_ENV): an image of this name with another hash is built again. */
  hash: string;
  /** `bash -c script bash <args...>`: builds the image with `runtime` (podman or docker). */
  script: string;
  args: string[];
}

/** The build of `localhost/gantry-python:<version>[-extras]` from `mirror`, as a bash script and its arguments. */
export function pythonBaseRecipe(
  version: DebianPython,
  mirror: string,
  runtime: string,
  extraPackages: readonly string[] = [],
): PythonBaseRecipe {
  const name = pythonBaseImageName(version, extraPackages);
  const suite = DEBIAN_PYTHON_SUITES[version];
  const packages = [...PACKAGES, ...extraPackages];
  const hash = createHash('sha256')
    .update(JSON.stringify({ RECIPE, version, suite, packages, mirror, trim: TRIM }))
    .digest('hex')
    .slice(0, 32);
  const changes = [
    'CMD ["python3"]',
    'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
    // What python:*-slim sets too: UTF-8 for stdio and open() whatever the host's locale.
    'ENV LANG=C.UTF-8',
    `ENV ${RECIPE_ENV}=${hash}`,
  ];
  const script = [
    'set -euo pipefail',
    'name="$1"; suite="$2"; mirror="$3"; include="$4"; runtime="$5"; shift 5',
    `[ "$(id -u)" = 0 ] || { echo "building $name needs root: debootstrap makes a root filesystem" >&2; exit ${NEEDS_ROOT}; }`,
    `command -v debootstrap >/dev/null || { echo "building $name needs debootstrap on the host (apt-get install debootstrap)" >&2; exit ${NEEDS_DEBOOTSTRAP}; }`,
    'work=$(mktemp -d); trap \'rm -rf "$work"\' EXIT',
    // debootstrap keeps the real reason of a failure (a download, a dpkg step) in its own log.
    'if ! debootstrap --variant=minbase --include="$include" "$suite" "$work/rootfs" "$mirror" >"$work/out" 2>&1; then',
    '  echo "debootstrap $suite from $mirror failed:" >&2; tail -n 15 "$work/out" >&2',
    '  tail -n 15 "$work/rootfs/debootstrap/debootstrap.log" >&2 2>/dev/null || true; exit 92',
    'fi',
    // Files go, directories and apt's lock files stay (apt expects both).
    `for d in ${TRIM.join(' ')}; do [ -d "$work/rootfs/$d" ] && find "$work/rootfs/$d" ! -type d ! -name lock -delete; done`,
    'old=$("$runtime" image inspect --format "{{.Id}}" "$name" 2>/dev/null || true)',
    // tar streams into the import: no second copy of the root filesystem on disk.
    'tar --numeric-owner -C "$work/rootfs" -c . | "$runtime" import "$@" - "$name" >/dev/null',
    // The replaced image lost its name; it goes unless a container still uses it.
    'if [ -n "$old" ]; then "$runtime" rmi "$old" >/dev/null 2>&1 || true; fi',
  ].join('\n');
  return {
    name,
    hash,
    script,
    args: [name, suite, mirror, packages.join(','), runtime, ...changes.flatMap((c) => ['--change', c])],
  };
}

/** A shell command that prints the recipe hash an image was built with (empty when none or no image). */
export function recipeHashCommand(runtime: string, image: string): string {
  const format = `{{range .Config.Env}}{{println .}}{{end}}`;
  return `${shellJoin([runtime, 'image', 'inspect', '--format', format, '--', image])} 2>/dev/null | sed -n 's/^${RECIPE_ENV}=//p'`;
}

export class PythonBaseUnavailable extends Error {
  override readonly name = 'PythonBaseUnavailable';
}

/**
 * `localhost/gantry-python:<version>` on the host, built when missing or made by another recipe.
 * The mirror is GANTRY_DEBIAN_MIRROR's (`mirror`) or the host's own apt archive. Answers whether it built.
 */
export async function ensurePythonBaseOnHost(
  pool: SshPool,
  h: HostHandle,
  version: DebianPython,
  options: { mirror?: string; timeoutMs: number; signal?: AbortSignal },
): Promise<'built' | 'present'> {
  let mirror = options.mirror;
  if (!mirror) {
    const sources = await pool.exec(h.target, HOST_APT_SOURCES_COMMAND, { timeoutMs: 30_000 });
    mirror = mirrorFromHostSources(sources.stdout);
    if (!mirror)
      throw new PythonBaseUnavailable(
        `building ${pythonBaseImageName(version)} needs a Debian mirror, and the host's apt names none: set GANTRY_DEBIAN_MIRROR`,
      );
  }
  const recipe = pythonBaseRecipe(version, mirror, h.runtime);
  const have = await pool.exec(h.target, recipeHashCommand(h.runtime, recipe.name), { timeoutMs: 60_000 });
  if (have.stdout.trim() === recipe.hash) return 'present';
  // A host-wide lock: two workers starting at once build it once.
  const lock = `/tmp/gantry-python-base-${version}.lock`;
  const build = `exec 9>${lock}; flock 9; if [ "$(${recipeHashCommand(h.runtime, recipe.name)})" = ${recipe.hash} ]; then exit 0; fi; ${shellJoin(['bash', '-c', recipe.script, 'bash', ...recipe.args])}`;
  const r = await pool.exec(h.target, build, { timeoutMs: options.timeoutMs, signal: options.signal });
  if (r.code === 0) return 'built';
  const detail = (r.stderr.trim() || r.stdout.trim()).split('\n').slice(-20).join('\n').slice(-2000);
  throw new PythonBaseUnavailable(detail || `building ${recipe.name} failed (exit ${r.code ?? r.signal})`);
}

/**
 * The base a runtime image builds on, on this host: the configured one, present or pulled. When
 * that is the default (`python:3.X-slim` from Docker Hub: `debianFallback`) and the host cannot
 * pull it, a Python that Debian ships (3.11, 3.13) is built on the host itself from its own Debian
 * mirror, so a host without any image registry runs Gantry's runtimes. A base that cannot be had
 * fails with the sentence that says which, why, and what names another.
 */
export async function ensureRuntimeBase(
  pool: SshPool,
  h: HostHandle,
  o: {
    base: string;
    /** The setting that names this base, for the sentence. */
    baseSetting: string;
    python: string;
    /** The runtime image it is for, for the sentence. */
    image: string;
    debianFallback: boolean;
    debianMirror?: string | undefined;
    /** False: answer Debian's base name without building it (a check that must be quick). */
    buildDebian?: boolean;
    timeoutMs: number;
    signal?: AbortSignal | undefined;
  },
): Promise<string> {
  const { base, python } = o;
  const debian = pythonBaseOf(base) ?? (o.debianFallback && isDebianPython(python) ? python : undefined);
  const fallback = debian ? pythonBaseImageName(debian) : undefined;
  if (await imagePresent(pool, h, base)) return base;
  // A host that built Debian's base once (its pull failed then) goes on using it.
  if (fallback && fallback !== base && (await imagePresent(pool, h, fallback))) return fallback;
  let cannot = 'the host does not have it (localhost/ images are built or loaded on the host itself)';
  if (!isHostLocalImage(base)) {
    try {
      await ensureImage(pool, h, base, undefined, {
        timeoutMs: o.timeoutMs,
        ...(o.signal ? { signal: o.signal } : {}),
      });
      return base;
    } catch (err) {
      cannot = `the host does not have it and could not pull it: ${err instanceof Error ? err.message : String(err)}`;
    }
  }
  const what = `could not get the base image ${base} of the Python ${python} runtime ${o.image}: ${cannot}`;
  const how =
    `name a base the hosts can pull with ${o.baseSetting} ({python} is replaced by the version), or load one on each host` +
    ' (docs/apps.md, "Runtime images")';
  if (!debian)
    throw new PythonBaseUnavailable(
      `${what}. Debian ships no Python ${python} to build one from (it ships 3.11 and 3.13): ${how}`,
    );
  if (o.buildDebian === false) return pythonBaseImageName(debian);
  try {
    await ensurePythonBaseOnHost(pool, h, debian, {
      ...(o.debianMirror ? { mirror: o.debianMirror } : {}),
      timeoutMs: o.timeoutMs,
      ...(o.signal ? { signal: o.signal } : {}),
    });
    return pythonBaseImageName(debian);
  } catch (err) {
    throw new PythonBaseUnavailable(
      `${what}; nor build Debian's Python ${debian} on the host: ${err instanceof Error ? err.message : String(err)}. Fix that, or ${how}`,
    );
  }
}
