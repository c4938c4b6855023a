import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * Every runtime image's build context (the flash runtime's too: it runs gantry.flash): sdk/python's
 * Containerfile and the `gantry` package, without tests and caches.
 */
export const RUNTIME_CONTEXT_DIR = fileURLToPath(new URL('../sdk/python', import.meta.url));

/** The files that go into the runtime image, for the digest in its name (domain/apps/apps.ts runtimeContextDigest). */
export function runtimeContextFiles(
  dir = RUNTIME_CONTEXT_DIR,
  pkg = 'gantry',
): Array<{ path: string; content: Buffer }> {
  const files: Array<{ path: string; content: Buffer }> = [
    { path: 'Containerfile', content: readFileSync(path.join(dir, 'Containerfile')) },
  ];
  const walk = (rel: string): void => {
    for (const e of readdirSync(path.join(dir, rel), { withFileTypes: true })) {
      const child = path.posix.join(rel, e.name);
      if (e.isDirectory()) {
        if (e.name !== '__pycache__' && e.name !== 'tests') walk(child);
      } else if (!e.name.endsWith('.pyc')) files.push({ path: child, content: readFileSync(path.join(dir, child)) });
    }
  };
  walk(pkg);
  return files;
}
