/**
 * Starts the real parts the suite talks to, once: a PostgreSQL server (Debian's package; or
 * TEST_DATABASE_URL) with a migrated template database, and a Temporal dev server (or
 * TEST_TEMPORAL_ADDRESS). Test files get their own databases cloned from the template. Before any
 * test, a whole run builds what is built once per machine (machine-prerequisites.ts).
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
import { prepareMachine } from './machine-prerequisites.ts';
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

/**
 * Whether to build the once-per-machine parts up front: GANTRY_TEST_PREPARE=1 or 0 says; else a
 * whole run (no file filter on the command line, as `npm test` and CI run it) and the scale-out run
 * do, and a run of chosen files builds what its tests need when they ask for it.
 */
export function preparesMachine(env: NodeJS.ProcessEnv, argv: readonly string[]): boolean {
  if (env.GANTRY_TEST_PREPARE === '1' || env.GANTRY_TEST_PREPARE === '0') return env.GANTRY_TEST_PREPARE === '1';
  if (env.GANTRY_TEST_SCALE === '1') return true;
  const run = argv.indexOf('run');
  const args = run >= 0 ? argv.slice(run + 1) : [];
  // A file filter is an argument that is neither an option nor an option's value (`--project api`).
  const valued = new Set(['--project', '--reporter', '--shard']);
  return !args.some((a, i) => !a.startsWith('-') && !valued.has(args[i - 1] ?? ''));
}

interface SuiteServers {
  adminUrl: string;
  temporalAddress: string;
  binary: string;
  stop(): Promise<void>;
}

/**
 * The servers of one vitest run, shared by the projects that use them (`api` and `integration`
 * both name this file, and vitest calls a project's global setup for each): started by the first,
 * stopped after the last one's teardown. Global setups run in vitest's main process, one global scope.
 */
const shared = globalThis as typeof globalThis & { gantrySuite?: { servers: Promise<SuiteServers>; users: number } };

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  shared.gantrySuite ??= { servers: startSuiteServers(), users: 0 };
  const suite = shared.gantrySuite;
  suite.users++;
  const servers = await suite.servers;
  project.provide('postgresAdminUrl', servers.adminUrl);
  project.provide('templateDatabase', TEMPLATE_DB);
  project.provide('temporalAddress', servers.temporalAddress);
  project.provide('temporalBinary', servers.binary);
  return async () => {
    if (--suite.users > 0) return;
    shared.gantrySuite = undefined;
    await servers.stop();
  };
}

async function startSuiteServers(): Promise<SuiteServers> {
  if (preparesMachine(process.env, process.argv))
    await prepareMachine({ scale: process.env.GANTRY_TEST_SCALE === '1', log: (msg) => console.log(msg) });
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

  return {
    adminUrl,
    temporalAddress,
    binary,
    async stop() {
      await temporal?.stop();
      await postgres?.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
