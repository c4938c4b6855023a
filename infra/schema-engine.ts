/**
 * Prisma's own schema engine compiled to WebAssembly (@prisma/schema-engine-wasm), run offline:
 * `diffSchemaAgainstDatabase`, `createMigrationSql` and `createMigration` (what `prisma migrate
 * diff` and `prisma migrate dev --create-only` do), over the driver adapter of
 * infra/schema-engine-adapter.ts. Migration history is replayed into a throwaway in-memory PGlite
 * "shadow database" unless a disposable `shadowDatabaseUrl` is given (the engine wipes that
 * database first).
 */
import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { bindMigrationAwareSqlAdapterFactory } from '@prisma/driver-adapter-utils';
import type { MigrationList, SchemaEngine, SchemaFilter } from '@prisma/schema-engine-wasm';
import { LOCKFILE_CONTENT, LOCKFILE_NAME, readMigrations } from './migrations.ts';
import { adapterFactory, startScratchPglite, type EngineOptions } from './schema-engine-adapter.ts';

export type { EngineOptions };

type EngineModule = typeof import('@prisma/schema-engine-wasm');
// The WebAssembly global, typed here because the project's `lib` has no DOM typings.
const wasmApi = (
  globalThis as unknown as {
    WebAssembly: {
      instantiate(
        bytes: Uint8Array,
        imports: Record<string, object>,
      ): Promise<{ instance: { exports: Record<string, unknown> } }>;
    };
  }
).WebAssembly;
let engineModule: Promise<EngineModule> | undefined;

/** Instantiates the wasm by hand, so no `--experimental-wasm-modules` flag is needed. */
function loadEngineModule(): Promise<EngineModule> {
  engineModule ??= (async () => {
    const globals = globalThis as { PRISMA_WASM_PANIC_REGISTRY?: { set_message(message: string): void } };
    globals.PRISMA_WASM_PANIC_REGISTRY ??= {
      set_message(message: string) {
        process.stderr.write(`schema engine panic: ${message}\n`);
        engineModule = undefined; // a panicked wasm instance is unusable: load a fresh one next time
      },
    };
    const gluePath = createRequire(import.meta.url).resolve('@prisma/schema-engine-wasm/schema_engine_bg');
    const glue = await import('@prisma/schema-engine-wasm/schema_engine_bg');
    const bytes = await readFile(path.join(path.dirname(gluePath), 'schema_engine_bg.wasm'));
    const { instance } = await wasmApi.instantiate(bytes, { './schema_engine_bg.js': glue });
    glue.__wbg_set_wasm(instance.exports);
    const start = instance.exports.__wbindgen_start as () => void;
    start();
    return glue;
  })();
  return engineModule;
}

/** Runs `fn` with a schema engine connected to `databaseUrl` (or to a scratch PGlite if undefined). */
async function withEngine<T>(
  databaseUrl: string | undefined,
  schemaFile: { path: string; content: string },
  opts: EngineOptions,
  fn: (engine: SchemaEngine) => Promise<T>,
): Promise<T> {
  const { SchemaEngine } = await loadEngineModule();
  const scratch = databaseUrl === undefined ? await startScratchPglite() : undefined;
  const factory = adapterFactory(databaseUrl ?? scratch?.url ?? '', opts);
  try {
    const engine = await SchemaEngine.new(
      { datamodels: [[schemaFile.path, schemaFile.content]] },
      () => {}, // engine tracing logs (JSON strings); ignored
      bindMigrationAwareSqlAdapterFactory(factory),
    );
    try {
      return await fn(engine);
    } finally {
      try {
        engine.free();
      } catch {
        // after a panic the instance is gone already
      }
    }
  } finally {
    await factory.close();
    await scratch?.stop();
  }
}

export const NO_FILTER: SchemaFilter = { externalTables: [], externalEnums: [] };

async function readSchema(schemaPath: string): Promise<{ path: string; content: string }> {
  return { path: path.basename(schemaPath), content: await readFile(schemaPath, 'utf8') };
}

/**
 * Low-level access to the wasm schema engine (all methods of `prisma migrate`/`db`), connected to
 * `databaseUrl`, or to a scratch in-memory PGlite when undefined. Connections close afterwards.
 */
export async function withSchemaEngine<T>(
  databaseUrl: string | undefined,
  schemaPath: string,
  fn: (engine: SchemaEngine) => Promise<T>,
  opts: EngineOptions = {},
): Promise<T> {
  return withEngine(databaseUrl, await readSchema(schemaPath), opts, fn);
}

/** The migration history in the shape the engine expects (same as the Prisma CLI builds it). */
export async function migrationList(migrationsDir: string | null): Promise<MigrationList> {
  const lockfile = migrationsDir ? path.join(migrationsDir, LOCKFILE_NAME) : undefined;
  const migrations = migrationsDir ? await readMigrations(migrationsDir) : [];
  return {
    baseDir: migrationsDir ?? '.',
    lockfile: {
      path: LOCKFILE_NAME,
      content: lockfile && existsSync(lockfile) ? await readFile(lockfile, 'utf8') : LOCKFILE_CONTENT,
    },
    shadowDbInitScript: '',
    migrationDirectories: migrations.map((m) => ({
      path: m.name,
      migrationFile: { path: 'migration.sql', content: { tag: 'ok', value: m.script } },
    })),
  };
}

/**
 * SQL that would bring the database to `schemaPath`; '' when the database already matches
 * (`prisma migrate diff --from-config-datasource --to-schema <schemaPath> --script`).
 */
export async function diffSchemaAgainstDatabase(databaseUrl: string, schemaPath: string): Promise<string> {
  const schema = await readSchema(schemaPath);
  const result = await withEngine(databaseUrl, schema, {}, (engine) =>
    engine.diff({
      from: { tag: 'schemaDatasource', files: [schema], configDir: path.dirname(path.resolve(schemaPath)) },
      to: { tag: 'schemaDatamodel', files: [schema] },
      script: true,
      exitCode: true,
      filters: NO_FILTER,
    }),
  );
  return result.exitCode === 0 ? '' : (result.stdout ?? '');
}

/**
 * SQL of the next migration: from the state produced by the migrations in `migrationsDir`
 * (or from an empty database when null) to `schemaPath`. '' when nothing changed.
 */
export async function createMigrationSql(
  migrationsDir: string | null,
  schemaPath: string,
  opts: EngineOptions = {},
): Promise<string> {
  const schema = await readSchema(schemaPath);
  const list = await migrationList(migrationsDir);
  const result = await withEngine(undefined, schema, opts, (engine) =>
    engine.diff({
      from: { tag: 'migrations', ...list },
      to: { tag: 'schemaDatamodel', files: [schema] },
      script: true,
      exitCode: true,
      filters: NO_FILTER,
    }),
  );
  return result.exitCode === 0 ? '' : (result.stdout ?? '');
}

/** Like the Prisma CLI: "Add userRole!" -> "add_user_role" (max 200 characters). */
function slugify(name: string): string {
  return name
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .replace(/([a-z\d])([A-Z])/g, '$1_$2')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '_')
    .replace(/^_+|_+$/g, '')
    .slice(0, 200);
}

/**
 * Writes `<migrationsDir>/<timestamp>_<name>/migration.sql` for the changes between the migrations
 * and `schemaPath`, like `prisma migrate dev --create-only` (same SQL, warnings header and folder
 * name; also writes migration_lock.toml), but without touching any real database.
 * Returns the folder name, or null when the migrations already match the schema.
 */
export async function createMigration(
  migrationsDir: string,
  schemaPath: string,
  name: string,
  opts: EngineOptions = {},
): Promise<string | null> {
  const schema = await readSchema(schemaPath);
  const list = await migrationList(migrationsDir);
  const created = await withEngine(undefined, schema, opts, async (engine) => {
    // The wasm engine's createMigration cannot open a shadow database itself; it reuses the schema
    // that devDiagnostic cached for the migrations applied to the main database. So, as in a
    // `prisma migrate dev` session, apply them all to the (scratch) main database first.
    await engine.applyMigrations({ migrationsList: list, filters: NO_FILTER });
    await engine.devDiagnostic({ migrationsList: list, filters: NO_FILTER });
    return engine.createMigration({
      draft: false,
      migrationName: slugify(name),
      migrationsList: list,
      schema: { files: [schema] },
      filters: NO_FILTER,
    });
  });
  if (created.migrationScript === null) return null;
  const dir = path.join(migrationsDir, created.generatedMigrationName);
  await mkdir(dir, { recursive: true });
  await writeFile(path.join(dir, `migration.${created.extension}`), created.migrationScript, 'utf8');
  await writeFile(path.join(migrationsDir, LOCKFILE_NAME), LOCKFILE_CONTENT, 'utf8');
  return created.generatedMigrationName;
}
