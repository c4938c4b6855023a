/**
 * The catalog: what the registered hosts offer (GPU types and pools, CPU flavors and instances,
 * data centers) and what each costs.
 */
export * from './catalog.ts';
export * from './cpu-instances.ts';
export * from './data-centers.ts';
export * from './gpu-pools.ts';
export * from './stock.ts';
