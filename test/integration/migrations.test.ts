import path from 'node:path';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { applyMigrations, migrationChecksum, readMigrations } from '../../infra/migrations.ts';
import { diffSchemaAgainstDatabase } from '../../infra/schema-engine.ts';
import { migrationsDir } from '../../infra/platform.ts';
import { freshDatabase } from '../support/databases.ts';

const schemaPath = path.join(migrationsDir, '..', 'schema.prisma');

describe('migrations', () => {
  it("bring a database exactly to schema.prisma (an empty diff from Prisma's schema engine)", async () => {
    const url = await freshDatabase(); // cloned from the template that the migrations built
    expect(await diffSchemaAgainstDatabase(url, schemaPath)).toBe('');
  });

  it("keep Prisma's bookkeeping, so `prisma migrate deploy` can take over", async () => {
    const url = await freshDatabase();
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      const rows = (
        await client.query(
          'select migration_name, checksum, finished_at, applied_steps_count, rolled_back_at from _prisma_migrations order by migration_name',
        )
      ).rows;
      const files = await readMigrations(migrationsDir);
      expect(rows.map((r) => r.migration_name)).toEqual(files.map((f) => f.name));
      for (const [i, f] of files.entries()) {
        expect(rows[i].checksum).toBe(migrationChecksum(f.script));
        expect(rows[i].finished_at).not.toBeNull();
        expect(rows[i].rolled_back_at).toBeNull();
      }
    } finally {
      await client.end();
    }
    // A second run applies nothing.
    expect((await applyMigrations(url, migrationsDir)).applied).toEqual([]);
  });

  it('refuses to go on when an applied migration was edited afterwards', async () => {
    const url = await freshDatabase();
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    await client.query("update _prisma_migrations set checksum = repeat('0', 64)");
    await client.end();
    await expect(applyMigrations(url, migrationsDir)).rejects.toThrow(/checksum|modified|changed/i);
  });

  it('can run from two processes at once without applying anything twice', async () => {
    const url = await freshDatabase();
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    // Start from empty: drop everything the template brought.
    await client.query('drop schema public cascade; create schema public');
    await client.end();
    const [a, b] = await Promise.all([applyMigrations(url, migrationsDir), applyMigrations(url, migrationsDir)]);
    const files = await readMigrations(migrationsDir);
    expect([...a.applied, ...b.applied].sort()).toEqual(files.map((f) => f.name).sort());
    expect(await diffSchemaAgainstDatabase(url, schemaPath)).toBe('');
  });
});
