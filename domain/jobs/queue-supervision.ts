/**
 * The job store's statements for a job's workflow (its TTL, execution timeout, worker loss and
 * webhook) and for the sweeps that mend what a crash left undone (expired rows, missed signals,
 * webhooks never tried). JobStore (queue.ts) extends this class: callers reach them on the store.
 */
import { requeueLostJobs } from './lost-workers.ts';
import { COLS, COLS_LEAN, JOB_CHANNEL, type JobRow } from './rows.ts';
import { JobStoreBase } from './queue-base.ts';

/** The supervision and sweep statements of the job store. */
export class JobSupervision extends JobStoreBase {
  // ------------------------------------------------------------------ supervision (the job workflow)

  async snapshotRow(jobId: string): Promise<JobRow | null> {
    const [row] = await this.rows<JobRow>(`SELECT ${COLS_LEAN} FROM "Job" j WHERE j.id = $1`, [jobId]);
    return row ?? null;
  }

  /**
   * TTL reached: a queued job is removed; a running one is cancelled, stopped on its worker and
   * hidden at once. Returns the row afterwards (null: removed).
   */
  async expire(jobId: string): Promise<JobRow | null> {
    const deleted = await this.rows<{ id: string }>(
      `WITH d AS (DELETE FROM "Job" WHERE id = $1 AND status = 'IN_QUEUE' AND "createdAt" + "ttlMs" * interval '1 millisecond' <= now() RETURNING id)
       SELECT d.id, pg_notify('${JOB_CHANNEL}', 'j:' || $2 || ':' || d.id) FROM d`,
      [jobId, this.tag],
    );
    if (deleted.length > 0) return null;
    await this.rows(
      `WITH j AS (
         UPDATE "Job" j SET status = 'CANCELLED', error = 'job TTL expired', "completedAt" = now(), seq = j.seq + 1,
           "expiresAt" = now(), "stopRequestedAt" = now()
         WHERE j.id = $1 AND j.status = 'IN_PROGRESS' AND j."createdAt" + j."ttlMs" * interval '1 millisecond' <= now()
         RETURNING j.id, j."workerId")
       SELECT pg_notify('${JOB_CHANNEL}', 'j:' || $2 || ':' || j.id), pg_notify('${JOB_CHANNEL}', 's:' || $2 || ':' || j."workerId") FROM j`,
      [jobId, this.tag],
    );
    return this.snapshotRow(jobId);
  }

  /**
   * Enforces a running job's limits: past its execution timeout it is TIMED_OUT (and stopped on its
   * worker); when its worker has not listed it in a ping for `lostAfterMs`, its worker counts as lost
   * (requeueLostJobs). Returns the row afterwards.
   */
  async supervise(jobId: string, lostAfterMs: number): Promise<JobRow | null> {
    await this.rows(
      `WITH j AS (
         UPDATE "Job" j SET status = 'TIMED_OUT', error = 'execution timeout exceeded', "completedAt" = now(), seq = j.seq + 1,
           "expiresAt" = ${this.RETAIN}, "stopRequestedAt" = now()
         WHERE j.id = $1 AND j.status = 'IN_PROGRESS' AND j."startedAt" + j."executionTimeoutMs" * interval '1 millisecond' <= now()
         RETURNING j.id, j."workerId")
       SELECT pg_notify('${JOB_CHANNEL}', 'j:' || $2 || ':' || j.id), pg_notify('${JOB_CHANNEL}', 's:' || $2 || ':' || j."workerId") FROM j`,
      [jobId, this.tag],
    );
    await requeueLostJobs(this.sql, { jobId, silentForMs: lostAfterMs }, { tag: this.tag, retention: this.retention });
    return this.snapshotRow(jobId);
  }

  /** The final job object a webhook receives, if the job is still at `seq` and not yet delivered. */
  async webhookPayload(jobId: string, seq: number): Promise<{ url: string; row: JobRow } | null> {
    const [row] = await this.rows<JobRow>(
      `SELECT ${COLS} FROM "Job" j WHERE j.id = $1 AND j.seq = $2 AND j.webhook IS NOT NULL AND j."webhookDeliveredAt" IS NULL`,
      [jobId, seq],
    );
    return row?.webhook ? { url: row.webhook, row } : null;
  }

  async webhookAttempted(jobId: string, seq: number, delivered: boolean): Promise<void> {
    await this.pool.query({
      text: `UPDATE "Job" SET "webhookAttempts" = "webhookAttempts" + 1, "webhookDeliveredAt" = CASE WHEN $3 THEN now() END
             WHERE id = $1 AND seq = $2`,
      values: [jobId, seq, delivered],
    });
  }

  // ------------------------------------------------------------------ sweeps (safety nets)

  /**
   * Deletes jobs past their expiry, in batches (retention, and TTL where no workflow acted). The
   * finished ones join their endpoint's totals in the same statement: /health counts kept jobs plus
   * totals, so a job leaves one as it enters the other. A finished job stays until the metrics
   * rollup has counted its minute (domain/metrics/rollup.ts; no rollup yet: no wait), or at most 15
   * minutes past its expiry (the rollup reaches 10 minutes back): a short retention loses no job
   * from the metrics.
   */
  async deleteExpired(limit: number): Promise<number> {
    const r = await this.pool.query<{ n: number }>({
      text: `WITH d AS (
               DELETE FROM "Job" WHERE id IN (SELECT id FROM "Job" WHERE "expiresAt" <= now() - interval '1 minute'
                 AND ("completedAt" IS NULL OR "expiresAt" <= now() - interval '15 minutes'
                   OR "completedAt" < coalesce((SELECT "rolledUntil" FROM "MetricRollupState" WHERE id = 1), 'infinity'))
                 LIMIT $1::int FOR UPDATE SKIP LOCKED)
               RETURNING "endpointId", "accountId", status, retries),
             added AS (
               INSERT INTO "EndpointJobTotals" AS t ("endpointId", "accountId", completed, failed, retried)
               SELECT "endpointId", "accountId", count(*) FILTER (WHERE status = 'COMPLETED'),
                      count(*) FILTER (WHERE status IN ('FAILED', 'TIMED_OUT')), count(*) FILTER (WHERE retries > 0)
               FROM d WHERE status IN ('COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT') GROUP BY 1, 2
               ON CONFLICT ("endpointId", "accountId") DO UPDATE SET completed = t.completed + EXCLUDED.completed,
                 failed = t.failed + EXCLUDED.failed, retried = t.retried + EXCLUDED.retried)
             SELECT count(*)::int AS n FROM d`,
      values: [limit],
    });
    return r.rows[0]?.n ?? 0;
  }

  /**
   * Running jobs whose limits passed more than `graceMs` ago: their workflow would have acted by now,
   * so it missed a signal (a crash between a commit and the signal). They get a fresh one.
   */
  async overdueRunning(lostAfterMs: number, graceMs: number, limit: number): Promise<JobRow[]> {
    return this.rows<JobRow>(
      `SELECT ${COLS_LEAN} FROM "Job" j
       WHERE j.status = 'IN_PROGRESS'
         AND (GREATEST(j."startedAt", COALESCE(j."lastSeenAt", j."startedAt")) + ($1::float8 + $2::float8) * interval '1 millisecond' <= now()
           OR j."startedAt" + (j."executionTimeoutMs" + $2::float8) * interval '1 millisecond' <= now()
           OR j."createdAt" + (j."ttlMs" + $2::float8) * interval '1 millisecond' <= now())
       LIMIT $3::int`,
      [lostAfterMs, graceMs, limit],
    );
  }

  /**
   * Finished jobs whose webhook no workflow has tried within `graceMs` of completion. Scans by start
   * time (the index it has); a job cancelled before it started is left to its workflow's TTL timer.
   */
  async undeliveredWebhooks(graceMs: number, windowMs: number, limit: number): Promise<JobRow[]> {
    return this.rows<JobRow>(
      `SELECT ${COLS_LEAN} FROM "Job" j
       WHERE j.status IN ('COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT')
         AND j."startedAt" > now() - $2::float8 * interval '1 millisecond'
         AND j."completedAt" <= now() - $1::float8 * interval '1 millisecond'
         AND j.webhook IS NOT NULL AND j."webhookDeliveredAt" IS NULL AND j."webhookAttempts" = 0
       LIMIT $3::int`,
      [graceMs, windowMs, limit],
    );
  }

  /** The states whose workflows were signalled: their marks go (only at the seq signalled). */
  async clearSignalDue(ids: string[], seqs: number[]): Promise<void> {
    if (ids.length === 0) return;
    await this.pool.query({
      text: `UPDATE "Job" j SET "signalDueAt" = NULL FROM unnest($1::text[], $2::int[]) AS s(id, seq)
             WHERE j.id = s.id AND j.seq = s.seq AND j."signalDueAt" IS NOT NULL`,
      values: [ids, seqs],
    });
  }

  /**
   * Jobs whose workflow was never confirmed told of their state (a new job's start, a final state)
   * `graceMs` after it was recorded: the process that recorded it went down first. A scan without an index: the column is almost always empty, and an
   * index would make every clearing update rewrite all of the row's index entries.
   */
  async unsignalled(
    graceMs: number,
    limit: number,
  ): Promise<Array<{ id: string; seq: number; endpointId: string; accountId: string }>> {
    return this.rows<{ id: string; seq: number; endpointId: string; accountId: string }>(
      `SELECT id, seq, "endpointId", "accountId" FROM "Job" WHERE "signalDueAt" < now() - $1::float8 * interval '1 millisecond' LIMIT $2::int`,
      [graceMs, limit],
    );
  }

  /** Runs `fn` only if no other process holds the named advisory lock (one sweeper at a time). */
  async exclusively(lockKey: number, fn: () => Promise<void>): Promise<boolean> {
    const { client, release } = await this.checkout();
    try {
      const { rows } = await client.query<{ locked: boolean }>({
        text: 'SELECT pg_try_advisory_lock($1) AS locked',
        values: [lockKey],
      });
      if (!rows[0]?.locked) return false;
      try {
        await fn();
      } finally {
        await client.query({ text: 'SELECT pg_advisory_unlock($1)', values: [lockKey] });
      }
      return true;
    } finally {
      release();
    }
  }
}
