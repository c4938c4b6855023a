/**
 * Request limits in fixed windows (docs/security.md, "Authentication and limits"), per account and per endpoint, counted in
 * PostgreSQL so that every API process shares them.
 */
export * from './rate-limits.ts';
