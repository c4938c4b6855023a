import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { LIVE_ENVIRONMENT, type LiveResource } from './state.ts';
import type { LiveEndpoints } from './live.ts';
import { CliError, describeError } from '../../errors.ts';
import { note } from '../../output.ts';
import type { Resource } from '../../scan.ts';

/** docs/jobs.md: /runsync takes up to 20 MB. */
const BODY_LIMIT = 20 * 1024 * 1024;
/** A busy port: this many after it are tried before giving up. */
const PORT_TRIES = 20;
/** /status-sync waits up to this long per call while a cold worker starts. */
const STATUS_WAIT_MS = 60_000;
const UNFINISHED = new Set(['IN_QUEUE', 'IN_PROGRESS']);

export interface DevServerOptions {
  host: string;
  port: number;
  apiKey: string;
  live: LiveEndpoints;
  /** The scanned resources now (a reload replaces them; routes follow without a restart). */
  resources: () => Resource[];
  /** The explorer's document now. */
  document: () => Record<string, unknown>;
}

export interface DevServer {
  url: string;
  port: number;
  close(): Promise<void>;
}

interface Forwarded {
  status: number;
  contentType: string | null;
  body: Buffer;
}

const trimSlash = (url: string): string => url.replace(/\/+$/, '');
const jsonError = (
  reply: FastifyReply,
  status: number,
  error: string,
  extra: Record<string, unknown> = {},
): FastifyReply => reply.code(status).send({ error, ...extra });

/** `/items/{id}` as a pattern for one path. */
function routePattern(path: string): RegExp {
  const escaped = path
    .split(/(\{[^}]+\})/)
    .map((part) => (/^\{[^}]+\}$/.test(part) ? '[^/]+' : part.replace(/[.*+?^$()|[\]\\]/g, '\\$&')))
    .join('');
  return new RegExp(`^${escaped}$`);
}

function localRoutes(r: Resource): Array<{ method: string; path: string }> {
  if (r.kind === 'queue') return [{ method: 'POST', path: `/${r.name}/runsync` }];
  return (r.routes ?? []).map((x) => ({ method: x.method, path: `/${r.name}${x.path}` }));
}

/**
 * The local server has no key of its own and adds the user's key to every call it forwards: on a
 * loopback address only this machine reaches it; anywhere else, whoever reaches it spends that key.
 */
export function exposureWarning(host: string): string | undefined {
  const h = host
    .trim()
    .toLowerCase()
    .replace(/^\[|\]$/g, '');
  if (h === 'localhost' || h === '::1' || /^127(\.\d{1,3}){3}$/.test(h)) return undefined;
  return `Listening on ${host}: anyone who reaches this address calls your live endpoints with your API key (keep --host on localhost unless that is what you want).`;
}

/** The local server of `gantry dev` (docs/dev-loop.md): each resource's routes, each call forwarded to its live endpoint. */
function buildApp(opts: DevServerOptions): FastifyInstance {
  // Open connections (a call waiting for a cold worker) must not hold up Ctrl+C.
  const app = Fastify({ logger: false, bodyLimit: BODY_LIMIT, forceCloseConnections: true });
  // Bodies stay bytes: load-balanced routes get exactly what the caller sent.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (_request, body, done) => done(null, body));

  // Static mode with a stand-in document: the explorer reads the current one through transformSpecification.
  void app.register(swagger, {
    mode: 'static',
    specification: { document: { openapi: '3.0.3', info: { title: 'gantry dev', version: 'live' }, paths: {} } },
  });
  void app.register(swaggerUi, {
    routePrefix: '/docs',
    transformSpecification: () => opts.document(),
    transformSpecificationClone: false,
    uiConfig: { tryItOutEnabled: true, displayOperationId: false, docExpansion: 'list' },
  });

  app.get('/openapi.json', async () => opts.document());

  app.get('/', async () => ({
    status: 'ok',
    app: opts.live.app,
    environment: LIVE_ENVIRONMENT,
    resources: opts.resources().map((r) => {
      const entry = opts.live.current(r.name);
      return {
        name: r.name,
        kind: r.kind,
        endpoint: `live-${r.name}`,
        provisioned: entry !== undefined,
        endpointId: entry?.endpointId ?? null,
        url: entry?.url ?? null,
        routes: localRoutes(r),
      };
    }),
  }));

  app.route({
    method: ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'],
    url: '/*',
    handler: (request, reply) => dispatch(opts, request, reply),
  });
  return app;
}

async function dispatch(opts: DevServerOptions, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const url = new URL(request.url, 'http://local');
  const [, name = '', ...rest] = url.pathname.split('/');
  const routePath = `/${rest.join('/')}`;
  const resource = opts.resources().find((r) => r.name === name);
  if (!resource) {
    const known = opts.resources().map((r) => r.name);
    return jsonError(reply, 404, `No resource named '${name}' (resources: ${known.join(', ') || 'none'}); see /docs.`);
  }
  const body = Buffer.isBuffer(request.body) ? request.body : undefined;

  if (resource.kind === 'queue') {
    if (routePath !== '/runsync')
      return jsonError(reply, 404, `${name} is queue-based: call POST /${name}/runsync with {"input": {...}}.`);
    if (request.method !== 'POST') return jsonError(reply, 405, `Use POST /${name}/runsync.`);
    return answer(reply, await call(opts, name, reply, (entry, signal) => runSync(entry, body, opts.apiKey, signal)));
  }

  const routes = resource.routes ?? [];
  const matching = routes.filter((r) => routePattern(r.path).test(routePath));
  if (matching.length === 0) {
    return jsonError(reply, 404, `${name} has no route ${routePath}.`, {
      routes: routes.map((r) => `${r.method} /${name}${r.path}`),
    });
  }
  if (!matching.some((r) => r.method === request.method)) {
    reply.header('allow', matching.map((r) => r.method).join(', '));
    return jsonError(reply, 405, `${routePath} of ${name} takes ${matching.map((r) => r.method).join(', ')}.`);
  }
  const target = `${routePath}${url.search}`;
  return answer(
    reply,
    await call(opts, name, reply, (entry, signal) => forwardRoute(entry, request, target, body, opts.apiKey, signal)),
  );
}

/**
 * The call on the resource's live endpoint, made first when it has none (the call waits). An
 * endpoint removed while dev runs answers 404: it is made again and the call goes there once.
 */
async function call(
  opts: DevServerOptions,
  name: string,
  reply: FastifyReply,
  send: (entry: LiveResource, signal: AbortSignal) => Promise<Forwarded>,
): Promise<Forwarded> {
  // The caller hung up before the answer: stop waiting on the platform for it.
  const hangup = new AbortController();
  reply.raw.once('close', () => {
    if (!reply.raw.writableFinished) hangup.abort();
  });
  try {
    for (let attempt = 0; ; attempt++) {
      const entry = await opts.live.endpointFor(name);
      const result = await send(entry, hangup.signal);
      if (
        result.status === 404 &&
        attempt === 0 &&
        isProblem(result) &&
        (await opts.live.confirmGone(name, entry.endpointId))
      ) {
        note(`live-${name} was removed from the platform; making it again`);
        continue;
      }
      return result;
    }
  } catch (err) {
    if (hangup.signal.aborted) return { status: 499, contentType: null, body: Buffer.alloc(0) };
    const status = err instanceof CliError ? 502 : 500;
    note(`A call to ${name} failed: ${describeError(err)}`);
    return {
      status,
      contentType: 'application/json',
      body: Buffer.from(JSON.stringify({ error: describeError(err) })),
    };
  }
}

const isProblem = (r: Forwarded): boolean => (r.contentType ?? '').includes('problem+json');

async function answer(reply: FastifyReply, r: Forwarded): Promise<FastifyReply> {
  if (r.contentType) reply.header('content-type', r.contentType);
  return reply.code(r.status).send(r.body);
}

async function fetchForwarded(url: string, init: RequestInit): Promise<Forwarded> {
  let res: Response;
  try {
    res = await fetch(url, init);
  } catch (err) {
    if ((err as Error).name === 'AbortError') throw err;
    const cause = (err as { cause?: { code?: string; message?: string } }).cause;
    throw new CliError(`Cannot reach ${new URL(url).origin} (${cause?.code ?? cause?.message ?? describeError(err)}).`);
  }
  return {
    status: res.status,
    contentType: res.headers.get('content-type'),
    body: Buffer.from(await res.arrayBuffer()),
  };
}

/**
 * POST {url}/runsync, answering what the platform answers. /runsync gives up after 90 s with the
 * job still queued (a first call waits for a worker to start): the job is then followed with
 * /status-sync until it ends, so the local call answers the result as the user expects.
 */
async function runSync(
  entry: LiveResource,
  body: Buffer | undefined,
  apiKey: string,
  signal: AbortSignal,
): Promise<Forwarded> {
  const base = trimSlash(entry.url);
  const headers = { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json', accept: 'application/json' };
  let result = await fetchForwarded(`${base}/runsync`, {
    method: 'POST',
    headers,
    body: body ?? Buffer.from('{}'),
    signal,
  });
  for (;;) {
    if (result.status !== 200) return result;
    let job: { id?: string; status?: string };
    try {
      job = JSON.parse(result.body.toString('utf8')) as typeof job;
    } catch {
      return result;
    }
    if (!job.id || !UNFINISHED.has(job.status ?? '')) return result;
    result = await fetchForwarded(`${base}/status-sync/${encodeURIComponent(job.id)}?wait=${STATUS_WAIT_MS}`, {
      method: 'GET',
      headers: { authorization: headers.authorization, accept: headers.accept },
      signal,
    });
  }
}

/** The same method, path, query and body on the load-balanced endpoint (the proxy waits for a worker). */
function forwardRoute(
  entry: LiveResource,
  request: FastifyRequest,
  target: string,
  body: Buffer | undefined,
  apiKey: string,
  signal: AbortSignal,
): Promise<Forwarded> {
  const headers: Record<string, string> = {
    authorization: `Bearer ${apiKey}`,
    accept: String(request.headers.accept ?? 'application/json'),
  };
  const type = request.headers['content-type'];
  if (type) headers['content-type'] = type;
  const withBody = body !== undefined && body.length > 0 && request.method !== 'GET';
  return fetchForwarded(`${trimSlash(entry.url)}${target}`, {
    method: request.method,
    headers,
    body: withBody ? body : undefined,
    signal,
  });
}

/**
 * Listens on the port, or the next free one (docs/dev-loop.md); says so when it moved. Each try is
 * a fresh server: a Fastify instance that failed to listen is not reused.
 */
export async function startDevServer(opts: DevServerOptions): Promise<DevServer> {
  for (let port = opts.port; port < opts.port + PORT_TRIES && port <= 65_535; port++) {
    const app = buildApp(opts);
    try {
      await app.listen({ host: opts.host, port });
    } catch (err) {
      await app.close().catch(() => undefined);
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'EADDRINUSE' || code === 'EACCES') continue;
      if (code === 'ENOTFOUND' || code === 'EADDRNOTAVAIL')
        throw new CliError(`Cannot listen on ${opts.host}: there is no such local address (--host).`);
      throw err;
    }
    if (port !== opts.port) note(`Port ${opts.port} is in use; using ${port} instead.`);
    const shown = opts.host.includes(':') ? `[${opts.host}]` : opts.host;
    return { url: `http://${shown}:${port}`, port, close: () => app.close() };
  }
  throw new CliError(
    `Ports ${opts.port} to ${Math.min(opts.port + PORT_TRIES - 1, 65_535)} are all in use on ${opts.host}; choose another with --port.`,
  );
}
