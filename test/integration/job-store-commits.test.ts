/**
 * Which job-queue writes wait for the WAL flush (domain/jobs/queue.ts, relaxedCommit). Each statement
 * runs inside a transaction left open, so that the setting its commit would use can be read: a
 * write someone is answered on (a /run insert, a result) keeps the session's `synchronous_commit`;
 * a take and a runsync insert (told to nobody before a durable commit that follows) turn it off for
 * their own transaction only. bench/jobs.ts measures the flushes per job that this saves. And the
 * queue's statements are prepared once per connection.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb, type Db } from '../../domain/shared/index.ts';
import { randomString } from '../../domain/shared/index.ts';
import { JobStore } from '../../domain/jobs/index.ts';
import { pgConfig, type NewJob } from '../../domain/jobs/index.ts';
import { freshDatabase } from '../support/databases.ts';

let url: string;
let db: Db;
let client: pg.Client;
let store: JobStore;
let endpointId: string;
let accountId: string;
const workerId = `wk${randomString(12)}`;

beforeAll(async () => {
  url = await freshDatabase();
  db = createDb(url, 2);
  accountId = `acct${randomString(10)}`;
  endpointId = `ep${randomString(12)}`;
  await db.account.create({ data: { id: accountId, email: `${accountId}@example.test`, name: 'commits' } });
  await db.endpoint.create({
    data: { id: endpointId, accountId, name: 'commits', image: 'i', gpuPools: ['AMPERE_24'] },
  });
  await db.worker.create({ data: { id: workerId, endpointId, status: 'IDLE' } });
  // The test server runs with synchronous_commit off; this session asks for durable commits, as a production server gives.
  client = new pg.Client({ ...pgConfig(url), options: '-c TimeZone=UTC -c synchronous_commit=on' });
  await client.connect();
  // One connection, so that the open transaction is the store's own: a pg.Client answers query() as a pool does.
  store = new JobStore(client as unknown as pg.Pool, 'commits');
});

afterAll(async () => {
  await client?.end();
  await db?.$disconnect();
});

const job = (sync: boolean): NewJob => ({
  id: `job-${randomString(12)}`,
  endpointId,
  accountId,
  inputJson: '{"n":1}',
  webhook: null,
  executionTimeoutMs: 60_000,
  ttlMs: 60_000,
  lowPriority: false,
  sync,
});

/** Runs `write` in a transaction, reads the commit setting it left, and commits. */
async function commitSetting(write: () => Promise<unknown>): Promise<string> {
  await client.query('BEGIN');
  try {
    await write();
    return (await client.query<{ s: string }>(`SELECT current_setting('synchronous_commit') AS s`)).rows[0]!.s;
  } finally {
    await client.query('COMMIT');
  }
}

describe('job queue commits', () => {
  it('a /run insert and a result wait for the flush; a runsync insert, a take and an untake do not', async () => {
    const queued = job(false);
    expect(await commitSetting(() => store.insert(queued, 1000))).toBe('on');
    const sync = job(true);
    expect(await commitSetting(() => store.insert(sync, 1000))).toBe('off');
    // The local setting ends with its transaction: the session is durable again.
    expect((await client.query<{ s: string }>(`SELECT current_setting('synchronous_commit') AS s`)).rows[0]!.s).toBe(
      'on',
    );

    let taken: string[] = [];
    expect(
      await commitSetting(async () => {
        taken = (await store.take(endpointId, workerId, 2)).jobs.map((j) => j.id);
      }),
    ).toBe('off');
    expect(taken.sort()).toEqual([queued.id, sync.id].sort());
    expect(await commitSetting(() => store.untake([sync.id], workerId))).toBe('off');
    expect(
      await commitSetting(() =>
        store.finish(queued.id, workerId, { status: 'COMPLETED', outputJson: '1', error: null }),
      ),
    ).toBe('on');
    expect((await db.job.findUniqueOrThrow({ where: { id: queued.id } })).status).toBe('COMPLETED');
    expect((await db.job.findUniqueOrThrow({ where: { id: sync.id } })).status).toBe('IN_QUEUE');
    // The barrier before a relaxed write is acknowledged: a transaction of its own that commits durably.
    await expect(store.flush()).resolves.toBeUndefined();
  });

  it('prepares its statements once per connection: the same insert, take and finish again use them', async () => {
    const prepared = async (): Promise<Array<{ name: string; calls: string }>> =>
      (
        await client.query<{ name: string; calls: string }>(
          `SELECT name, generic_plans + custom_plans AS calls FROM pg_prepared_statements WHERE name LIKE 'gantry-sql-%' ORDER BY name`,
        )
      ).rows;
    const cycle = async (): Promise<void> => {
      const queued = job(false);
      await store.insert(queued, 1000);
      await store.take(endpointId, workerId, 1);
      await store.finish(queued.id, workerId, { status: 'COMPLETED', outputJson: '1', error: null });
    };
    await cycle();
    const once = await prepared();
    await cycle();
    const twice = await prepared();
    // No new statement for the same calls; each one prepared before ran again.
    expect(twice.map((p) => p.name)).toEqual(once.map((p) => p.name));
    expect(once.length).toBeGreaterThanOrEqual(3);
    expect(twice.filter((p, i) => Number(p.calls) > Number(once[i]!.calls)).length).toBeGreaterThanOrEqual(3);
  });
});
