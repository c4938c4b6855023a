import { Type } from 'typebox';
import { logsCommand } from '../../hostctl/containers.ts';
import { sshTargetOf } from './access.ts';
import type { ExecStream, OutputLine } from '../../hostctl/ssh.ts';
import { requireEndpointAccess, requireScope, type Principal } from '../accounts/auth.ts';
import type { DomainContext } from '../context.ts';
import { DomainError, notFound, validationFailed } from '../errors.ts';
import { validate } from '../shared/validation.ts';
import { isLiveWorker } from '../workers/status.ts';

/** A worker's container logs, read from its host over SSH and streamed to the caller. */

export const WorkerLogsQuerySchema = Type.Object(
  {
    tail: Type.Optional(
      Type.String({
        pattern: '^[0-9]{1,6}$',
        description: 'lines of the past to start with (default 100; ignored when resuming)',
      }),
    ),
    since: Type.Optional(
      Type.String({ minLength: 1, maxLength: 64, description: 'RFC 3339 time or Unix seconds: only lines after it' }),
    ),
    follow: Type.Optional(
      Type.Union([Type.Literal('true'), Type.Literal('false')], {
        description: 'keep streaming new lines (default true)',
      }),
    ),
  },
  { additionalProperties: false },
);

export interface WorkerLogLine {
  /** RFC 3339 time the runtime stamped on the line; also the SSE event id to resume from. */
  time: string;
  stream: 'stdout' | 'stderr';
  line: string;
}

export interface WorkerLogStream {
  lines: AsyncIterable<WorkerLogLine>;
  close(): Promise<void>;
}

/** Nanoseconds since the epoch of an RFC 3339 time with up to nine fraction digits (comparable). */
export function logTimeKey(time: string): bigint | undefined {
  const m = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2})$/.exec(time);
  if (!m) return undefined;
  const seconds = Date.parse(`${m[1]}${m[3]}`);
  if (Number.isNaN(seconds)) return undefined;
  return BigInt(seconds) * 1_000_000n + BigInt((m[2] ?? '').padEnd(9, '0'));
}

/**
 * Streams a worker's container output, read on its host over SSH (`<runtime> logs --timestamps`).
 * `lastEventId` (the SSE Last-Event-ID) resumes after that line.
 */
export async function openWorkerLogs(
  ctx: DomainContext,
  principal: Principal,
  endpointId: string,
  workerId: string,
  query: unknown,
  lastEventId: string | undefined,
): Promise<WorkerLogStream> {
  requireScope(principal, 'READ');
  const q = validate(WorkerLogsQuerySchema, query ?? {});
  const endpoint = await ctx.db.endpoint.findFirst({
    where: { id: endpointId, accountId: principal.accountId, deletingAt: null },
    select: { id: true },
  });
  if (!endpoint) throw notFound('endpoint');
  requireEndpointAccess(principal, endpointId);
  const worker = await ctx.db.worker.findFirst({ where: { id: workerId, endpointId }, include: { host: true } });
  if (!worker) throw notFound('worker');
  if (!worker.host || !worker.containerId || !isLiveWorker(worker.status)) {
    throw new DomainError('conflict', `the worker has no container to read logs from (status ${worker.status})`);
  }
  if (worker.host.status !== 'READY' && worker.host.status !== 'DISABLED') {
    throw new DomainError(
      'unavailable',
      `host ${worker.host.name} is ${worker.host.status}${worker.host.statusReason ? `: ${worker.host.statusReason}` : ''}`,
    );
  }
  let since: string | undefined;
  let after: bigint | undefined;
  if (lastEventId !== undefined) {
    after = logTimeKey(lastEventId);
    if (after === undefined) throw validationFailed(['Last-Event-ID: not a log line id']);
    since = lastEventId;
  } else if (q.since !== undefined) {
    if (/^\d+(\.\d+)?$/.test(q.since)) since = new Date(Number(q.since) * 1000).toISOString();
    else if (logTimeKey(q.since) !== undefined) since = q.since;
    else throw validationFailed(['$.since: must be an RFC 3339 time or Unix seconds']);
  }
  const tail =
    since === undefined
      ? Number(q.tail ?? 100)
      : q.tail !== undefined && lastEventId === undefined
        ? Number(q.tail)
        : undefined;

  const command = logsCommand(
    (worker.host.containerRuntime ?? 'podman') as 'podman' | 'docker',
    worker.containerName ?? worker.containerId,
    {
      follow: q.follow !== 'false',
      ...(tail !== undefined ? { tail } : {}),
      ...(since !== undefined ? { since } : {}),
    },
  );
  let stream: ExecStream;
  try {
    stream = await ctx.ssh.execStream(sshTargetOf(worker.host, ctx.secrets), command);
  } catch (err) {
    throw new DomainError(
      'unavailable',
      `cannot reach host ${worker.host.name}: ${err instanceof Error ? err.message : String(err)}`,
    );
  }
  async function* parsed(): AsyncGenerator<WorkerLogLine> {
    for await (const out of stream.lines as AsyncIterable<OutputLine>) {
      const space = out.line.indexOf(' ');
      const time = space > 0 ? out.line.slice(0, space) : out.line;
      const key = logTimeKey(time);
      // Not a runtime line (a message of the runtime itself): pass it on as stderr, untimed.
      if (key === undefined) {
        yield { time: '', stream: 'stderr', line: out.line };
        continue;
      }
      if (after !== undefined && key <= after) continue;
      yield { time, stream: out.stream, line: space > 0 ? out.line.slice(space + 1) : '' };
    }
  }
  return { lines: parsed(), close: () => stream.close() };
}
