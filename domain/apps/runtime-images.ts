/**
 * The runtime images deployed apps run on, one per Python version and kind of resource: CPU
 * resources get the base with the gantry package, GPU resources that and the packages GPU functions
 * may import without shipping them (torch and its kin: gigabytes with their CUDA libraries, too
 * large for an artifact). Hosts build them from sdk/python/Containerfile unless an operator names
 * images to pull (docs/apps.md, "Runtime images").
 */
import type { AppSettings } from '../shared/index.ts';
import type { Manifest } from './manifest.ts';

/** What the GPU runtime adds by default: what the CLI leaves out of GPU-only artifacts (cli/src/artifact.ts). */
export const GPU_RUNTIME_PACKAGES = ['torch', 'torchvision', 'torchaudio', 'numpy', 'triton'] as const;

/** Images of these repositories are built on the host (hostctl buildImage) when missing, never pulled. */
const CPU_REPOSITORY = 'localhost/gantry-runtime';
const GPU_REPOSITORY = 'localhost/gantry-runtime-gpu';

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

/** A runtime image hosts build: its Python version and kind; undefined for any other image. */
export function builtRuntime(image: string): { python: string; gpu: boolean } | undefined {
  const m = /^(localhost\/gantry-runtime(?:-gpu)?):py(3\.\d+)-[0-9a-f]+$/.exec(image);
  if (!m) return undefined;
  return { python: m[2]!, gpu: m[1] === GPU_REPOSITORY };
}

/** What hosts build a runtime image from: its base and the packages added to it. */
export function runtimeRecipe(apps: AppSettings, python: string, gpu: boolean): { base: string; packages: string[] } {
  return gpu
    ? { base: apps.gpuRuntime.baseImage.replaceAll('{python}', python), packages: apps.gpuRuntime.packages }
    : { base: apps.runtimeBaseImage.replaceAll('{python}', python), packages: [] };
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
