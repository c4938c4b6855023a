import { Type } from 'typebox';
import { nullableWorkerProblemSchema } from '../../../domain/endpoints/index.ts';
import { JobStatusSchema } from '../../../domain/jobs/index.ts';

/**
 * The job API's stream and health answers (docs/jobs.md). The domain answers them in this shape
 * already (domain/jobs/client-api.ts: streamJob, endpointHealth); the job object itself is the
 * domain's (domain/jobs/schemas.ts), as webhooks carry it too.
 */
export const JobStreamSchema = Type.Object({
  status: JobStatusSchema,
  stream: Type.Array(Type.Object({ output: Type.Unknown() })),
});

export const HealthSchema = Type.Object({
  jobs: Type.Object({
    completed: Type.Integer(),
    failed: Type.Integer(),
    inProgress: Type.Integer(),
    inQueue: Type.Integer(),
    retried: Type.Integer(),
  }),
  workers: Type.Object({
    idle: Type.Integer(),
    initializing: Type.Integer(),
    ready: Type.Integer(),
    running: Type.Integer(),
    throttled: Type.Integer(),
    unhealthy: Type.Integer(),
  }),
  workerProblem: nullableWorkerProblemSchema(
    'Why no worker of the endpoint can run right now (docs/endpoints.md#why-a-job-waits); null while nothing stands in the way, and always for a public model’s callers.',
  ),
});
