/** The runtime images' names and the check of what an artifact left out against what they hold. */
import { describe, expect, it } from 'vitest';
import {
  builtRuntime,
  currentRuntimeImage,
  exampleWorkerImage,
  flashImage,
  FLASH_RUNTIME_PACKAGES,
  GPU_RUNTIME_PACKAGES,
  runtimeRecipe,
  flashRuntimeImageFor,
  ManifestSchema,
  runtimeImageOf,
  runtimePackageProblems,
  runtimePackages,
  type Manifest,
} from '../../domain/apps/index.ts';
import { validate, type AppSettings } from '../../domain/shared/index.ts';

const apps = (over: Partial<AppSettings> = {}, gpu: Partial<AppSettings['gpuRuntime']> = {}): AppSettings => ({
  runtimeImage: undefined,
  runtimeBaseImage: 'docker.io/library/python:{python}-slim',
  runtimeDigest: 'aaaaaaaaaaaa',
  runtimeContextDir: '/x',
  debianMirror: undefined,
  artifactCacheDir: '/y',
  flashRuntime: {
    image: undefined,
    gpuImage: undefined,
    baseImage: 'docker.io/library/python:{python}-slim',
    gpuBaseImage: 'docker.io/library/python:{python}-slim',
    packages: [...FLASH_RUNTIME_PACKAGES],
    gpuPackages: [...GPU_RUNTIME_PACKAGES, ...FLASH_RUNTIME_PACKAGES],
    digest: 'cccccccccccc',
    gpuDigest: 'dddddddddddd',
    contextDir: '/f',
  },
  ...over,
  gpuRuntime: {
    image: undefined,
    baseImage: 'docker.io/library/python:{python}-slim',
    packages: [...GPU_RUNTIME_PACKAGES],
    digest: 'bbbbbbbbbbbb',
    ...gpu,
  },
});

const resource = (name: string, gpu: boolean, preinstalledImports?: string[]) =>
  ({
    name,
    kind: 'queue',
    file: `${name}.py`,
    function: 'f',
    summary: null,
    compute: gpu ? { gpu: { pools: ['ADA_24'], count: 1 } } : { cpu: 'cpu3c-2-4' },
    workers: { min: 0, max: 1 },
    idleTimeout: 5,
    scaler: { type: 'QUEUE_DELAY', value: 4 },
    timeout: 600,
    env: {},
    dependencies: [],
    ...(preinstalledImports ? { preinstalledImports } : {}),
  }) as Manifest['resources'][number];

const manifest = (resources: Manifest['resources'], excluded: string[]): Manifest => ({
  format: 1,
  pythonVersion: '3.11',
  fingerprint: '0'.repeat(64),
  resources,
  excluded,
});

describe('runtime images', () => {
  it('names a CPU and a GPU image per Python version, and reads them back', () => {
    expect(runtimeImageOf(apps(), '3.12', false)).toBe('localhost/gantry-runtime:py3.12-aaaaaaaaaaaa');
    expect(runtimeImageOf(apps(), '3.12', true)).toBe('localhost/gantry-runtime-gpu:py3.12-bbbbbbbbbbbb');
    expect(builtRuntime('localhost/gantry-runtime-gpu:py3.12-bbbbbbbbbbbb')).toEqual({
      python: '3.12',
      gpu: true,
      flash: false,
      example: false,
    });
    expect(builtRuntime('localhost/gantry-runtime:py3.10-aaaaaaaaaaaa')).toEqual({
      python: '3.10',
      gpu: false,
      flash: false,
      example: false,
    });
    expect(builtRuntime('docker.io/library/python:3.11')).toBeUndefined();
    // Configured images to pull: the GPU one falls back to the general one.
    expect(runtimeImageOf(apps({ runtimeImage: 'reg.example/rt:{python}' }), '3.11', true)).toBe('reg.example/rt:3.11');
    expect(runtimeImageOf(apps({}, { image: 'reg.example/gpu:{python}' }), '3.11', true)).toBe('reg.example/gpu:3.11');
  });

  it("runs Gantry's flash runtime in place of flash's images", () => {
    expect(flashImage('runpod/flash-cpu:py3.11-latest')).toEqual({ python: '3.11', gpu: false, lb: false });
    expect(flashImage('runpod/flash-lb-cpu:py3.12-latest')).toEqual({ python: '3.12', gpu: false, lb: true });
    expect(flashImage('docker.io/runpod/flash:py3.12-1.2.0')).toEqual({ python: '3.12', gpu: true, lb: false });
    expect(flashImage('runpod/flash-lb:py3.10-latest')).toEqual({ python: '3.10', gpu: true, lb: true });
    for (const other of ['runpod/flash-cpu', 'runpod/flashy:py3.11-latest', 'evil.example/runpod/flash:py3.11-latest'])
      expect(flashImage(other)).toBeUndefined();

    expect(flashRuntimeImageFor(apps(), 'runpod/flash-lb-cpu:py3.11-latest')).toBe(
      'localhost/gantry-flash-runtime:py3.11-cccccccccccc',
    );
    expect(flashRuntimeImageFor(apps(), 'runpod/flash:py3.12-latest')).toBe(
      'localhost/gantry-flash-runtime-gpu:py3.12-dddddddddddd',
    );
    // The build's Python version, when known, over the tag's.
    expect(flashRuntimeImageFor(apps(), 'runpod/flash-cpu:py3.12-latest', '3.11')).toBe(
      'localhost/gantry-flash-runtime:py3.11-cccccccccccc',
    );
    expect(flashRuntimeImageFor(apps(), 'reg.example/mine:1', '3.11')).toBeUndefined();
    // Configured images to pull: the GPU one falls back to the CPU one.
    const pulled = apps({
      flashRuntime: { ...apps().flashRuntime, image: 'reg.example/flash:{python}' },
    });
    expect(flashRuntimeImageFor(pulled, 'runpod/flash:py3.12-latest')).toBe('reg.example/flash:3.12');

    expect(builtRuntime('localhost/gantry-flash-runtime-gpu:py3.12-dddddddddddd')).toEqual({
      python: '3.12',
      gpu: true,
      flash: true,
      example: false,
    });
    expect(runtimeRecipe(apps(), '3.11', false, true)).toEqual({
      base: 'docker.io/library/python:3.11-slim',
      baseSetting: 'GANTRY_FLASH_RUNTIME_BASE_IMAGE',
      packages: ['runpod-flash==1.19.0', 'runpod==1.12.0'],
      contextDir: '/f',
    });
    expect(runtimeRecipe(apps(), '3.11', true, true).baseSetting).toBe('GANTRY_RUNTIME_GPU_BASE_IMAGE');
    expect(runtimeRecipe(apps(), '3.11', false).baseSetting).toBe('GANTRY_RUNTIME_BASE_IMAGE');
  });

  it("builds the example worker on the CPU runtime, and runs a stale runtime name as today's recipe", () => {
    expect(exampleWorkerImage()).toBe('localhost/gantry-example-worker:py3.11');
    expect(builtRuntime(exampleWorkerImage('3.13'))).toEqual({
      python: '3.13',
      gpu: false,
      flash: false,
      example: true,
    });
    expect(builtRuntime('localhost/gantry-example-worker:latest')).toBeUndefined();
    expect(currentRuntimeImage(apps(), exampleWorkerImage())).toBe(exampleWorkerImage());
    // A release made before the base setting changed names an older digest: the worker runs today's.
    expect(currentRuntimeImage(apps(), 'localhost/gantry-runtime:py3.12-0123456789ab')).toBe(
      'localhost/gantry-runtime:py3.12-aaaaaaaaaaaa',
    );
    expect(currentRuntimeImage(apps(), 'localhost/gantry-flash-runtime-gpu:py3.11-0123456789ab')).toBe(
      'localhost/gantry-flash-runtime-gpu:py3.11-dddddddddddd',
    );
    expect(currentRuntimeImage(apps(), 'reg.example/mine:1')).toBe('reg.example/mine:1');
  });

  it('reads package settings and refuses what is not a name or name==version', () => {
    expect(runtimePackages('V', 'torch==2.5.1, numpy  triton')).toEqual(['torch==2.5.1', 'numpy', 'triton']);
    expect(() => runtimePackages('V', 'torch; rm -rf /')).toThrow(
      'V: not a package name or name==version: torch; -rf /',
    );
    expect(() => runtimePackages('V', 'torch>=2')).toThrow('V: not a package name or name==version: torch>=2');
  });

  it('refuses a resource that imports what the artifact left out and its image lacks, naming both', () => {
    const all = [...GPU_RUNTIME_PACKAGES];
    // The default GPU image has them all.
    expect(runtimePackageProblems(manifest([resource('gpu', true, ['torch', 'numpy'])], all), apps())).toEqual([]);
    // A GPU image with numpy alone.
    const numpyOnly = apps({}, { baseImage: 'localhost/base:{python}', packages: ['numpy'] });
    expect(runtimePackageProblems(manifest([resource('gpu', true, ['numpy'])], all), numpyOnly)).toEqual([]);
    expect(runtimePackageProblems(manifest([resource('gpu', true, ['torch', 'numpy'])], all), numpyOnly)).toEqual([
      'gpu imports torch, left out of the artifact as preinstalled, but its GPU runtime image (localhost/base:3.11 with numpy) does not have it: ' +
        'ask the operator to add it to GANTRY_RUNTIME_GPU_PACKAGES, or to name a GPU base image that has it',
    ]);
    // A CPU resource never has them.
    expect(runtimePackageProblems(manifest([resource('cpu', false, ['numpy'])], all), apps())[0]).toMatch(
      /^cpu imports numpy, left out of the artifact as preinstalled, but its CPU runtime image \(docker.io\/library\/python:3.11-slim\) does not have it/,
    );
    // Shipped in the artifact (not left out), or imports unknown (an older CLI): nothing to say.
    expect(runtimePackageProblems(manifest([resource('cpu', false, ['numpy'])], []), apps())).toEqual([]);
    expect(runtimePackageProblems(manifest([resource('cpu', false)], all), apps())).toEqual([]);
  });

  it("bounds what a build may say of its imports (the manifest is the tenant's)", () => {
    const all = [...GPU_RUNTIME_PACKAGES];
    expect(() => validate(ManifestSchema, manifest([resource('gpu', true, ['numpy'])], all))).not.toThrow();
    expect(() => validate(ManifestSchema, manifest([resource('gpu', true, Array(21).fill('numpy'))], all))).toThrow();
    expect(() => validate(ManifestSchema, manifest([resource('gpu', true, ['x'.repeat(101)])], all))).toThrow();
  });
});
