import { Context } from '@temporalio/activity';
import { create } from 'tar';
import { builtRuntime, FLASH_RUNTIME_MODULE, runtimeRecipe } from '../domain/apps/index.ts';
import type { AppSettings } from '../domain/shared/index.ts';
import { buildImage, imagePresent, type HostHandle } from '../hostctl/containers.ts';
import type { SshPool } from '../hostctl/ssh.ts';

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

/**
 * Deployed apps run Gantry's runtime images (domain/apps/runtime-images.ts), and endpoints of the
 * hosted flash tool its flash runtime. Unless an operator names them to pull (GANTRY_RUNTIME_IMAGE,
 * GANTRY_RUNTIME_GPU_IMAGE, GANTRY_FLASH_RUNTIME_IMAGE, ...), each host builds them once
 * from the Containerfile Gantry ships, on the configured base (a `python:3.X-slim` by default), the
 * GPU one with its packages added: a host needs no registry account of Gantry's, and the image name
 * carries a digest of what went in, so a new Gantry builds a new one.
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
  if (await imagePresent(pool, h, image)) return 'present';
  const { base, baseSetting, packages, contextDir } = runtimeRecipe(apps, runtime.python, runtime.gpu, runtime.flash);
  try {
    await buildImage(
      pool,
      h,
      image,
      await buildContext(contextDir, 'gantry'),
      { BASE_IMAGE: base, PACKAGES: packages.join(' '), ...(runtime.flash ? { MODULE: FLASH_RUNTIME_MODULE } : {}) },
      { timeoutMs, signal: Context.current().cancellationSignal },
    );
  } catch (err) {
    const detail = err instanceof Error ? err.message : String(err);
    // The usual cause on hosts without a registry: no base image of this Python. Say which, and where it is set.
    if (!(await imagePresent(pool, h, base).catch(() => true)))
      throw new Error(
        `could not get the base image ${base} of the Python ${runtime.python} runtime ${image}: the host does not have it and could not pull it ` +
          `(the operator sets it with ${baseSetting}; docs/apps.md, "Runtime images"): ${detail}`,
      );
    throw new Error(`could not build the Python ${runtime.python} runtime ${image} on ${base}: ${detail}`);
  }
  return 'built';
}
