/**
 * Offline stand-in for the Prisma migrate CLI (same folder layout and `_prisma_migrations` table).
 *
 *   node --import tsx tooling/migrate-cli.ts deploy            apply pending migrations (DATABASE_URL)
 *   node --import tsx tooling/migrate-cli.ts diff              exit 1 and print SQL if the DB differs from the schema
 *   node --import tsx tooling/migrate-cli.ts create <name>     write prisma/migrations/<timestamp>_<name>/migration.sql
 *   node --import tsx tooling/migrate-cli.ts resolve --rolled-back <migration>
 *
 * Options: --schema <file> (default prisma/schema.prisma), --migrations <dir> (default prisma/migrations).
 * `create` replays the migrations in a scratch in-memory PGlite, or in SHADOW_DATABASE_URL if set
 * (a disposable database: it is wiped).
 */
import { parseArgs } from 'node:util';
import { applyMigrations, markMigrationRolledBack } from '../infra/migrations.ts';
import { createMigration, diffSchemaAgainstDatabase } from '../infra/schema-engine.ts';

function databaseUrl(): string {
  const url = process.env.DATABASE_URL;
  if (!url) throw new Error('DATABASE_URL is not set');
  return url;
}

async function main(argv: string[]): Promise<number> {
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      schema: { type: 'string', default: 'prisma/schema.prisma' },
      migrations: { type: 'string', default: 'prisma/migrations' },
      'rolled-back': { type: 'string' },
    },
  });
  const [command, name] = positionals;
  const started = performance.now();
  const took = (): string => `${Math.round(performance.now() - started)} ms`;

  switch (command) {
    case 'deploy': {
      const { applied } = await applyMigrations(databaseUrl(), values.migrations);
      console.error(applied.length ? `Applied ${applied.join(', ')} (${took()})` : `No pending migrations (${took()})`);
      return 0;
    }
    case 'diff': {
      const sql = await diffSchemaAgainstDatabase(databaseUrl(), values.schema);
      if (!sql) {
        console.error(`Database matches ${values.schema} (${took()})`);
        return 0;
      }
      process.stdout.write(sql);
      console.error(`Database differs from ${values.schema} (${took()})`);
      return 1;
    }
    case 'create': {
      if (!name) throw new Error('usage: create <name>');
      const shadowDatabaseUrl = process.env.SHADOW_DATABASE_URL;
      const created = await createMigration(
        values.migrations,
        values.schema,
        name,
        shadowDatabaseUrl ? { shadowDatabaseUrl } : {},
      );
      console.error(
        created ? `Created ${values.migrations}/${created}/migration.sql (${took()})` : `No schema changes (${took()})`,
      );
      return 0;
    }
    case 'resolve': {
      const rolledBack = values['rolled-back'];
      if (!rolledBack) throw new Error('usage: resolve --rolled-back <migration>');
      await markMigrationRolledBack(databaseUrl(), rolledBack);
      console.error(`Marked ${rolledBack} as rolled back`);
      return 0;
    }
    default:
      throw new Error('usage: migrate-cli.ts deploy | diff | create <name> | resolve --rolled-back <migration>');
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(error instanceof Error ? error.message : error);
    process.exit(2);
  },
);
