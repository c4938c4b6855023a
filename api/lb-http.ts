/**
 * The load-balancing proxy's HTTP path, on Node's own request and response (no Fastify request,
 * reply or route per call): the API server hands it every request for `/lb/<endpointId>/...` or an
 * `<endpointId>.<GANTRY_LB_DOMAIN>` host before Fastify sees it (api/server.ts), and the proxy's
 * Fastify routes hand it what reaches them (`inject`). WebSocket handshakes stay on the Fastify routes
 * (api/lb-proxy.ts). The checks are the same as every surface's: the failed-authentication throttle,
 * the key (remembered within the revocation bound), the endpoint, the proxy's quota; then a worker
 * is chosen (api/lb-balancer.ts) and the request streamed to it with undici, the answer streamed back.
 */
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import type { FastifyBaseLogger } from 'fastify';
import { Agent, type Dispatcher } from 'undici';
import { authenticateCached, authenticateCachedNow } from '../domain/accounts/index.ts';
import type { DomainContext } from '../domain/context.ts';
import { DomainError, notFound } from '../domain/errors.ts';
import {
  authorizeLbCall,
  authorizeLbCallNow,
  type LbEndpoint,
  type LbWorkerAddress,
} from '../domain/load-balancing/index.ts';
import type { RateLimitQuotas } from '../domain/rate-limits/index.ts';
import { bearerOf, type AuthFailureThrottle } from './auth.ts';
import type { LoadBalancer } from './lb-balancer.ts';
import { problem, problemOf, type Problem } from './problem.ts';
import { consumeQuota, rateLimitHeaders, refuseOverQuota } from './rate-limit.ts';

export type Routing = 'path' | 'host';

/** Where a request goes: the endpoint, the path on its worker, and how the endpoint was named. */
export interface LbTarget {
  endpointId: string;
  /** The worker's path and query: `/lb/<id>/a?b` is `/a?b`, `/lb/<id>` is `/`. */
  path: string;
  routing: Routing;
}

/** Requests without a body are tried on another worker when theirs cannot be reached. */
const MAX_ATTEMPTS = 3;
const CONNECT_TIMEOUT_MS = 5_000;
const LB_PREFIX = '/lb/';
/** The shape of every endpoint id (domain/shared/ids.ts), with room to spare. */
const ENDPOINT_ID = /^[A-Za-z0-9_-]{1,64}$/;

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

/** The proxy's target for a request, or undefined when the request is the API's. */
export function lbTargetOf(url: string, host: string | undefined, domain: string | undefined): LbTarget | undefined {
  const byHost = domain ? endpointIdFromHost(host, domain) : undefined;
  if (byHost) return { endpointId: byHost, path: url, routing: 'host' };
  if (!url.startsWith(LB_PREFIX)) return undefined;
  let end = LB_PREFIX.length;
  while (end < url.length && url[end] !== '/' && url[end] !== '?') end++;
  const rest = url.slice(end);
  return {
    endpointId: url.slice(LB_PREFIX.length, end),
    path: rest.startsWith('/') ? rest : `/${rest}`,
    routing: 'path',
  };
}

/** Headers of the client's request that describe the connection to the proxy, not the request. */
export const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'te',
  'trailer',
  'upgrade',
  'proxy-authorization',
]);

/** What the forwarded headers say of the client's request. */
export interface ForwardedFrom {
  headers: IncomingHttpHeaders;
  ip: string;
  protocol: string;
  /** The path prefix the worker is reached under (path routing). */
  prefix?: string;
}

/** The headers the worker gets: `headers` less the platform's key, plus the X-Forwarded-* set. */
export function forwardedHeaders(from: ForwardedFrom, headers: Record<string, unknown>): Record<string, unknown> {
  // The platform's key is for the platform: the worker never sees it.
  delete headers.authorization;
  const prior = from.headers['x-forwarded-for'];
  headers['x-forwarded-for'] = prior ? `${String(prior)}, ${from.ip}` : from.ip;
  headers['x-forwarded-proto'] = from.protocol;
  if (from.headers.host) headers['x-forwarded-host'] = from.headers.host;
  if (from.prefix) headers['x-forwarded-prefix'] = from.prefix;
  return headers;
}

/** The client's headers for the worker: hop-by-hop ones (and those `Connection` names) dropped, `Host` the worker's. */
function requestHeaders(from: ForwardedFrom): Record<string, unknown> {
  const named = from.headers.connection
    ? new Set(from.headers.connection.split(',').map((h) => h.trim().toLowerCase()))
    : undefined;
  const out: Record<string, unknown> = {};
  for (const name in from.headers) {
    // `expect`: Node answers 100-continue itself; undici refuses the header.
    if (HOP_BY_HOP.has(name) || name === 'host' || name === 'expect' || named?.has(name)) continue;
    out[name] = from.headers[name];
  }
  return forwardedHeaders(from, out);
}

/** The worker's answer headers for the client: framing is the client connection's own. */
function responseHeaders(headers: IncomingHttpHeaders, target: LbTarget): IncomingHttpHeaders {
  const out: IncomingHttpHeaders = {};
  for (const name in headers) if (!HOP_BY_HOP.has(name)) out[name] = headers[name];
  // A redirect to a path of the worker stays under the endpoint's prefix.
  const location = out.location;
  if (
    target.routing === 'path' &&
    typeof location === 'string' &&
    location.startsWith('/') &&
    !location.startsWith('//')
  )
    out.location = `${LB_PREFIX}${target.endpointId}${location}`;
  return out;
}

export function upstreamErrorProblem(
  workerId: string,
  timeoutMs: number,
  error: Error,
): { status: number; detail: string; unreachable: boolean } {
  const e = error as Error & { code?: string; cause?: { code?: string; message?: string } };
  const code = e.cause?.code ?? e.code ?? '';
  if (code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT' || e.name === 'TimeoutError') {
    return {
      status: 504,
      detail: `worker ${workerId} did not answer within the endpoint's timeout of ${timeoutMs} ms`,
      unreachable: false,
    };
  }
  if (
    ['ECONNREFUSED', 'UND_ERR_CONNECT_TIMEOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN'].includes(code)
  ) {
    return { status: 502, detail: `worker ${workerId} could not be reached (${code})`, unreachable: true };
  }
  if (code === 'ECONNRESET' || code === 'UND_ERR_SOCKET' || code === 'EPIPE') {
    return { status: 502, detail: `worker ${workerId} closed the connection before it answered`, unreachable: false };
  }
  return {
    status: 502,
    detail: `the request to worker ${workerId} failed: ${e.cause?.message ?? e.message}`,
    unreachable: false,
  };
}

/** A problem+json answer on a bare response (unless it is gone or already answering). */
export function sendRawProblem(res: ServerResponse, p: Problem, extra: Record<string, string> = {}): void {
  if (res.headersSent || res.destroyed) {
    if (!res.writableEnded) res.destroy();
    return;
  }
  const body = JSON.stringify(p);
  res.writeHead(p.status, {
    ...extra,
    'content-type': 'application/problem+json; charset=utf-8',
    'content-length': Buffer.byteLength(body),
  });
  res.end(body);
}

/** A request's hang-up signal and the end of its in-flight count on its worker. */
interface CallState {
  hangup: AbortController;
  release: (() => void) | undefined;
}

export interface LbHttpOptions {
  ctx: DomainContext;
  balancer: LoadBalancer;
  log: FastifyBaseLogger;
  throttle: AuthFailureThrottle | undefined;
  quotas: RateLimitQuotas;
  /** Observes each answered request (the API's request-duration metric). */
  observe?: (method: string, target: LbTarget, status: number, seconds: number) => void;
}

/** Proxied requests: forwarded with one undici agent per process, aborted when their client hangs up. */
export class LbHttpProxy {
  private readonly agent = new Agent({ connect: { timeout: CONNECT_TIMEOUT_MS } });

  constructor(private readonly o: LbHttpOptions) {}

  close(): Promise<void> {
    return this.agent.close();
  }

  /** Answers `req` (never throws: every failure is a problem+json answer or, mid-answer, a dropped connection). */
  handle(req: IncomingMessage, res: ServerResponse, target: LbTarget): void {
    const started = performance.now();
    const call: CallState = { hangup: new AbortController(), release: undefined };
    // Counted until the answer is sent or the client is gone; the worker's request is aborted then.
    res.once('close', () => {
      call.release?.();
      if (!res.writableFinished) call.hangup.abort();
      else this.o.observe?.(req.method ?? 'GET', target, res.statusCode, (performance.now() - started) / 1000);
    });
    this.admit(req, res, target, call).catch((err: unknown) => {
      const p = problemOf(err);
      if (!p) this.o.log.error({ err }, 'unhandled error in the load-balancing proxy');
      sendRawProblem(res, p?.problem ?? problem(500, 'internal error; the request was not completed'), p?.headers);
    });
  }

  /**
   * The key, the endpoint, the quota and a worker: each from what this process holds when it can
   * (no promise, no turn of the event loop), else looked up.
   */
  private async admit(req: IncomingMessage, res: ServerResponse, target: LbTarget, call: CallState): Promise<void> {
    const { ctx, balancer, throttle } = this.o;
    const address = req.socket.remoteAddress ?? '';
    const presented = bearerOf(req.headers.authorization);
    throttle?.check(address);
    const principal =
      authenticateCachedNow(ctx, presented) ??
      (await (throttle
        ? throttle.guard(address, () => authenticateCached(ctx, presented))
        : authenticateCached(ctx, presented)));
    // No look-up for what cannot be an endpoint id (the router's parameter limit, before this path).
    if (!ENDPOINT_ID.test(target.endpointId)) throw notFound('endpoint');
    const endpoint =
      authorizeLbCallNow(ctx, principal, target.endpointId) ??
      (await authorizeLbCall(ctx, principal, target.endpointId));
    const spec = { counter: `${principal.accountId}/proxy/${endpoint.id}`, quotas: this.o.quotas };
    const decision = ctx.rateLimiter?.consumeNow(spec) ?? (await consumeQuota(ctx, spec));
    for (const [name, value] of rateLimitHeaders(decision)) res.setHeader(name, value);
    refuseOverQuota(decision);

    const waitFrom = Date.now();
    const got =
      balancer.takeNow(endpoint.id) ??
      (await balancer.acquire(endpoint, waitFrom + endpoint.timeoutMs, call.hangup.signal));
    if (!got) {
      if (call.hangup.signal.aborted) return;
      res.setHeader('retry-after', '5');
      throw new DomainError(
        'unavailable',
        `no worker of endpoint ${endpoint.id} was ready within ${Date.now() - waitFrom} ms (the endpoint's timeout is ${endpoint.timeoutMs} ms)`,
      );
    }
    call.release = got.release;
    // Gone while its key, quota or worker was looked up: its 'close' came already.
    if (res.destroyed || req.socket.destroyed) return got.release();
    const from: ForwardedFrom = {
      headers: req.headers,
      ip: address,
      protocol: (req.socket as { encrypted?: boolean }).encrypted ? 'https' : 'http',
      prefix: target.routing === 'path' ? `${LB_PREFIX}${endpoint.id}` : undefined,
    };
    this.forward(req, res, target, call, {
      endpoint,
      worker: got.worker,
      headers: requestHeaders(from),
      attempts: 1,
    });
  }

  private forward(
    req: IncomingMessage,
    res: ServerResponse,
    target: LbTarget,
    call: CallState,
    attempt: { endpoint: LbEndpoint; worker: LbWorkerAddress; headers: Record<string, unknown>; attempts: number },
  ): void {
    const withBody =
      req.headers['transfer-encoding'] !== undefined ||
      (req.headers['content-length'] !== undefined && req.headers['content-length'] !== '0');
    const options: Dispatcher.RequestOptions = {
      origin: attempt.worker.origin,
      path: target.path,
      method: req.method as Dispatcher.HttpMethod,
      headers: attempt.headers as Dispatcher.RequestOptions['headers'],
      body: withBody ? req : undefined,
      signal: call.hangup.signal,
      headersTimeout: attempt.endpoint.timeoutMs,
      bodyTimeout: attempt.endpoint.timeoutMs,
    };
    this.agent.stream(
      options,
      ({ statusCode, headers }) => {
        res.writeHead(statusCode, responseHeaders(headers as IncomingHttpHeaders, target));
        return res;
      },
      (err) => {
        if (!err) return;
        if (call.hangup.signal.aborted) {
          this.o.log.info(
            { workerId: attempt.worker.id },
            'client hung up before the worker answered; request to the worker dropped',
          );
          // Nobody reads the answer; 499 (as nginx logs it) keeps this out of the worker's error counts.
          return sendRawProblem(res, problem(499, 'the client closed the connection before the worker answered'));
        }
        const p = upstreamErrorProblem(attempt.worker.id, attempt.endpoint.timeoutMs, err);
        if (p.unreachable && !res.headersSent) {
          this.o.balancer.health.reportUnreachable(attempt.worker.id, p.detail);
          // Nothing reached the worker: a request without a body can go to another one.
          const next =
            !withBody && attempt.attempts < MAX_ATTEMPTS
              ? this.o.balancer.retake(attempt.endpoint.id, attempt.worker.id)
              : undefined;
          if (next) {
            call.release?.();
            call.release = next.release;
            return this.forward(req, res, target, call, {
              ...attempt,
              worker: next.worker,
              attempts: attempt.attempts + 1,
            });
          }
        }
        this.o.log.info({ err, workerId: attempt.worker.id }, 'load-balancing request failed');
        sendRawProblem(res, problem(p.status, p.detail));
      },
    );
  }
}
