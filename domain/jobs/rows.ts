import pg from 'pg';
import type { Db } from '../shared/db.ts';
import type { JobSnapshot, JobStatus } from '../../contracts/workflows.ts';

/** The job row as the queue reads it, its snapshot for the job workflow, and the queue's connections and prepared statements. */

export type { JobStatus } from '../../contracts/workflows.ts';

export const TERMINAL: readonly JobStatus[] = ['COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT'];
export const isTerminal = (s: JobStatus): boolean => TERMINAL.includes(s);

/** The NOTIFY channel; payloads are `<kind>:<process tag>:<id>` (kinds below). */
export const JOB_CHANNEL = 'gantry_jobs';
export type NotifyKind =
  | 'q' /* endpoint has queued work */
  | 'j' /* job changed */
  | 's' /* worker has jobs to stop */
  | 'w'; /* worker stood by or was thawed (FlashBoot): its takes look at its state again */

/** How long results stay readable after a job finishes (docs/jobs.md). */
export const RETENTION_RUN_MS = 30 * 60_000;
export const RETENTION_SYNC_MS = 60_000;
/** A job whose worker was lost this many times fails instead of going back to the queue. */
export const MAX_WORKER_LOSSES = 3;

export interface JobRow {
  id: string;
  endpointId: string;
  accountId: string;
  status: JobStatus;
  output: unknown;
  error: string | null;
  webhook: string | null;
  executionTimeoutMs: number;
  ttlMs: number;
  lowPriority: boolean;
  sync: boolean;
  workerId: string | null;
  retries: number;
  seq: number;
  createdAt: Date;
  startedAt: Date | null;
  lastSeenAt: Date | null;
  completedAt: Date | null;
  expiresAt: Date;
  webhookDeliveredAt: Date | null;
  webhookAttempts: number;
  /** The public model the job was submitted to (its caller's account is billed), else null. */
  modelId: string | null;
}

export interface TakenJob extends JobRow {
  input: unknown;
}

export const COLS = `j.id, j."endpointId", j."accountId", j.status, j.output, j.error, j.webhook, j."executionTimeoutMs", j."ttlMs",
  j."lowPriority", j.sync, j."workerId", j.retries, j.seq, j."createdAt", j."startedAt", j."lastSeenAt", j."completedAt",
  j."expiresAt", j."webhookDeliveredAt", j."webhookAttempts", j."modelId"`;
/** Same, without the output (which may be megabytes) where it is not needed. */
export const COLS_LEAN = COLS.replace('j.output, ', 'NULL::jsonb AS output, ');

/** SQL: the job `j` is of the account in parameter `p`, or `p` is null (any account's). */
export const OF_ACCOUNT = (p: string): string => `(${p}::text IS NULL OR j."accountId" = ${p}::text)`;

/** How long finished jobs stay readable. */
export interface Retention {
  runMs: number;
  syncMs: number;
}
export const DEFAULT_RETENTION: Retention = { runMs: RETENTION_RUN_MS, syncMs: RETENTION_SYNC_MS };

/**
 * `expiresAt` once a job is finished: retention after completion, never beyond its TTL. `now` is the
 * SQL of the current time as the columns store it (UTC `timestamp`): the queue's own sessions run in
 * UTC, where `now()` converts so; any other session needs `now() AT TIME ZONE 'UTC'`.
 */
export const retainSql = (
  r: Retention,
  now = 'now()',
): string => `LEAST(j."createdAt" + j."ttlMs" * interval '1 millisecond',
  ${now} + CASE WHEN j.sync THEN interval '${Math.trunc(r.syncMs)} milliseconds' ELSE interval '${Math.trunc(r.runMs)} milliseconds' END)`;

const TIMESTAMP_OID = 1114;

/**
 * The connection string behind a Prisma client built by `createDb` (its node-postgres adapter keeps
 * it). The queue needs its own connections: a LISTEN session and plain pg statements.
 */
export function databaseUrlOf(db: Db): string {
  const config = (db as unknown as { _engineConfig?: { adapter?: { config?: { connectionString?: unknown } } } })
    ._engineConfig?.adapter?.config;
  const url = config?.connectionString;
  if (typeof url === 'string' && url) return url;
  throw new Error(
    'cannot find the database URL of the Prisma client (expected a @prisma/adapter-pg client from createDb)',
  );
}

/** node-postgres settings shared by the queue's pool and LISTEN session: UTC on both sides. */
export function pgConfig(connectionString: string): pg.ClientConfig {
  return {
    connectionString,
    // Prisma stores `timestamp(3)` columns in UTC; now() must be read and written the same way.
    options: '-c TimeZone=UTC',
    types: {
      getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
        oid === TIMESTAMP_OID && format !== 'binary'
          ? (s: string) => new Date(`${s.replace(' ', 'T')}Z`)
          : pg.types.getTypeParser(oid, format as 'text')) as typeof pg.types.getTypeParser,
    },
  };
}

/** Names of prepared statements by their text (a handful of constant texts). */
const statementNames = new Map<string, string>();

/**
 * Statements on the job runtime's pools are prepared: each connection parses and plans one once,
 * not on every call (that was a third or more of a take's, insert's or finish's time). Their texts
 * are constants, never values, so the names stay few; one name is never given to another text.
 */
export function statementName(text: string): string {
  let name = statementNames.get(text);
  if (name === undefined) {
    name = `gantry-sql-${statementNames.size}`;
    statementNames.set(text, name);
  }
  return name;
}

export function createJobPool(connectionString: string, max = 10): pg.Pool {
  const pool = new pg.Pool({ ...pgConfig(connectionString), max, idleTimeoutMillis: 10_000, allowExitOnIdle: true });
  // An idle client whose server went away (a PostgreSQL restart) must not crash the process.
  pool.on('error', () => {});
  return pool;
}

export const ms = (d: Date | null | undefined): number | null => (d ? d.getTime() : null);

/** What the job workflow is told: the state of one job at one `seq`. */
export function snapshotOf(row: JobRow, lostAfterMs: number): JobSnapshot {
  const startedAt = ms(row.startedAt);
  return {
    seq: row.seq,
    status: row.status,
    ttlDeadline: row.createdAt.getTime() + row.ttlMs,
    startedAt,
    livenessDeadline: startedAt === null ? null : Math.max(startedAt, ms(row.lastSeenAt) ?? 0) + lostAfterMs,
    executionDeadline: startedAt === null ? null : startedAt + row.executionTimeoutMs,
    webhookPending: row.webhook !== null && row.webhookDeliveredAt === null,
  };
}

export const GONE = (seq: number): JobSnapshot => ({
  seq,
  status: 'GONE',
  ttlDeadline: 0,
  startedAt: null,
  livenessDeadline: null,
  executionDeadline: null,
  webhookPending: false,
});

export interface NewJob {
  id: string;
  endpointId: string;
  accountId: string;
  /** JSON text of the input (kept as the client sent it, re-serialized once). */
  inputJson: string;
  webhook: string | null;
  executionTimeoutMs: number;
  ttlMs: number;
  lowPriority: boolean;
  sync: boolean;
  /** Submitted by model id (a public model). */
  modelId?: string | null;
}

/** What a submit with an idempotency key came to (JobStore.insertOnce). */
export type KeyedInsert =
  | { kind: 'created'; row: JobRow }
  /** The key's job, from an earlier submit of the same request. */
  | { kind: 'replayed'; row: JobRow }
  /** The key's job came from another request. */
  | { kind: 'mismatch' }
  /** No job under the key, and the endpoint's queue is full. */
  | { kind: 'full' };

export interface Outcome {
  status: 'COMPLETED' | 'FAILED';
  outputJson: string | null;
  error: string | null;
}

/** What one completed call of a public model costs its caller. */
export interface ModelCharge {
  units: number;
  amount: number;
}

export interface HealthCounts {
  jobs: { completed: number; failed: number; inProgress: number; inQueue: number; retried: number };
  workers: { idle: number; initializing: number; ready: number; running: number; throttled: number; unhealthy: number };
}
