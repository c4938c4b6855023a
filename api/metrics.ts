import type { FastifyInstance, FastifyRequest } from 'fastify';

declare module 'fastify' {
  interface FastifyInstance {
    /** Observes a request answered outside Fastify's routes (the load-balancing proxy's HTTP path). */
    observeRequest?: (method: string, route: string, status: number, seconds: number) => void;
  }
}
import { collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import { authenticateCurrent, type KeySource } from '../domain/accounts/index.ts';
import { lastMinuteMetrics } from '../domain/metrics/index.ts';
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

/**
 * Every live endpoint's gauges of the last complete minute, in the text format: a registry of its
 * own per scrape (the figures are read from the rollups each time, none is kept in this process).
 */
async function endpointMetricsText(keys: KeySource): Promise<string> {
  const last = await lastMinuteMetrics(keys);
  if (!last) return '';
  const registry = new Registry();
  const gauge = <L extends string>(name: string, help: string, labelNames: readonly L[]) =>
    new Gauge<L>({ name, help, labelNames, registers: [registry] });
  const seconds = (ms: number | null) => (ms === null ? null : ms / 1000);
  gauge(
    'gantry_endpoint_metrics_minute_timestamp_seconds',
    'Start of the minute the gantry_endpoint_* gauges describe (the last one rolled up)',
    [],
  ).set(Date.parse(last.minute) / 1000);
  const jobs = gauge('gantry_endpoint_jobs', 'Jobs that ended in the minute, by final status', [
    'endpoint_id',
    'status',
  ]);
  const execution = gauge(
    'gantry_endpoint_execution_seconds',
    'Execution time (completed - started) of the jobs that ended in the minute, from a histogram (±12 %)',
    ['endpoint_id', 'quantile'],
  );
  const delay = gauge(
    'gantry_endpoint_delay_seconds',
    'Delay time (started - created) of the jobs that ended in the minute, from a histogram (±12 %)',
    ['endpoint_id', 'quantile'],
  );
  const coldStarts = gauge('gantry_endpoint_cold_starts', 'Workers whose cold start ended in the minute', [
    'endpoint_id',
  ]);
  const coldStartMax = gauge(
    'gantry_endpoint_cold_start_max_seconds',
    'Longest cold start (created to ready) that ended in the minute',
    ['endpoint_id'],
  );
  const thaws = gauge('gantry_endpoint_thaws', 'FlashBoot standbys thawed in the minute', ['endpoint_id']);
  const workers = gauge('gantry_endpoint_workers', 'Average workers in each state over the minute (sampled)', [
    'endpoint_id',
    'state',
  ]);
  /** Sets a gauge where there is a value (a percentile of no jobs is no sample). */
  const put = <L extends string>(g: Gauge<L>, labels: Partial<Record<L, string>>, value: number | null) => {
    if (value !== null) g.set(labels, value);
  };
  for (const { endpointId: endpoint_id, point: p } of last.endpoints) {
    put(jobs, { endpoint_id, status: 'completed' }, p.jobs.completed);
    put(jobs, { endpoint_id, status: 'failed' }, p.jobs.failed);
    put(jobs, { endpoint_id, status: 'timed_out' }, p.jobs.timedOut);
    put(jobs, { endpoint_id, status: 'cancelled' }, p.jobs.cancelled);
    put(execution, { endpoint_id, quantile: '0.5' }, seconds(p.executionMs.p50));
    put(execution, { endpoint_id, quantile: '0.9' }, seconds(p.executionMs.p90));
    put(delay, { endpoint_id, quantile: '0.5' }, seconds(p.delayMs.p50));
    put(delay, { endpoint_id, quantile: '0.9' }, seconds(p.delayMs.p90));
    put(coldStarts, { endpoint_id }, p.coldStarts.count);
    put(coldStartMax, { endpoint_id }, seconds(p.coldStarts.maxMs));
    put(thaws, { endpoint_id }, p.thaws);
    for (const [state, n] of Object.entries(p.workers)) put(workers, { endpoint_id, state }, n);
  }
  return registry.metrics();
}
