import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createTlsServer, type Server as TlsServer } from 'node:https';
import Fastify, { type FastifyError, type FastifyInstance, type FastifyServerOptions } from 'fastify';
import type { DomainContext } from '../domain/context.ts';
import { registerMetrics } from './metrics.ts';
import { errorHandler, problem, sendProblem } from './problem.ts';
import { registerRoutes } from './routes/index.ts';
import { consoleRoutes } from './console/routes.ts';
import { compileSchema, formatErrors } from '../domain/shared/index.ts';
import { validationFailed } from '../domain/errors.ts';
import type { RateLimitQuotas, SurfaceLimits } from '../domain/rate-limits/index.ts';
import { stdSerializers } from 'pino';
import { redactKeys, redactUrl } from './redact.ts';
import { acceptEmptyJsonBodies, BODILESS_METHODS } from './empty-json-body.ts';
import { registerInputGuards } from './input-guards.ts';
import { registerWorkerListenerGuard } from './worker-listener.ts';
import { registerAuthThrottle } from './auth.ts';
import { registerOpenApi } from './openapi.ts';
import { registerRateLimitPurge } from './rate-limit.ts';
import { readTlsCredentials, watchTlsFiles, type TlsCredentials, type TlsFiles } from './tls.ts';

export interface AppOptions {
  logLevel: string;
  /** Answers /readyz: false while starting or shutting down. */
  isReady?: () => boolean;
  /** Default per-account quotas of the management API; default: GANTRY_RATE_LIMITS, else built in. */
  rateLimits?: RateLimitQuotas;
  /** Every surface's limits; default: the platform's (ctx.settings.limits). */
  limits?: Partial<SurfaceLimits>;
  /** Where log lines go; default: standard output. */
  logStream?: { write(line: string): void };
  /** Serve HTTPS with these PEM files (GANTRY_TLS_CERT, GANTRY_TLS_KEY), re-read when they change; default: plain HTTP. */
  tls?: TlsFiles;
  /** The console's build (api/console/build.ts consoleBuildDir); none or not built: /console answers 503. */
  consoleDir?: string;
  /** The Temporal Web UI's address and namespace, for the console's links to an endpoint's workflows. */
  temporalUi?: { url: string; namespace: string };
}

declare module 'fastify' {
  interface FastifyInstance {
    surfaceLimits: SurfaceLimits;
  }
}

/**
 * The API's HTTP server: requests the load-balancing proxy takes (`entry.take`, set once its routes
 * are registered) never become Fastify requests; the rest are Fastify's. Its timeouts are those
 * Fastify sets on a server of its own. With `tls` it is an HTTPS server: the same handler, so the
 * proxy's fast path and WebSocket upgrades work the same over TLS.
 */
function apiServer(
  fastifyHandler: (req: IncomingMessage, res: ServerResponse) => void,
  options: FastifyServerOptions,
  entry: FastifyInstance['lbEntry'],
  tls: TlsCredentials | undefined,
): Server {
  const handler = (req: IncomingMessage, res: ServerResponse): void => {
    if (!entry.take?.(req, res)) fastifyHandler(req, res);
  };
  // An HTTPS server is an HTTP server with TLS sockets (node:https's Server extends http.Server).
  const server: Server = tls ? createTlsServer({ cert: tls.cert, key: tls.key }, handler) : createServer(handler);
  server.keepAliveTimeout = options.keepAliveTimeout ?? 72_000;
  server.requestTimeout = options.requestTimeout ?? 0;
  server.setTimeout(options.connectionTimeout ?? 0);
  return server;
}

/**
 * The Fastify app: the public routes (health, readiness, metrics, the OpenAPI document and its
 * explorer) and what every surface shares; the surfaces themselves, each in its own scope with its
 * own authentication and limits, in routes/index.ts.
 */
export function buildApp(ctx: DomainContext, opts: AppOptions): FastifyInstance {
  const lbEntry: FastifyInstance['lbEntry'] = {};
  // Read before anything listens: a missing or mismatched file stops the start, naming its variable.
  const tls = opts.tls && readTlsCredentials(opts.tls, ctx.settings.lbDomain);
  const app = Fastify({
    serverFactory: (handler, options) => apiServer(handler, options, lbEntry, tls),
    logger: {
      level: opts.logLevel,
      ...(opts.logStream ? { stream: opts.logStream } : {}),
      redact: { paths: ['req.headers.authorization', 'req.headers["x-api-key"]'], censor: '[redacted]' },
      // Keys may come in the query string (`?api_key=`, the GraphQL convention) or anywhere a client
      // puts one by mistake (a path segment, a lookalike name): never logged, in requests or errors.
      serializers: {
        err: (err: FastifyError) => {
          const out = stdSerializers.err(err);
          // Not an error (pino hands whatever is under `err` here): as it came.
          if (typeof out !== 'object' || out === null) return out;
          return { ...out, message: redactKeys(out.message ?? ''), stack: redactKeys(out.stack ?? '') };
        },
        req: (req: { method: string; url: string; host?: string; ip?: string; socket?: { remotePort?: number } }) => ({
          method: req.method,
          url: redactUrl(req.url),
          host: req.host,
          remoteAddress: req.ip,
          remotePort: req.socket?.remotePort,
        }),
      },
    },
    bodyLimit: 20 * 1024 * 1024,
    // Client disconnects must not leave handlers running forever.
    requestTimeout: 330_000,
    return503OnClosing: true,
    // Errors the router raises before any route runs (bad URL encoding, over-long parameters) are
    // problem+json like every other error.
    frameworkErrors: (err, _request, reply) => {
      const status = typeof err.statusCode === 'number' && err.statusCode >= 400 ? err.statusCode : 400;
      const detail =
        err.code === 'FST_ERR_MAX_PARAM_LENGTH'
          ? 'a path parameter is too long'
          : err.code === 'FST_ERR_BAD_URL'
            ? 'the URL is not validly encoded'
            : 'request could not be processed';
      return sendProblem(reply, problem(status, detail));
    },
  });
  app.setErrorHandler(errorHandler);
  // `DELETE` with `Content-Type: application/json` and no body (many clients send every call so) is
  // a bodiless DELETE on every surface; scopes that take bodiless POSTs so too say so themselves.
  acceptEmptyJsonBodies(app, BODILESS_METHODS);
  if (opts.tls) {
    const stop = watchTlsFiles(
      opts.tls,
      ctx.settings.lbDomain,
      (next) => (app.server as TlsServer).setSecureContext({ cert: next.cert, key: next.key }),
      { info: (m) => app.log.info(m), warn: (m) => app.log.warn(m) },
    );
    app.addHook('onClose', async () => stop());
  }
  // Route schemas (params, query, body) validate with the domain's validator: one set of messages.
  app.setValidatorCompiler(({ schema }) => {
    const validateFn = compileSchema(schema);
    return (data: unknown) =>
      validateFn(data) ? { value: data } : { error: validationFailed(formatErrors(validateFn.errors)) };
  });
  app.setNotFoundHandler((request, reply) =>
    // The path as logged: a credential in it (`/graphql;api_key=...`) is never echoed.
    sendProblem(reply, problem(404, `no route ${request.method} ${redactUrl(request.url.split('?')[0]!)}`)),
  );

  registerMetrics(app, ctx);
  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/readyz', async (_request, reply) => {
    if (opts.isReady && !opts.isReady()) return sendProblem(reply, problem(503, 'not ready'));
    await ctx.db.$queryRaw`select 1`;
    return { status: 'ready' };
  });

  const limits: SurfaceLimits = {
    ...ctx.settings.limits,
    ...(opts.rateLimits ? { management: opts.rateLimits } : {}),
    ...opts.limits,
  };
  app.decorate('surfaceLimits', limits);
  app.decorate('lbEntry', lbEntry);
  // Before anything reads them: ids and query values that no handler can store (NUL).
  registerInputGuards(app);
  // Worker containers' own address answers the worker protocol and nothing else.
  registerWorkerListenerGuard(app);
  // Shared by every surface; each surface authenticates and counts in its own scope (routes/index.ts).
  registerAuthThrottle(app, ctx.db, limits.authFailuresPerMinute);
  registerRateLimitPurge(app, ctx);

  // The OpenAPI generator collects routes as they are added, so it loads before the route modules.
  registerOpenApi(app);
  app.register(registerRoutes, { ctx });
  app.register(consoleRoutes, { dir: opts.consoleDir, temporalUi: opts.temporalUi });
  return app;
}
