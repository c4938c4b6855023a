/**
 * A new admin key from the machine (`npm run admin-key`, tooling/admin-key.ts): straight into the
 * database `npm start` uses, never through the API. See docs/operating.md, "Locked out".
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { mintAdminKey } from '../domain/accounts/index.ts';
import { createDb } from '../domain/shared/index.ts';
import type { GantryConfig } from './config.ts';
import { canConnect, embeddedPostgresUrl, startEmbeddedPostgres, type RunningPostgres } from './postgres.ts';

/**
 * The database `npm start` would use: DATABASE_URL; else the embedded server in the data dir,
 * reached where Gantry runs it (starting another would stop that one as a leftover), else started
 * for the moment (the caller stops it).
 */
async function platformDatabase(config: GantryConfig, log: (m: string) => void): Promise<RunningPostgres> {
  if (config.databaseUrl) return { url: config.databaseUrl, stop: async () => {} };
  const pgDir = path.join(config.dataDir, 'pg');
  if (!existsSync(path.join(pgDir, 'PG_VERSION')))
    throw new Error(`no Gantry database in ${pgDir}: set DATABASE_URL or GANTRY_DATA_DIR, or run npm start first`);
  const password = readFileSync(`${pgDir}.password`, 'utf8').trim();
  const url = embeddedPostgresUrl(config.embeddedPostgresPort, password);
  if (await canConnect(url)) return { url, stop: async () => {} };
  log(`starting the embedded PostgreSQL in ${pgDir} for a moment...`);
  return startEmbeddedPostgres(pgDir, config.embeddedPostgresPort, log);
}

/** Adds a key with every scope to the admin account (made if missing) and returns it, once. */
export async function mintAdminKeyOnMachine(
  config: GantryConfig,
  name: string,
  log: (m: string) => void,
): Promise<{ key: string; keyId: string }> {
  const postgres = await platformDatabase(config, log);
  try {
    const db = createDb(postgres.url, 1);
    try {
      const { key, keyId } = await mintAdminKey(db, name);
      return { key, keyId };
    } finally {
      await db.$disconnect();
    }
  } finally {
    await postgres.stop();
  }
}
