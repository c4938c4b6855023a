/**
 * Jobs: the PostgreSQL queue (queue.ts: every change of a job's state is one conditional
 * statement), the client job API and the worker protocol (docs/jobs.md) over it, the wake-ups of
 * waiting requests, and what job workflows are told. Owns the Job rows; each job's workflow
 * (workflows/job.ts) owns its timers and its webhook.
 */
export * from './client-api.ts';
export * from './handoff.ts';
export * from './idempotency.ts';
export * from './list.ts';
export * from './lost-workers.ts';
export * from './queue-endpoints.ts';
export * from './queue-base.ts';
export * from './queue-supervision.ts';
export * from './queue.ts';
export * from './rows.ts';
export * from './runtime.ts';
export * from './schemas.ts';
export * from './settings.ts';
export * from './wakeups.ts';
export * from './webhook-targets.ts';
export * from './worker-protocol.ts';
export * from './workflow-signals.ts';
