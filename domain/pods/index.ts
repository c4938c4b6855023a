/**
 * Pods: long-running containers on a host, run by the same worker machinery as endpoint workers
 * (workflows/pod.ts). Owns the Pod rows; GraphQL (pods.ts, records.ts) and REST /v2/pods (rest.ts)
 * are two skins over one set of rules.
 */
export * from './pods.ts';
export * from './records.ts';
export * from './rest.ts';
export * from './schemas.ts';
