/**
 * `flash <args>`, the hosted service's deploy tool, run as its users run it: in the project's
 * directory, with nothing but its URL and key variables pointed at a Gantry platform.
 */
import { execFile } from 'node:child_process';

export interface FlashCliTarget {
  /** The Python of the venv with runpod-flash (ensurePythonClients with FLASH_CLIENT_REQUIREMENTS). */
  python: string;
  /** The project's directory: flash names the app after it. */
  project: string;
  /** HOME for flash's own files (credentials, caches): one per test file. */
  home: string;
  /** The platform's base URL and a key of it (none: flash reads what `flash login` saved). */
  url: string;
  key?: string;
}

/** flash's environment: the platform's URLs, the key when given, nothing else of this process's. */
export function flashEnv(t: Pick<FlashCliTarget, 'home' | 'url' | 'key'>): Record<string, string> {
  return {
    PATH: process.env.PATH ?? '',
    HOME: t.home,
    COLUMNS: '200',
    ...(t.key ? { RUNPOD_API_KEY: t.key } : {}),
    RUNPOD_API_BASE_URL: t.url,
    RUNPOD_ENDPOINT_BASE_URL: `${t.url}/v2`,
    RUNPOD_REST_API_URL: `${t.url}/v2`,
    RUNPOD_HAPI_URL: t.url,
    RUNPOD_CONSOLE_URL: t.url,
    FLASH_NO_UPDATE_CHECK: '1',
  };
}

export function flashCli(t: FlashCliTarget, args: string[]): Promise<{ code: number; output: string }> {
  return new Promise((resolve) => {
    execFile(
      t.python,
      ['-m', 'runpod_flash.cli.main', ...args],
      {
        cwd: t.project,
        encoding: 'utf8',
        // flash pip-installs a build's requirements first: over 3 minutes seen on a loaded 2-core machine.
        timeout: 600_000,
        env: flashEnv(t),
      },
      (err, stdout, stderr) =>
        resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, output: `${stdout}${stderr}` }),
    );
  });
}
