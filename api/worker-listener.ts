import { createServer, type Server } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { problem, sendProblem } from './problem.ts';

/** The worker protocol (compat.md, and the live-reload source poll) and the downloads: all a worker container needs of Gantry. */
const WORKER_ACTIONS = new Set(['job-take', 'job-take-batch', 'job-done', 'job-stream', 'job-stop', 'ping', 'source']);

export function isWorkerProtocolRoute(url: string | undefined): boolean {
  // A deployed app's worker fetches its code here, and a live one its new sources (signed URLs; api/routes/apps.ts).
  if (url === '/v2/artifacts/:buildId' || url === '/v2/sources/:envId/:version') return true;
  if (!url?.startsWith('/v2/:endpointId/')) return false;
  return WORKER_ACTIONS.has(url.slice('/v2/:endpointId/'.length).split('/')[0] ?? '');
}

/** Connections that came in through a worker-facing listener. */
const workerSockets = new WeakSet<Socket>();

/** On a worker-facing listener, everything but the worker protocol is 404: workers reach nothing else. */
export function registerWorkerListenerGuard(app: FastifyInstance): void {
  app.addHook('onRequest', async (request, reply) => {
    if (workerSockets.has(request.raw.socket) && !isWorkerProtocolRoute(request.routeOptions.url)) {
      return sendProblem(reply, problem(404, 'only the worker protocol is served on this address'));
    }
  });
}

export interface WorkerListener {
  /** True once bound. */
  readonly listening: boolean;
  close(): Promise<void>;
}

/**
 * Serves `app` on host:port for worker containers. The address is a container bridge's gateway,
 * which exists only once the runtime has created the bridge (its first container): until then the
 * bind is retried every second.
 */
export function startWorkerListener(
  app: FastifyInstance,
  host: string,
  port: number,
  log: (msg: string) => void,
): WorkerListener {
  let server: Server | undefined;
  let timer: NodeJS.Timeout | undefined;
  let closed = false;
  let warned = false;
  const state = { listening: false };
  const attempt = (): void => {
    if (closed) return;
    const s = createServer((req, res) => app.routing(req, res));
    s.on('connection', (socket: Socket) => workerSockets.add(socket));
    s.once('error', (err: NodeJS.ErrnoException) => {
      s.close();
      if (closed) return;
      if (!warned)
        log(`worker listener ${host}:${port} not up yet (${err.code ?? err.message}); retrying every second`);
      warned = true;
      timer = setTimeout(attempt, 1000);
      timer.unref();
    });
    s.listen(port, host, () => {
      server = s;
      state.listening = true;
      if (warned) log(`worker listener up on ${host}:${port}`);
    });
  };
  attempt();
  return {
    get listening() {
      return state.listening;
    },
    async close() {
      closed = true;
      if (timer) clearTimeout(timer);
      if (!server) return;
      const closing = new Promise<void>((resolve) => server!.close(() => resolve()));
      server.closeAllConnections(); // long-polls end now; workers reconnect to the next process
      await closing;
    },
  };
}
