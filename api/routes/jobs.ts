import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import type { DomainContext } from '../../domain/context.ts';
import {
  cancelJob,
  endpointHealth,
  getJobStatus,
  purgeQueue,
  retryJob,
  runJob,
  runJobSync,
  streamJob,
  waitJobStatus,
} from '../../domain/jobs/index.ts';
import { jobRuntimeOf } from '../../domain/jobs/index.ts';
import { idempotencyHeaderOf, IDEMPOTENT_REPLAYED_HEADER, type Submitted } from '../../domain/jobs/index.ts';
import { JobStatusSchema, JobViewSchema, RunJobBodySchema, WaitQuerySchema } from '../../domain/jobs/index.ts';
import { recordCachesOf } from '../../domain/shared/index.ts';
import { authenticateRequests, cachedPrincipalOf, principalOf } from '../auth.ts';
import { acceptEmptyJsonBodies } from '../empty-json-body.ts';
import { refuseUnstorableBodies } from '../input-guards.ts';
import { countRequests, jobApiCounter } from '../rate-limit.ts';
import { HealthSchema, JobStreamSchema } from './shapes/job-api.ts';
import { RequestWaits } from '../request-signals.ts';

const EndpointParams = Type.Object({ endpointId: Type.String() });
const JobParams = Type.Object({ endpointId: Type.String(), jobId: Type.String() });
const JobAck = Type.Object({ id: Type.String(), status: JobStatusSchema });

/** A submit's answer; a repeat under an idempotency key says so in a header (docs/jobs.md). */
function answer<T>(reply: FastifyReply, submitted: Submitted<T>): T {
  if (submitted.replayed) reply.header(IDEMPOTENT_REPLAYED_HEADER, 'true');
  return submitted.answer;
}

/** docs/jobs.md payload caps: 10 MB for /run, 20 MB for /runsync (413 beyond). */
const RUN_BODY_LIMIT = 10 * 1024 * 1024;
const RUNSYNC_BODY_LIMIT = 20 * 1024 * 1024;

/**
 * The job API of queue-based endpoints (`/v2/{endpointId}/run` and friends), in its own scope: an
 * API key (RUN scope), through the failed-authentication throttle and a short cache, then the quota
 * of the account and endpoint, both on `onRequest`, before the body is read; then JSON bodies no
 * handler could store are refused (422). Which scope the key needs and which endpoints it reaches,
 * the domain decides. On the job runtime the composition root put in `ctx` (its start and stop
 * belong to the platform; the worker protocol, on the same runtime, is worker-protocol.ts). Waits
 * (runsync, status-sync, stream) end when the client hangs up or the app starts closing: a graceful
 * stop answers them as they stand.
 */
export const jobApiRoutes: FastifyPluginAsyncTypebox<{ ctx: DomainContext }> = async (scope, { ctx }) => {
  authenticateRequests(scope, ctx, { cache: recordCachesOf(ctx) });
  countRequests(scope, ctx, (request) =>
    jobApiCounter(principalOf(request), (request.params as { endpointId: string }).endpointId, scope.surfaceLimits),
  );
  refuseUnstorableBodies(scope);

  const jobs = jobRuntimeOf(ctx);
  const waits = new RequestWaits(scope);
  // An empty `application/json` body means "no body" (the hosted service's Python client sends
  // cancel and purge-queue so); any other body is parsed as everywhere else.
  acceptEmptyJsonBodies(scope);

  // Route schemas document the shapes; the domain validates (attachValidation), so that a missing
  // `input` wrapper is the clear 400 the job API promises and authentication comes first.
  scope.post<{ Params: { endpointId: string } }>(
    '/v2/:endpointId/run',
    {
      bodyLimit: RUN_BODY_LIMIT,
      attachValidation: true,
      schema: { params: EndpointParams, body: RunJobBodySchema, response: { 200: JobAck } },
    },
    async (request, reply) =>
      answer(
        reply,
        await runJob(jobs, await cachedPrincipalOf(ctx, request), request.params.endpointId, request.body, {
          idempotencyKey: idempotencyHeaderOf(request.raw.rawHeaders),
        }),
      ),
  );

  scope.post<{ Params: { endpointId: string } }>(
    '/v2/:endpointId/runsync',
    {
      bodyLimit: RUNSYNC_BODY_LIMIT,
      attachValidation: true,
      schema: {
        params: EndpointParams,
        querystring: WaitQuerySchema,
        body: RunJobBodySchema,
        response: { 200: JobViewSchema },
      },
    },
    async (request, reply) =>
      answer(
        reply,
        await runJobSync(
          jobs,
          await cachedPrincipalOf(ctx, request),
          request.params.endpointId,
          request.body,
          request.query,
          waits.signal(reply),
          { idempotencyKey: idempotencyHeaderOf(request.raw.rawHeaders) },
        ),
      ),
  );

  scope.get<{ Params: { endpointId: string; jobId: string } }>(
    '/v2/:endpointId/status/:jobId',
    { schema: { params: JobParams, response: { 200: JobViewSchema } } },
    async (request) =>
      getJobStatus(jobs, await cachedPrincipalOf(ctx, request), request.params.endpointId, request.params.jobId),
  );

  const statusSync = {
    attachValidation: true,
    schema: { params: JobParams, querystring: WaitQuerySchema, response: { 200: JobViewSchema } },
  };
  const statusSyncHandler = async (
    request: FastifyRequest<{ Params: { endpointId: string; jobId: string } }>,
    reply: FastifyReply,
  ) =>
    waitJobStatus(
      jobs,
      await cachedPrincipalOf(ctx, request),
      request.params.endpointId,
      request.params.jobId,
      request.query,
      waits.signal(reply),
    );
  scope.get<{ Params: { endpointId: string; jobId: string } }>(
    '/v2/:endpointId/status-sync/:jobId',
    statusSync,
    statusSyncHandler,
  );
  scope.post<{ Params: { endpointId: string; jobId: string } }>(
    '/v2/:endpointId/status-sync/:jobId',
    statusSync,
    statusSyncHandler,
  );

  scope.get<{ Params: { endpointId: string; jobId: string } }>(
    '/v2/:endpointId/stream/:jobId',
    { schema: { params: JobParams, response: { 200: JobStreamSchema } } },
    async (request, reply) =>
      streamJob(
        jobs,
        await cachedPrincipalOf(ctx, request),
        request.params.endpointId,
        request.params.jobId,
        waits.signal(reply),
      ),
  );

  scope.post<{ Params: { endpointId: string; jobId: string } }>(
    '/v2/:endpointId/cancel/:jobId',
    { schema: { params: JobParams, response: { 200: JobAck } } },
    async (request) =>
      cancelJob(jobs, await cachedPrincipalOf(ctx, request), request.params.endpointId, request.params.jobId),
  );

  scope.post<{ Params: { endpointId: string; jobId: string } }>(
    '/v2/:endpointId/retry/:jobId',
    { schema: { params: JobParams, response: { 200: JobAck } } },
    async (request) =>
      retryJob(jobs, await cachedPrincipalOf(ctx, request), request.params.endpointId, request.params.jobId),
  );

  scope.post<{ Params: { endpointId: string } }>(
    '/v2/:endpointId/purge-queue',
    {
      schema: {
        params: EndpointParams,
        response: { 200: Type.Object({ removed: Type.Integer(), status: Type.Literal('completed') }) },
      },
    },
    async (request) => purgeQueue(jobs, await cachedPrincipalOf(ctx, request), request.params.endpointId),
  );

  scope.get<{ Params: { endpointId: string } }>(
    '/v2/:endpointId/health',
    { schema: { params: EndpointParams, response: { 200: HealthSchema } } },
    async (request) => endpointHealth(jobs, await cachedPrincipalOf(ctx, request), request.params.endpointId),
  );
};
