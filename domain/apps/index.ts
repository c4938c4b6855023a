/**
 * Apps, environments, builds and deployments: what `gantry deploy` makes (docs/apps.md), and the
 * live endpoints of `gantry dev` (docs/dev-loop.md), and the same records as the hosted service's `flash`
 * tool makes them over GraphQL (flash.ts). Owns the App, AppEnvironment, Build and
 * Deployment rows and the endpoints a deploy writes for each manifest resource.
 */
export * from './apps.ts';
export * from './builds.ts';
export * from './deployments.ts';
export * from './flash.ts';
export * from './live.ts';
export * from './manifest.ts';
export * from './models.ts';
export * from './resource-endpoints.ts';
export * from './runtime-images.ts';
export * from './schemas.ts';
