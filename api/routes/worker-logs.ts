// The OpenAPI fields of route schemas (operationId, summary, description, tags) are typed by @fastify/swagger.
import type {} from '@fastify/swagger';
import { once } from 'node:events';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { DomainContext } from '../../domain/context.ts';
import { openWorkerLogs, WorkerLogsQuerySchema } from '../../domain/hosts/index.ts';
import { principalOf } from '../auth.ts';

const Params = Type.Object({
  id: Type.String({ minLength: 1, description: 'endpoint id' }),
  workerId: Type.String({ minLength: 1, description: 'worker id' }),
});

/** Keeps idle connections open through proxies that close silent ones. */
const HEARTBEAT_MS = 15_000;

/** SSE data lines cannot hold line breaks; JSON escapes them. */
const sseEvent = (fields: { id?: string; event: string; data: unknown }): string =>
  `${fields.id ? `id: ${fields.id}\n` : ''}event: ${fields.event}\ndata: ${JSON.stringify(fields.data)}\n\n`;

/**
 * GET /v2/serverless/{id}/workers/{workerId}/logs: the worker container's output as Server-Sent
 * Events, read over SSH from its host. Each line is an event `log` with id = the line's time, so a
 * reconnecting EventSource resumes after the last line it saw (Last-Event-ID). The stream ends with
 * an `end` event when the container stops (or at once with follow=false).
 */
export const workerLogRoutes: FastifyPluginAsyncTypebox<{ ctx: DomainContext }> = async (app, { ctx }) => {
  app.get(
    '/v2/serverless/:id/workers/:workerId/logs',
    {
      config: { requiredScope: 'READ' },
      schema: {
        operationId: 'streamWorkerLogs',
        summary: "Stream a worker's logs",
        description:
          'Server-Sent Events (`text/event-stream`): `log` events with data `{time, stream, line}` and id = time; resumable with `Last-Event-ID`; an `end` event when the output ends. `tail` lines of the past first (default 100), or the lines after `since`. Scope: READ.',
        tags: ['Serverless'],
        params: Params,
        querystring: WorkerLogsQuerySchema,
      },
    },
    async (request, reply) => {
      const lastEventId = request.headers['last-event-id'];
      const logs = await openWorkerLogs(
        ctx,
        principalOf(request),
        request.params.id,
        request.params.workerId,
        request.query,
        typeof lastEventId === 'string' && lastEventId !== '' ? lastEventId : undefined,
      );
      // From here on the answer is a stream: errors can no longer become problem+json.
      reply.hijack();
      const raw = reply.raw;
      raw.writeHead(200, {
        'content-type': 'text/event-stream; charset=utf-8',
        'cache-control': 'no-cache, no-transform',
        connection: 'keep-alive',
        // nginx and similar proxies buffer responses unless told not to.
        'x-accel-buffering': 'no',
      });
      raw.write('retry: 2000\n\n');
      let closed = false;
      const stop = (): void => {
        closed = true;
        void logs.close();
      };
      request.raw.on('close', stop);
      const heartbeat = setInterval(() => raw.write(': keep-alive\n\n'), HEARTBEAT_MS);
      try {
        for await (const l of logs.lines) {
          if (closed) break;
          if (!raw.write(sseEvent({ ...(l.time ? { id: l.time } : {}), event: 'log', data: l })))
            await Promise.race([once(raw, 'drain'), once(raw, 'close')]);
        }
        if (!closed) raw.write(sseEvent({ event: 'end', data: { reason: 'the output ended' } }));
      } catch (err) {
        request.log.warn({ err }, 'worker log stream failed');
        if (!closed) raw.write(sseEvent({ event: 'error', data: { detail: 'reading the logs failed' } }));
      } finally {
        clearInterval(heartbeat);
        await logs.close();
        raw.end();
      }
    },
  );
};
