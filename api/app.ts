import Fastify, { type FastifyInstance } from 'fastify';
import type { DomainContext } from '../domain/context.ts';
import { registerMetrics } from './metrics.ts';
import { errorHandler, problem, sendProblem } from './problem.ts';
import { registerRoutes } from './routes/index.ts';
import { ajv, formatErrors } from '../domain/validation.ts';
import { validationFailed } from '../domain/errors.ts';

export interface AppOptions {
  logLevel: string;
  /** Answers /readyz: false while starting or shutting down. */
  isReady?: () => boolean;
}

/** The Fastify app: REST /v2 (and later the job API, worker protocol, proxy and GraphQL). */
export function buildApp(ctx: DomainContext, opts: AppOptions): FastifyInstance {
  const app = Fastify({
    logger: {
      level: opts.logLevel,
      redact: { paths: ['req.headers.authorization', 'req.headers["x-api-key"]'], censor: '[redacted]' },
    },
    bodyLimit: 20 * 1024 * 1024,
    // Client disconnects must not leave handlers running forever.
    requestTimeout: 330_000,
    return503OnClosing: true,
  });
  app.setErrorHandler(errorHandler);
  // Route schemas (params, query, body) validate with the domain's validator: one set of messages.
  app.setValidatorCompiler(({ schema }) => {
    const validateFn = ajv.compile(schema);
    return (data: unknown) => (validateFn(data) ? { value: data } : { error: validationFailed(formatErrors(validateFn.errors)) });
  });
  app.setNotFoundHandler((request, reply) => sendProblem(reply, problem(404, `no route ${request.method} ${request.url.split('?')[0]}`)));

  registerMetrics(app);
  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/readyz', async (_request, reply) => {
    if (opts.isReady && !opts.isReady()) return sendProblem(reply, problem(503, 'not ready'));
    await ctx.db.$queryRaw`select 1`;
    return { status: 'ready' };
  });

  registerRoutes(app, ctx);
  return app;
}
