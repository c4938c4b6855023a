/**
 * The job queue in PostgreSQL: every change of a job's state is one conditional SQL statement, so
 * that correctness (no job taken twice, no completion recorded twice, nothing lost on a restart)
 * stays in the database whatever the processes around it do. Wake-ups ride on LISTEN/NOTIFY: the
 * statements that make work appear send `pg_notify` in the same transaction.
 *
 * This module speaks plain SQL over node-postgres rather than Prisma: the hot path (take, done) is a
 * single statement each, and Prisma's per-query overhead was a third of the round trip here.
 */
import type { JobStatus } from '../../contracts/workflows.ts';
import { FINAL_WORKER_STATUSES_SQL } from '../workers/status.ts';
import {
  COLS,
  COLS_LEAN,
  JOB_CHANNEL,
  OF_ACCOUNT,
  type HealthCounts,
  type JobRow,
  type KeyedInsert,
  type ModelCharge,
  type NewJob,
  type Outcome,
  type TakenJob,
} from './rows.ts';
import { JobSupervision } from './queue-supervision.ts';

/**
 * A CTE (to be joined: an unread one is never run) that makes the statement's own transaction
 * commit without waiting for the WAL flush (`synchronous_commit` off for that transaction only,
 * where `when` holds), for writes nobody has been told of yet:
 * a take (lost in a crash, the job is queued again and taken again, as after a worker loss) and a
 * runsync job's insert (acknowledged only with its result, whose commit does wait and flushes the
 * WAL before it, the insert included; an early answer goes through `flush` first). Every write a
 * client or worker is answered on commits durably.
 */
const relaxedCommit = (when = 'true'): string =>
  `relaxed AS (SELECT set_config('synchronous_commit', CASE WHEN ${when} THEN 'off' ELSE current_setting('synchronous_commit') END, true))`;

/** $1-$8 of the statements that insert a job: what the submission set. */
const jobValues = (job: NewJob): unknown[] => [
  job.id,
  job.endpointId,
  job.accountId,
  job.inputJson,
  job.webhook,
  job.executionTimeoutMs,
  job.ttlMs,
  job.lowPriority,
];

/**
 * The SQL of every job state change; the statements of supervision and sweeps come from
 * JobSupervision (queue-supervision.ts), the pool and its statements from JobStoreBase (queue-base.ts).
 */
export class JobStore extends JobSupervision {
  /**
   * Queues a job unless its endpoint already holds `maxQueued` queued jobs (undefined: the queue is
   * full). The count stops at the cap, so it costs at most that many index entries. The job is
   * marked signal-due: its workflow does not exist until a signal-with-start is confirmed, and a
   * process killed between this commit and that signal leaves the mark for the sweep to mend.
   */
  async insert(job: NewJob, maxQueued: number): Promise<JobRow | undefined> {
    const [row] = await this.rows<JobRow>(
      `WITH ${relaxedCommit('$9::boolean')}, j AS (
         INSERT INTO "Job" (id, "endpointId", "accountId", status, input, webhook, "executionTimeoutMs", "ttlMs", "lowPriority", sync, "createdAt", "expiresAt", "signalDueAt", "modelId")
         SELECT $1, $2, $3, 'IN_QUEUE', $4::jsonb, $5, $6::int, $7::int, $8::boolean, $9::boolean, now(), now() + $7::int * interval '1 millisecond', now(), $12
         WHERE (SELECT count(*) FROM (SELECT 1 FROM "Job" WHERE "endpointId" = $2 AND status = 'IN_QUEUE' LIMIT $11::int) queued) < $11::int
         RETURNING *)
       -- A /run job commits durably (its answer acknowledges it), a runsync job relaxed.
       SELECT ${COLS_LEAN}, pg_notify('${JOB_CHANNEL}', 'q:' || $10 || ':' || j."endpointId") FROM j CROSS JOIN relaxed`,
      [...jobValues(job), job.sync, this.tag, maxQueued, job.modelId ?? null],
    );
    return row;
  }

  /**
   * A runsync job inserted already taken by a worker whose take waits in this process (handoff.ts):
   * the insert and the take in one statement. Relaxed like a runsync insert and a take (the client
   * is answered with the result, whose commit flushes this one); no queue notification, since
   * nothing was queued. The queue cap does not apply: the job never waits in the queue.
   */
  async insertTaken(job: NewJob, workerId: string): Promise<TakenJob | undefined> {
    const [row] = await this.rows<TakenJob>(
      `WITH ${relaxedCommit()}, j AS (
         INSERT INTO "Job" (id, "endpointId", "accountId", status, input, webhook, "executionTimeoutMs", "ttlMs", "lowPriority", sync, "createdAt", "expiresAt", "signalDueAt", "modelId", "workerId", "startedAt", seq)
         SELECT $1, $2, $3, 'IN_PROGRESS', $4::jsonb, $5, $6::int, $7::int, $8::boolean, true, now(), now() + $7::int * interval '1 millisecond', now(), $9, $10, now(), 1
         -- Never to a frozen worker (FlashBoot standby): the caller queues the job instead.
         WHERE NOT EXISTS (SELECT 1 FROM "Worker" w WHERE w.id = $10 AND w.status = 'STANDBY')
         RETURNING *)
       SELECT ${COLS_LEAN}, j.input FROM j CROSS JOIN relaxed`,
      [...jobValues(job), job.modelId ?? null, workerId],
    );
    return row;
  }

  /**
   * insert for a request with an idempotency key (idempotency.ts): the job is queued with its key
   * and request fingerprint unless the account already has a job under that key on the endpoint,
   * which is then read instead, in the same statement. The key's unique index decides, so two
   * concurrent submits, in one process or two, create one job. Only submits with a key come here:
   * `insert`'s statement, the path of every other job, is unchanged by keys.
   *
   * A job past its expiry still holds its key until the sweep deletes it: its key is released and
   * the insert tried again, so that a key is bound to its job exactly while the job can be read.
   */
  async insertOnce(
    job: NewJob,
    key: { key: string; hash: Buffer },
    maxQueued: number,
    withOutput: boolean,
  ): Promise<KeyedInsert> {
    for (let attempt = 0; attempt < 3; attempt++) {
      const [found] = await this.rows<
        JobRow & { created: boolean; sameRequest: boolean; live: boolean; notified: unknown }
      >(
        `WITH ${relaxedCommit('$9::boolean')}, ins AS (
           INSERT INTO "Job" (id, "endpointId", "accountId", status, input, webhook, "executionTimeoutMs", "ttlMs", "lowPriority", sync, "createdAt", "expiresAt", "signalDueAt", "modelId", "idempotencyKey", "idempotencyHash")
           SELECT $1, $2, $3, 'IN_QUEUE', $4::jsonb, $5, $6::int, $7::int, $8::boolean, $9::boolean, now(), now() + $7::int * interval '1 millisecond', now(), $12, $13, $14::bytea
           WHERE (SELECT count(*) FROM (SELECT 1 FROM "Job" WHERE "endpointId" = $2 AND status = 'IN_QUEUE' LIMIT $11::int) queued) < $11::int
           ON CONFLICT ("accountId", "endpointId", "idempotencyKey") WHERE "idempotencyKey" IS NOT NULL DO NOTHING
           RETURNING *)
         SELECT ${COLS_LEAN}, true AS created, true AS "sameRequest", true AS live,
           pg_notify('${JOB_CHANNEL}', 'q:' || $10 || ':' || j."endpointId")::text AS notified
         FROM ins j CROSS JOIN relaxed
         UNION ALL
         -- The job already under the key (seen from this statement's snapshot: one committed while
         -- the insert waited on its key is read by the next attempt).
         SELECT ${withOutput ? COLS : COLS_LEAN}, false, j."idempotencyHash" = $14::bytea, j."expiresAt" > now(), NULL
         FROM "Job" j
         WHERE j."accountId" = $3 AND j."endpointId" = $2 AND j."idempotencyKey" = $13 AND NOT EXISTS (SELECT 1 FROM ins)`,
        [...jobValues(job), job.sync, this.tag, maxQueued, job.modelId ?? null, key.key, key.hash],
      );
      if (!found) {
        // Neither inserted nor read: the queue is full, unless another submit committed a job under
        // the key after this statement's snapshot was taken (then the next attempt reads it).
        const [held] = await this.rows<{ id: string }>(
          `SELECT id FROM "Job" WHERE "accountId" = $1 AND "endpointId" = $2 AND "idempotencyKey" = $3`,
          [job.accountId, job.endpointId, key.key],
        );
        if (!held) return { kind: 'full' };
        continue;
      }
      const { created, sameRequest, live, notified: _notified, ...row } = found;
      if (created) return { kind: 'created', row };
      if (live) return sameRequest ? { kind: 'replayed', row } : { kind: 'mismatch' };
      // Expired but not yet swept: the key goes free, and the next attempt inserts.
      await this.pool.query({
        text: `UPDATE "Job" SET "idempotencyKey" = NULL, "idempotencyHash" = NULL
               WHERE id = $1 AND "idempotencyKey" = $2 AND "expiresAt" <= now()`,
        values: [row.id, key.key],
      });
    }
    throw new Error('the job under an idempotency key changed three times while it was submitted');
  }

  /**
   * Waits until every commit before it is on disk: a transaction with an id of its own commits
   * durably, and WAL is flushed in order. Before a relaxed write is acknowledged after all.
   */
  async flush(): Promise<void> {
    await this.pool.query('SELECT txid_current()');
  }

  /**
   * Takes up to `limit` queued jobs for a worker, oldest first, normal priority before low. SKIP
   * LOCKED lets concurrent takers pass each other without waiting or taking the same row.
   */
  async take(endpointId: string, workerId: string, limit: number): Promise<{ jobs: TakenJob[]; more: boolean }> {
    const rows = await this.rows<TakenJob & { more: boolean }>(
      `WITH ${relaxedCommit()}, picked AS (
         SELECT id FROM "Job"
         WHERE "endpointId" = $1 AND status = 'IN_QUEUE' AND "expiresAt" > now()
           -- A frozen worker (FlashBoot standby) takes nothing, whatever its take believed when it began.
           AND NOT EXISTS (SELECT 1 FROM "Worker" w WHERE w.id = $2 AND w.status = 'STANDBY')
         ORDER BY "lowPriority", "createdAt"
         LIMIT $3::int
         FOR UPDATE SKIP LOCKED),
       j AS (
         UPDATE "Job" j SET status = 'IN_PROGRESS', "workerId" = $2, "startedAt" = now(), "lastSeenAt" = NULL, seq = j.seq + 1
         FROM picked WHERE j.id = picked.id
         RETURNING j.*)
       -- Whether queued jobs remain (seen from this statement's snapshot): when none do, the next take
       -- can wait for a wake-up without asking.
       SELECT ${COLS_LEAN}, j.input,
         EXISTS (SELECT 1 FROM "Job" q WHERE q."endpointId" = $1 AND q.status = 'IN_QUEUE' AND q."expiresAt" > now()
                 AND q.id NOT IN (SELECT id FROM picked)) AS more
       FROM j CROSS JOIN relaxed`,
      [endpointId, workerId, limit],
    );
    return {
      jobs: rows.map(({ more: _more, ...job }) => job),
      more: rows.length === 0 ? false : Boolean(rows[0]?.more),
    };
  }

  /** Puts back jobs whose take answer never reached the worker (it hung up first). */
  async untake(ids: string[], workerId: string): Promise<JobRow[]> {
    if (ids.length === 0) return [];
    return this.rows<JobRow>(
      `WITH ${relaxedCommit()}, j AS (
         UPDATE "Job" SET status = 'IN_QUEUE', "workerId" = NULL, "startedAt" = NULL, seq = seq + 1
         WHERE id = ANY($1) AND "workerId" = $2 AND status = 'IN_PROGRESS' RETURNING *)
       SELECT ${COLS_LEAN}, pg_notify('${JOB_CHANNEL}', 'q:' || $3 || ':' || j."endpointId") FROM j CROSS JOIN relaxed`,
      [ids, workerId, this.tag],
    );
  }

  /**
   * Records a worker's result. Only the worker holding the job, and only once: a repeated post (the
   * SDK retries) or a post from a worker the job was taken away from changes nothing (null). Jobs
   * of public models are not finished here (null too): their output is stored and billed first
   * (finishModelJob), and this one statement stays the whole path of every other job.
   */
  async finish(jobId: string, workerId: string, outcome: Outcome): Promise<JobRow | null> {
    const [row] = await this.rows<JobRow>(
      `WITH ${this.finishing('IS NULL')}
       SELECT ${COLS}, pg_notify('${JOB_CHANNEL}', 'j:' || $6 || ':' || j.id) FROM j`,
      [jobId, workerId, outcome.status, outcome.outputJson, outcome.error, this.tag],
    );
    return row ?? null;
  }

  /**
   * finish for a job of a public model, with its charge (if any) recorded by the same statement: a
   * completed call is billed exactly once, and never without its result.
   */
  async finishModelJob(
    jobId: string,
    workerId: string,
    outcome: Outcome,
    charge: ModelCharge | null,
  ): Promise<JobRow | null> {
    const [row] = await this.rows<JobRow>(
      `WITH ${this.finishing('IS NOT NULL')},
       c AS (
         INSERT INTO "PublicModelCharge" ("jobId", "accountId", "modelId", units, amount, "createdAt")
         SELECT j.id, j."accountId", j."modelId", $7::float8, $8::float8, now() FROM j WHERE $9::boolean
         ON CONFLICT ("jobId") DO NOTHING)
       SELECT ${COLS}, pg_notify('${JOB_CHANNEL}', 'j:' || $6 || ':' || j.id) FROM j`,
      [
        jobId,
        workerId,
        outcome.status,
        outcome.outputJson,
        outcome.error,
        this.tag,
        charge?.units ?? 0,
        charge?.amount ?? 0,
        charge !== null,
      ],
    );
    return row ?? null;
  }

  /** The CTE `j` of finish and finishModelJob: the held job's result ($1 job, $2 worker, $3-$5 the outcome), for plain jobs or a model's. */
  private finishing(model: 'IS NULL' | 'IS NOT NULL'): string {
    return `j AS (
         UPDATE "Job" j SET status = $3::"JobStatus", output = $4::jsonb, error = $5, "completedAt" = now(), seq = j.seq + 1,
           "expiresAt" = ${this.RETAIN}, "signalDueAt" = now()
         WHERE j.id = $1 AND j."workerId" = $2 AND j.status = 'IN_PROGRESS' AND j."modelId" ${model}
         RETURNING j.*)`;
  }

  /** Status and holder of a job, to tell a duplicate result from one for a job not held, and whose model (and caller) it is. */
  async holder(
    jobId: string,
  ): Promise<{ status: JobStatus; workerId: string | null; modelId: string | null; accountId: string } | null> {
    const [row] = await this.rows<{
      status: JobStatus;
      workerId: string | null;
      modelId: string | null;
      accountId: string;
    }>(`SELECT status, "workerId", "modelId", "accountId" FROM "Job" WHERE id = $1`, [jobId]);
    return row ?? null;
  }

  /** A progress update (`status: IN_PROGRESS` on job-done): shown as the output until the result. */
  async progress(jobId: string, workerId: string, outputJson: string | null): Promise<boolean> {
    const r = await this.pool.query({
      text: `WITH j AS (UPDATE "Job" SET output = $3::jsonb WHERE id = $1 AND "workerId" = $2 AND status = 'IN_PROGRESS' RETURNING id)
             SELECT pg_notify('${JOB_CHANNEL}', 'j:' || $4 || ':' || j.id) FROM j`,
      values: [jobId, workerId, outputJson, this.tag],
    });
    return (r.rowCount ?? 0) > 0;
  }

  /** Appends a stream chunk; its seq comes from the job row, whose lock orders concurrent posts. */
  async appendChunk(jobId: string, workerId: string, outputJson: string): Promise<boolean> {
    const r = await this.pool.query({
      text: `WITH j AS (
               UPDATE "Job" SET "streamTotal" = "streamTotal" + 1
               WHERE id = $1 AND "workerId" = $2 AND status = 'IN_PROGRESS' RETURNING id, "streamTotal"),
             c AS (INSERT INTO "JobStreamChunk" ("jobId", seq, output) SELECT j.id, j."streamTotal" - 1, $3::jsonb FROM j RETURNING "jobId")
             SELECT pg_notify('${JOB_CHANNEL}', 'j:' || $4 || ':' || c."jobId") FROM c`,
      values: [jobId, workerId, outputJson, this.tag],
    });
    return (r.rowCount ?? 0) > 0;
  }

  /**
   * The job as its owner may read it; null once expired or gone. `accountId`: only a job that
   * account submitted (the callers of a public model share its endpoint, not their jobs); this
   * holds for every call below that takes it.
   */
  async get(
    jobId: string,
    endpointId: string,
    withOutput = true,
    accountId: string | null = null,
  ): Promise<JobRow | null> {
    const [row] = await this.rows<JobRow>(
      `SELECT ${withOutput ? COLS : COLS_LEAN} FROM "Job" j WHERE j.id = $1 AND j."endpointId" = $2 AND j."expiresAt" > now() AND ${OF_ACCOUNT('$3')}`,
      [jobId, endpointId, accountId],
    );
    return row ?? null;
  }

  /**
   * Hands out the stream chunks not yet given to a /stream caller, moving the job's cursor in the
   * same statement: concurrent callers never get the same chunk.
   */
  async takeStream(
    jobId: string,
    endpointId: string,
    accountId: string | null = null,
  ): Promise<{ status: JobStatus; outputs: unknown[] } | null> {
    const [cursor] = await this.rows<{ status: JobStatus; from: number; to: number }>(
      `WITH cur AS (
         SELECT id, status, "streamDelivered" AS "from", "streamTotal" AS "to" FROM "Job" j
         WHERE id = $1 AND "endpointId" = $2 AND "expiresAt" > now() AND ${OF_ACCOUNT('$3')} FOR UPDATE),
       moved AS (UPDATE "Job" j SET "streamDelivered" = cur."to" FROM cur WHERE j.id = cur.id AND cur."to" > cur."from" RETURNING j.id)
       SELECT status, "from", "to" FROM cur`,
      [jobId, endpointId, accountId],
    );
    if (!cursor) return null;
    if (cursor.to <= cursor.from) return { status: cursor.status, outputs: [] };
    const chunks = await this.rows<{ output: unknown }>(
      `SELECT output FROM "JobStreamChunk" WHERE "jobId" = $1 AND seq >= $2 AND seq < $3 ORDER BY seq`,
      [jobId, cursor.from, cursor.to],
    );
    return { status: cursor.status, outputs: chunks.map((c) => c.output) };
  }

  /**
   * Cancels a queued or running job. A running one is marked for its worker's job-stop channel.
   * Returns the job after the call and whether this call cancelled it.
   */
  async cancel(
    jobId: string,
    endpointId: string,
    accountId: string | null = null,
  ): Promise<{ row: JobRow; changed: boolean } | null> {
    const [row] = await this.rows<JobRow & { prevWorker: string | null; prevStatus: JobStatus }>(
      `WITH prev AS (
         SELECT id, status, "workerId" FROM "Job" j WHERE id = $1 AND "endpointId" = $2 AND "expiresAt" > now()
           AND status IN ('IN_QUEUE', 'IN_PROGRESS') AND ${OF_ACCOUNT('$4')} FOR UPDATE),
       j AS (
         UPDATE "Job" j SET status = 'CANCELLED', "completedAt" = now(), seq = j.seq + 1, "expiresAt" = ${this.RETAIN},
           "stopRequestedAt" = CASE WHEN prev.status = 'IN_PROGRESS' THEN now() END, "signalDueAt" = now()
         FROM prev WHERE j.id = prev.id
         RETURNING j.*, prev."workerId" AS "prevWorker", prev.status AS "prevStatus")
       SELECT ${COLS_LEAN}, j."prevWorker", j."prevStatus",
         pg_notify('${JOB_CHANNEL}', 'j:' || $3 || ':' || j.id),
         CASE WHEN j."prevStatus" = 'IN_PROGRESS' THEN pg_notify('${JOB_CHANNEL}', 's:' || $3 || ':' || j."prevWorker") END
       FROM j`,
      [jobId, endpointId, this.tag, accountId],
    );
    if (row) return { row, changed: true };
    const current = await this.get(jobId, endpointId, false, accountId);
    return current ? { row: current, changed: false } : null;
  }

  /** Puts a FAILED or TIMED_OUT job back in the queue under the same id (a resubmission). */
  async retry(
    jobId: string,
    endpointId: string,
    accountId: string | null = null,
  ): Promise<{ row: JobRow; changed: boolean } | null> {
    const { client, release } = await this.checkout();
    try {
      await client.query('BEGIN');
      const r = await client.query({
        text: `WITH j AS (
                 UPDATE "Job" j SET status = 'IN_QUEUE', output = NULL, error = NULL, "workerId" = NULL, "startedAt" = NULL,
                   "completedAt" = NULL, "lastSeenAt" = NULL, "stopRequestedAt" = NULL, "stopDeliveredAt" = NULL,
                   retries = j.retries + 1, seq = j.seq + 1, "webhookAttempts" = 0, "webhookDeliveredAt" = NULL,
                   "streamTotal" = 0, "streamDelivered" = 0, "createdAt" = now(), "expiresAt" = now() + j."ttlMs" * interval '1 millisecond'
                 WHERE j.id = $1 AND j."endpointId" = $2 AND j."expiresAt" > now() AND j.status IN ('FAILED', 'TIMED_OUT') AND ${OF_ACCOUNT('$4')}
                 RETURNING j.*)
               SELECT ${COLS_LEAN}, pg_notify('${JOB_CHANNEL}', 'q:' || $3 || ':' || j."endpointId") FROM j`,
        values: [jobId, endpointId, this.tag, accountId],
      });
      if (r.rows[0]) await client.query({ text: `DELETE FROM "JobStreamChunk" WHERE "jobId" = $1`, values: [jobId] });
      await client.query('COMMIT');
      if (r.rows[0]) return { row: r.rows[0] as JobRow, changed: true };
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    } finally {
      release();
    }
    const current = await this.get(jobId, endpointId, false, accountId);
    return current ? { row: current, changed: false } : null;
  }

  /** Removes the endpoint's queued jobs (running ones stay); returns their ids. */
  async purge(endpointId: string, accountId: string | null = null): Promise<string[]> {
    const rows = await this.rows<{ id: string }>(
      `DELETE FROM "Job" j WHERE "endpointId" = $1 AND status = 'IN_QUEUE' AND ${OF_ACCOUNT('$2')} RETURNING id`,
      [endpointId, accountId],
    );
    return rows.map((r) => r.id);
  }

  /**
   * Job counts of the endpoint (of `accountId`'s jobs alone when given: a public model's caller) and
   * its workers. Finished jobs are those kept plus the totals of those the retention sweep deleted
   * (deleteExpired moves them in one statement), so the counts only grow; a queued or running job
   * past its expiry (its TTL, before its workflow acts) no longer counts.
   */
  async health(endpointId: string, accountId: string | null = null): Promise<HealthCounts> {
    const jobs = await this.rows<{ status: JobStatus; n: number; retried: number }>(
      `SELECT status, count(*)::int AS n, count(*) FILTER (WHERE retries > 0)::int AS retried
       FROM "Job" j WHERE j."endpointId" = $1 AND (j.status IN ('COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT') OR j."expiresAt" > now())
         AND ${OF_ACCOUNT('$2')} GROUP BY status`,
      [endpointId, accountId],
    );
    const [swept] = await this.rows<{ completed: number; failed: number; retried: number }>(
      `SELECT coalesce(sum(completed), 0)::float8 AS completed, coalesce(sum(failed), 0)::float8 AS failed,
              coalesce(sum(retried), 0)::float8 AS retried
       FROM "EndpointJobTotals" j WHERE j."endpointId" = $1 AND ${OF_ACCOUNT('$2')}`,
      [endpointId, accountId],
    );
    const workers = await this.rows<{ status: string; busy: boolean }>(
      `SELECT w.status, EXISTS (SELECT 1 FROM "Job" j WHERE j."workerId" = w.id AND j.status = 'IN_PROGRESS') AS busy
       FROM "Worker" w WHERE w."endpointId" = $1 AND w.status NOT IN (${FINAL_WORKER_STATUSES_SQL})`,
      [endpointId],
    );
    const count = (s: JobStatus): number => jobs.find((r) => r.status === s)?.n ?? 0;
    const h: HealthCounts = {
      jobs: {
        completed: count('COMPLETED') + (swept?.completed ?? 0),
        failed: count('FAILED') + count('TIMED_OUT') + (swept?.failed ?? 0),
        inProgress: count('IN_PROGRESS'),
        inQueue: count('IN_QUEUE'),
        retried: jobs.reduce((sum, r) => sum + r.retried, 0) + (swept?.retried ?? 0),
      },
      workers: { idle: 0, initializing: 0, ready: 0, running: 0, throttled: 0, unhealthy: 0 },
    };
    for (const w of workers) {
      if (w.status === 'PENDING') h.workers.throttled++;
      else if (w.status === 'INITIALIZING') h.workers.initializing++;
      else if (w.status === 'UNHEALTHY') h.workers.unhealthy++;
      // A FlashBoot standby: frozen, thawed in a moment when work comes (the hosted shape's idle).
      else if (w.status === 'STANDBY') h.workers.idle++;
      else if (w.status === 'IDLE' || w.status === 'RUNNING') {
        h.workers.ready++;
        if (w.busy) h.workers.running++;
        else h.workers.idle++;
      }
    }
    return h;
  }

  /** A worker's ping: it is alive, and so are the jobs it lists (worker-loss detection reads these). */
  async ping(workerId: string, jobIds: string[], unhealthy: string | null): Promise<void> {
    await this.pool.query({
      text: unhealthy
        ? `UPDATE "Worker" SET "lastPingAt" = now(), status = 'UNHEALTHY', "statusReason" = $2 WHERE id = $1`
        : `UPDATE "Worker" SET "lastPingAt" = now() WHERE id = $1`,
      values: unhealthy ? [workerId, unhealthy] : [workerId],
    });
    if (jobIds.length > 0) {
      await this.pool.query({
        text: `UPDATE "Job" SET "lastSeenAt" = now() WHERE id = ANY($1) AND "workerId" = $2 AND status = 'IN_PROGRESS'`,
        values: [jobIds, workerId],
      });
    }
  }

  /** Jobs the worker must stop (cancelled or timed out while it held them), each handed over once. */
  async takeStops(workerId: string): Promise<string[]> {
    const rows = await this.rows<{ id: string }>(
      `UPDATE "Job" SET "stopDeliveredAt" = now()
       WHERE "workerId" = $1 AND "stopRequestedAt" IS NOT NULL AND "stopDeliveredAt" IS NULL RETURNING id`,
      [workerId],
    );
    return rows.map((r) => r.id);
  }

  /** Marks the worker as leaving (stopPod): it gets no new jobs. */
  async workerLeaving(workerId: string, reason: string): Promise<void> {
    await this.pool.query({
      text: `UPDATE "Worker" SET "desiredStatus" = 'EXITED', "statusReason" = $2 WHERE id = $1`,
      values: [workerId, reason],
    });
  }
}
