import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

export interface StaticAsset {
  /** Where the file is (resolved on first use). */
  file: () => string;
  type: string;
}

/** A file read once into memory, with its ETag and (made on first demand) a gzip copy. */
export interface LoadedFile {
  body: Buffer;
  type: string;
  etag: string;
  gzip: Buffer | undefined;
}

export function loadFile(file: string, type: string): LoadedFile {
  return bodyFile(readFileSync(file), type);
}

/** Content held in memory, served as a file. */
export function bodyFile(body: Buffer, type: string): LoadedFile {
  return {
    body,
    type,
    etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"`,
    gzip: undefined,
  };
}

/**
 * Answers a loaded file: revalidated by ETag (304), gzipped for clients that take it. By default
 * `cache-control: no-cache` (a 304 is a few bytes, so a new release is never served stale); files
 * whose names carry their content's hash say `immutable` instead. `headers` go on every answer.
 */
export function sendFile(
  request: FastifyRequest,
  reply: FastifyReply,
  asset: LoadedFile,
  opts: { cacheControl?: string; headers?: Record<string, string> } = {},
): FastifyReply {
  reply
    .headers(opts.headers ?? {})
    .header('content-type', asset.type)
    .header('x-content-type-options', 'nosniff')
    .header('cache-control', opts.cacheControl ?? 'no-cache')
    .header('etag', asset.etag)
    .header('vary', 'accept-encoding');
  if (request.headers['if-none-match'] === asset.etag) return reply.code(304).send();
  if (/\bgzip\b/.test(String(request.headers['accept-encoding'] ?? ''))) {
    asset.gzip ??= gzipSync(asset.body, { level: 9 });
    return reply.header('content-encoding', 'gzip').send(asset.gzip);
  }
  return reply.send(asset.body);
}

/**
 * GET `<prefix><name>` for each of a fixed list of files and nothing else (the GraphQL explorer's
 * and the playground's): read once, kept in memory with a gzip copy, revalidated by ETag. Answering
 * them touches neither the database nor the rate-limit counters and needs no key: they are public code.
 */
export function registerStaticAssets(app: FastifyInstance, prefix: string, assets: Record<string, StaticAsset>): void {
  const loaded = new Map<string, LoadedFile>();
  for (const [name, asset] of Object.entries(assets)) {
    app.get(`${prefix}${name}`, { schema: { hide: true } }, async (request, reply) => {
      let file = loaded.get(name);
      if (!file) loaded.set(name, (file = loadFile(asset.file(), asset.type)));
      return sendFile(request, reply, file);
    });
  }
}
