/**
 * One `pg` connection from a Prisma-style database URL, shared by the migration runner
 * (infra/migrations.ts) and the schema engine's driver adapter (infra/schema-engine-adapter.ts).
 */
import pg from 'pg';
import pRetry from 'p-retry';

/** pg connection settings from a Prisma-style URL (`?schema=` becomes the search_path). */
function connectionConfig(databaseUrl: string): { config: pg.ClientConfig; schema: string } {
  const url = new URL(databaseUrl);
  const schema = url.searchParams.get('schema') ?? 'public';
  url.searchParams.delete('schema');
  return { config: { connectionString: url.toString() }, schema };
}

const quoteIdent = (name: string): string => `"${name.replaceAll('"', '""')}"`;

/**
 * One connection. pglite-socket accepts one client by default and drops extra ones right away
 * ("Connection terminated unexpectedly"), so retry for a while instead of failing at once.
 */
export async function connect(
  databaseUrl: string,
  retryForMs = 30_000,
): Promise<{ client: pg.Client; schema: string }> {
  const { config, schema } = connectionConfig(databaseUrl);
  const busy = (error: unknown) =>
    /Connection terminated unexpectedly|ECONNRESET|too many clients/i.test(String(error));
  return pRetry(
    async () => {
      const client = new pg.Client(config);
      client.on('error', () => {}); // a dropped idle connection surfaces on the next query
      try {
        await client.connect();
        await client.query(`SET search_path TO ${quoteIdent(schema)}`);
        return { client, schema };
      } catch (error) {
        await client.end().catch(() => {});
        throw error;
      }
    },
    {
      retries: Infinity,
      minTimeout: 100,
      maxTimeout: 2_000,
      maxRetryTime: retryForMs,
      shouldRetry: ({ error }) => busy(error),
    },
  );
}
