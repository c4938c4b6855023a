/**
 * Where Gantry keeps large opaque objects (build artifacts, later model outputs): a directory on
 * this machine, or an S3-compatible bucket when several machines must see the same objects.
 * PostgreSQL holds what an object is (its key, size and digest, who may read it); the store holds
 * only its bytes. Both stores keep the same promises: a reader sees either no object or a whole
 * one, and the last whole put of a key wins.
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdir, open, readdir, rename, rm, rmdir, stat, unlink, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { S3Client } from '@aws-sdk/client-s3';
import { DomainError } from '../errors.ts';

/** A byte range of an object, both ends included (as in HTTP's Range header); `end` past the object means its end. */
export interface BlobRange {
  start: number;
  end?: number;
}

export interface BlobStore {
  readonly kind: 'directory' | 's3';
  /** Stores the whole body under `key`, replacing what was there; resolves once the object is readable. */
  put(
    key: string,
    body: Readable | Buffer,
    options?: { contentType?: string },
  ): Promise<{ size: number; sha256: string }>;
  /**
   * The object's bytes (only the range's, with one), or null when there is none. `size` is the whole
   * object's size in both cases. A range that starts at or past the end is a RangeError.
   */
  get(key: string, range?: BlobRange): Promise<{ body: Readable; size: number } | null>;
  stat(key: string): Promise<{ size: number } | null>;
  /** Streams the object and hashes it (hex); null when there is none. */
  sha256(key: string): Promise<string | null>;
  /** Removes the object; an absent one is fine. */
  delete(key: string): Promise<void>;
  /** Removes every object whose key starts with `prefix` (a string prefix, as S3 has it) and says how many. */
  deletePrefix(prefix: string): Promise<number>;
  /** A URL a client PUTs the bytes to directly, when the store offers one (S3 presigned); undefined for the directory store (the platform then serves its own signed upload route). */
  presignedPut?(
    key: string,
    options: { expiresInSec: number; contentType?: string },
  ): Promise<{ url: string; headers: Record<string, string> }>;
}

/** The `blobStore` section of the configuration (GANTRY_BLOB_STORE and friends). */
export type BlobStoreSettings = { kind: 'directory'; dir: string } | ({ kind: 's3' } & S3BlobStoreOptions);

export interface S3BlobStoreOptions {
  /** Unset: AWS's own endpoint for the region. */
  endpoint?: string;
  region: string;
  bucket: string;
  /** Both unset: the SDK's default credential chain (environment, profile, instance role). */
  accessKeyId?: string;
  secretAccessKey?: string;
  /** `http://host/bucket/key` instead of `http://bucket.host/key`; what most self-hosted servers want. */
  forcePathStyle: boolean;
  /** Prepended to every key (`<prefix>/<key>`), so Gantry can share a bucket. */
  prefix?: string;
}

export const MAX_KEY_LENGTH = 512;
/** File systems allow 255 bytes a name; the directory store's temp files add 21 to the last segment. */
export const MAX_SEGMENT_LENGTH = 200;
const KEY_CHARS = /^[A-Za-z0-9._/-]+$/;

/**
 * Keys name files in the directory store, so they must not be able to leave it: a closed alphabet
 * (no `\`, NUL or `~`, which the directory store's temp files use), no `..`, no empty, `.` or
 * absolute segments, no segment a file system could not name. The S3 store applies the same rules, so a key valid in one is valid in both.
 */
export function validateBlobKey(key: string, what: 'key' | 'prefix' = 'key'): void {
  const bad = (why: string): DomainError =>
    new DomainError('bad_request', `invalid blob ${what} "${key.slice(0, 80)}": ${why}`);
  if (key.length === 0) throw bad('empty');
  if (key.length > MAX_KEY_LENGTH) throw bad(`longer than ${MAX_KEY_LENGTH} characters`);
  if (!KEY_CHARS.test(key)) throw bad('only letters, digits, ".", "_", "-" and "/" are allowed');
  if (key.startsWith('/')) throw bad('starts with "/"');
  if (key.includes('..')) throw bad('contains ".."');
  const segments = key.split('/');
  // A prefix may end with "/" (everything in a "folder"); a key names a file and may not.
  if (what === 'prefix' && segments.at(-1) === '') segments.pop();
  if (segments.some((s) => s === '' || s === '.')) throw bad('has an empty or "." segment');
  if (segments.some((s) => s.length > MAX_SEGMENT_LENGTH))
    throw bad(`has a segment longer than ${MAX_SEGMENT_LENGTH} characters`);
}

/** Counts and hashes the bytes going through it. */
class Measure extends Transform {
  readonly hash = createHash('sha256');
  size = 0;
  override _transform(
    chunk: Buffer,
    _encoding: BufferEncoding,
    done: (err?: Error | null, data?: Buffer) => void,
  ): void {
    this.hash.update(chunk);
    this.size += chunk.length;
    done(null, chunk);
  }
}

async function hashStream(body: Readable): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of body) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

const asStream = (body: Readable | Buffer): Readable => (Buffer.isBuffer(body) ? Readable.from([body]) : body);

/** Inclusive byte bounds of `range` in an object of `size` bytes. */
function bounds(range: BlobRange, size: number): { start: number; end: number } {
  if (
    !Number.isSafeInteger(range.start) ||
    range.start < 0 ||
    (range.end !== undefined && (!Number.isSafeInteger(range.end) || range.end < range.start))
  ) {
    throw new RangeError(`invalid range ${range.start}-${range.end ?? ''}`);
  }
  if (range.start >= size) throw new RangeError(`range ${range.start}- is past the end of a ${size}-byte object`);
  return { start: range.start, end: Math.min(range.end ?? size - 1, size - 1) };
}

const isMissing = (err: unknown): boolean => {
  const code = (err as NodeJS.ErrnoException).code;
  return code === 'ENOENT' || code === 'ENOTDIR';
};

/**
 * Objects as files under `dir`, at their keys' paths. A put writes a temp file beside the target
 * and renames it over, so readers never see half an object, and concurrent puts of one key end with
 * one of them whole. Temp names contain `~`, which keys cannot, so they never pass for objects.
 * One limit S3 does not have: a key cannot also be a "folder" of other keys (`a` and `a/b`).
 */
export function directoryBlobStore(dir: string): BlobStore {
  const root = path.resolve(dir);
  const fileOf = (key: string): string => {
    validateBlobKey(key);
    const file = path.join(root, key);
    // Belt and braces over validateBlobKey: nothing outside the root, ever.
    if (!file.startsWith(root + path.sep)) throw new DomainError('bad_request', `invalid blob key "${key}"`);
    return file;
  };

  /** Removes the now-empty folders between `from` and the root; one that filled again meanwhile stays. */
  async function pruneEmpty(from: string): Promise<void> {
    for (let d = from; d.startsWith(root + path.sep); d = path.dirname(d)) {
      try {
        await rmdir(d);
      } catch {
        return;
      }
    }
  }

  async function openObject(key: string): Promise<{ handle: FileHandle; size: number } | null> {
    let handle: FileHandle;
    try {
      handle = await open(fileOf(key), 'r');
    } catch (err) {
      if (isMissing(err) || (err as NodeJS.ErrnoException).code === 'EISDIR') return null;
      throw err;
    }
    // Size from the open file, not the path: a put renaming over the key now leaves this reader
    // with the object it opened, whole.
    const info = await handle.stat();
    if (!info.isFile()) {
      await handle.close();
      return null;
    }
    return { handle, size: info.size };
  }

  return {
    kind: 'directory',

    // Files carry no content type: whoever serves them knows what they hold.
    async put(key, body) {
      const file = fileOf(key);
      const folder = path.dirname(file);
      const temp = path.join(folder, `${path.basename(file)}~${randomBytes(6).toString('hex')}.partial`);
      // One of the key's "folders" is an object, or the key is a folder of others: S3 allows
      // both, files cannot.
      const conflict = (err: unknown): unknown =>
        ['ENOTDIR', 'EEXIST', 'EISDIR', 'ENOTEMPTY'].includes((err as NodeJS.ErrnoException).code ?? '')
          ? new DomainError(
              'conflict',
              `blob key "${key}" conflicts with another key in the directory store (an object cannot also be a folder of objects)`,
            )
          : err;
      let handle: FileHandle | undefined;
      // A concurrent delete may prune the folder between the mkdir and the open: make it again.
      for (let attempt = 0; !handle; attempt++) {
        try {
          await mkdir(folder, { recursive: true, mode: 0o700 });
          handle = await open(temp, 'wx', 0o600);
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code !== 'ENOENT' || attempt >= 3) throw conflict(err);
        }
      }
      try {
        const measure = new Measure();
        // flush: on disk before it has its name, so after a crash a key holds the whole object or
        // the old one. The stream owns the handle from here and closes it when it ends or fails.
        await pipeline(asStream(body), measure, handle.createWriteStream({ flush: true }));
        await rename(temp, file);
        return { size: measure.size, sha256: measure.hash.digest('hex') };
      } catch (err) {
        await rm(temp, { force: true }).catch(() => {});
        throw conflict(err);
      }
    },

    async get(key, range) {
      const opened = await openObject(key);
      if (!opened) return null;
      const { handle, size } = opened;
      try {
        const span = range ? bounds(range, size) : undefined;
        // An empty object gets an empty stream; a read stream over 0..-1 would be one of the whole file.
        const body = size === 0 ? Readable.from([]) : handle.createReadStream(span ?? {});
        if (size === 0) await handle.close();
        return { body, size };
      } catch (err) {
        await handle.close();
        throw err;
      }
    },

    async stat(key) {
      try {
        const info = await stat(fileOf(key));
        return info.isFile() ? { size: info.size } : null;
      } catch (err) {
        if (isMissing(err)) return null;
        throw err;
      }
    },

    async sha256(key) {
      const opened = await openObject(key);
      if (!opened) return null;
      try {
        return await hashStream(opened.handle.createReadStream({ autoClose: false }));
      } finally {
        await opened.handle.close();
      }
    },

    async delete(key) {
      const file = fileOf(key);
      try {
        await unlink(file);
      } catch (err) {
        if (isMissing(err) || (err as NodeJS.ErrnoException).code === 'EISDIR') return;
        throw err;
      }
      await pruneEmpty(path.dirname(file));
    },

    async deletePrefix(prefix) {
      validateBlobKey(prefix, 'prefix');
      // "a/b" matches "a/b", "a/bc" and "a/b/c": the entries of folder "a" whose names start with "b".
      const slash = prefix.lastIndexOf('/');
      const folder = path.resolve(root, prefix.slice(0, slash + 1));
      const namePrefix = prefix.slice(slash + 1);
      let entries;
      try {
        entries = await readdir(folder, { withFileTypes: true });
      } catch (err) {
        if (isMissing(err)) return 0;
        throw err;
      }
      let deleted = 0;
      const remove = async (entryPath: string, isDir: boolean): Promise<void> => {
        if (!isDir) {
          try {
            await unlink(entryPath);
            deleted++;
          } catch (err) {
            if (!isMissing(err)) throw err;
          }
          return;
        }
        let children;
        try {
          children = await readdir(entryPath, { withFileTypes: true });
        } catch (err) {
          if (isMissing(err)) return;
          throw err;
        }
        for (const child of children) {
          // Another put's temp file is not an object yet; that put still owns it (and the folder stays).
          if (!child.name.includes('~')) await remove(path.join(entryPath, child.name), child.isDirectory());
        }
        await rmdir(entryPath).catch(() => {});
      };
      for (const entry of entries) {
        if (entry.name.startsWith(namePrefix) && !entry.name.includes('~'))
          await remove(path.join(folder, entry.name), entry.isDirectory());
      }
      await pruneEmpty(folder);
      return deleted;
    },
  };
}

/** S3's smallest part is 5 MiB; 8 MiB parts reach 80 GB in the 10,000 parts S3 allows. */
const PART_SIZE = 8 * 1024 * 1024;
/** Parts in flight at once: a 1.5 GB artifact goes up in parallel without holding more than ~40 MiB. */
const PART_CONCURRENCY = 4;
const DELETE_BATCH = 1000;

/** The body as it streams past, hashed and counted: Gantry's own digest of what was stored. */
async function* measured(
  body: Readable | Buffer,
  measure: { hash: ReturnType<typeof createHash>; size: number },
): AsyncGenerator<Buffer> {
  for await (const raw of asStream(body)) {
    const chunk = raw as Buffer;
    measure.hash.update(chunk);
    measure.size += chunk.length;
    yield chunk;
  }
}

const statusOf = (err: unknown): number | undefined =>
  (err as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
const nameOf = (err: unknown): string | undefined => (err as { name?: string }).name;

type S3Sdk = typeof import('@aws-sdk/client-s3');
type Presigner = typeof import('@aws-sdk/s3-request-presigner').getSignedUrl;
type UploadClass = typeof import('@aws-sdk/lib-storage').Upload;

/** Objects in an S3 bucket (AWS or any S3-compatible server), through the AWS SDK v3. */
export function s3BlobStore(options: S3BlobStoreOptions): BlobStore {
  const { bucket } = options;
  if (!bucket) throw new Error('s3BlobStore: a bucket is required');
  if ((options.accessKeyId === undefined) !== (options.secretAccessKey === undefined)) {
    throw new Error('s3BlobStore: give both accessKeyId and secretAccessKey, or neither');
  }
  // The SDK loads on first use (about 0.1 s): every process reads the configuration that imports
  // this module, and most of them keep their blobs in a directory.
  type Connection = { sdk: S3Sdk; client: S3Client; presign: Presigner; Upload: UploadClass };
  let connection: Promise<Connection> | undefined;
  const connect = (): Promise<Connection> =>
    (connection ??= Promise.all([
      import('@aws-sdk/client-s3'),
      import('@aws-sdk/s3-request-presigner'),
      import('@aws-sdk/lib-storage'),
    ]).then(([sdk, presigner, storage]) => ({
      sdk,
      presign: presigner.getSignedUrl,
      Upload: storage.Upload,
      client: new sdk.S3Client({
        region: options.region,
        endpoint: options.endpoint,
        forcePathStyle: options.forcePathStyle,
        credentials:
          options.accessKeyId !== undefined && options.secretAccessKey !== undefined
            ? { accessKeyId: options.accessKeyId, secretAccessKey: options.secretAccessKey }
            : undefined,
        // Checksums only where S3 demands them: by default the SDK would put a CRC32 of an empty body
        // in presigned URLs (so any real upload fails) and stream-wrap every upload in aws-chunked
        // encoding, which S3-compatible servers support unevenly. Integrity here is the sha256
        // Gantry computes and records itself.
        requestChecksumCalculation: 'WHEN_REQUIRED',
        responseChecksumValidation: 'WHEN_REQUIRED',
      }),
    })));
  const keyPrefix = (options.prefix ?? '').replace(/^\/+|\/+$/g, '');
  if (keyPrefix) validateBlobKey(keyPrefix, 'prefix');
  const full = (key: string, what: 'key' | 'prefix' = 'key'): string => {
    validateBlobKey(key, what);
    return keyPrefix ? `${keyPrefix}/${key}` : key;
  };

  async function head(key: string): Promise<{ size: number } | null> {
    const Key = full(key);
    const { sdk, client } = await connect();
    try {
      const res = await client.send(new sdk.HeadObjectCommand({ Bucket: bucket, Key }));
      return { size: res.ContentLength ?? 0 };
    } catch (err) {
      if (statusOf(err) === 404 || nameOf(err) === 'NotFound' || nameOf(err) === 'NoSuchKey') return null;
      throw err;
    }
  }

  async function getObject(
    key: string,
    rangeHeader?: string,
  ): Promise<{ body: Readable; contentRange?: string; length: number } | null> {
    const Key = full(key);
    const { sdk, client } = await connect();
    try {
      const res = await client.send(new sdk.GetObjectCommand({ Bucket: bucket, Key, Range: rangeHeader }));
      const body = (res.Body as Readable | undefined) ?? Readable.from([]);
      return { body, contentRange: res.ContentRange, length: res.ContentLength ?? 0 };
    } catch (err) {
      if (nameOf(err) === 'NoSuchKey' || statusOf(err) === 404) return null;
      throw err;
    }
  }

  return {
    kind: 's3',

    async put(key, body, putOptions) {
      const { client, Upload } = await connect();
      const measure = { hash: createHash('sha256'), size: 0 };
      // One PUT for a body of one part or less, else a multipart upload (aborted on failure); S3
      // makes either visible only whole.
      const upload = new Upload({
        client,
        params: {
          Bucket: bucket,
          Key: full(key),
          Body: Readable.from(measured(body, measure)),
          ContentType: putOptions?.contentType,
        },
        partSize: PART_SIZE,
        queueSize: PART_CONCURRENCY,
        leavePartsOnError: false,
      });
      await upload.done();
      return { size: measure.size, sha256: measure.hash.digest('hex') };
    },

    async get(key, range) {
      if (!range) {
        const res = await getObject(key);
        return res && { body: res.body, size: res.length };
      }
      // The whole size first, so that a range past the end is the same RangeError as in the directory store.
      const info = await head(key);
      if (!info) return null;
      const span = bounds(range, info.size);
      const res = await getObject(key, `bytes=${span.start}-${span.end}`);
      if (!res) return null;
      const total = /\/(\d+)$/.exec(res.contentRange ?? '')?.[1];
      return { body: res.body, size: total !== undefined ? Number(total) : info.size };
    },

    stat: head,

    async sha256(key) {
      const res = await getObject(key);
      return res && hashStream(res.body);
    },

    async delete(key) {
      const Key = full(key);
      const { sdk, client } = await connect();
      await client.send(new sdk.DeleteObjectCommand({ Bucket: bucket, Key }));
    },

    async deletePrefix(prefix) {
      const Prefix = full(prefix, 'prefix');
      const { sdk, client } = await connect();
      let deleted = 0;
      let ContinuationToken: string | undefined;
      do {
        const page = await client.send(
          new sdk.ListObjectsV2Command({ Bucket: bucket, Prefix, ContinuationToken, MaxKeys: DELETE_BATCH }),
        );
        const keys = (page.Contents ?? []).flatMap((o) => (o.Key ? [{ Key: o.Key }] : []));
        if (keys.length > 0) {
          const res = await client.send(
            new sdk.DeleteObjectsCommand({ Bucket: bucket, Delete: { Objects: keys, Quiet: true } }),
          );
          const errors = res.Errors ?? [];
          if (errors.length > 0)
            throw new Error(
              `S3 DeleteObjects failed for ${errors.length} keys, e.g. ${errors[0]?.Key}: ${errors[0]?.Code} ${errors[0]?.Message}`,
            );
          deleted += keys.length;
        }
        ContinuationToken = page.IsTruncated ? page.NextContinuationToken : undefined;
      } while (ContinuationToken);
      return deleted;
    },

    async presignedPut(key, presignOptions) {
      const ContentType = presignOptions.contentType;
      const Key = full(key);
      const { sdk, client, presign } = await connect();
      const url = await presign(client, new sdk.PutObjectCommand({ Bucket: bucket, Key, ContentType }), {
        expiresIn: presignOptions.expiresInSec,
        // Signed, so the client must send exactly this type.
        ...(ContentType ? { signableHeaders: new Set(['content-type']) } : {}),
      });
      const headers: Record<string, string> = ContentType ? { 'content-type': ContentType } : {};
      return { url, headers };
    },
  };
}

/** The store the configuration names (the `blobStore` section of GantryConfig). */
export function createBlobStore(settings: BlobStoreSettings): BlobStore {
  if (settings.kind === 'directory') return directoryBlobStore(settings.dir);
  const { kind: _kind, ...s3 } = settings;
  return s3BlobStore(s3);
}
