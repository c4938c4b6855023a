/**
 * Request limits in fixed windows (spec "Limits"), per account and per endpoint, counted in
 * PostgreSQL so that every API process shares them.
 */
export * from './rate-limits.ts';
