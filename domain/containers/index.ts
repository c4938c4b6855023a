/**
 * The container fields a tenant writes (image, args, env, ports, disk, mounts), one set of schemas
 * and rules for endpoints, templates and pods.
 */
export * from './args.ts';
export * from './fields.ts';
