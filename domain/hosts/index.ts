/**
 * Hosts: the machines workers run on, reached over SSH; their registration, the hosts file and
 * local host applied at start, their probe workflows, and workers' logs read from them. Owns the
 * Host rows.
 */
export * from './access.ts';
export * from './hosts-file.ts';
export * from './hosts.ts';
export * from './worker-logs.ts';
