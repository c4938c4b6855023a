/**
 * Load-balancing endpoints: who may call one, which worker takes a request, the health of workers,
 * and the load every API process reports.
 */
export * from './call-authorization.ts';
export * from './health.ts';
export * from './load-publication.ts';
export * from './shared.ts';
export * from './worker-choice.ts';
