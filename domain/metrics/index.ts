/**
 * Endpoint metrics: the per-endpoint, per-minute rollups (EndpointMetricMinute, kept 7 days) of
 * jobs, execution and delay times, cold starts and worker states, and their readers (REST points,
 * the admin's Prometheus figures). Owns the EndpointMetricMinute and MetricRollupState rows.
 */
export * from './histogram.ts';
export * from './read.ts';
export * from './rollup.ts';
export * from './schemas.ts';
