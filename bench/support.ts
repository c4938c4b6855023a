/**
 * What the HTTP benchmarks share: a whole platform in this process on its own PostgreSQL (Debian's
 * package, as the test suite runs it) and an in-memory Temporal dev server, in a temporary directory.
 */
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadConfig } from '../infra/config.ts';
import { startPlatform, type Platform } from '../infra/platform.ts';
import { startPostgresServer } from '../infra/postgres.ts';
import { resolveTemporalBinary, startTemporalDevServer } from '../infra/temporal.ts';
import { freePort } from '../test/support/ports.ts';

/** Quotas no benchmark reaches. */
export const BENCH_QUOTAS = 'minute=1000000000,hour=1000000000,day=1000000000';

export interface BenchPlatform {
  platform: Platform;
  /** `http://127.0.0.1:<port>` of the API. */
  base: string;
  adminKey: string;
  /** The admin key and a JSON content type. */
  headers: Record<string, string>;
  stop(): Promise<void>;
}

export { freePort };

export async function startBenchPlatform(name: string): Promise<BenchPlatform> {
  const dir = mkdtempSync(path.join(tmpdir(), `gantry-bench-${name}-`));
  chmodSync(dir, 0o755);
  const postgres = await startPostgresServer(path.join(dir, 'pg'), await freePort());
  const binary = resolveTemporalBinary(loadConfig());
  if (!binary) throw new Error('no Temporal CLI: run `npm test` once, or set TEMPORAL_CLI_PATH');
  const temporal = await startTemporalDevServer({
    binary,
    port: await freePort(),
    uiPort: undefined,
    dbFile: undefined,
    namespace: 'default',
  });
  const port = await freePort();
  const adminKey = `gntr_bench_${'k'.repeat(32)}`;
  const platform = await startPlatform(
    loadConfig({
      PORT: String(port),
      DATABASE_URL: postgres.url,
      TEMPORAL_ADDRESS: temporal.address,
      GANTRY_ADMIN_API_KEY: adminKey,
      GANTRY_DATA_DIR: path.join(dir, 'data'),
      LOG_LEVEL: 'warn',
      // A benchmark is one client at full speed: quotas that never bind, unless the run sets its own.
      GANTRY_RATE_LIMITS: process.env.GANTRY_RATE_LIMITS ?? BENCH_QUOTAS,
      GANTRY_JOB_RATE_LIMITS: process.env.GANTRY_JOB_RATE_LIMITS ?? BENCH_QUOTAS,
      GANTRY_PROXY_RATE_LIMITS: process.env.GANTRY_PROXY_RATE_LIMITS ?? BENCH_QUOTAS,
    }),
    () => {},
  );
  return {
    platform,
    base: `http://127.0.0.1:${port}`,
    adminKey,
    headers: { authorization: `Bearer ${adminKey}`, 'content-type': 'application/json' },
    async stop() {
      await platform.stop();
      await temporal.stop();
      await postgres.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * The whole platform as `npm start` runs it (embedded PostgreSQL and Temporal dev server, production
 * loop settings) in `dataDir`, on free ports, with `env` over it: for the benchmarks that need hosts.
 */
export async function startEmbeddedPlatform(
  dataDir: string,
  adminKey: string,
  env: Record<string, string> = {},
): Promise<{ platform: Platform; base: string }> {
  const port = await freePort();
  const platform = await startPlatform(
    loadConfig({
      ...process.env,
      PORT: String(port),
      GANTRY_WORKER_PORT: String(await freePort()),
      GANTRY_DATA_DIR: dataDir,
      GANTRY_ADMIN_API_KEY: adminKey,
      TEMPORAL_PORT: String(await freePort()),
      TEMPORAL_UI_PORT: String(await freePort()),
      GANTRY_PG_PORT: String(await freePort()),
      DATABASE_URL: '',
      TEMPORAL_ADDRESS: '',
      LOG_LEVEL: 'warn',
      ...env,
    }),
    () => {},
  );
  return { platform, base: `http://127.0.0.1:${port}` };
}

/** Settings of a platform whose hosts run deployed apps here: the runtime image built on the Debian-made base, quotas that never bind. */
export const appsBenchSettings = (cacheDir: string): Record<string, string> => ({
  GANTRY_RUNTIME_BASE_IMAGE: 'localhost/gantry-python:{python}',
  GANTRY_ARTIFACT_CACHE_DIR: cacheDir,
  GANTRY_RATE_LIMITS: BENCH_QUOTAS,
  GANTRY_JOB_RATE_LIMITS: BENCH_QUOTAS,
  GANTRY_PROXY_RATE_LIMITS: BENCH_QUOTAS,
});
