/**
 * The load-balancing proxy: HTTP and WebSocket requests to a load-balancing endpoint go straight to
 * one of its ready workers; bodies stream through both ways without buffering.
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
 *
 * Plain HTTP requests are api/lb-http.ts's: the API server hands them over before Fastify parses
 * them (a Fastify request, route and reply per call cost several times what the forwarding does),
 * and the routes here hand over those that reach Fastify all the same (`inject`). WebSocket
 * handshakes go through the routes here (@fastify/http-proxy). The routing state and the choice of
 * a worker are api/lb-balancer.ts's.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import httpProxy, { type FastifyHttpProxyOptions } from '@fastify/http-proxy';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { authenticateCached } from '../domain/accounts/index.ts';
import type { DomainContext } from '../domain/context.ts';
import { DomainError } from '../domain/errors.ts';
import { authorizeLbCall, type LbEndpoint, type LbWorkerAddress } from '../domain/load-balancing/index.ts';
import { bearerToken, throttledAuth } from './auth.ts';
import { enforceRateLimit } from './rate-limit.ts';
import { LoadBalancer } from './lb-balancer.ts';
import { problem, sendProblem } from './problem.ts';
import { endpointIdFromHost, forwardedHeaders, HOP_BY_HOP, LbHttpProxy, lbTargetOf, type Routing } from './lb-http.ts';

interface LbWebSocketState {
  endpoint: LbEndpoint;
  worker: LbWorkerAddress;
  routing: Routing;
}

declare module 'fastify' {
  interface FastifyRequest {
    lb?: LbWebSocketState;
  }
  interface FastifyContextConfig {
    lbRouting?: Routing;
  }
  interface FastifyInstance {
    /** Where the API server hands plain HTTP requests for the proxy (set once the proxy's routes are registered). */
    lbEntry: { take?: (req: IncomingMessage, res: ServerResponse) => boolean };
  }
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

/** Headers for the WebSocket handshake with the worker: the client's, less the key and the handshake's own. */
function webSocketHeaders(request: FastifyRequest): Record<string, unknown> {
  const headers: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(request.headers)) {
    if (HOP_BY_HOP.has(name) || name === 'host' || name.startsWith('sec-websocket-')) continue;
    headers[name] = value;
  }
  const lb = request.lb;
  return forwardedHeaders(
    {
      headers: request.headers,
      ip: request.ip,
      protocol: request.protocol,
      prefix: lb?.routing === 'path' ? `/lb/${lb.endpoint.id}` : undefined,
    },
    headers,
  );
}

/**
 * Registers the proxy: `/lb/<endpointId>/...` always, and every path of `<endpointId>.<domain>`
 * when GANTRY_LB_DOMAIN is set.
 */
export const lbProxyRoutes: FastifyPluginAsyncTypebox<{ ctx: DomainContext }> = async (scope, { ctx }) => {
  const domain = ctx.settings.lbDomain;
  const balancer = new LoadBalancer(ctx, scope.log, ctx.settings.lbHealth);
  const observe = scope.observeRequest;
  const http = new LbHttpProxy({
    ctx,
    balancer,
    log: scope.log,
    throttle: scope.authThrottle,
    quotas: scope.surfaceLimits.proxy,
    observe: observe
      ? (method, target, status, seconds) =>
          observe(method, target.routing === 'path' ? '/lb/:endpointId/*' : '/*', status, seconds)
      : undefined,
  });
  let closing = false;

  if (domain)
    scope.addConstraintStrategy(
      lbHostConstraint(domain) as unknown as Parameters<FastifyInstance['addConstraintStrategy']>[0],
    );
  // Bodies are never parsed here: the proxy's own pass-through parser streams them to the worker.
  scope.removeAllContentTypeParsers();
  scope.addHook('onReady', async () => {
    balancer.start();
    scope.lbEntry.take = (req, res) => {
      if (req.headers.upgrade !== undefined) return false;
      const target = lbTargetOf(req.url ?? '/', req.headers.host, domain);
      if (!target) return false;
      // While the API closes, Fastify answers 503 itself; requests it would refuse go to it.
      if (closing) return false;
      http.handle(req, res, target);
      return true;
    };
  });
  scope.addHook('preClose', async () => {
    closing = true;
  });
  scope.addHook('onClose', async () => {
    scope.lbEntry.take = undefined;
    await balancer.stop();
    await http.close();
  });

  scope.addHook('onRequest', async (request, reply) => {
    const routing = request.routeOptions.config.lbRouting ?? 'path';
    if (request.headers.upgrade === undefined) {
      // Plain HTTP that reached Fastify (inject, or a server without the hand-off): the same path.
      const target = lbTargetOf(request.raw.url ?? '/', request.headers.host, routing === 'host' ? domain : undefined);
      if (!target) throw new DomainError('not_found', 'endpoint not found');
      reply.hijack();
      http.handle(request.raw, reply.raw, target);
      return reply;
    }
    // A WebSocket handshake: authentication, the endpoint, then a worker (waiting for one if need be).
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
    const hangup = new AbortController();
    if (reply.raw.destroyed) hangup.abort();
    else reply.raw.once('close', () => hangup.abort());
    const got = await balancer.acquire(endpoint, started + endpoint.timeoutMs, hangup.signal);
    if (!got) {
      reply.header('retry-after', '5');
      throw new DomainError(
        'unavailable',
        `no worker of endpoint ${endpoint.id} was ready within ${Date.now() - started} ms (the endpoint's timeout is ${endpoint.timeoutMs} ms)`,
      );
    }
    // Counted for the whole session; a client gone meanwhile ends its count now.
    if (hangup.signal.aborted || request.raw.socket?.destroyed) {
      got.release();
      return sendProblem(reply, problem(499, 'the client closed the connection before a worker was chosen'));
    }
    request.lb = { endpoint, worker: got.worker, routing };
    reply.raw.once('close', got.release);
  });

  const proxyOptions = (routing: Routing): FastifyHttpProxyOptions & { websocket: true } => ({
    upstream: '',
    websocket: true as const,
    config: { lbRouting: routing },
    disableRequestLogging: true,
    replyOptions: { getUpstream: (request) => request.lb?.worker.origin ?? 'http://127.0.0.1:9' },
    // Not in the library's types: http-proxy calls it for the handshake with the worker.
    wsClientOptions: {
      rewriteRequestHeaders: (_headers: unknown, request: FastifyRequest) => webSocketHeaders(request),
    } as FastifyHttpProxyOptions['wsClientOptions'],
  });

  await scope.register(httpProxy, { ...proxyOptions('path'), prefix: '/lb/:endpointId' });
  if (domain) await scope.register(httpProxy, { ...proxyOptions('host'), prefix: '', constraints: { lbHost: '*' } });
};
