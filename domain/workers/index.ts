/**
 * Workers (the containers that serve endpoints and pods): which states are live, their
 * credentials, and placement on hosts. Owns the Worker rows' rules; their lifecycles are
 * workflows/worker.ts.
 */
export * from './credentials.ts';
export * from './placement.ts';
export * from './status.ts';
