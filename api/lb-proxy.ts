/**
 * The load-balancing proxy: HTTP and WebSocket requests to a load-balancing endpoint go straight to
 * one of its ready workers (@fastify/http-proxy over @fastify/reply-from and undici; bodies stream
 * through both ways without buffering).
 *
 * Addresses (`requestUrls.base`, see loadBalancerBaseUrl in domain/endpoints/endpoints.ts):
 * - `<GANTRY_PUBLIC_URL>/lb/<endpointId>/<worker path>` always;
 * - `https://<endpointId>.<GANTRY_LB_DOMAIN>/<worker path>` when a wildcard DNS domain routes to the
 *   API: every path on such a host goes to the worker, `/v2/...` and `/healthz` included.
 *
 * Every request needs a bearer key with the RUN scope that reaches the endpoint; the key is not
 * forwarded. The worker with the fewest outstanding requests (over all API processes) takes the
 * request. With no ready worker (scale from zero, a release between workers) the request waits,
 * up to the endpoint's timeout, and the endpoint's autoscaler is woken once per waiting period.
 * Errors of the platform are problem+json; the worker's own answers pass through untouched.
 * The routing state and the choice of a worker are api/lb-balancer.ts's; this file forwards.
 */
import httpProxy, { type FastifyHttpProxyOptions } from '@fastify/http-proxy';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReplyFromHooks } from '@fastify/reply-from';
import type { FastifyBaseLogger, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Agent, type Dispatcher } from 'undici';
import { authenticateCached } from '../domain/accounts/index.ts';
import type { DomainContext } from '../domain/context.ts';
import { DomainError } from '../domain/errors.ts';
import { authorizeLbCall, type LbEndpoint, type LbWorkerAddress } from '../domain/load-balancing/index.ts';
import { bearerToken, throttledAuth } from './auth.ts';
import { enforceRateLimit } from './rate-limit.ts';
import { LoadBalancer } from './lb-balancer.ts';
import { problem, sendProblem } from './problem.ts';

type Routing = 'path' | 'host';

interface LbRequestState {
  endpoint: LbEndpoint;
  worker: LbWorkerAddress;
  /** Ends the request's in-flight count on its worker (idempotent). */
  release: () => void;
  routing: Routing;
  attempts: number;
  /** Aborts when the client hangs up before the answer; the request to the worker is then dropped too. */
  hangup: AbortSignal;
}

declare module 'fastify' {
  interface FastifyRequest {
    lb?: LbRequestState;
  }
  interface FastifyContextConfig {
    lbRouting?: Routing;
  }
}

/** Requests without a body are tried on another worker when theirs cannot be reached. */
const MAX_ATTEMPTS = 3;
const CONNECT_TIMEOUT_MS = 5_000;
/**
 * Carries a request's hang-up signal from rewriteRequestHeaders to the dispatcher (reply-from has no
 * per-request signal of its own); a symbol key, so it is never sent as a header.
 */
const HANGUP = Symbol('client hang-up');

/** `<endpointId>.<domain>[:port]` to the endpoint id; undefined for any other host. */
export function endpointIdFromHost(host: string | undefined, domain: string): string | undefined {
  if (!host || host.startsWith('[')) return undefined;
  let h = host.toLowerCase();
  const colon = h.lastIndexOf(':');
  if (colon >= 0) h = h.slice(0, colon);
  if (h.endsWith('.')) h = h.slice(0, -1);
  const suffix = `.${domain}`;
  if (!h.endsWith(suffix)) return undefined;
  const label = h.slice(0, -suffix.length);
  return /^[a-z0-9][a-z0-9-]{0,62}$/.test(label) ? label : undefined;
}

/**
 * A router constraint that sends every request on a load-balancing host to the proxy's host
 * routes. `mustMatchWhenDerived`: on such a host, routes without the constraint (the whole API)
 * do not match, so worker paths such as `/v2/...` or `/metrics` reach the worker.
 */
function lbHostConstraint(domain: string) {
  return {
    name: 'lbHost',
    mustMatchWhenDerived: true,
    // Every load-balancing host matches the routes constrained with '*'.
    storage() {
      const handlers = new Map<string, unknown>();
      return {
        get: () => handlers.get('*') ?? null,
        set: (value: string, store: unknown) => void handlers.set(value, store),
      };
    },
    deriveConstraint: (req: { headers: Record<string, string | string[] | undefined> }) => {
      const host = req.headers.host;
      return endpointIdFromHost(typeof host === 'string' ? host : undefined, domain);
    },
    validate(value: unknown) {
      if (value !== '*') throw new Error("the lbHost constraint takes '*' only");
    },
  };
}

/** Headers of the client's request that describe the connection to the proxy, not the request. */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'te',
  'trailer',
  'upgrade',
  'proxy-authorization',
]);

/** What the proxy reads of a request, whatever server type the library's callbacks name. */
type ProxiedRequest = Pick<FastifyRequest, 'headers' | 'ip' | 'protocol' | 'lb' | 'log'>;
type ProxyReply = Parameters<NonNullable<FastifyReplyFromHooks['onError']>>[0];

function forwardedHeaders<H extends object>(request: ProxiedRequest, headers: H): H {
  const out = { ...headers } as Record<string, unknown>;
  // The platform's key is for the platform: the worker never sees it.
  delete out.authorization;
  const prior = request.headers['x-forwarded-for'];
  out['x-forwarded-for'] = prior ? `${String(prior)}, ${request.ip}` : request.ip;
  out['x-forwarded-proto'] = request.protocol;
  if (request.headers.host) out['x-forwarded-host'] = request.headers.host;
  if (request.lb?.routing === 'path') out['x-forwarded-prefix'] = `/lb/${request.lb.endpoint.id}`;
  return out as H;
}

/** Headers for the WebSocket handshake with the worker: the client's, less the key and the handshake's own. */
function webSocketHeaders(request: ProxiedRequest): Record<string, unknown> {
  const headers: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(request.headers)) {
    if (HOP_BY_HOP.has(name) || name === 'host' || name.startsWith('sec-websocket-')) continue;
    headers[name] = value;
  }
  return forwardedHeaders(request, headers);
}

const hasBody = (request: ProxiedRequest): boolean =>
  request.headers['transfer-encoding'] !== undefined ||
  (request.headers['content-length'] !== undefined && request.headers['content-length'] !== '0');

/**
 * Aborts when the client hangs up before the answer. From then on the request's warnings are
 * logged at info: reply-from logs every failed upstream call at warn ("response errored", with a
 * stack), the call it aborted for a hang-up included, and a client hanging up is no fault.
 */
function hangupSignal(request: FastifyRequest, reply: FastifyReply): AbortSignal {
  const ac = new AbortController();
  const hangUp = (): void => {
    request.log = warningsAsInfo(request.log);
    ac.abort();
  };
  // Gone already (its 'close' came during the awaits before this): no wait for a worker.
  if (reply.raw.destroyed && !reply.raw.writableFinished) hangUp();
  else
    reply.raw.once('close', () => {
      if (!reply.raw.writableFinished) hangUp();
    });
  return ac.signal;
}

function warningsAsInfo(log: FastifyBaseLogger): FastifyBaseLogger {
  const quieter = Object.create(log) as FastifyBaseLogger;
  quieter.warn = log.info.bind(log);
  return quieter;
}

/**
 * The dispatcher under reply-from: an undici Agent whose request is aborted when its client hangs up,
 * so that the worker sees its connection close and can stop, instead of computing (say, for minutes
 * on a GPU) an answer nobody reads.
 */
function hangupAwareDispatcher(): { request: Dispatcher['request']; destroy: () => Promise<void> } {
  const agent = new Agent({ connect: { timeout: CONNECT_TIMEOUT_MS } });
  const request = (
    options: Dispatcher.RequestOptions,
    callback: (err: Error | null, data: Dispatcher.ResponseData) => void,
  ): void => {
    const { [HANGUP]: hangup, ...headers } = (options.headers ?? {}) as Record<string | symbol, unknown>;
    const signal = hangup instanceof AbortSignal ? hangup : undefined;
    agent.request({ ...options, headers: headers as Dispatcher.RequestOptions['headers'], signal }, callback);
  };
  return { request: request as Dispatcher['request'], destroy: () => agent.destroy() };
}

function upstreamErrorProblem(
  request: ProxiedRequest,
  error: Error,
): { status: number; detail: string; unreachable: boolean } {
  const e = error as Error & { code?: string; cause?: { code?: string; message?: string } };
  const code = e.cause?.code ?? e.code ?? '';
  const worker = request.lb?.worker.id ?? 'the worker';
  if (code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'FST_REPLY_FROM_GATEWAY_TIMEOUT' || e.name === 'TimeoutError') {
    return {
      status: 504,
      detail: `worker ${worker} did not answer within the endpoint's timeout of ${request.lb?.endpoint.timeoutMs} ms`,
      unreachable: false,
    };
  }
  if (
    ['ECONNREFUSED', 'UND_ERR_CONNECT_TIMEOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN'].includes(code)
  ) {
    return { status: 502, detail: `worker ${worker} could not be reached (${code})`, unreachable: true };
  }
  if (code === 'ECONNRESET' || code === 'UND_ERR_SOCKET' || code === 'EPIPE') {
    return { status: 502, detail: `worker ${worker} closed the connection before it answered`, unreachable: false };
  }
  return {
    status: 502,
    detail: `the request to worker ${worker} failed: ${e.cause?.message ?? e.message}`,
    unreachable: false,
  };
}

/**
 * Registers the proxy: `/lb/<endpointId>/...` always, and every path of `<endpointId>.<domain>`
 * when GANTRY_LB_DOMAIN is set.
 */
export const lbProxyRoutes: FastifyPluginAsyncTypebox<{ ctx: DomainContext }> = async (scope, { ctx }) => {
  const domain = ctx.settings.lbDomain;
  const balancer = new LoadBalancer(ctx, scope.log, ctx.settings.lbHealth);

  if (domain)
    scope.addConstraintStrategy(
      lbHostConstraint(domain) as unknown as Parameters<FastifyInstance['addConstraintStrategy']>[0],
    );
  // Bodies are never parsed here: the proxy's own pass-through parser streams them to the worker.
  scope.removeAllContentTypeParsers();
  scope.addHook('onReady', async () => balancer.start());
  scope.addHook('onClose', async () => balancer.stop());

  // Authentication, the endpoint, then a worker (waiting for one if need be), before the body is read.
  scope.addHook('onRequest', async (request, reply) => {
    const routing = request.routeOptions.config.lbRouting ?? 'path';
    const endpointId =
      routing === 'host' && domain
        ? endpointIdFromHost(request.headers.host, domain)
        : (request.params as { endpointId?: string }).endpointId;
    if (!endpointId) throw new DomainError('not_found', 'endpoint not found');
    const principal = await throttledAuth(request, () => authenticateCached(ctx, bearerToken(request)));
    const endpoint = await authorizeLbCall(ctx, principal, endpointId);
    await enforceRateLimit(ctx, reply, {
      counter: `${principal.accountId}/proxy/${endpoint.id}`,
      quotas: scope.surfaceLimits.proxy,
    });
    const started = Date.now();
    const hangup = hangupSignal(request, reply);
    const got = await balancer.acquire(endpoint, started + endpoint.timeoutMs, hangup);
    if (!got) {
      reply.header('retry-after', '5');
      throw new DomainError(
        'unavailable',
        `no worker of endpoint ${endpoint.id} was ready within ${Date.now() - started} ms (the endpoint's timeout is ${endpoint.timeoutMs} ms)`,
      );
    }
    // A client gone while its key, quota or worker was looked up already had its 'close': none
    // follows, so its count ends here (else the worker would seem busy until the process ends,
    // and a drain of it would wait its whole timeout).
    if (reply.raw.destroyed || request.raw.socket?.destroyed) {
      got.release();
      return sendProblem(reply, problem(499, 'the client closed the connection before a worker was chosen'));
    }
    request.lb = { endpoint, worker: got.worker, release: got.release, routing, attempts: 1, hangup };
    // Counted until the answer is sent or the connection (for a WebSocket, the whole session) ends.
    reply.raw.once('close', () => request.lb?.release());
  });

  const forward = (request: ProxiedRequest, reply: ProxyReply, dest: string, options: FastifyReplyFromHooks): void => {
    const lb = request.lb!;
    void reply.from(dest, {
      ...options,
      getUpstream: () => lb.worker.origin,
      timeout: lb.endpoint.timeoutMs,
      onError: (r, { error }) => {
        if (lb.hangup.aborted) {
          // Nobody reads the answer; 499 (as nginx logs it) keeps this out of the worker's error counts.
          request.log.info(
            { workerId: lb.worker.id },
            'client hung up before the worker answered; request to the worker dropped',
          );
          void sendProblem(
            r as unknown as FastifyReply,
            problem(499, 'the client closed the connection before the worker answered'),
          );
          return;
        }
        const p = upstreamErrorProblem(request, error);
        if (p.unreachable) {
          balancer.health.reportUnreachable(lb.worker.id, p.detail);
          // Nothing reached the worker: a request without a body can go to another one.
          const next =
            !hasBody(request) && lb.attempts < MAX_ATTEMPTS ? balancer.retake(lb.endpoint.id, lb.worker.id) : undefined;
          if (next) {
            lb.release();
            lb.worker = next.worker;
            lb.release = next.release;
            lb.attempts++;
            forward(request, r, dest, options);
            return;
          }
        }
        request.log.info({ err: error, workerId: lb.worker.id }, 'load-balancing request failed');
        void sendProblem(r as unknown as FastifyReply, problem(p.status, p.detail));
      },
    });
  };

  const proxyOptions = (routing: Routing): FastifyHttpProxyOptions & { websocket: true } => ({
    undici: hangupAwareDispatcher(),
    upstream: '',
    websocket: true as const,
    config: { lbRouting: routing },
    disableRequestLogging: true,
    // Worker redirects keep their own paths; see rewriteHeaders for the path-routed prefix.
    internalRewriteLocationHeader: false,
    replyOptions: {
      getUpstream: (request) => request.lb?.worker.origin ?? 'http://127.0.0.1:9',
      rewriteRequestHeaders: (request, headers) => ({
        ...forwardedHeaders(request, headers),
        [HANGUP]: request.lb?.hangup,
      }),
      rewriteHeaders: (headers, request) => {
        // A redirect to a path of the worker stays under the endpoint's prefix.
        const location = headers.location;
        if (
          request?.lb?.routing === 'path' &&
          typeof location === 'string' &&
          location.startsWith('/') &&
          !location.startsWith('//')
        ) {
          return { ...headers, location: `/lb/${request.lb.endpoint.id}${location}` };
        }
        return headers;
      },
      // Never replay a request on its own: a worker's 503 is the worker's answer.
      retryDelay: () => null,
    },
    // Not in the library's types: http-proxy calls it for the handshake with the worker.
    wsClientOptions: {
      rewriteRequestHeaders: (_headers: unknown, request: ProxiedRequest) => webSocketHeaders(request),
    } as FastifyHttpProxyOptions['wsClientOptions'],
    handler: (request, reply, dest, options) => forward(request, reply, dest, options),
  });

  await scope.register(httpProxy, { ...proxyOptions('path'), prefix: '/lb/:endpointId' });
  if (domain) await scope.register(httpProxy, { ...proxyOptions('host'), prefix: '', constraints: { lbHost: '*' } });
};
