import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import type { DomainContext } from '../../domain/context.ts';
import { randomString } from '../../domain/ids.ts';
import { createJobPool, databaseUrlOf, JobStore } from '../../domain/job-queue.ts';
import {
  attachJobRuntime,
  cancelJob,
  endpointHealth,
  getJobStatus,
  HealthSchema,
  JobRuntime,
  jobSettings,
  JobStatusSchema,
  JobStreamSchema,
  JobViewSchema,
  purgeQueue,
  retryJob,
  runJob,
  RunJobBodySchema,
  runJobSync,
  streamJob,
  waitJobStatus,
  WaitQuerySchema,
  type Log,
} from '../../domain/jobs.ts';
import { cachedPrincipalOf } from '../auth.ts';
import { acceptEmptyJsonBodies } from '../empty-json-body.ts';
import { JobNotifier } from '../job-notify.ts';
import { workerProtocolRoutes } from './worker-protocol.ts';

const EndpointParams = Type.Object({ endpointId: Type.String() });
const JobParams = Type.Object({ endpointId: Type.String(), jobId: Type.String() });
const JobAck = Type.Object({ id: Type.String(), status: JobStatusSchema });

/** compat.md payload caps: 10 MB for /run, 20 MB for /runsync (413 beyond). */
const RUN_BODY_LIMIT = 10 * 1024 * 1024;
const RUNSYNC_BODY_LIMIT = 20 * 1024 * 1024;

/** Aborts when the client hangs up before the answer: long waits stop early. */
export function hangupSignal(reply: FastifyReply): AbortSignal {
  const ac = new AbortController();
  reply.raw.once('close', () => {
    if (!reply.raw.writableFinished) ac.abort();
  });
  return ac.signal;
}

/**
 * The job API of queue-based endpoints (`/v2/{endpointId}/run` and friends, bearer key with the RUN
 * scope) and the worker protocol, with the per-process job runtime they share: a pool for the queue,
 * one LISTEN session, coalesced workflow signals and the mending sweeps.
 */
export function jobRoutes(app: FastifyInstance, ctx: DomainContext): void {
  const databaseUrl = databaseUrlOf(ctx.db);
  const tag = randomString(8);
  const pool = createJobPool(databaseUrl, 10);
  const workerPool = createJobPool(databaseUrl, 6);
  const log: Log = (level, msg, err) => app.log[level]({ err }, msg);
  const notifier = new JobNotifier(databaseUrl, tag, log);
  const settings = jobSettings();
  const runtime = new JobRuntime(ctx, new JobStore(pool, tag, settings.retention), notifier, settings, log, new JobStore(workerPool, tag, settings.retention));
  attachJobRuntime(runtime);

  app.addHook('onReady', async () => {
    await notifier.start();
    runtime.startSweeps();
  });
  // Long-polls and waits return now, so that closing does not wait out their hold time.
  app.addHook('preClose', async () => {
    runtime.closing = true;
    notifier.wakeAll();
  });
  app.addHook('onClose', async () => {
    await runtime.stop();
    await notifier.stop();
    await pool.end();
    await workerPool.end();
  });

  // The job API in its own scope, for its body parser: an empty `application/json` body means "no
  // body" (the hosted service's Python client sends cancel and purge-queue so); any other body is
  // parsed as everywhere else.
  void app.register(async (scope) => {
    acceptEmptyJsonBodies(scope);

    // Route schemas document the shapes; the domain validates (attachValidation), so that a missing
    // `input` wrapper is the clear 400 the job API promises and authentication comes first.
    scope.post<{ Params: { endpointId: string } }>(
      '/v2/:endpointId/run',
      { bodyLimit: RUN_BODY_LIMIT, attachValidation: true, schema: { params: EndpointParams, body: RunJobBodySchema, response: { 200: JobAck } } },
      async (request) => runJob(ctx, await cachedPrincipalOf(ctx.db, request), request.params.endpointId, request.body),
    );

    scope.post<{ Params: { endpointId: string } }>(
      '/v2/:endpointId/runsync',
      {
        bodyLimit: RUNSYNC_BODY_LIMIT,
        attachValidation: true,
        schema: { params: EndpointParams, querystring: WaitQuerySchema, body: RunJobBodySchema, response: { 200: JobViewSchema } },
      },
      async (request, reply) => runJobSync(ctx, await cachedPrincipalOf(ctx.db, request), request.params.endpointId, request.body, request.query, hangupSignal(reply)),
    );

    scope.get<{ Params: { endpointId: string; jobId: string } }>(
      '/v2/:endpointId/status/:jobId',
      { schema: { params: JobParams, response: { 200: JobViewSchema } } },
      async (request) => getJobStatus(ctx, await cachedPrincipalOf(ctx.db, request), request.params.endpointId, request.params.jobId),
    );

    const statusSync = {
      attachValidation: true,
      schema: { params: JobParams, querystring: WaitQuerySchema, response: { 200: JobViewSchema } },
    };
    const statusSyncHandler = async (request: FastifyRequest<{ Params: { endpointId: string; jobId: string } }>, reply: FastifyReply) =>
      waitJobStatus(ctx, await cachedPrincipalOf(ctx.db, request), request.params.endpointId, request.params.jobId, request.query, hangupSignal(reply));
    scope.get<{ Params: { endpointId: string; jobId: string } }>('/v2/:endpointId/status-sync/:jobId', statusSync, statusSyncHandler);
    scope.post<{ Params: { endpointId: string; jobId: string } }>('/v2/:endpointId/status-sync/:jobId', statusSync, statusSyncHandler);

    scope.get<{ Params: { endpointId: string; jobId: string } }>(
      '/v2/:endpointId/stream/:jobId',
      { schema: { params: JobParams, response: { 200: JobStreamSchema } } },
      async (request, reply) => streamJob(ctx, await cachedPrincipalOf(ctx.db, request), request.params.endpointId, request.params.jobId, hangupSignal(reply)),
    );

    scope.post<{ Params: { endpointId: string; jobId: string } }>(
      '/v2/:endpointId/cancel/:jobId',
      { schema: { params: JobParams, response: { 200: JobAck } } },
      async (request) => cancelJob(ctx, await cachedPrincipalOf(ctx.db, request), request.params.endpointId, request.params.jobId),
    );

    scope.post<{ Params: { endpointId: string; jobId: string } }>(
      '/v2/:endpointId/retry/:jobId',
      { schema: { params: JobParams, response: { 200: JobAck } } },
      async (request) => retryJob(ctx, await cachedPrincipalOf(ctx.db, request), request.params.endpointId, request.params.jobId),
    );

    scope.post<{ Params: { endpointId: string } }>(
      '/v2/:endpointId/purge-queue',
      { schema: { params: EndpointParams, response: { 200: Type.Object({ removed: Type.Integer(), status: Type.Literal('completed') }) } } },
      async (request) => purgeQueue(ctx, await cachedPrincipalOf(ctx.db, request), request.params.endpointId),
    );

    scope.get<{ Params: { endpointId: string } }>(
      '/v2/:endpointId/health',
      { schema: { params: EndpointParams, response: { 200: HealthSchema } } },
      async (request) => endpointHealth(ctx, await cachedPrincipalOf(ctx.db, request), request.params.endpointId),
    );
  });

  workerProtocolRoutes(app, ctx);
}
