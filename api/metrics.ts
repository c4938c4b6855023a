import type { FastifyInstance, FastifyRequest } from 'fastify';

declare module 'fastify' {
  interface FastifyInstance {
    /** Observes a request answered outside Fastify's routes (the load-balancing proxy's HTTP path). */
    observeRequest?: (method: string, route: string, status: number, seconds: number) => void;
  }
}
import { collectDefaultMetrics, Histogram, Registry } from 'prom-client';
import { authenticateCurrent, type KeySource } from '../domain/accounts/index.ts';
import { lastMinuteMetrics, type EndpointMetricsPoint } from '../domain/metrics/index.ts';
import { bearerToken, throttledAuth } from './auth.ts';

/**
 * Prometheus metrics at /metrics: process defaults plus one histogram of HTTP request durations,
 * for anyone who reaches it. A scrape that presents the platform admin's key (`Authorization: Bearer
 * <admin key>`) gets every endpoint's figures of the last complete minute as well (labelled
 * `endpoint_id`, docs/operating.md); any other key, valid or not, gets only the process metrics (a
 * failed key counts toward the address's failed authentications, as on every surface).
 */
export function registerMetrics(app: FastifyInstance, keys?: KeySource): Registry {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'gantry_' });
  const duration = new Histogram({
    name: 'gantry_http_request_duration_seconds',
    help: 'HTTP request duration by route and status',
    labelNames: ['method', 'route', 'status'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10],
    registers: [registry],
  });
  app.addHook('onResponse', async (request, reply) => {
    duration.observe(
      { method: request.method, route: request.routeOptions.url ?? 'unmatched', status: String(reply.statusCode) },
      reply.elapsedTime / 1000,
    );
  });
  app.decorate('observeRequest', (method: string, route: string, status: number, seconds: number) =>
    duration.observe({ method, route, status: String(status) }, seconds),
  );
  app.get('/metrics', async (request, reply) => {
    const endpoints = keys && (await isAdminScrape(keys, request)) ? await endpointMetricsText(keys) : '';
    const text = (await registry.metrics()) + endpoints;
    reply.type(registry.contentType);
    return text;
  });
  return registry;
}

/** The request presents the platform admin's key. */
async function isAdminScrape(keys: KeySource, request: FastifyRequest): Promise<boolean> {
  if (request.headers.authorization === undefined) return false;
  try {
    return (await throttledAuth(request, () => authenticateCurrent(keys, bearerToken(request)))).isAdmin;
  } catch {
    // Not a key, a key not the admin's, or an address refused for its failures: the public metrics only.
    return false;
  }
}

/** Prometheus label value: backslash, double quote and newline escaped. */
const label = (v: string): string => v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');

/** Every live endpoint's gauges of the last complete minute, in the text format. */
async function endpointMetricsText(keys: KeySource): Promise<string> {
  const last = await lastMinuteMetrics(keys);
  if (!last) return '';
  const families = new Map<string, { help: string; lines: string[] }>();
  const put = (name: string, help: string, labels: Record<string, string>, value: number | null) => {
    if (value === null) return;
    let family = families.get(name);
    if (!family) families.set(name, (family = { help, lines: [] }));
    const ls = Object.entries(labels)
      .map(([k, v]) => `${k}="${label(v)}"`)
      .join(',');
    family.lines.push(`${name}${ls ? `{${ls}}` : ''} ${value}`);
  };
  const seconds = (ms: number | null) => (ms === null ? null : ms / 1000);
  put(
    'gantry_endpoint_metrics_minute_timestamp_seconds',
    'Start of the minute the gantry_endpoint_* gauges describe (the last one rolled up)',
    {},
    Date.parse(last.minute) / 1000,
  );
  for (const { endpointId, point } of last.endpoints) {
    const id = { endpoint_id: endpointId };
    const p: EndpointMetricsPoint = point;
    for (const [status, n] of [
      ['completed', p.jobs.completed],
      ['failed', p.jobs.failed],
      ['timed_out', p.jobs.timedOut],
      ['cancelled', p.jobs.cancelled],
    ] as const)
      put('gantry_endpoint_jobs', 'Jobs that ended in the minute, by final status', { ...id, status }, n);
    for (const [quantile, x, d] of [
      ['0.5', p.executionMs.p50, p.delayMs.p50],
      ['0.9', p.executionMs.p90, p.delayMs.p90],
    ] as const) {
      put(
        'gantry_endpoint_execution_seconds',
        'Execution time (completed - started) of the jobs that ended in the minute, from a histogram (±12 %)',
        { ...id, quantile },
        seconds(x),
      );
      put(
        'gantry_endpoint_delay_seconds',
        'Delay time (started - created) of the jobs that ended in the minute, from a histogram (±12 %)',
        { ...id, quantile },
        seconds(d),
      );
    }
    put('gantry_endpoint_cold_starts', 'Workers whose cold start ended in the minute', id, p.coldStarts.count);
    put(
      'gantry_endpoint_cold_start_max_seconds',
      'Longest cold start (created to ready) that ended in the minute',
      id,
      seconds(p.coldStarts.maxMs),
    );
    put('gantry_endpoint_thaws', 'FlashBoot standbys thawed in the minute', id, p.thaws);
    for (const [state, n] of Object.entries(p.workers))
      put('gantry_endpoint_workers', 'Average workers in each state over the minute (sampled)', { ...id, state }, n);
  }
  let out = '';
  for (const [name, { help, lines }] of families)
    out += `# HELP ${name} ${help}\n# TYPE ${name} gauge\n${lines.join('\n')}\n`;
  return out;
}
