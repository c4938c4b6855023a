/**
 * The job store's own connections against a real PostgreSQL whose server ends them (as a restart
 * does): a client held for several statements must turn that into a failed statement, never into
 * an unhandled 'error' that ends the process (the whole API stopped once this way mid-test).
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createJobPool } from '../../domain/jobs/index.ts';
import { JobStore } from '../../domain/jobs/index.ts';
import { freshDatabase } from '../support/databases.ts';

let url: string;
let pool: pg.Pool;

beforeAll(async () => {
  url = await freshDatabase();
  pool = createJobPool(url, 4);
});

afterAll(async () => {
  await pool?.end();
});

/** Ends every other session on the database, the way a server shutting down does (57P01). */
async function terminateSessions(): Promise<number> {
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  try {
    const { rows } = await admin.query<{ n: string }>(
      'SELECT count(pg_terminate_backend(pid)) AS n FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()',
    );
    return Number(rows[0]?.n ?? 0);
  } finally {
    await admin.end();
  }
}

describe('job store connections', () => {
  it('survives the server ending a connection it holds: the sweep fails, the process does not, the next one works', async () => {
    const store = new JobStore(pool, 'test');
    const uncaught: unknown[] = [];
    const onUncaught = (err: unknown): void => void uncaught.push(err);
    process.on('uncaughtException', onUncaught);
    try {
      const held = store.exclusively(4242, async () => {
        // The lock's own session is idle here while the sweep works on other connections.
        expect(await terminateSessions()).toBeGreaterThan(0);
        await new Promise((resolve) => setTimeout(resolve, 300));
      });
      // Unlocking on the ended session fails; that is the sweep's failure to report.
      await expect(held).rejects.toThrow();
      expect(uncaught).toEqual([]);
      // The broken client did not go back to the pool: the next sweep gets a working one.
      expect(await store.exclusively(4242, async () => undefined)).toBe(true);
    } finally {
      process.removeListener('uncaughtException', onUncaught);
    }
  });
});
