import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

export interface StaticAsset {
  /** Where the file is (resolved on first use). */
  file: () => string;
  type: string;
}

interface Loaded {
  body: Buffer;
  gzip: Buffer | undefined;
  etag: string;
}

/**
 * GET `<prefix><name>` for each of a fixed list of files and nothing else (the GraphQL explorer's
 * and the playground's): read once, kept in memory with a gzip copy, revalidated by ETag. Answering
 * them touches neither the database nor the rate-limit counters and needs no key: they are public code.
 */
export function registerStaticAssets(app: FastifyInstance, prefix: string, assets: Record<string, StaticAsset>): void {
  const loaded = new Map<string, Loaded>();
  const load = (name: string): Loaded => {
    let asset = loaded.get(name);
    if (!asset) {
      const body = readFileSync(assets[name]!.file());
      asset = {
        body,
        gzip: undefined,
        etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"`,
      };
      loaded.set(name, asset);
    }
    return asset;
  };
  const send = (request: FastifyRequest, reply: FastifyReply, name: string): FastifyReply => {
    const asset = load(name);
    reply
      .header('content-type', assets[name]!.type)
      .header('x-content-type-options', 'nosniff')
      // Revalidated on each load (a 304 is a few bytes), so a new release is never served stale.
      .header('cache-control', 'no-cache')
      .header('etag', asset.etag)
      .header('vary', 'accept-encoding');
    if (request.headers['if-none-match'] === asset.etag) return reply.code(304).send();
    if (/\bgzip\b/.test(String(request.headers['accept-encoding'] ?? ''))) {
      asset.gzip ??= gzipSync(asset.body, { level: 9 });
      return reply.header('content-encoding', 'gzip').send(asset.gzip);
    }
    return reply.send(asset.body);
  };
  for (const name of Object.keys(assets)) {
    app.get(`${prefix}${name}`, { schema: { hide: true } }, async (request, reply) => send(request, reply, name));
  }
}
