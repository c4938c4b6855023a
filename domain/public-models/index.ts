/**
 * Public models: queue endpoints the operator publishes under a model id, their per-job charges
 * and the store of their media outputs. Owns the PublicModel and ModelOutput rows.
 */
export * from './models.ts';
export * from './outputs.ts';
