/**
 * The shapes of the job API and the worker protocol (docs/jobs.md): request bodies and queries the
 * domain validates, and the job object clients and webhooks see. Unlike the other outside shapes
 * (api/routes/shapes/, where the job API's stream and health answers are), the job object stays in
 * the domain: it is a wire contract the domain itself delivers, as the webhook body
 * (activities/job.ts, below the API) as well as the job API's answer, and the hosted service's
 * clients read both (docs/jobs.md).
 */
import { Type, type Static } from 'typebox';
import { workerProblemSchema } from '../endpoints/worker-problem.ts';
import type { JobRow } from './rows.ts';

export const JobPolicySchema = Type.Object(
  {
    executionTimeout: Type.Optional(
      Type.Integer({ minimum: 5_000, maximum: 7 * 86_400_000, description: 'milliseconds a worker may run the job' }),
    ),
    ttl: Type.Optional(
      Type.Integer({
        minimum: 10_000,
        maximum: 7 * 86_400_000,
        description: 'milliseconds the job lives from submission',
      }),
    ),
    lowPriority: Type.Optional(Type.Boolean({ description: 'never causes a scale-up' })),
  },
  { additionalProperties: false },
);

export const RunJobBodySchema = Type.Object(
  {
    input: Type.Optional(Type.Unknown({ description: 'passed to the worker handler as job.input (required)' })),
    webhook: Type.Optional(Type.String({ format: 'uri', pattern: '^https?://', description: 'POSTed the final job' })),
    policy: Type.Optional(JobPolicySchema),
    s3Config: Type.Optional(Type.Object({}, { additionalProperties: true })),
  },
  { additionalProperties: true },
);
export type RunJobBody = Static<typeof RunJobBodySchema>;

export const WaitQuerySchema = Type.Object({
  wait: Type.Optional(Type.String({ pattern: '^[0-9]+$', description: 'milliseconds, 1000..300000' })),
});

export const JobStatusSchema = Type.Union([
  Type.Literal('IN_QUEUE'),
  Type.Literal('IN_PROGRESS'),
  Type.Literal('COMPLETED'),
  Type.Literal('FAILED'),
  Type.Literal('CANCELLED'),
  Type.Literal('TIMED_OUT'),
]);

export const JobViewSchema = Type.Object({
  id: Type.String(),
  status: JobStatusSchema,
  delayTime: Type.Optional(Type.Integer({ description: 'ms from submission to start' })),
  executionTime: Type.Optional(Type.Integer({ description: 'ms from start to finish' })),
  workerId: Type.Optional(Type.String()),
  output: Type.Optional(Type.Unknown()),
  error: Type.Optional(Type.String()),
  retries: Type.Optional(Type.Integer()),
  workerProblem: Type.Optional(
    workerProblemSchema(
      'Only while the job is IN_QUEUE (status, status-sync and runsync answers; never in webhooks) and no worker of the endpoint can run: why (docs/endpoints.md#why-a-job-waits). Absent otherwise.',
    ),
  ),
});
export type JobView = Static<typeof JobViewSchema>;

/** The worker protocol's ping query. */
export const PingQuerySchema = Type.Object(
  {
    job_id: Type.Optional(Type.String({ description: 'comma-separated ids of the jobs in progress' })),
    runpod_version: Type.Optional(Type.String()),
    status: Type.Optional(Type.String({ description: '"unhealthy" when the worker failed its self-check' })),
    check: Type.Optional(Type.String()),
    reason: Type.Optional(Type.String()),
  },
  { additionalProperties: true },
);

/** The job object clients (and webhooks) see. Times in milliseconds. */
export function jobView(row: JobRow): JobView {
  const view: JobView = { id: row.id, status: row.status };
  if (row.startedAt) view.delayTime = Math.max(0, row.startedAt.getTime() - row.createdAt.getTime());
  if (row.startedAt && row.completedAt)
    view.executionTime = Math.max(0, row.completedAt.getTime() - row.startedAt.getTime());
  if (row.workerId) view.workerId = row.workerId;
  if (row.output !== null && row.output !== undefined) view.output = row.output;
  if (row.error !== null) view.error = row.error;
  if (row.retries > 0) view.retries = row.retries;
  return view;
}
