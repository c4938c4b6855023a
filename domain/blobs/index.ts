/**
 * The blob store (a directory or an S3-compatible bucket) for build artifacts, sources and model
 * outputs, and the signed URLs that carry their own permission.
 */
export * from './blob-store.ts';
export * from './signed-urls.ts';
