/**
 * The output store of public models: media a model's worker returns as base64 (`image`, `video`,
 * `audio`) is checked for what it really is, kept in the blob store, and handed to the caller as a
 * signed URL (`image_url`, ...) that works until the object expires (GANTRY_OUTPUT_URL_TTL_MS,
 * default 7 days); the purge-expired-outputs schedule deletes it then. The job's output also gets
 * its `cost`: the model's price times the units of what was returned.
 *
 * Outputs are hostile (a tenant's container made them): only bytes that parse as one of a few media
 * types are stored, they are served with that type alone, never sniffed, and sandboxed.
 */
import type { Readable } from 'node:stream';
import { fileTypeFromBuffer } from 'file-type';
import { imageSize } from 'image-size';
import { parseBuffer } from 'music-metadata';
import type { BlobStore } from '../blobs/blob-store.ts';
import type { Db } from '../shared/db.ts';
import { DomainError, ForgedCredential } from '../errors.ts';
import { randomString } from '../shared/ids.ts';
import type { ModelCharge } from '../jobs/rows.ts';
import type { CachedModel } from './models.ts';
import { signUrl, verifySignedUrl } from '../blobs/signed-urls.ts';

export interface OutputSettings {
  /** How long output URLs (and the objects) last: 7 days by default (docs/public-models.md). */
  urlTtlMs: number;
  /** How often the purge schedule runs. */
  purgeIntervalMs: number;
}

export const DEFAULT_OUTPUT_SETTINGS: OutputSettings = { urlTtlMs: 7 * 86_400_000, purgeIntervalMs: 3_600_000 };

export interface OutputStoreDeps {
  db: Db;
  blobs: BlobStore;
  signingKey: Buffer;
  publicUrl: string;
  outputs: OutputSettings;
}

const PURPOSE = 'model-output';

type MediaKind = 'image' | 'video' | 'audio';
const MEDIA: ReadonlyArray<{ field: MediaKind; url: string }> = [
  { field: 'image', url: 'image_url' },
  { field: 'video', url: 'video_url' },
  { field: 'audio', url: 'audio_url' },
];

/** The media types stored per kind (by what file-type finds in the bytes). */
const ACCEPTED: Record<MediaKind, ReadonlySet<string>> = {
  image: new Set(['image/png', 'image/jpeg', 'image/webp', 'image/gif']),
  video: new Set(['video/mp4', 'video/webm']),
  audio: new Set([
    'audio/wav',
    'audio/vnd.wave',
    'audio/x-wav',
    'audio/mpeg',
    'audio/ogg',
    'audio/opus',
    'audio/flac',
    'audio/x-flac',
  ]),
};

/** A stored media field that failed its checks: the job fails with this, naming the field. */
export class OutputProblem extends Error {}

function decode(field: string, value: unknown): Buffer {
  if (typeof value !== 'string') throw new OutputProblem(`output.${field} must be base64 text or a data: URI`);
  let text = value;
  const dataUri = /^data:([a-z0-9.+/-]+)?(;[a-z0-9=.-]+)*;base64,/i.exec(text);
  if (dataUri) text = text.slice(dataUri[0].length);
  else if (text.startsWith('data:')) throw new OutputProblem(`output.${field}: only base64 data: URIs are accepted`);
  text = text.replace(/\s+/g, '');
  if (text.length === 0 || !/^[A-Za-z0-9+/_-]+={0,2}$/.test(text))
    throw new OutputProblem(`output.${field} is not valid base64`);
  return Buffer.from(text, text.includes('-') || text.includes('_') ? 'base64url' : 'base64');
}

/** Units of the price for one stored medium: megapixels of an image, seconds of video or audio. */
async function measure(
  kind: MediaKind,
  bytes: Buffer,
  mime: string,
  field: string,
): Promise<{ megapixels: number; seconds: number }> {
  if (kind === 'image') {
    let size: { width?: number; height?: number };
    try {
      size = imageSize(bytes);
    } catch {
      throw new OutputProblem(`output.${field}: the image's size cannot be read`);
    }
    return { megapixels: ((size.width ?? 0) * (size.height ?? 0)) / 1e6, seconds: 0 };
  }
  try {
    const meta = await parseBuffer(bytes, { mimeType: mime, size: bytes.length }, { duration: true, skipCovers: true });
    return { megapixels: 0, seconds: meta.format.duration ?? 0 };
  } catch {
    return { megapixels: 0, seconds: 0 };
  }
}

export interface StoredOutput {
  /** What the caller sees: media fields replaced by their URLs, and `cost`. */
  output: Record<string, unknown>;
  /** The charge, null when the model is gone (unpublished since the job was queued). */
  charge: ModelCharge | null;
}

/**
 * Stores the media of a public model's output and prices it. Each object's row is written before
 * its bytes, so the purge knows every object ever stored (a crash in between leaves a row whose
 * blob is missing, which the purge deletes all the same). Throws OutputProblem for media that are
 * not what their field says.
 */
export async function storeModelOutput(
  deps: OutputStoreDeps,
  job: { id: string; accountId: string },
  model: CachedModel | null,
  raw: unknown,
): Promise<StoredOutput> {
  // A model's output is an object (it carries `cost`); anything else is kept under `output`.
  const output: Record<string, unknown> =
    raw !== null && typeof raw === 'object' && !Array.isArray(raw)
      ? { ...(raw as Record<string, unknown>) }
      : raw === undefined
        ? {}
        : { output: raw };
  let megapixels = 0;
  let seconds = 0;
  const expiresAt = new Date(Date.now() + deps.outputs.urlTtlMs);
  for (const { field, url } of MEDIA) {
    // `image` (base64), or `image_url` holding a data: URI; an http(s) `image_url` passes through.
    const source =
      output[field] !== undefined
        ? field
        : typeof output[url] === 'string' && (output[url] as string).startsWith('data:')
          ? url
          : undefined;
    if (!source) continue;
    const bytes = decode(source, output[source]);
    const type = await fileTypeFromBuffer(bytes);
    if (!type || !ACCEPTED[field].has(type.mime)) {
      throw new OutputProblem(
        `output.${source} is not a ${field} of an accepted type (${[...ACCEPTED[field]].join(', ')})${type ? `: it is ${type.mime}` : ''}`,
      );
    }
    const m = await measure(field, bytes, type.mime, source);
    megapixels += m.megapixels;
    seconds += m.seconds;
    const id = randomString(24);
    const fileName = `${field}.${type.ext}`;
    const blobKey = `outputs/${job.accountId}/${id}/${fileName}`;
    await deps.db.outputObject.create({
      data: {
        id,
        jobId: job.id,
        accountId: job.accountId,
        blobKey,
        contentType: type.mime,
        fileName,
        size: bytes.length,
        expiresAt,
      },
    });
    await deps.blobs.put(blobKey, bytes, { contentType: type.mime });
    delete output[field];
    output[url] = signUrl(deps.publicUrl, `/v2/outputs/${id}/${fileName}`, deps.signingKey, expiresAt, PURPOSE);
  }
  if (!model) return { output, charge: null };
  const units = model.priceUnit === 'CALL' ? 1 : model.priceUnit === 'MEGAPIXEL' ? megapixels : seconds;
  const amount = Math.round(model.priceAmount * units * 1e6) / 1e6;
  output.cost = amount;
  return { output, charge: { units, amount } };
}

/**
 * The signed output route: the object's bytes and type, or 403 (a URL this platform did not sign),
 * or 410 (signed, but past its lifetime, or already purged).
 */
export async function openOutput(
  deps: Pick<OutputStoreDeps, 'db' | 'blobs' | 'signingKey'>,
  id: string,
  fileName: string,
  path: string,
  query: Record<string, unknown>,
): Promise<{ body: Readable; size: number; contentType: string; fileName: string }> {
  const verdict = verifySignedUrl(path, query, deps.signingKey, PURPOSE, new Date());
  if (verdict === 'invalid') throw new ForgedCredential('this output URL is not valid (its signature does not match)');
  if (verdict === 'expired')
    throw new DomainError(
      'gone',
      'this output URL has expired (output URLs last 7 days); run the job again for a new one',
    );
  const row = await deps.db.outputObject.findUnique({ where: { id } });
  const blob =
    row && row.fileName === fileName && row.expiresAt > new Date() ? await deps.blobs.get(row.blobKey) : null;
  if (!row || !blob) throw new DomainError('gone', 'this output has expired and was deleted');
  return { ...blob, contentType: row.contentType, fileName: row.fileName };
}

/** Deletes up to `limit` expired objects (bytes first, then the row); returns how many. */
export async function purgeExpiredOutputs(deps: Pick<OutputStoreDeps, 'db' | 'blobs'>, limit = 1000): Promise<number> {
  const rows = await deps.db.outputObject.findMany({
    where: { expiresAt: { lte: new Date() } },
    orderBy: { expiresAt: 'asc' },
    take: limit,
    select: { id: true, blobKey: true },
  });
  for (const r of rows) await deps.blobs.delete(r.blobKey);
  if (rows.length > 0) await deps.db.outputObject.deleteMany({ where: { id: { in: rows.map((r) => r.id) } } });
  return rows.length;
}
