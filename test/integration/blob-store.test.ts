/**
 * The blob stores (domain/blobs/blob-store.ts): one behaviour suite, run against the directory store in a
 * temp dir and against the S3 store talking to a real S3-compatible server (versitygw, built once
 * per machine by test/support/versitygw.ts, started here over a temp dir). Both must keep the same
 * promises: whole objects or none, keys that cannot escape, prefixes that delete what they name.
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createBlobStore, directoryBlobStore, type BlobStore } from '../../domain/blobs/index.ts';
import { DomainError } from '../../domain/errors.ts';
import { loadConfig } from '../../infra/config.ts';
import { startVersityGw, type RunningVersityGw } from '../support/versitygw.ts';

const ACCESS_KEY = 'gantrytest';
const SECRET_KEY = randomBytes(18).toString('base64url');
const BUCKET = 'gantry-blobs';

async function readAll(body: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of body) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

const sha256 = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

/** A body of `size` random bytes produced in 64 KiB chunks, never held whole, and its digest once read. */
function streamedBody(size: number): { body: Readable; digest: () => string } {
  const hash = createHash('sha256');
  let left = size;
  const body = new Readable({
    read() {
      if (left === 0) return void this.push(null);
      const chunk = randomBytes(Math.min(64 * 1024, left));
      left -= chunk.length;
      hash.update(chunk);
      this.push(chunk);
    },
  });
  return { body, digest: () => hash.digest('hex') };
}

/** A stream that sends some bytes and then fails, as a dropped upload does. */
function failingBody(bytesBefore: number): Readable {
  let sent = false;
  return new Readable({
    read() {
      if (!sent) {
        sent = true;
        this.push(randomBytes(bytesBefore));
      } else {
        this.destroy(new Error('client went away'));
      }
    },
  });
}

interface Harness {
  store: BlobStore;
  /** The directory the objects end up in, where there is one to look at. */
  files?: string;
}

const root = mkdtempSync(path.join(tmpdir(), 'gantry-blobs-'));
let gateway: RunningVersityGw | undefined;

const harnesses: Record<'directory' | 's3', () => Promise<Harness>> = {
  async directory() {
    const dir = path.join(root, 'directory', 'store');
    mkdirSync(path.dirname(dir), { recursive: true });
    return { store: directoryBlobStore(dir), files: dir };
  },
  async s3() {
    const started = Date.now();
    gateway = await startVersityGw({ dir: path.join(root, 'versitygw'), accessKey: ACCESS_KEY, secretKey: SECRET_KEY });
    console.error(
      `versitygw answered after ${Date.now() - started} ms (including the build, the first time on a machine)`,
    );
    const admin = new S3Client({
      endpoint: gateway.endpoint,
      region: 'us-east-1',
      forcePathStyle: true,
      credentials: { accessKeyId: ACCESS_KEY, secretAccessKey: SECRET_KEY },
    });
    await admin.send(new CreateBucketCommand({ Bucket: BUCKET }));
    admin.destroy();
    // Built from the configuration, as the platform builds it.
    const config = loadConfig({
      GANTRY_BLOB_STORE: 's3',
      GANTRY_S3_ENDPOINT: gateway.endpoint,
      GANTRY_S3_BUCKET: BUCKET,
      GANTRY_S3_ACCESS_KEY_ID: ACCESS_KEY,
      GANTRY_S3_SECRET_ACCESS_KEY: SECRET_KEY,
      GANTRY_S3_PREFIX: 'gantry/',
    });
    return { store: createBlobStore(config.blobStore), files: path.join(root, 'versitygw', BUCKET, 'gantry') };
  },
};

afterAll(async () => {
  await gateway?.stop();
  rmSync(root, { recursive: true, force: true });
});

describe.each(['directory', 's3'] as const)('%s blob store', (kind) => {
  let h: Harness;
  beforeAll(async () => {
    h = await harnesses[kind]();
  });

  it('puts, reads, sizes and hashes an object, and a second put replaces it', async () => {
    const { store } = h;
    expect(store.kind).toBe(kind);
    const body = Buffer.from('hello, blob store');
    expect(await store.put('builds/b1/artifact.tar', body, { contentType: 'application/x-tar' })).toEqual({
      size: body.length,
      sha256: sha256(body),
    });
    expect(await store.stat('builds/b1/artifact.tar')).toEqual({ size: body.length });
    expect(await store.sha256('builds/b1/artifact.tar')).toBe(sha256(body));
    const got = await store.get('builds/b1/artifact.tar');
    expect(got?.size).toBe(body.length);
    expect(await readAll(got!.body)).toEqual(body);

    const next = Buffer.from('shorter');
    await store.put('builds/b1/artifact.tar', next);
    expect(await readAll((await store.get('builds/b1/artifact.tar'))!.body)).toEqual(next);
    expect(await store.stat('builds/b1/artifact.tar')).toEqual({ size: next.length });

    const empty = await store.put('builds/b1/empty', Buffer.alloc(0));
    expect(empty).toEqual({ size: 0, sha256: sha256(Buffer.alloc(0)) });
    const gotEmpty = await store.get('builds/b1/empty');
    expect(gotEmpty?.size).toBe(0);
    expect((await readAll(gotEmpty!.body)).length).toBe(0);
  });

  it('reads byte ranges, and refuses one past the end', async () => {
    const { store } = h;
    await store.put('ranges/digits', Buffer.from('0123456789'));
    const mid = await store.get('ranges/digits', { start: 2, end: 5 });
    expect(mid?.size).toBe(10);
    expect((await readAll(mid!.body)).toString()).toBe('2345');
    expect((await readAll((await store.get('ranges/digits', { start: 7 }))!.body)).toString()).toBe('789');
    expect((await readAll((await store.get('ranges/digits', { start: 8, end: 100 }))!.body)).toString()).toBe('89');
    await expect(store.get('ranges/digits', { start: 10 })).rejects.toThrow(RangeError);
    expect(await store.get('ranges/absent', { start: 0 })).toBeNull();
  });

  it('answers null for absent keys, and deleting one is fine', async () => {
    const { store } = h;
    expect(await store.get('nothing/here')).toBeNull();
    expect(await store.stat('nothing/here')).toBeNull();
    expect(await store.sha256('nothing/here')).toBeNull();
    await expect(store.delete('nothing/here')).resolves.toBeUndefined();
    expect(await store.deletePrefix('nothing/')).toBe(0);
    // A "folder" of other keys is not an object either.
    await store.put('folder/inside', Buffer.from('x'));
    expect(await store.stat('folder')).toBeNull();
    expect(await store.get('folder')).toBeNull();
    await store.delete('folder/inside');
    expect(await store.stat('folder/inside')).toBeNull();
  });

  it('deletes by prefix, as a string prefix, and says how many', async () => {
    const { store } = h;
    for (const key of ['p/a/1', 'p/a/2', 'p/a/deep/3', 'p/ab/4', 'p/abc', 'p/b/5'])
      await store.put(key, Buffer.from(key));
    expect(await store.deletePrefix('p/a/')).toBe(3);
    expect(await store.stat('p/a/1')).toBeNull();
    expect(await store.stat('p/a/deep/3')).toBeNull();
    expect(await store.stat('p/ab/4')).toEqual({ size: 6 });
    expect(await store.deletePrefix('p/a')).toBe(2); // p/ab/4 and p/abc
    expect(await store.stat('p/b/5')).toEqual({ size: 5 });
    expect(await store.deletePrefix('p/')).toBe(1);
    expect(await store.deletePrefix('p/')).toBe(0);
    if (h.files) expect(readdirSync(h.files)).not.toContain('p');
  });

  it('streams a 50 MB body in and out without holding it', async () => {
    const { store } = h;
    const size = 50 * 1024 * 1024;
    const { body, digest } = streamedBody(size);
    const put = await store.put('big/50mb.bin', body, { contentType: 'application/octet-stream' });
    const expected = digest();
    expect(put).toEqual({ size, sha256: expected });
    expect(await store.stat('big/50mb.bin')).toEqual({ size });
    expect(await store.sha256('big/50mb.bin')).toBe(expected);
    const got = await store.get('big/50mb.bin');
    const hash = createHash('sha256');
    let read = 0;
    for await (const chunk of got!.body) {
      hash.update(chunk as Buffer);
      read += (chunk as Buffer).length;
    }
    expect(read).toBe(size);
    expect(hash.digest('hex')).toBe(expected);
    const tail = await store.get('big/50mb.bin', { start: size - 10 });
    expect((await readAll(tail!.body)).length).toBe(10);
    await store.delete('big/50mb.bin');
    expect(await store.stat('big/50mb.bin')).toBeNull();
  }, 120_000);

  it('refuses keys that try to leave the store, and writes nothing for them', async () => {
    const { store } = h;
    // Where an escaped key would land: beside the store, or above it.
    const around = (): string[][] =>
      [root, ...(h.files ? [path.dirname(h.files)] : [])].map((d) => readdirSync(d).sort());
    const before = around();
    const bad = [
      '../x',
      '/etc/passwd',
      'a/../../b',
      '..',
      'a/..',
      './a',
      'a//b',
      'a/./b',
      'a\\b',
      'a b',
      '',
      'x'.repeat(513),
      'a/',
      'ü',
    ];
    for (const key of bad) {
      await expect(store.put(key, Buffer.from('nope')), key).rejects.toBeInstanceOf(DomainError);
      await expect(store.get(key), key).rejects.toBeInstanceOf(DomainError);
      await expect(store.stat(key), key).rejects.toBeInstanceOf(DomainError);
      await expect(store.sha256(key), key).rejects.toBeInstanceOf(DomainError);
      await expect(store.delete(key), key).rejects.toBeInstanceOf(DomainError);
    }
    for (const prefix of ['../', '/', '', 'a/../../', '../../etc'])
      await expect(store.deletePrefix(prefix), prefix).rejects.toBeInstanceOf(DomainError);
    expect(around()).toEqual(before);
    // A segment longer than a file name can be is refused, in both stores alike.
    await expect(store.put(`k/${'x'.repeat(201)}`, Buffer.from('x'))).rejects.toBeInstanceOf(DomainError);
    // 512 characters in segments of at most 200 is still a key.
    const longest = `k/${'x'.repeat(200)}/${'y'.repeat(200)}/${'z'.repeat(108)}`;
    expect(longest.length).toBe(512);
    await store.put(longest, Buffer.from('ok'));
    expect(await store.stat(longest)).toEqual({ size: 2 });
    await store.delete(longest);
  });

  it('ends concurrent puts of one key with one of them, whole', async () => {
    const { store } = h;
    // Bodies over one S3 part, so the S3 store's puts are multipart uploads racing each other.
    const bodies = [1, 2, 3, 4].map((n) => Buffer.alloc(9 * 1024 * 1024 + n * 1000, n));
    const results = await Promise.all(
      bodies.map((b) => store.put('race/one', Readable.from([b.subarray(0, 1_000_000), b.subarray(1_000_000)]))),
    );
    results.forEach((r, i) => expect(r).toEqual({ size: bodies[i]!.length, sha256: sha256(bodies[i]!) }));
    const got = await readAll((await store.get('race/one'))!.body);
    const winner = bodies.findIndex((b) => b.equals(got));
    expect(winner).toBeGreaterThanOrEqual(0);
    expect(await store.sha256('race/one')).toBe(sha256(bodies[winner]!));
    if (h.files) expect(readdirSync(path.join(h.files, 'race'))).toEqual(['one']);
  }, 60_000);

  it('leaves no object and no partial file behind when the body fails', async () => {
    const { store } = h;
    await expect(store.put('failed/small', failingBody(1000))).rejects.toThrow(/went away/);
    // Past one S3 part: the multipart upload is aborted.
    await expect(store.put('failed/big', failingBody(9 * 1024 * 1024))).rejects.toThrow(/went away/);
    expect(await store.stat('failed/small')).toBeNull();
    expect(await store.stat('failed/big')).toBeNull();
    if (h.files) {
      const left = (() => {
        try {
          return readdirSync(path.join(h.files!, 'failed'));
        } catch {
          return [];
        }
      })();
      expect(left).toEqual([]);
    }
  });

  if (kind === 'directory') {
    it('keeps objects owner-only, and offers no presigned upload (the platform signs its own)', async () => {
      const { store } = h;
      await store.put('modes/a/b', Buffer.from('secret'));
      expect(statSync(path.join(h.files!, 'modes/a/b')).mode & 0o777).toBe(0o600);
      expect(statSync(path.join(h.files!, 'modes/a')).mode & 0o777).toBe(0o700);
      expect(statSync(h.files!).mode & 0o777).toBe(0o700);
      expect(store.presignedPut).toBeUndefined();
    });

    it('says conflict, not a file system error, where an object would have to be a folder too', async () => {
      const { store } = h;
      await store.put('clash/a', Buffer.from('1'));
      await expect(store.put('clash/a/b', Buffer.from('2'))).rejects.toMatchObject({ kind: 'conflict' });
      await store.put('clash/c/d', Buffer.from('3'));
      await expect(store.put('clash/c', Buffer.from('4'))).rejects.toMatchObject({ kind: 'conflict' });
      expect(readdirSync(path.join(h.files!, 'clash')).sort()).toEqual(['a', 'c']);
      expect(readdirSync(path.join(h.files!, 'clash', 'c'))).toEqual(['d']);
    });
  }

  if (kind === 's3') {
    it('hands out a presigned PUT that plain fetch can use, for that key and type only', async () => {
      const { store } = h;
      const presigned = await store.presignedPut!('uploads/ctx.tar.gz', {
        expiresInSec: 60,
        contentType: 'application/gzip',
      });
      expect(presigned.headers).toEqual({ 'content-type': 'application/gzip' });
      const body = randomBytes(300_000);
      const res = await fetch(presigned.url, { method: 'PUT', headers: presigned.headers, body });
      expect(res.status, await res.text()).toBe(200);
      expect(await store.stat('uploads/ctx.tar.gz')).toEqual({ size: body.length });
      expect(await readAll((await store.get('uploads/ctx.tar.gz'))!.body)).toEqual(body);
      expect(await store.sha256('uploads/ctx.tar.gz')).toBe(sha256(body));

      // The signature covers the key and the content type.
      const other = new URL(presigned.url);
      other.pathname = other.pathname.replace('ctx.tar.gz', 'other.tar.gz');
      expect((await fetch(other, { method: 'PUT', headers: presigned.headers, body })).status).toBe(403);
      expect(
        (await fetch(presigned.url, { method: 'PUT', headers: { 'content-type': 'text/html' }, body })).status,
      ).toBe(403);
      expect(await store.stat('uploads/other.tar.gz')).toBeNull();

      const plain = await store.presignedPut!('uploads/plain', { expiresInSec: 60 });
      expect(plain.headers).toEqual({});
      expect((await fetch(plain.url, { method: 'PUT', body: 'x' })).status).toBe(200);
      expect(await store.stat('uploads/plain')).toEqual({ size: 1 });
    });
  }
});

describe('blob store configuration', () => {
  it('defaults to a directory under the data dir', () => {
    const c = loadConfig({ GANTRY_DATA_DIR: '/srv/gantry' });
    expect(c.blobStore).toEqual({ kind: 'directory', dir: '/srv/gantry/blobs' });
    expect(loadConfig({ GANTRY_BLOB_DIR: '/blobs' }).blobStore).toEqual({ kind: 'directory', dir: '/blobs' });
  });

  it('reads the S3 settings with their defaults', () => {
    expect(loadConfig({ GANTRY_BLOB_STORE: 's3', GANTRY_S3_BUCKET: 'b' }).blobStore).toEqual({
      kind: 's3',
      endpoint: undefined,
      region: 'us-east-1',
      bucket: 'b',
      accessKeyId: undefined,
      secretAccessKey: undefined,
      forcePathStyle: true,
      prefix: undefined,
    });
    expect(
      loadConfig({
        GANTRY_BLOB_STORE: 's3',
        GANTRY_S3_BUCKET: 'b',
        GANTRY_S3_REGION: 'eu-west-3',
        GANTRY_S3_FORCE_PATH_STYLE: 'false',
        GANTRY_S3_ENDPOINT: 'https://s3.example/',
        GANTRY_S3_PREFIX: '/team/gantry/',
      }).blobStore,
    ).toMatchObject({
      region: 'eu-west-3',
      forcePathStyle: false,
      endpoint: 'https://s3.example',
      prefix: 'team/gantry',
    });
  });

  it('reports an incomplete S3 setting with the other problems, each naming its variable', () => {
    let message = '';
    try {
      loadConfig({
        GANTRY_BLOB_STORE: 's3',
        GANTRY_S3_ACCESS_KEY_ID: 'only-the-id',
        GANTRY_S3_ENDPOINT: 'ftp://x',
        GANTRY_S3_PREFIX: '../up',
        PORT: '70000',
      });
    } catch (err) {
      message = String(err);
    }
    for (const name of [
      'GANTRY_S3_BUCKET',
      'GANTRY_S3_SECRET_ACCESS_KEY',
      'GANTRY_S3_ENDPOINT',
      'GANTRY_S3_PREFIX',
      'PORT',
    ])
      expect(message).toContain(name);
    expect(() => loadConfig({ GANTRY_BLOB_STORE: 'ftp' })).toThrow(/GANTRY_BLOB_STORE/);
    expect(() => loadConfig({ GANTRY_S3_FORCE_PATH_STYLE: 'maybe' })).toThrow(/GANTRY_S3_FORCE_PATH_STYLE/);
  });
});
