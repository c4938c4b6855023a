/**
 * What every area uses: the Prisma client, ids, sealed secrets, the settings read once at start,
 * the one JSON Schema validator, and the short-lived record caches of the hot paths.
 */
export * from './db.ts';
export * from './ids.ts';
export * from './orchestration-settings.ts';
export * from './record-cache.ts';
export * from './secrets.ts';
export * from './settings.ts';
export * from './validation.ts';
