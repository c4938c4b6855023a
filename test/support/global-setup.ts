/**
 * Starts the real parts the suite talks to, once: a PostgreSQL server (Debian's package; or
 * TEST_DATABASE_URL) with a migrated template database, and a Temporal dev server (or
 * TEST_TEMPORAL_ADDRESS). Test files get their own databases cloned from the template.
 */
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { loadConfig } from '../../infra/config.ts';
import { applyMigrations } from '../../infra/migrations.ts';
import { migrationsDir } from '../../infra/platform.ts';
import { startPostgresServer, type RunningPostgres } from '../../infra/postgres.ts';
import { resolveTemporalBinary, startTemporalDevServer, type RunningTemporal } from '../../infra/temporal.ts';
import { freePort } from './ports.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    postgresAdminUrl: string;
    templateDatabase: string;
    temporalAddress: string;
    temporalBinary: string;
  }
}

export const TEMPLATE_DB = 'gantry_template';

function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const dir = mkdtempSync(path.join(tmpdir(), 'gantry-test-'));
  chmodSync(dir, 0o755); // the PostgreSQL server runs as the postgres user when the suite runs as root
  let postgres: RunningPostgres | undefined;
  let temporal: RunningTemporal | undefined;

  const adminUrl =
    process.env.TEST_DATABASE_URL ?? (postgres = await startPostgresServer(path.join(dir, 'pg'), await freePort())).url;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`drop database if exists ${TEMPLATE_DB}`);
  await admin.query(`create database ${TEMPLATE_DB}`);
  await admin.end();
  await applyMigrations(withDatabase(adminUrl, TEMPLATE_DB), migrationsDir);

  const binary = resolveTemporalBinary(loadConfig());
  if (!binary) throw new Error('no Temporal CLI: set TEMPORAL_CLI_PATH, or install Go so it can be built');
  const temporalAddress =
    process.env.TEST_TEMPORAL_ADDRESS ??
    (temporal = await startTemporalDevServer({
      binary,
      port: await freePort(),
      uiPort: undefined,
      dbFile: undefined,
      namespace: 'default',
    })).address;

  project.provide('postgresAdminUrl', adminUrl);
  project.provide('templateDatabase', TEMPLATE_DB);
  project.provide('temporalAddress', temporalAddress);
  project.provide('temporalBinary', binary);

  return async () => {
    await temporal?.stop();
    await postgres?.stop();
    rmSync(dir, { recursive: true, force: true });
  };
}
