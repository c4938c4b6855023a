import { watch, type FSWatcher } from 'node:fs';
import path from 'node:path';

/** Never source, whatever the ignore file says (the scanner's ALWAYS_IGNORED), and their churn is noise. */
const IGNORED_PARTS = new Set([
  '.git',
  '.gantry',
  '.venv',
  'venv',
  '__pycache__',
  'node_modules',
  '.mypy_cache',
  '.pytest_cache',
]);

export const DEBOUNCE_MS = 100;

export interface Watcher {
  close(): void;
}

/** True when a project-relative path is under a folder that never holds source. */
export const ignoredPath = (rel: string): boolean =>
  rel.split(/[\\/]/).some((part) => IGNORED_PARTS.has(part)) || rel.endsWith('.pyc');

/**
 * Calls `onChange` with the project-relative paths that changed, once things have been quiet for
 * DEBOUNCE_MS (an editor's save is often several events: write, rename, chmod). Node's recursive
 * fs.watch (Node 22 on Linux) walks and watches every folder, .venv and .git included, which can
 * run into the inotify limit; the events from those are dropped here, and what counts as source
 * is decided by the caller (the scanner's --files applies the ignore file).
 */
export function watchProject(
  projectDir: string,
  onChange: (paths: Set<string>) => void,
  onError: (err: Error) => void,
): Watcher {
  let pending = new Set<string>();
  let timer: NodeJS.Timeout | undefined;
  const flush = (): void => {
    timer = undefined;
    const batch = pending;
    pending = new Set();
    if (batch.size > 0) onChange(batch);
  };
  const watcher: FSWatcher = watch(projectDir, { recursive: true }, (_event, filename) => {
    if (filename === null) return;
    const rel = filename.toString().split(path.sep).join('/');
    if (ignoredPath(rel)) return;
    pending.add(rel);
    if (timer) clearTimeout(timer);
    timer = setTimeout(flush, DEBOUNCE_MS);
  });
  watcher.on('error', onError);
  return {
    close: () => {
      if (timer) clearTimeout(timer);
      watcher.close();
    },
  };
}
