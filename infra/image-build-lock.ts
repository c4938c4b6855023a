import { createHash } from 'node:crypto';
import { mkdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

/**
 * Parallel test files may want the same local image at once: one builds it, the others wait. The
 * lock is a directory (mkdir is atomic) named after the image; one older than `staleMs` was left by
 * a killed build and is taken over.
 */
export function imageBuildLockPath(image: string): string {
  return path.join(tmpdir(), `gantry-image-${createHash('sha256').update(image).digest('hex').slice(0, 16)}.lock`);
}

/** One attempt: true when this process now holds the lock. */
export function tryImageBuildLock(lock: string, staleMs: number): boolean {
  try {
    mkdirSync(lock);
    return true;
  } catch {
    try {
      if (Date.now() - statSync(lock).mtimeMs > staleMs) rmSync(lock, { recursive: true, force: true });
    } catch {
      // released meanwhile: the next attempt takes it
    }
    return false;
  }
}

export function releaseImageBuildLock(lock: string): void {
  rmSync(lock, { recursive: true, force: true });
}
