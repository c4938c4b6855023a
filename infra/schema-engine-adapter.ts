/**
 * A minimal single-connection `pg` driver adapter for Prisma's WebAssembly schema engine
 * (infra/schema-engine.ts), and the shadow databases the engine replays the migration history into:
 * a throwaway in-memory PGlite unless a disposable `shadowDatabaseUrl` is given.
 */
import pg from 'pg';
import { PGlite } from '@electric-sql/pglite';
import { PGLiteSocketServer } from '@electric-sql/pglite-socket';
import {
  ColumnTypeEnum,
  DriverAdapterError,
  type ArgType,
  type ColumnType,
  type IsolationLevel,
  type SqlDriverAdapter,
  type SqlMigrationAwareDriverAdapterFactory,
  type SqlQuery,
  type SqlResultSet,
  type Transaction,
} from '@prisma/driver-adapter-utils';
import { connect } from './migration-connection.ts';
import { MIGRATIONS_TABLE_DDL } from './migrations.ts';

const rawText = (value: string): string => value;
type TypeId = Parameters<typeof pg.types.getTypeParser>[0];
const pgParser = (oid: number) => pg.types.getTypeParser(oid as TypeId) as (value: string) => unknown;
// Column types the engine reads; everything else (text, varchar, name, enums, ...) is Text.
// (@prisma/adapter-pg 7.10 rejects "char", which the engine's schema describer selects.)
const COLUMN_TYPES: Record<number, [ColumnType, (value: string) => unknown]> = {
  18: [ColumnTypeEnum.Character, rawText],
  16: [ColumnTypeEnum.Boolean, pgParser(16)],
  20: [ColumnTypeEnum.Int64, rawText],
  21: [ColumnTypeEnum.Int32, Number],
  23: [ColumnTypeEnum.Int32, Number],
  26: [ColumnTypeEnum.Int64, rawText],
  700: [ColumnTypeEnum.Float, Number],
  701: [ColumnTypeEnum.Double, Number],
  1700: [ColumnTypeEnum.Numeric, rawText],
  114: [ColumnTypeEnum.Json, rawText],
  3802: [ColumnTypeEnum.Json, rawText],
  2950: [ColumnTypeEnum.Uuid, rawText],
  1082: [ColumnTypeEnum.Date, rawText],
  1083: [ColumnTypeEnum.Time, rawText],
  1114: [ColumnTypeEnum.DateTime, (v) => `${v.replace(' ', 'T')}+00:00`],
  1184: [ColumnTypeEnum.DateTime, (v) => v.replace(' ', 'T').replace(/[+-]\d{2}(:\d{2})?$/, '+00:00')],
  17: [ColumnTypeEnum.Bytes, pgParser(17)],
  1000: [ColumnTypeEnum.BooleanArray, pgParser(1000)],
  1005: [ColumnTypeEnum.Int32Array, pgParser(1007)],
  1007: [ColumnTypeEnum.Int32Array, pgParser(1007)],
  1016: [ColumnTypeEnum.Int64Array, pgParser(1009)],
  1002: [ColumnTypeEnum.CharacterArray, pgParser(1009)],
  1003: [ColumnTypeEnum.TextArray, pgParser(1009)],
  1009: [ColumnTypeEnum.TextArray, pgParser(1009)],
  1014: [ColumnTypeEnum.TextArray, pgParser(1009)],
  1015: [ColumnTypeEnum.TextArray, pgParser(1009)],
};
const columnType = (oid: number): ColumnType => COLUMN_TYPES[oid]?.[0] ?? ColumnTypeEnum.Text;
const parseValue = (oid: number, value: string): unknown => (COLUMN_TYPES[oid]?.[1] ?? rawText)(value);

function toPgArg(arg: unknown, type: ArgType | undefined): unknown {
  if (Array.isArray(arg)) return arg.map((item) => toPgArg(item, type));
  if (typeof arg === 'string' && type?.scalarType === 'bytes') return Buffer.from(arg, 'base64');
  if (typeof arg === 'string' && type?.scalarType === 'datetime') return new Date(arg).toISOString();
  return arg;
}

function asAdapterError(error: unknown): unknown {
  if (!(error instanceof pg.DatabaseError)) return error;
  return new DriverAdapterError({
    kind: 'postgres',
    code: error.code ?? '',
    severity: error.severity ?? 'ERROR',
    message: error.message,
    detail: error.detail,
    column: error.column,
    hint: error.hint,
  });
}

/** The subset of a Prisma driver adapter that the schema engine uses, over one `pg.Client`. */
class PgAdapter implements SqlDriverAdapter {
  readonly provider = 'postgres';
  readonly adapterName = 'gantry-pg';

  constructor(
    private readonly client: pg.Client,
    private readonly schema: string,
    private readonly release: () => Promise<void>,
  ) {}

  private async run(text: string, values?: unknown[]): Promise<pg.QueryResult<unknown[]>> {
    try {
      return await this.client.query<unknown[]>({
        text,
        values,
        rowMode: 'array',
        types: { getTypeParser: (oid: number) => (value: string) => parseValue(oid, value) },
      });
    } catch (error) {
      throw asAdapterError(error);
    }
  }

  async queryRaw({ sql, args, argTypes }: SqlQuery): Promise<SqlResultSet> {
    const result = await this.run(
      sql,
      args.map((arg, i) => toPgArg(arg, argTypes[i])),
    );
    return {
      columnNames: result.fields.map((f) => f.name),
      columnTypes: result.fields.map((f) => columnType(f.dataTypeID)),
      rows: result.rows,
    };
  }

  async executeRaw({ sql, args, argTypes }: SqlQuery): Promise<number> {
    return (
      (
        await this.run(
          sql,
          args.map((arg, i) => toPgArg(arg, argTypes[i])),
        )
      ).rowCount ?? 0
    );
  }

  async executeScript(script: string): Promise<void> {
    try {
      await this.client.query(script); // simple protocol: the whole script in one round trip
    } catch (error) {
      throw asAdapterError(error);
    }
  }

  async startTransaction(isolationLevel?: IsolationLevel): Promise<Transaction> {
    await this.run(isolationLevel ? `BEGIN ISOLATION LEVEL ${isolationLevel}` : 'BEGIN');
    // Like @prisma/adapter-pg: the engine sends COMMIT/ROLLBACK itself (usePhantomQuery: false).
    return {
      provider: this.provider,
      adapterName: this.adapterName,
      options: { usePhantomQuery: false },
      queryRaw: (query) => this.queryRaw(query),
      executeRaw: (query) => this.executeRaw(query),
      commit: async () => {},
      rollback: async () => {},
    };
  }

  getConnectionInfo(): { schemaName: string; supportsRelationJoins: boolean } {
    return { schemaName: this.schema, supportsRelationJoins: true };
  }

  private disposed: Promise<void> | undefined;
  /** Idempotent: the engine disposes shadow connections itself, `adapterFactory` closes the rest. */
  dispose(): Promise<void> {
    this.disposed ??= this.release();
    return this.disposed;
  }
}

async function openAdapter(databaseUrl: string): Promise<PgAdapter> {
  const { client, schema } = await connect(databaseUrl);
  return new PgAdapter(client, schema, () => client.end().catch(() => {}));
}

/** A fresh in-memory PGlite on an ephemeral loopback port. */
export async function startScratchPglite(): Promise<{ url: string; stop: () => Promise<void> }> {
  const db = await PGlite.create();
  const server = new PGLiteSocketServer({ db, host: '127.0.0.1', port: 0 });
  await server.start();
  return {
    url: `postgresql://postgres@${server.getServerConn()}/postgres`,
    stop: async () => {
      await server.stop();
      await db.close();
    },
  };
}

/** Empties a shadow database before each use, as Prisma does (the wasm engine does not). */
const WIPE_DATABASE_SQL = `DO $$
DECLARE s name;
BEGIN
  FOR s IN SELECT nspname FROM pg_namespace
           WHERE nspname NOT IN ('pg_catalog', 'information_schema') AND nspname NOT LIKE 'pg\\_%'
  LOOP
    EXECUTE format('DROP SCHEMA %I CASCADE', s);
  END LOOP;
  CREATE SCHEMA public;
END $$;`;

export interface EngineOptions {
  /**
   * Disposable database for replaying the migration history: it is WIPED (all schemas dropped)
   * each time the engine connects to it. Default: one scratch in-memory PGlite per engine session.
   */
  shadowDatabaseUrl?: string;
}

/**
 * Driver adapter factory for the engine. The engine disposes shadow connections but not its main
 * one, so every connection (and the scratch PGlite) is tracked here and closed by `close()`.
 */
export function adapterFactory(
  mainUrl: string,
  opts: EngineOptions,
): SqlMigrationAwareDriverAdapterFactory & { close(): Promise<void> } {
  const opened: PgAdapter[] = [];
  let scratchShadow: ReturnType<typeof startScratchPglite> | undefined;
  const open = async (url: string): Promise<PgAdapter> => {
    const adapter = await openAdapter(url);
    opened.push(adapter);
    return adapter;
  };
  return {
    provider: 'postgres',
    adapterName: 'gantry-pg',
    connect: () => open(mainUrl),
    connectToShadowDb: async () => {
      const adapter = await open(opts.shadowDatabaseUrl ?? (await (scratchShadow ??= startScratchPglite())).url);
      await adapter.executeScript(WIPE_DATABASE_SQL);
      // Data migrations may read their own history (20261124020000 does); the replay has none.
      await adapter.executeScript(MIGRATIONS_TABLE_DDL);
      return adapter;
    },
    close: async () => {
      await Promise.all(opened.splice(0).map((adapter) => adapter.dispose()));
      await (await scratchShadow)?.stop();
    },
  };
}
