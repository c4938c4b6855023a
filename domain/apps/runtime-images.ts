/**
 * The runtime images deployed apps run on, one per Python version and kind of resource: CPU
 * resources get the base with the gantry package, GPU resources that and the packages GPU functions
 * may import without shipping them (torch and its kin: gigabytes with their CUDA libraries, too
 * large for an artifact). Hosts build them from sdk/python/Containerfile unless an operator names
 * images to pull (docs/apps.md, "Runtime images"). Endpoints of the hosted `flash` tool run the flash
 * runtime in place of flash's own images, built from sdk/python's Containerfile with MODULE=gantry.flash (docs/apps.md, "Flash workers").
 */
import type { AppSettings } from '../shared/index.ts';
import type { Manifest } from './manifest.ts';

/** What the GPU runtime adds by default: what the CLI leaves out of GPU-only artifacts (cli/src/artifact.ts). */
export const GPU_RUNTIME_PACKAGES = ['torch', 'torchvision', 'torchaudio', 'numpy', 'triton'] as const;

/**
 * What the flash runtime adds to its base: the hosted deploy tool's package at the version Gantry's
 * flash support is tested with, and the `runpod` worker SDK (with FastAPI and uvicorn) that its
 * queue handlers and load-balanced apps run on (sdk/python/gantry/flash.py).
 */
export const FLASH_RUNTIME_PACKAGES = ['runpod-flash==1.19.0', 'runpod==1.12.0'] as const;

/** The flash runtime's entry point: the runtime images' Containerfile runs this module (its MODULE build argument). */
export const FLASH_RUNTIME_MODULE = 'gantry.flash';

/** The base hosts build runtime images on unless the operator names one (`{python}` replaced). */
export const DEFAULT_RUNTIME_BASE_IMAGE = 'docker.io/library/python:{python}-slim';

/**
 * The example worker (sdk/python/gantry/example.py): `localhost/gantry-example-worker:py3.11`
 * (or another Python's), built by a host the first time an endpoint names it, on the CPU runtime's
 * base, and again when that recipe changes. An image anyone can run without a registry.
 */
const EXAMPLE_REPOSITORY = 'localhost/gantry-example-worker';
export const EXAMPLE_WORKER_MODULE = 'gantry.example';
export const exampleWorkerImage = (python = '3.11'): string => `${EXAMPLE_REPOSITORY}:py${python}`;

/** Images of these repositories are built on the host (hostctl buildImage) when missing, never pulled. */
const CPU_REPOSITORY = 'localhost/gantry-runtime';
const GPU_REPOSITORY = 'localhost/gantry-runtime-gpu';
const FLASH_REPOSITORY = 'localhost/gantry-flash-runtime';
const FLASH_GPU_REPOSITORY = 'localhost/gantry-flash-runtime-gpu';

/**
 * The images the hosted `flash` tool names for the endpoints it makes (`runpod/flash`,
 * `runpod/flash-cpu`, `runpod/flash-lb`, `runpod/flash-lb-cpu`, tagged `py3.<minor>-<tag>`), with
 * or without Docker Hub's registry name.
 */
const FLASH_IMAGE =
  /^(?:(?:docker\.io|registry-1\.docker\.io|index\.docker\.io)\/)?runpod\/flash(-lb)?(-cpu)?:py(3\.\d{1,2})-[A-Za-z0-9_.-]{1,100}$/;

/** One of flash's worker images: its Python version, and whether it is a GPU one; undefined for any other image. */
export function flashImage(image: string): { python: string; gpu: boolean; lb: boolean } | undefined {
  const m = FLASH_IMAGE.exec(image);
  if (!m) return undefined;
  return { python: m[3]!, gpu: m[2] === undefined, lb: m[1] !== undefined };
}

/** Gantry's flash runtime for a Python version: configured to pull, or built by hosts under a name with the recipe's digest. */
export function flashRuntimeImageOf(apps: AppSettings, pythonVersion: string, gpu: boolean): string {
  const f = apps.flashRuntime;
  const configured = gpu ? (f.gpuImage ?? f.image) : f.image;
  if (configured) return configured.replaceAll('{python}', pythonVersion);
  return gpu
    ? `${FLASH_GPU_REPOSITORY}:py${pythonVersion}-${f.gpuDigest}`
    : `${FLASH_REPOSITORY}:py${pythonVersion}-${f.digest}`;
}

/**
 * Gantry's flash runtime in place of one of flash's images (undefined for any other image): of the
 * image's kind, and of the build's Python version when known (the version its packages were
 * installed for; flash 1.19 names `py3.12` images even for a build made with `--python-version
 * 3.11`), else the tag's.
 */
export function flashRuntimeImageFor(
  apps: AppSettings,
  image: string,
  buildPython?: string | null,
): string | undefined {
  const flash = flashImage(image);
  return flash ? flashRuntimeImageOf(apps, buildPython ?? flash.python, flash.gpu) : undefined;
}

const REQUIREMENT = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}(==[A-Za-z0-9.+!_-]{1,50})?$/;

/** A package list setting: space or comma separated `name` or `name==version`. */
export function runtimePackages(variable: string, value: string): string[] {
  const list = value
    .split(/[\s,]+/)
    .map((p) => p.trim())
    .filter(Boolean);
  const bad = list.filter((p) => !REQUIREMENT.test(p));
  if (bad.length > 0) throw new Error(`${variable}: not a package name or name==version: ${bad.join(' ')}`);
  return list;
}

/** A requirement's package name, normalized as pip compares them (`Foo_Bar==1` -> `foo-bar`). */
const packageName = (requirement: string): string =>
  requirement
    .split('==')[0]!
    .toLowerCase()
    .replace(/[-_.]+/g, '-');

/** The runtime image of a resource: configured to pull, or built by hosts under a name with the recipe's digest. */
export function runtimeImageOf(apps: AppSettings, pythonVersion: string, gpu: boolean): string {
  const configured = gpu ? (apps.gpuRuntime.image ?? apps.runtimeImage) : apps.runtimeImage;
  if (configured) return configured.replaceAll('{python}', pythonVersion);
  return gpu
    ? `${GPU_REPOSITORY}:py${pythonVersion}-${apps.gpuRuntime.digest}`
    : `${CPU_REPOSITORY}:py${pythonVersion}-${apps.runtimeDigest}`;
}

/** An image hosts build: its Python version and kind (flash: the flash runtime; example: the example worker); undefined for any other image. */
export function builtRuntime(
  image: string,
): { python: string; gpu: boolean; flash: boolean; example: boolean } | undefined {
  const example = /^localhost\/gantry-example-worker:py(3\.\d{1,2})$/.exec(image);
  if (example) return { python: example[1]!, gpu: false, flash: false, example: true };
  const m = /^(localhost\/gantry-(?:flash-)?runtime(?:-gpu)?):py(3\.\d+)-[0-9a-f]+$/.exec(image);
  if (!m) return undefined;
  const repository = m[1]!;
  return {
    python: m[2]!,
    gpu: repository === GPU_REPOSITORY || repository === FLASH_GPU_REPOSITORY,
    flash: repository === FLASH_REPOSITORY || repository === FLASH_GPU_REPOSITORY,
    example: false,
  };
}

/**
 * The runtime image a worker runs for the image its release names: the same kind and Python, of
 * the recipe this platform has now. A release made before the recipe changed (a new base setting,
 * a new Gantry) names an image whose digest no longer matches; building that name from today's
 * recipe would make a name that says one recipe hold another, so the worker runs today's name.
 */
export function currentRuntimeImage(apps: AppSettings, image: string): string {
  const r = builtRuntime(image);
  if (!r || r.example) return image;
  return r.flash ? flashRuntimeImageOf(apps, r.python, r.gpu) : runtimeImageOf(apps, r.python, r.gpu);
}

/**
 * What hosts build a runtime image from: its base, the setting that names that base (infra/config.ts;
 * said when the base cannot be had), the packages added to it and its build context.
 */
export function runtimeRecipe(
  apps: AppSettings,
  python: string,
  gpu: boolean,
  flash = false,
): { base: string; baseSetting: string; packages: string[]; contextDir: string } {
  // GPU runtimes, flash's among them, build on the GPU base.
  const baseSetting = gpu
    ? 'GANTRY_RUNTIME_GPU_BASE_IMAGE'
    : flash
      ? 'GANTRY_FLASH_RUNTIME_BASE_IMAGE'
      : 'GANTRY_RUNTIME_BASE_IMAGE';
  if (flash) {
    const f = apps.flashRuntime;
    return {
      base: (gpu ? f.gpuBaseImage : f.baseImage).replaceAll('{python}', python),
      baseSetting,
      packages: gpu ? f.gpuPackages : f.packages,
      contextDir: f.contextDir,
    };
  }
  const contextDir = apps.runtimeContextDir;
  return gpu
    ? {
        base: apps.gpuRuntime.baseImage.replaceAll('{python}', python),
        baseSetting,
        packages: apps.gpuRuntime.packages,
        contextDir,
      }
    : { base: apps.runtimeBaseImage.replaceAll('{python}', python), baseSetting, packages: [], contextDir };
}

/**
 * What a host is asked of a runtime image's base (hostctl/python-base.ts ensureRuntimeBase): the
 * base and the setting that names it, the Python, and whether Debian's Python may stand in for it
 * (only for the default base: an operator's base is taken at its word).
 */
export function runtimeBaseRequest(
  apps: AppSettings,
  runtime: { python: string; gpu: boolean; flash: boolean },
  image: string,
): {
  base: string;
  baseSetting: string;
  python: string;
  image: string;
  debianFallback: boolean;
  debianMirror: string | undefined;
} {
  const { base, baseSetting } = runtimeRecipe(apps, runtime.python, runtime.gpu, runtime.flash);
  return {
    base,
    baseSetting,
    python: runtime.python,
    image,
    debianFallback: base === DEFAULT_RUNTIME_BASE_IMAGE.replaceAll('{python}', runtime.python),
    debianMirror: apps.debianMirror,
  };
}

/**
 * Packages an artifact left out as being in the runtime image that a resource imports while its
 * runtime image does not have them: its worker could not import them. Each problem names the
 * resource, the packages and the image's recipe. A resource without `preinstalledImports` (an older
 * CLI's build) is not judged: what it imports is not known.
 */
export function runtimePackageProblems(m: Manifest, apps: AppSettings): string[] {
  const excluded = new Set((m.excluded ?? []).map(packageName));
  const relied = new Set<string>(GPU_RUNTIME_PACKAGES.filter((p) => excluded.has(p)));
  if (relied.size === 0) return [];
  const gpuHas = new Set(apps.gpuRuntime.packages.map(packageName));
  const problems: string[] = [];
  for (const r of m.resources) {
    const gpu = 'gpu' in r.compute;
    // An operator's image to pull is taken at its word.
    if (gpu ? (apps.gpuRuntime.image ?? apps.runtimeImage) : apps.runtimeImage) continue;
    const missing = (r.preinstalledImports ?? [])
      .map(packageName)
      .filter((p) => relied.has(p) && !(gpu && gpuHas.has(p)));
    if (missing.length === 0) continue;
    const { base, packages } = runtimeRecipe(apps, m.pythonVersion, gpu);
    const image = packages.length > 0 ? `${base} with ${packages.join(', ')}` : base;
    problems.push(
      `${r.name} imports ${missing.join(', ')}, left out of the artifact as preinstalled, but its ${gpu ? 'GPU' : 'CPU'} ` +
        `runtime image (${image}) does not have ${missing.length === 1 ? 'it' : 'them'}` +
        (gpu
          ? `: ask the operator to add ${missing.length === 1 ? 'it' : 'them'} to GANTRY_RUNTIME_GPU_PACKAGES, or to name a GPU base image that has ${missing.length === 1 ? 'it' : 'them'}`
          : ': build it again with this version of the gantry CLI, which ships such packages unless every resource is a GPU one'),
    );
  }
  return problems;
}
