import { Context } from '@temporalio/activity';
import { create } from 'tar';
import {
  builtRuntime,
  EXAMPLE_WORKER_MODULE,
  FLASH_RUNTIME_MODULE,
  runtimeBaseRequest,
  runtimeRecipe,
} from '../domain/apps/index.ts';
import type { AppSettings } from '../domain/shared/index.ts';
import { buildImage, imageLabel, imagePresent, type HostHandle } from '../hostctl/containers.ts';
import { ensureRuntimeBase, pythonBaseOf } from '../hostctl/python-base.ts';
import type { SshPool } from '../hostctl/ssh.ts';
import { packagesLayer } from './runtime-packages.ts';

/** A runtime's build context, made once per process and directory: the Containerfile and the Python package. */
const contexts = new Map<string, Promise<Buffer>>();

function buildContext(dir: string, pkg: string): Promise<Buffer> {
  let context = contexts.get(dir);
  if (!context) {
    context = (async () => {
      const chunks: Buffer[] = [];
      const stream = create(
        { cwd: dir, portable: true, filter: (p) => !/(^|\/)(__pycache__|tests)(\/|$)|\.pyc$/.test(p) },
        ['Containerfile', pkg],
      );
      for await (const chunk of stream) chunks.push(chunk as Buffer);
      return Buffer.concat(chunks);
    })();
    contexts.set(dir, context);
  }
  return context;
}

/** Marks the example worker's image with the recipe it was built from: its name carries none. */
const RECIPE_LABEL = 'io.gantry.runtime.recipe';

/** Why an image could not be had, as the user sees it: its words, and no stack. */
const message = (err: unknown): string => (err instanceof Error ? err.message : String(err));

/**
 * Deployed apps run Gantry's runtime images (domain/apps/runtime-images.ts), endpoints of the
 * hosted flash tool its flash runtime, and `localhost/gantry-example-worker:py3.X` the example
 * worker. Unless an operator names them to pull (GANTRY_RUNTIME_IMAGE, GANTRY_RUNTIME_GPU_IMAGE,
 * GANTRY_FLASH_RUNTIME_IMAGE, ...), each host builds them once from the Containerfile Gantry
 * ships, on the configured base (a `python:3.X-slim` by default, or Debian's Python built on the
 * host when that cannot be pulled), the GPU one with its packages added: a host needs no registry
 * account of Gantry's, and the image name carries a digest of what went in (the example's label
 * does), so a new Gantry builds a new one.
 * Answers whether it built; other images are left to the ordinary pull.
 */
export async function ensureRuntimeImage(
  pool: SshPool,
  h: HostHandle,
  image: string,
  apps: AppSettings,
  timeoutMs: number,
): Promise<'built' | 'present' | 'not-runtime'> {
  const runtime = builtRuntime(image);
  if (!runtime) return 'not-runtime';
  const present = runtime.example
    ? (await imageLabel(pool, h, image, RECIPE_LABEL)) === apps.runtimeDigest
    : await imagePresent(pool, h, image);
  if (present) return 'present';
  const recipe = runtimeRecipe(apps, runtime.python, runtime.gpu, runtime.flash);
  const signal = Context.current().cancellationSignal;
  Context.current().heartbeat();
  let base = await ensureRuntimeBase(pool, h, { ...runtimeBaseRequest(apps, runtime, image), timeoutMs, signal });
  // Debian's Python has no pip: the flash runtime's packages come from this machine's pip (GPU
  // packages, gigabytes of CUDA wheels, are left to the base's own pip or the operator's GPU base).
  if (pythonBaseOf(base) && !runtime.gpu && recipe.packages.length > 0) {
    try {
      base = (await packagesLayer(pool, h, base, runtime.python, recipe.packages, { timeoutMs, signal })) ?? base;
    } catch (err) {
      throw new Error(
        `could not add ${recipe.packages.join(', ')} to ${base} for the Python ${runtime.python} runtime ${image}: ${message(err)}`,
      );
    }
  }
  const module = runtime.flash ? FLASH_RUNTIME_MODULE : runtime.example ? EXAMPLE_WORKER_MODULE : undefined;
  try {
    await buildImage(
      pool,
      h,
      image,
      await buildContext(recipe.contextDir, 'gantry'),
      { BASE_IMAGE: base, PACKAGES: recipe.packages.join(' '), ...(module ? { MODULE: module } : {}) },
      {
        timeoutMs,
        signal,
        ...(runtime.example ? { labels: { [RECIPE_LABEL]: apps.runtimeDigest } } : {}),
      },
    );
  } catch (err) {
    throw new Error(`could not build the Python ${runtime.python} runtime ${image} on ${base}: ${message(err)}`);
  }
  return 'built';
}
