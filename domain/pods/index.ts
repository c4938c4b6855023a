/**
 * Pods: long-running containers on a host, run by the same worker machinery as endpoint workers
 * (workflows/pod.ts). Owns the Pod rows; one model (model.ts) that GraphQL and REST /v2/pods map to their
 * shapes in api/, one set of rules behind GraphQL's operations (pods.ts) and REST's (updates.ts).
 */
export * from './pods.ts';
export * from './model.ts';
export * from './schemas.ts';
export * from './updates.ts';
