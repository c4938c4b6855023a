import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { sourceForWorker } from '../../domain/apps/index.ts';
import { workerFacingBase } from '../worker-listener.ts';
import type { DomainContext } from '../../domain/context.ts';
import { jobRuntimeOf } from '../../domain/jobs/index.ts';
import { PingQuerySchema } from '../../domain/jobs/index.ts';
import { finishJob, postStreamChunk, takeJobs, untakeJobs, waitForStops, workerPing } from '../../domain/jobs/index.ts';
import { validationFailed } from '../../domain/errors.ts';
import { authenticateWorker, forgetWorker, workerKeyOf, type WorkerIdentity } from '../../domain/workers/index.ts';
import { throttledAuth } from '../auth.ts';
import { RequestWaits } from '../request-signals.ts';
import { WorkerSourceSchema } from './shapes/app.ts';

const WorkerParams = Type.Object({ endpointId: Type.String(), workerId: Type.String() });
const WorkerJobParams = Type.Object({ endpointId: Type.String(), workerId: Type.String(), jobId: Type.String() });
const TakeQuery = Type.Object(
  {
    job_in_progress: Type.Optional(
      Type.String({ description: '1 when the worker already runs a job and asks for another' }),
    ),
    batch_size: Type.Optional(
      Type.String({ pattern: '^[0-9]+$', description: 'job-take-batch: most jobs to hand over' }),
    ),
    gpu: Type.Optional(Type.String()),
  },
  { additionalProperties: true },
);
const TakenJobSchema = Type.Object({ id: Type.String(), input: Type.Unknown() });
const SourceQuery = Type.Object({
  after: Type.Optional(
    Type.String({ pattern: '^[0-9]{1,10}$', description: 'the newest source version the worker runs' }),
  ),
});

/** Most jobs one job-take-batch call hands over. */
const MAX_BATCH = 64;
const DONE_BODY_LIMIT = 20 * 1024 * 1024;

type WorkerRequest = FastifyRequest<{ Params: { endpointId: string; workerId: string } }>;

function worker(ctx: DomainContext, request: WorkerRequest): Promise<WorkerIdentity> {
  return throttledAuth(request, () =>
    authenticateWorker(
      ctx,
      workerKeyOf(request.headers.authorization),
      request.params.workerId,
      request.params.endpointId,
    ),
  );
}

/**
 * The worker protocol (docs/jobs.md) that worker containers speak with their own credential
 * (`Authorization: <key>`): job-take and job-take-batch long-polls, job-done, job-stream, the job-stop
 * long-poll, ping, and the live-reload source poll. Registered in its own scope: the worker SDK
 * sends JSON bodies labelled `application/x-www-form-urlencoded`, so bodies here are read raw and
 * parsed as JSON by the domain.
 */
export const workerProtocolRoutes: FastifyPluginAsyncTypebox<{ ctx: DomainContext }> = async (scope, { ctx }) => {
  const jobs = jobRuntimeOf(ctx);
  // Long-polls end when the worker hangs up or the app starts closing (a graceful stop does not wait out their hold time).
  const waits = new RequestWaits(scope);
  scope.removeAllContentTypeParsers();
  scope.addContentTypeParser('*', { parseAs: 'string', bodyLimit: DONE_BODY_LIMIT }, (_request, body, done) =>
    done(null, body),
  );

  type TakeRequest = FastifyRequest<{
    Params: { endpointId: string; workerId: string };
    Querystring: { batch_size?: string };
  }>;
  const take = (batch: boolean) => async (request: TakeRequest, reply: FastifyReply) => {
    const identity = await worker(ctx, request);
    const max = batch ? Math.min(MAX_BATCH, Math.max(1, Number(request.query.batch_size ?? 1) || 1)) : 1;
    const abort = waits.signal(reply);
    // A thaw or standby while the take waits: the worker's state is read again past the cache.
    const refresh = async (): Promise<WorkerIdentity> => {
      if (ctx.records) forgetWorker(ctx.records, identity.workerId);
      const { authorization } = request.headers;
      return authenticateWorker(ctx, workerKeyOf(authorization), request.params.workerId, request.params.endpointId);
    };
    const taken = await takeJobs(jobs, identity, { max, abort, refresh });
    if (taken.length === 0) return reply.code(204).send();
    if (reply.raw.destroyed || (abort.aborted && !waits.closing)) {
      // The worker is gone: the jobs go back to the queue rather than wait for worker-loss detection.
      await untakeJobs(
        jobs,
        identity,
        taken.map((j) => j.id),
      );
      return reply.code(204).send();
    }
    const out = taken.map((j) => ({ id: j.id, input: j.input }));
    return reply.send(batch ? out : out[0]);
  };
  const takeOpts = (response: object) => ({
    attachValidation: true,
    schema: { params: WorkerParams, querystring: TakeQuery, response: { 200: response } },
  });
  scope.get<{ Params: { endpointId: string; workerId: string }; Querystring: { batch_size?: string } }>(
    '/v2/:endpointId/job-take/:workerId',
    takeOpts(TakenJobSchema),
    take(false),
  );
  scope.get<{ Params: { endpointId: string; workerId: string }; Querystring: { batch_size?: string } }>(
    '/v2/:endpointId/job-take-batch/:workerId',
    takeOpts(Type.Array(TakenJobSchema)),
    take(true),
  );

  scope.post<{ Params: { endpointId: string; workerId: string; jobId: string } }>(
    '/v2/:endpointId/job-done/:workerId/:jobId',
    { schema: { params: WorkerJobParams } },
    async (request) => finishJob(jobs, await worker(ctx, request), request.params.jobId, request.body),
  );

  scope.post<{ Params: { endpointId: string; workerId: string; jobId: string } }>(
    '/v2/:endpointId/job-stream/:workerId/:jobId',
    { schema: { params: WorkerJobParams } },
    async (request) => {
      await postStreamChunk(jobs, await worker(ctx, request), request.params.jobId, request.body);
      return {};
    },
  );

  scope.get<{ Params: { endpointId: string; workerId: string } }>(
    '/v2/:endpointId/job-stop/:workerId',
    { schema: { params: WorkerParams, response: { 200: Type.Object({ jobsToStop: Type.Array(Type.String()) }) } } },
    async (request, reply) => {
      const identity = await worker(ctx, request);
      const ids = await waitForStops(jobs, identity, waits.signal(reply));
      if (ids.length === 0) return reply.code(204).send();
      return { jobsToStop: ids };
    },
  );

  // Live reload (docs/dev-loop.md): the worker asks for a source version newer than the one it runs.
  scope.get<{ Params: { endpointId: string; workerId: string }; Querystring: { after?: string } }>(
    '/v2/:endpointId/source/:workerId',
    {
      attachValidation: true,
      schema: { params: WorkerParams, querystring: SourceQuery, response: { 200: WorkerSourceSchema } },
    },
    async (request, reply) => {
      const identity = await worker(ctx, request);
      // The credential first, as on every worker route: a stranger learns nothing from a 422.
      if (request.validationError)
        throw validationFailed(['$query.after: the newest source version the worker runs (a whole number)']);
      // The download is signed for the address the worker reached (its network's gateway, on the worker listener).
      const base = workerFacingBase(request.raw.socket);
      const source = await sourceForWorker(
        base ? { ...ctx, workerUrl: base } : ctx,
        identity,
        Number(request.query.after ?? 0),
      );
      if (!source) return reply.code(204).send();
      return source;
    },
  );

  scope.get<{ Params: { endpointId: string; workerId: string } }>(
    '/v2/:endpointId/ping/:workerId',
    { attachValidation: true, schema: { params: WorkerParams, querystring: PingQuerySchema } },
    async (request) => {
      await workerPing(jobs, await worker(ctx, request), request.query);
      return {};
    },
  );
};
