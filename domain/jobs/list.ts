/**
 * An endpoint's recent jobs for its owner (REST GET /v2/serverless/{id}/jobs and /jobs/{jobId}, the
 * console's Requests tab): the jobs `/status` would still answer (not yet expired), newest first,
 * paged by a job id. The list carries no input or output (a page of 100 jobs of megabytes each would
 * be too much to read every few seconds); one job's read carries both, each cut at PAYLOAD_CAP_BYTES.
 */
import { Type, type Static } from 'typebox';
import { requireScope, type Principal } from '../accounts/auth.ts';
import type { DomainContext } from '../context.ts';
import { findOwned } from '../endpoints/endpoints.ts';
import { notFound, validationFailed } from '../errors.ts';
import { rowReader } from '../shared/db.ts';
import { JobStatusSchema } from './schemas.ts';
import type { JobStatus } from './rows.ts';

export const ENDPOINT_JOBS_DEFAULT_LIMIT = 50;
export const ENDPOINT_JOBS_MAX_LIMIT = 100;
/** Most bytes of a job's input or output (as JSON text) one read answers whole. */
export const PAYLOAD_CAP_BYTES = 64 * 1024;
/** Most characters of a job's error in a list (a worker's error is any length). */
export const LIST_ERROR_CAP = 1024;

export const EndpointJobsQuerySchema = Type.Object(
  {
    limit: Type.Optional(
      Type.String({ pattern: '^[0-9]{1,6}$', description: `jobs per page, 1-${ENDPOINT_JOBS_MAX_LIMIT} (default 50)` }),
    ),
    status: Type.Optional(JobStatusSchema),
    before: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 200,
        description:
          "a job id of this endpoint (the previous page's `nextBefore`): only jobs older than it (by createdAt, then id)",
      }),
    ),
  },
  { additionalProperties: false },
);
export type EndpointJobsQuery = Static<typeof EndpointJobsQuerySchema>;

export const JobIdParamsSchema = Type.Object({
  id: Type.String({ minLength: 1, maxLength: 200, description: 'endpoint id' }),
  jobId: Type.String({ minLength: 1, maxLength: 200, description: 'job id' }),
});

/** A job as the list reads it: times as ISO text (SQL renders them, see `iso`), the error cut. */
export interface EndpointJobRow {
  id: string;
  status: JobStatus;
  createdAt: string;
  startedAt: string | null;
  completedAt: string | null;
  expiresAt: string;
  /** ms from submission to start; null until started. */
  delayTime: number | null;
  /** ms from start to finish; null until finished. */
  executionTime: number | null;
  workerId: string | null;
  retries: number;
  /** Cut at the read's cap (LIST_ERROR_CAP in the list, PAYLOAD_CAP_BYTES for one job). */
  error: string | null;
  errorTruncated: boolean;
}

/** A page of the list, newest first. */
export interface EndpointJobsPage {
  jobs: EndpointJobRow[];
  /** The `before` of the next (older) page; null when this page is the last. */
  nextBefore: string | null;
}

/** A job's input or output as one read answers it: whole, or the start of its JSON text past the cap. */
export interface EndpointJobPayload {
  /** Size of its JSON text as PostgreSQL writes it; null for an output not written yet. */
  bytes: number | null;
  /** The text is over PAYLOAD_CAP_BYTES: `value` is absent and `preview` holds its start. */
  truncated: boolean;
  /** Present when it fits (a JSON null included); absent when truncated or not written yet. */
  value?: unknown;
  preview?: string;
}

/** One job's read, with its input and output as far as the caps allow. */
export interface EndpointJobDetailModel {
  job: EndpointJobRow;
  input: EndpointJobPayload;
  output: EndpointJobPayload;
}

/** SQL: a UTC `timestamp` column as ISO text (the same through node-postgres and Prisma). */
const iso = (column: string): string => `to_char(${column}, 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;
/** SQL: whole milliseconds between two `timestamp`s, never negative. */
const msBetween = (from: string, to: string): string =>
  `GREATEST(0, round(extract(epoch FROM (${to} - ${from})) * 1000))::int`;
// The columns store UTC; the queue's sessions run in UTC, Prisma's may not: say so either way.
const NOW_UTC = `(now() AT TIME ZONE 'UTC')`;

const columns = (errorCap: number): string => `j.id, j.status::text AS status, ${iso('j."createdAt"')} AS "createdAt",
  ${iso('j."startedAt"')} AS "startedAt", ${iso('j."completedAt"')} AS "completedAt", ${iso('j."expiresAt"')} AS "expiresAt",
  CASE WHEN j."startedAt" IS NOT NULL THEN ${msBetween('j."createdAt"', 'j."startedAt"')} END AS "delayTime",
  CASE WHEN j."startedAt" IS NOT NULL AND j."completedAt" IS NOT NULL THEN ${msBetween('j."startedAt"', 'j."completedAt"')} END AS "executionTime",
  j."workerId", j.retries, left(j.error, ${errorCap}) AS error, coalesce(length(j.error) > ${errorCap}, false) AS "errorTruncated"`;

function parseLimit(limit: string | undefined): number {
  if (limit === undefined) return ENDPOINT_JOBS_DEFAULT_LIMIT;
  const n = Number(limit);
  if (!Number.isInteger(n) || n < 1 || n > ENDPOINT_JOBS_MAX_LIMIT)
    throw validationFailed([`$.limit: must be between 1 and ${ENDPOINT_JOBS_MAX_LIMIT}`]);
  return n;
}

/**
 * GET /v2/serverless/{id}/jobs: the endpoint's jobs that have not expired, newest first (createdAt,
 * then id), optionally of one status, `limit` at a time; `before` (a job id, the last page's
 * `nextBefore`) pages back. Every job of the endpoint, as its owner's `/status` answers them: a
 * public model's callers' jobs too. Scope RUN, as `/status` (this shows what it shows and more).
 */
export async function listEndpointJobs(
  ctx: DomainContext,
  principal: Principal,
  endpointId: string,
  query: EndpointJobsQuery,
): Promise<EndpointJobsPage> {
  requireScope(principal, 'RUN');
  const limit = parseLimit(query.limit);
  await findOwned(ctx, principal, endpointId);
  const sql = rowReader(ctx);
  const values: unknown[] = [endpointId, limit + 1];
  const where = [`j."endpointId" = $1`, `j."expiresAt" > ${NOW_UTC}`];
  if (query.status) {
    values.push(query.status as JobStatus);
    where.push(`j.status = $${values.length}::"JobStatus"`);
  }
  if (query.before) {
    values.push(query.before);
    // The cursor's own row, expired or not: a page boundary stays put while the job is still stored.
    where.push(
      `(j."createdAt", j.id) < (SELECT c."createdAt", c.id FROM "Job" c WHERE c.id = $${values.length} AND c."endpointId" = $1)`,
    );
  }
  const rows = await sql<EndpointJobRow>(
    `SELECT ${columns(LIST_ERROR_CAP)} FROM "Job" j WHERE ${where.join(' AND ')}
     ORDER BY j."createdAt" DESC, j.id DESC LIMIT $2`,
    values,
  );
  if (rows.length === 0 && query.before) {
    const [known] = await sql<{ one: number }>(`SELECT 1 AS one FROM "Job" WHERE id = $1 AND "endpointId" = $2`, [
      query.before,
      endpointId,
    ]);
    if (!known)
      throw validationFailed([
        `$.before: no job ${query.before} of this endpoint (it may have been removed); start again without it`,
      ]);
  }
  const jobs = rows.slice(0, limit);
  return { jobs, nextBefore: rows.length > limit ? jobs[jobs.length - 1]!.id : null };
}

interface DetailRow extends EndpointJobRow {
  input: unknown;
  inputBytes: number;
  inputText: string | null;
  output: unknown;
  outputBytes: number | null;
  outputText: string | null;
}

/** The start of `text` that fits in `maxBytes` of UTF-8, never cutting a character in two. */
export function cutUtf8(text: string, maxBytes: number): string {
  const bytes = Buffer.from(text, 'utf8');
  if (bytes.length <= maxBytes) return text;
  let end = maxBytes;
  // Back off continuation bytes (10xxxxxx) to the start of the cut character.
  while (end > 0 && (bytes[end]! & 0xc0) === 0x80) end--;
  return bytes.subarray(0, end).toString('utf8');
}

/** A payload as read under the cap: its value, or (`text` read: it was over) the start of its JSON text. */
function payloadOf(value: unknown, bytes: number, text: string | null, cap: number): EndpointJobPayload {
  return text === null ? { bytes, truncated: false, value } : { bytes, truncated: true, preview: cutUtf8(text, cap) };
}

/**
 * GET /v2/serverless/{id}/jobs/{jobId}: one job of the list with its input and output. A value whose
 * JSON text exceeds PAYLOAD_CAP_BYTES comes as the start of that text (`…Preview`, `…Truncated`), so
 * one read stays bounded whatever a tenant submitted or a worker answered. 404 once it expired.
 */
export async function getEndpointJob(
  ctx: DomainContext,
  principal: Principal,
  endpointId: string,
  jobId: string,
): Promise<EndpointJobDetailModel> {
  requireScope(principal, 'RUN');
  await findOwned(ctx, principal, endpointId);
  const cap = PAYLOAD_CAP_BYTES;
  // Only the start of an oversized value leaves the database: a character is at most 4 bytes.
  const [row] = await rowReader(ctx)<DetailRow>(
    `SELECT ${columns(cap)},
       s."inputBytes", CASE WHEN s."inputBytes" <= ${cap} THEN j.input END AS input,
       CASE WHEN s."inputBytes" > ${cap} THEN left(j.input::text, ${cap}) END AS "inputText",
       s."outputBytes", CASE WHEN s."outputBytes" <= ${cap} THEN j.output END AS output,
       CASE WHEN s."outputBytes" > ${cap} THEN left(j.output::text, ${cap}) END AS "outputText"
     FROM "Job" j
     CROSS JOIN LATERAL (SELECT octet_length(j.input::text) AS "inputBytes", octet_length(j.output::text) AS "outputBytes") s
     WHERE j.id = $1 AND j."endpointId" = $2 AND j."expiresAt" > ${NOW_UTC}`,
    [jobId, endpointId],
  );
  if (!row) throw notFound('job');
  const { input, inputBytes, inputText, output, outputBytes, outputText, ...job } = row;
  return {
    job,
    input: payloadOf(input, inputBytes, inputText, cap),
    // No output yet (SQL NULL) is neither a value nor a preview.
    output: outputBytes === null ? { bytes: null, truncated: false } : payloadOf(output, outputBytes, outputText, cap),
  };
}
