import type { Db, Prisma } from '../shared/db.ts';
import { JOB_CHANNEL, MAX_WORKER_LOSSES, retainSql, type Retention } from './rows.ts';

/** A lost worker: one rule, every caller (the job workflow's supervision, a worker's end, a host's reconcile). */

/** Runs one statement on the caller's connection and answers its rows. */
export type SqlRunner = <T>(text: string, values: unknown[]) => Promise<T[]>;

/** A Prisma client or interactive transaction as a SqlRunner: the statement commits with the caller's other writes. */
export function prismaSql(db: Db | Prisma.TransactionClient): SqlRunner {
  return <T>(text: string, values: unknown[]) => db.$queryRawUnsafe<T[]>(text, ...values);
}

/** Why a job failed whose worker was lost MAX_WORKER_LOSSES times. */
export const WORKER_LOST_ERROR = `worker lost while running the job (${MAX_WORKER_LOSSES} times)`;

/**
 * Whose running jobs lost their worker: every job a worker held once the worker is known gone (its
 * container ended, its workflow is gone: the orchestration), or one job its worker's pings have not
 * listed for `silentForMs` (the job's own workflow, through JobStore.supervise).
 */
export type LostWorker = { workerId: string } | { jobId: string; silentForMs: number };

export interface LostJob {
  id: string;
  endpointId: string;
  /** IN_QUEUE: back in the queue for another worker; FAILED: lost MAX_WORKER_LOSSES times. */
  status: 'IN_QUEUE' | 'FAILED';
  seq: number;
}

/** The current time as the job columns store it (UTC `timestamp`), whatever the session's time zone. */
const NOW_UTC = `(now() AT TIME ZONE 'UTC')`;

/**
 * THE rule for a lost worker, for every caller (the job workflow's liveness check, a worker's final
 * state, a host's reconcile): each running job it held goes back to the queue (retries + 1) for
 * another worker, or, at its MAX_WORKER_LOSSES-th loss, FAILS with WORKER_LOST_ERROR and is kept
 * for the retention of finished jobs. Either way its `seq` moves on (its workflow adopts the new
 * state at its next look) and the same statement NOTIFYs: a requeued job wakes a waiting job-take
 * of its endpoint, a failed one wakes the runsync, status-sync and /stream calls waiting on it, in
 * every API process. Jobs already finished are not touched. `tag` names the caller in the NOTIFY
 * payloads (an API process skips its own); `retention` is the job settings' (jobSettings()).
 */
export async function requeueLostJobs(
  sql: SqlRunner,
  lost: LostWorker,
  opts: { tag: string; retention: Retention },
): Promise<LostJob[]> {
  const failed = `j.retries + 1 >= ${MAX_WORKER_LOSSES}`;
  const [where, values] =
    'workerId' in lost
      ? [`j."workerId" = $1`, [lost.workerId, opts.tag, WORKER_LOST_ERROR]]
      : [
          `j.id = $1 AND GREATEST(j."startedAt", COALESCE(j."lastSeenAt", j."startedAt")) + $4::float8 * interval '1 millisecond' <= ${NOW_UTC}`,
          [lost.jobId, opts.tag, WORKER_LOST_ERROR, lost.silentForMs],
        ];
  return sql<LostJob>(
    `WITH j AS (
       UPDATE "Job" j SET
         status = CASE WHEN ${failed} THEN 'FAILED'::"JobStatus" ELSE 'IN_QUEUE'::"JobStatus" END,
         error = CASE WHEN ${failed} THEN $3::text END,
         "completedAt" = CASE WHEN ${failed} THEN ${NOW_UTC} END,
         "expiresAt" = CASE WHEN ${failed} THEN ${retainSql(opts.retention, NOW_UTC)} ELSE j."expiresAt" END,
         "workerId" = CASE WHEN ${failed} THEN j."workerId" END,
         "startedAt" = CASE WHEN ${failed} THEN j."startedAt" END,
         retries = j.retries + 1, seq = j.seq + 1, "lastSeenAt" = NULL
       WHERE ${where} AND j.status = 'IN_PROGRESS'
       RETURNING j.id, j."endpointId", j.status, j.seq)
     SELECT j.id, j."endpointId", j.status::text AS status, j.seq,
       pg_notify('${JOB_CHANNEL}', CASE WHEN j.status = 'IN_QUEUE' THEN 'q:' || $2 || ':' || j."endpointId" ELSE 'j:' || $2 || ':' || j.id END)::text AS notified
     FROM j`,
    values,
  );
}
