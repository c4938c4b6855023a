/**
 * Container registry credentials: write-only, sealed at rest, bound to the account that stored
 * them. Owns the Registry rows.
 */
export * from './registries.ts';
