/**
 * `npm run admin-key`: a new admin API key (every scope, the platform admin's account), written
 * straight to the database and printed once on standard output. The way back in for an operator
 * whose admin keys were revoked or lost (docs/operating.md, "Locked out"): it needs the machine and
 * its database, never the API, and works whether Gantry is running or not.
 *
 *   npm run -s admin-key                      the key alone on stdout (-s: without npm's banner)
 *   npm run -s admin-key -- --name <name>     its name in GET /v2/keys (default "admin (npm run admin-key)")
 *
 * The database is the one `npm start` uses, from the same settings (infra/admin-key.ts): DATABASE_URL
 * when set; else the embedded PostgreSQL in GANTRY_DATA_DIR (default .gantry/data) on GANTRY_PG_PORT.
 */
import { parseArgs } from 'node:util';
import { mintAdminKeyOnMachine } from '../infra/admin-key.ts';
import { loadConfig } from '../infra/config.ts';

const say = (m: string): void => void process.stderr.write(`${m}\n`);

async function main(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: { name: { type: 'string', default: 'admin (npm run admin-key)' } },
  });
  const name = values.name.trim();
  if (name.length === 0 || name.length > 191) throw new Error('--name: 1 to 191 characters');
  const { key, keyId } = await mintAdminKeyOnMachine(loadConfig(process.env), name, say);
  // Only the key on stdout, so that `$(npm run -s admin-key)` is the key.
  process.stdout.write(`${key}\n`);
  say(
    `A new admin API key (id ${keyId}, "${name}", every scope) is above: it is shown this once and stored hashed. ` +
      'Keep it, then revoke the keys you no longer trust (GET /v2/keys, DELETE /v2/keys/{id}).',
  );
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    say(`admin-key: ${error instanceof Error ? error.message : String(error)}`);
    process.exit(2);
  },
);
