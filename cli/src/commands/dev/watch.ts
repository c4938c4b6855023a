import path from 'node:path';
import { watch } from 'chokidar';

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
 * DEBOUNCE_MS (an editor's save is often several events: write, rename, chmod). chokidar watches
 * each folder, so a file saved by writing a temporary file and renaming it over the old one (sed
 * -i, vim, many editors' safe-save) stays watched; Node's own recursive fs.watch loses such a file
 * after its first rename-save. Folders that never hold source (.venv, .git, ...) are not walked at
 * all; what counts as source is decided by the caller (the scanner's --files applies the ignore file).
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
  const relative = (p: string): string => path.relative(projectDir, p).split(path.sep).join('/');
  const watcher = watch(projectDir, {
    ignoreInitial: true,
    ignored: (p: string) => p !== projectDir && ignoredPath(relative(p)),
  });
  watcher.on('all', (_event, changed) => {
    const rel = relative(changed);
    if (!rel || ignoredPath(rel)) return;
    pending.add(rel);
    if (timer) clearTimeout(timer);
    timer = setTimeout(flush, DEBOUNCE_MS);
  });
  watcher.on('error', (err) => onError(err instanceof Error ? err : new Error(String(err))));
  return {
    close: () => {
      if (timer) clearTimeout(timer);
      void watcher.close();
    },
  };
}
