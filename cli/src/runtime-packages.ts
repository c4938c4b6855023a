/**
 * What the platform's runtime images hold (docs/apps.md, "Runtime images"), as the build needs it:
 * GPU resources run on an image with torch and its kin (too large for an artifact), CPU resources on
 * Python and the gantry package alone. One artifact serves every resource of a project, so those
 * packages are left out of it only when every resource runs on the GPU image.
 */
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { CliError } from './errors.ts';
import type { Resource } from './scan.ts';

/** The GPU runtime image's own packages (the platform's GANTRY_RUNTIME_GPU_PACKAGES by default). */
export const PREINSTALLED = ['torch', 'torchvision', 'torchaudio', 'numpy', 'triton'];

const onGpu = (r: Resource): boolean => 'gpu' in r.compute;

/** The packages the artifact leaves out as preinstalled: all of PREINSTALLED when every resource is a GPU one. */
export function preinstalledLeftOut(resources: readonly Resource[]): string[] {
  return resources.length > 0 && resources.every(onGpu) ? [...PREINSTALLED] : [];
}

/**
 * Refuses a resource off the GPU image whose file imports one of PREINSTALLED that nothing lists
 * (requirements.txt or its `dependencies`): its worker could not import it. `listed`: normalized
 * requirement names. Only the resource's own file is read, not what it imports in turn.
 */
export function checkRuntimeImports(
  resources: readonly Resource[],
  imports: Readonly<Record<string, readonly string[]>>,
  listed: ReadonlySet<string>,
): void {
  for (const r of resources.filter((x) => !onGpu(x))) {
    const unlisted = (imports[r.file] ?? []).filter((m) => PREINSTALLED.includes(m) && !listed.has(m));
    if (unlisted.length === 0) continue;
    const them = unlisted.join(', ');
    throw new CliError(
      `${r.name} (${r.file}) imports ${them}, which its runtime image does not have: CPU resources run on ` +
        `Python with the gantry package alone (python:3.X-slim by default), and ${PREINSTALLED.join(', ')} are in the ` +
        `GPU runtime image only. List ${them} in requirements.txt to ship ${unlisted.length === 1 ? 'it' : 'them'} in the artifact, ` +
        'or give the resource a gpu=[...].',
    );
  }
}

/** The normalized names requirements.txt and the resources' `dependencies` list. */
export async function listedPackages(
  projectDir: string,
  resources: readonly Resource[],
  nameOf: (line: string) => string | undefined,
): Promise<Set<string>> {
  const file = path.join(projectDir, 'requirements.txt');
  const lines = existsSync(file) ? (await readFile(file, 'utf8')).split('\n') : [];
  const names = [...lines, ...resources.flatMap((r) => r.dependencies ?? [])]
    .filter((l) => l.trim() && !l.trim().startsWith('#') && !l.trim().startsWith('-'))
    .map(nameOf);
  return new Set(names.filter((n): n is string => n !== undefined));
}
