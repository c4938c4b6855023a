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

const Time = Type.String({ format: 'date-time' });
const NullableTime = Type.Union([Time, Type.Null()]);

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

const JOB_PROPERTIES = {
  id: Type.String(),
  status: JobStatusSchema,
  createdAt: Type.String({
    format: 'date-time',
    description: 'when it was submitted (a retry submits it again: the retry time)',
  }),
  startedAt: Type.Union([Time, Type.Null()], { description: 'when a worker took it; null while queued' }),
  completedAt: NullableTime,
  expiresAt: Type.String({ format: 'date-time', description: 'after this the job is gone (404 on /status)' }),
  delayTime: Type.Union([Type.Integer(), Type.Null()], {
    description: 'ms from submission to start, as /status answers it; null until started',
  }),
  executionTime: Type.Union([Type.Integer(), Type.Null()], {
    description: 'ms from start to finish; null until finished',
  }),
  workerId: Type.Union([Type.String(), Type.Null()]),
  retries: Type.Integer({ minimum: 0 }),
  error: Type.Union([Type.String(), Type.Null()], {
    description: `the worker's error, cut at ${LIST_ERROR_CAP} characters in the list and at ${PAYLOAD_CAP_BYTES} in one job's read`,
  }),
  errorTruncated: Type.Boolean(),
};

export const EndpointJobSchema = Type.Object(JOB_PROPERTIES);
export type EndpointJob = Static<typeof EndpointJobSchema>;

export const EndpointJobsSchema = Type.Object({
  jobs: Type.Array(EndpointJobSchema),
  nextBefore: Type.Union([Type.String(), Type.Null()], {
    description: 'pass as `before` for the next (older) page; null when this page is the last',
  }),
});
export type EndpointJobs = Static<typeof EndpointJobsSchema>;

const payloadProperties = (what: 'input' | 'output') => ({
  value: Type.Optional(
    Type.Unknown({
      description: `the job's ${what}, when its JSON text is at most ${PAYLOAD_CAP_BYTES} bytes${what === 'output' ? ' (absent: none yet)' : ''}`,
    }),
  ),
  bytes: Type.Union([Type.Integer({ minimum: 0 }), Type.Null()], {
    description: `size of its JSON text as PostgreSQL writes it${what === 'output' ? '; null without an output' : ''}`,
  }),
  truncated: Type.Boolean({
    description: `true when that is larger than ${PAYLOAD_CAP_BYTES} bytes: then \`${what}\` is absent and \`${what}Preview\` holds the start of the text`,
  }),
  preview: Type.Optional(
    Type.String({
      description: `only when truncated: the first ${PAYLOAD_CAP_BYTES} bytes (or less) of its JSON text`,
    }),
  ),
});
const inputProperties = payloadProperties('input');
const outputProperties = payloadProperties('output');

export const EndpointJobDetailSchema = Type.Object({
  ...JOB_PROPERTIES,
  input: inputProperties.value,
  inputBytes: inputProperties.bytes,
  inputTruncated: inputProperties.truncated,
  inputPreview: inputProperties.preview,
  output: outputProperties.value,
  outputBytes: outputProperties.bytes,
  outputTruncated: outputProperties.truncated,
  outputPreview: outputProperties.preview,
});

/** One job's read, with its input and output as far as the caps allow. */
export interface EndpointJobDetail extends EndpointJob {
  input?: unknown;
  inputBytes: number | null;
  inputTruncated: boolean;
  inputPreview?: string;
  output?: unknown;
  outputBytes: number | null;
  outputTruncated: boolean;
  outputPreview?: string;
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
): Promise<EndpointJobs> {
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
  const rows = await sql<EndpointJob>(
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

interface DetailRow extends EndpointJob {
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
): Promise<EndpointJobDetail> {
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
  const detail: EndpointJobDetail = {
    ...job,
    inputBytes,
    inputTruncated: inputText !== null,
    outputBytes,
    outputTruncated: outputText !== null,
  };
  if (inputText !== null) detail.inputPreview = cutUtf8(inputText, cap);
  else detail.input = input;
  if (outputText !== null) detail.outputPreview = cutUtf8(outputText, cap);
  else if (outputBytes !== null) detail.output = output;
  return detail;
}
