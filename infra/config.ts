import { homedir } from 'node:os';
import path from 'node:path';
import { surfaceLimitsFromEnv, type SurfaceLimits } from '../domain/rate-limit.ts';

/**
 * The process's settings, with their defaults. Subsystems read their own tuning variables next to
 * their code (GANTRY_ORCHESTRATION, GANTRY_LB_HEALTH, GANTRY_JOB_*, ...); the README's configuration
 * table lists them all. Unset TEMPORAL_ADDRESS / DATABASE_URL mean "start the embedded default".
 */
export interface GantryConfig {
  /** Which parts this process runs: everything, only the API, or only the Temporal worker. */
  role: 'all' | 'api' | 'worker';
  dataDir: string;
  host: string;
  port: number;
  /** Address worker containers and clients use to reach the API (requestUrls, worker env). */
  publicUrl: string;
  /** With a loopback publicUrl: the worker-facing listener's port on the container bridge's gateway. */
  workerPort: number;
  temporalAddress: string | undefined;
  temporalNamespace: string;
  temporalPort: number;
  temporalUiPort: number;
  temporalCliPath: string | undefined;
  taskQueue: string;
  databaseUrl: string | undefined;
  embeddedPostgresPort: number;
  adminApiKey: string | undefined;
  /** 32-byte key (hex or base64) sealing stored secrets; default: generated once into the data dir. */
  secretKey: string | undefined;
  logLevel: string;
  cacheDir: string;
  /** Request limits of every API surface (README "Security"). */
  limits: SurfaceLimits;
}

function int(value: string | undefined, fallback: number, name: string): number {
  if (value === undefined || value === '') return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new Error(`${name} must be a non-negative integer, got "${value}"`);
  return n;
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): GantryConfig {
  const role = env.GANTRY_ROLE ?? 'all';
  if (role !== 'all' && role !== 'api' && role !== 'worker') {
    throw new Error(`GANTRY_ROLE must be all, api or worker, got "${role}"`);
  }
  const port = int(env.PORT, 8080, 'PORT');
  const host = env.GANTRY_HOST ?? '127.0.0.1';
  const cacheHome = env.XDG_CACHE_HOME ?? path.join(homedir(), '.cache');
  return {
    role,
    dataDir: path.resolve(env.GANTRY_DATA_DIR ?? '.gantry/data'),
    host,
    port,
    publicUrl: (env.GANTRY_PUBLIC_URL ?? `http://${host === '0.0.0.0' ? '127.0.0.1' : host}:${port}`).replace(/\/$/, ''),
    workerPort: int(env.GANTRY_WORKER_PORT, port + 1, 'GANTRY_WORKER_PORT'),
    temporalAddress: env.TEMPORAL_ADDRESS || undefined,
    temporalNamespace: env.TEMPORAL_NAMESPACE ?? 'default',
    temporalPort: int(env.TEMPORAL_PORT, 7233, 'TEMPORAL_PORT'),
    temporalUiPort: int(env.TEMPORAL_UI_PORT, 8233, 'TEMPORAL_UI_PORT'),
    temporalCliPath: env.TEMPORAL_CLI_PATH || undefined,
    taskQueue: env.GANTRY_TASK_QUEUE ?? 'gantry',
    databaseUrl: env.DATABASE_URL || undefined,
    embeddedPostgresPort: int(env.GANTRY_PG_PORT, 54329, 'GANTRY_PG_PORT'),
    adminApiKey: env.GANTRY_ADMIN_API_KEY || undefined,
    secretKey: env.GANTRY_SECRET_KEY || undefined,
    logLevel: env.LOG_LEVEL ?? 'info',
    cacheDir: path.join(cacheHome, 'gantry'),
    limits: surfaceLimitsFromEnv(env),
  };
}
