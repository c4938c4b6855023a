/**
 * Load-balancing endpoints: who may call one, which worker takes a request, and the load every API
 * process reports.
 */
export * from './load-balancing.ts';
