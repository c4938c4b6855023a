import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync } from 'node:fs';
import path from 'node:path';
import { CONSOLE_ROOT, consoleViteConfig } from './vite.config.ts';

/**
 * The console's built files (index.html + hashed assets), never in the repository: built once per
 * machine into `<cacheDir>/console/<digest>` (`~/.cache/gantry/console/...` by default), where the
 * digest covers the console's sources (index.html, vite.config.ts, src/) and the lock file (the
 * versions of Vite, Preact and uPlot). A start whose digest has a build reuses it; a change of
 * source or lock file builds a new one beside it. Built by `npm start` (infra/start.ts) and the
 * test suite's machine preparation, before the platform starts; the API only looks for it.
 */

const LOCK_FILE = path.join(CONSOLE_ROOT, '..', '..', 'package-lock.json');

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true })
    .flatMap((e) => (e.isDirectory() ? sourceFiles(path.join(dir, e.name)) : [path.join(dir, e.name)]))
    .sort();
}

/** The digest of what the build depends on: each input's path and bytes. */
export function consoleDigest(): string {
  const hash = createHash('sha256');
  const inputs = [
    path.join(CONSOLE_ROOT, 'index.html'),
    path.join(CONSOLE_ROOT, 'vite.config.ts'),
    ...sourceFiles(path.join(CONSOLE_ROOT, 'src')),
    LOCK_FILE,
  ];
  for (const file of inputs) {
    hash.update(path.relative(CONSOLE_ROOT, file)).update('\0');
    hash.update(readFileSync(file)).update('\0');
  }
  return hash.digest('hex').slice(0, 20);
}

/** Where the build for the sources as they are now lives (or would). */
export const consoleBuildDir = (cacheDir: string): string => path.join(cacheDir, 'console', consoleDigest());

/** Whether a build is complete there (a build is moved into place whole, so index.html means done). */
export const consoleBuilt = (dir: string): boolean => existsSync(path.join(dir, 'index.html'));

/**
 * The build dir for these sources, built first when there is none: into a folder of its own, then
 * renamed into place, so two processes building at once never see half a build (the loser's copy
 * is dropped).
 */
export async function ensureConsoleBuilt(cacheDir: string, log: (msg: string) => void = () => {}): Promise<string> {
  const dir = consoleBuildDir(cacheDir);
  if (consoleBuilt(dir)) return dir;
  mkdirSync(path.dirname(dir), { recursive: true });
  const tmp = `${dir}.tmp-${process.pid}-${randomBytes(4).toString('hex')}`;
  const began = Date.now();
  log(`building the console (Vite) into ${dir}...`);
  try {
    const { build } = await import('vite');
    await build(consoleViteConfig(tmp));
    try {
      renameSync(tmp, dir);
    } catch (err) {
      if (!consoleBuilt(dir)) throw err;
    }
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
  log(`console built in ${((Date.now() - began) / 1000).toFixed(1)} s`);
  pruneConsoleBuilds(path.dirname(dir), dir);
  return dir;
}

/** Builds kept besides the newest: processes started on older sources may still serve them. */
const KEEP_BUILDS = 3;
/** A folder being built is left alone unless it is older than this (its process died). */
const STALE_BUILD_MS = 3_600_000;

/**
 * Removes all but the newest few builds (and abandoned half-builds), so a cache that sees many
 * versions of the sources (a developer's machine) does not grow without bound.
 */
export function pruneConsoleBuilds(consoleDir: string, current: string, now = Date.now()): string[] {
  const entries = readdirSync(consoleDir, { withFileTypes: true })
    .filter((e) => e.isDirectory())
    .map((e) => ({ dir: path.join(consoleDir, e.name), tmp: e.name.includes('.tmp-') }))
    .map((e) => ({ ...e, mtimeMs: statSync(e.dir).mtimeMs }));
  const builds = entries.filter((e) => !e.tmp && e.dir !== current).sort((a, b) => b.mtimeMs - a.mtimeMs);
  const removed = [
    ...builds.slice(KEEP_BUILDS),
    ...entries.filter((e) => e.tmp && now - e.mtimeMs > STALE_BUILD_MS),
  ].map((e) => e.dir);
  for (const dir of removed) rmSync(dir, { recursive: true, force: true });
  return removed;
}
