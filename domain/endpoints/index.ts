/**
 * Serverless endpoints: their rows (changed in REST's and the hosted GraphQL's vocabulary), their entity workflows
 * (`endpoint:<id>`), the autoscaling math and the wake-up of the autoscaler. Owns the Endpoint and
 * Release rows.
 */
export * from './autoscaler-wakeup.ts';
export * from './endpoints.ts';
export * from './image-prepull.ts';
export * from './rollback.ts';
export * from './save-endpoint.ts';
export * from './scaling.ts';
export * from './schemas.ts';
export * from './worker-problem.ts';
export * from './workers-releases.ts';
export * from './workflow-signals.ts';
