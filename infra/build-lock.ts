import { createHash } from 'node:crypto';
import { mkdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

/**
 * What is built once per machine (the Temporal CLI, the time-skipping server, versitygw, local test
 * images) may be asked for by several processes at once (parallel test files): one builds, the
 * others wait. The lock is a directory (mkdir is atomic); one older than `staleMs` was left by a
 * killed build and is taken over.
 */
export function tryBuildLock(lock: string, staleMs: number): boolean {
  try {
    mkdirSync(lock);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    try {
      if (Date.now() - statSync(lock).mtimeMs > staleMs) rmSync(lock, { recursive: true, force: true });
    } catch {
      // released meanwhile: the next attempt takes it
    }
    return false;
  }
}

export function releaseBuildLock(lock: string): void {
  rmSync(lock, { recursive: true, force: true });
}

/** The lock of a local image build, named after the image. */
export function imageBuildLockPath(image: string): string {
  return path.join(tmpdir(), `gantry-image-${createHash('sha256').update(image).digest('hex').slice(0, 16)}.lock`);
}
