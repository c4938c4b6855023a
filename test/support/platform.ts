import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { inject } from 'vitest';
import { loadConfig } from '../../infra/config.ts';
import { startPlatform, type Platform } from '../../infra/platform.ts';
import { randomString } from '../../domain/shared/index.ts';
import { freshDatabase } from './databases.ts';
import { freePort } from './ports.ts';

export interface TestPlatform extends Platform {
  url: string;
  adminKey: string;
  taskQueue: string;
}

/** The whole platform in this process, on its own database and task queue, against the suite's servers. */
export async function startTestPlatform(env: Record<string, string> = {}): Promise<TestPlatform> {
  const port = await freePort();
  const adminKey = `gntr_test_${randomString(32)}`;
  const taskQueue = `test-${randomString(8)}`;
  const config = loadConfig({
    // The settings a test file put in the environment (GANTRY_ORCHESTRATION, ...), under the suite's own.
    ...process.env,
    PORT: String(port),
    // Worker containers' own listener (on the container bridge): a port no other test took either.
    GANTRY_WORKER_PORT: String(await freePort()),
    DATABASE_URL: await freshDatabase(),
    TEMPORAL_ADDRESS: inject('temporalAddress'),
    TEMPORAL_CLI_PATH: inject('temporalBinary'),
    GANTRY_TASK_QUEUE: taskQueue,
    GANTRY_ADMIN_API_KEY: adminKey,
    GANTRY_DATA_DIR: mkdtempSync(path.join(tmpdir(), 'gantry-data-')),
    LOG_LEVEL: 'warn',
    ...env,
  });
  const platform = await startPlatform(config, () => {});
  return { ...platform, url: `http://127.0.0.1:${port}`, adminKey, taskQueue };
}

/** fetch with JSON in and out, for tests. */
export async function call(
  base: string,
  method: string,
  route: string,
  opts: { key?: string; body?: unknown; rawBody?: string; headers?: Record<string, string> } = {},
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- tests read arbitrary JSON
): Promise<{ status: number; headers: Headers; body: any }> {
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.key) headers.authorization = `Bearer ${opts.key}`;
  let body: string | undefined;
  if (opts.rawBody !== undefined) body = opts.rawBody;
  else if (opts.body !== undefined) body = JSON.stringify(opts.body);
  if (body !== undefined) headers['content-type'] ??= 'application/json';
  const res = await fetch(base + route, { method, headers, body });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    // not JSON: keep the text
  }
  return { status: res.status, headers: res.headers, body: parsed };
}
