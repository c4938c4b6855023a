/**
 * What every part of the job store stands on: the pool, its prepared statements, the retention of
 * finished jobs and the checkout of a client for several statements. JobStore (queue.ts) adds the
 * job state changes, JobSupervision (queue-supervision.ts) the workflow's and sweeper's statements.
 */
import pg from 'pg';
import type { SqlRunner } from './lost-workers.ts';
import { DEFAULT_RETENTION, retainSql, statementName, type Retention } from './rows.ts';

/** The pool a JobStore runs on. `tag` names the calling process in NOTIFY payloads. */
export class JobStoreBase {
  protected readonly RETAIN: string;

  constructor(
    readonly pool: pg.Pool,
    readonly tag: string,
    readonly retention: Retention = DEFAULT_RETENTION,
  ) {
    this.RETAIN = retainSql(retention);
  }

  /**
   * The rows of one statement on this store's pool, prepared (statementName): the queue's own, and
   * the key and endpoint reads that API processes make here rather than through Prisma.
   */
  async rows<T>(text: string, values: unknown[]): Promise<T[]> {
    return (await this.pool.query({ name: statementName(text), text, values })).rows as T[];
  }

  /** This store's connections as a SqlRunner. */
  protected readonly sql: SqlRunner = <T>(text: string, values: unknown[]) => this.rows<T>(text, values);

  /**
   * A client of the pool for several statements. While checked out it has no error listener of the
   * pool's: a server that goes away meanwhile (a PostgreSQL restart) would emit an unhandled 'error'
   * and end the process. The listener here keeps it to the next query's failure, and a broken
   * client is destroyed on release instead of going back to the pool.
   */
  protected async checkout(): Promise<{ client: pg.PoolClient; release: () => void }> {
    const client = await this.pool.connect();
    let broken: Error | undefined;
    const onError = (err: Error): void => {
      broken = err;
    };
    client.on('error', onError);
    return {
      client,
      release: () => {
        client.removeListener('error', onError);
        client.release(broken);
      },
    };
  }
}
