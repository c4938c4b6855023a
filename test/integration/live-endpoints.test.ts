/**
 * Live endpoints (docs/dev-loop.md) through the REST API and the worker protocol, against the whole
 * platform with no host (endpoints keep zero workers; a worker's credential is registered by hand):
 * provisionResource, source uploads, the worker's source poll and the signed source download. Real
 * workers reloading real code are in live-reload.test.ts.
 */
import { createHash } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { Readable } from 'node:stream';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { discoveryVariable, MAX_SOURCE_BYTES, type Manifest } from '../../domain/apps/index.ts';
import { issueApiKey } from '../../domain/accounts/index.ts';
import { newId } from '../../domain/shared/index.ts';
import { registerWorkerCredential } from '../../domain/workers/index.ts';
import { isWorkerProtocolRoute } from '../../api/worker-listener.ts';
import { call, startTestPlatform, type TestPlatform } from '../support/platform.ts';

let p: TestPlatform;
let key: string;
let readKey: string;
let otherKey: string;
let buildId: string;

const sha256 = (b: Buffer): string => createHash('sha256').update(b).digest('hex');
const base = '/v2/apps/dev/environments/live';

function manifest(names: Array<{ name: string; kind?: 'queue' | 'lb' }>): Manifest {
  return {
    format: 1,
    pythonVersion: '3.11',
    fingerprint: 'c'.repeat(64),
    resources: names.map(({ name, kind = 'queue' }) => ({
      name,
      kind,
      file: 'worker.py',
      ...(kind === 'lb'
        ? { object: 'api', routes: [{ method: 'GET', path: '/version', function: 'version' }] }
        : { function: 'handler', params: [] }),
      compute: { cpu: 'cpu3c-2-4' },
      workers: { min: 0, max: 1 },
      idleTimeout: 5,
      scaler: { type: 'QUEUE_DELAY', value: 4 },
      timeout: 60,
      env: { FROM_MANIFEST: 'yes' },
      dependencies: [],
    })) as Manifest['resources'],
  };
}

async function upload(app: string, bytes: Buffer, m: Manifest): Promise<string> {
  const prepared = await call(p.url, 'POST', `/v2/apps/${app}/builds`, {
    key,
    body: { sha256: sha256(bytes), size: bytes.length, manifest: m },
  });
  expect(prepared.status, JSON.stringify(prepared.body)).toBe(201);
  expect(
    (await fetch(prepared.body.upload.url, { method: 'PUT', headers: prepared.body.upload.headers, body: bytes }))
      .status,
  ).toBe(200);
  expect((await call(p.url, 'POST', `/v2/apps/${app}/builds/${prepared.body.build.id}/finalize`, { key })).status).toBe(
    200,
  );
  return prepared.body.build.id as string;
}

/** PUT .../source with raw bytes. */
async function putSource(
  bytes: Buffer | ReadableStream,
  opts: { key?: string; path?: string; headers?: Record<string, string> } = {},
) {
  const headers: Record<string, string> = { 'content-type': 'application/gzip', ...opts.headers };
  if (opts.key !== '') headers.authorization = `Bearer ${opts.key ?? key}`;
  const res = await fetch(`${p.url}${opts.path ?? base}/source`, {
    method: 'PUT',
    headers,
    body: bytes,
    duplex: 'half',
  } as RequestInit);
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

const provision = (resource: string, body: unknown = { buildId }, k = key) =>
  call(p.url, 'PUT', `${base}/endpoints/${resource}`, { key: k, body });
const envOf = async (endpointId: string) =>
  (await p.ctx.db.endpoint.findUniqueOrThrow({ where: { id: endpointId } })).env as Record<string, string>;

beforeAll(async () => {
  p = await startTestPlatform();
  key = p.adminKey;
  const admin = await p.ctx.db.account.findFirstOrThrow({ where: { isAdmin: true } });
  readKey = (await issueApiKey(p.ctx.db, admin.id, 'reader', ['READ'])).key;
  const other = await call(p.url, 'POST', '/v2/accounts', {
    key,
    body: { email: 'other@example.test', name: 'Other' },
  });
  otherKey = (
    await call(p.url, 'POST', '/v2/keys', {
      key,
      body: { name: 'other', scopes: ['READ', 'WRITE'], accountId: other.body.id },
    })
  ).body.key;
  expect((await call(p.url, 'POST', '/v2/apps', { key, body: { name: 'dev', environment: 'live' } })).status).toBe(201);
  buildId = await upload(
    'dev',
    Buffer.from('live build'),
    manifest([{ name: 'worker' }, { name: 'api', kind: 'lb' }, { name: 'third' }, { name: 'fourth' }]),
  );
}, 180_000);

afterAll(async () => {
  await p?.stop();
});

describe('provisionResource', () => {
  it('creates (201) then updates (200) one resource as live-<resource>, with live reload on, and leaves the others alone', async () => {
    const first = await provision('worker');
    expect(first.status, JSON.stringify(first.body)).toBe(201);
    expect(first.body).toMatchObject({
      resource: 'worker',
      name: 'live-worker',
      kind: 'queue',
      type: 'QUEUE_BASED',
      url: `${p.url}/v2/${first.body.id}`,
      routes: [],
    });
    const env = await envOf(first.body.id);
    expect(env).toMatchObject({
      GANTRY_LIVE_RELOAD: '1',
      GANTRY_SOURCE_VERSION: '0',
      GANTRY_APP: 'dev',
      GANTRY_ENVIRONMENT: 'live',
      GANTRY_RESOURCE: 'worker',
      GANTRY_BUILD_ID: buildId,
      FROM_MANIFEST: 'yes',
    });
    // Discovery: what the environment has after the call (only this one so far).
    expect(JSON.parse(env.GANTRY_ENDPOINTS!)).toEqual({ worker: first.body.url });
    expect((await call(p.url, 'GET', `${base}`, { key })).body).toMatchObject({
      currentBuildId: buildId,
      endpoints: [{ resource: 'worker', id: first.body.id }],
    });

    const again = await provision('worker');
    expect(again.status).toBe(200);
    expect(again.body.id).toBe(first.body.id);
    // Same build, same configuration: no new release.
    expect((await p.ctx.db.endpoint.findUniqueOrThrow({ where: { id: first.body.id } })).currentReleaseVersion).toBe(1);
  });

  it("answers 404 for a resource the build does not have, 422 for a build that is not the app's, and refuses READ keys", async () => {
    const missing = await provision('nope');
    expect(missing.status).toBe(404);
    expect(missing.body.detail).toMatch(/no resource 'nope'.*worker, api, third, fourth/);
    expect((await provision('worker', { buildId: 'not-a-build' })).status).toBe(422);
    expect((await provision('worker', {})).status).toBe(422);
    expect((await provision('worker', { buildId }, readKey)).status).toBe(403);
    expect((await call(p.url, 'PUT', `${base}/endpoints/worker`, { body: { buildId } })).status).toBe(401);
    expect((await provision('worker', { buildId }, otherKey)).status).toBe(404);
  });

  it('takes three provisions of one environment at once', async () => {
    const results = await Promise.all(['api', 'third', 'fourth'].map((r) => provision(r)));
    expect(results.map((r) => [r.status, r.body.name])).toEqual([
      [201, 'live-api'],
      [201, 'live-third'],
      [201, 'live-fourth'],
    ]);
    expect(results[0]!.body).toMatchObject({
      kind: 'lb',
      type: 'LOAD_BALANCING',
      routes: [{ method: 'GET', path: '/version' }],
    });
    const worker = (await call(p.url, 'GET', base, { key })).body.endpoints.find(
      (e: { resource: string }) => e.resource === 'worker',
    );
    for (const r of results) {
      const env = await envOf(r.body.id);
      // Each lists what existed when it was made (worker) and itself.
      expect(env[discoveryVariable('worker')]).toBe(worker.url);
      expect(env[discoveryVariable(r.body.resource)]).toBe(r.body.url);
    }
    const listed = (await call(p.url, 'GET', base, { key })).body.endpoints.map((e: { name: string }) => e.name);
    expect(listed).toEqual(['live-api', 'live-fourth', 'live-third', 'live-worker']);
    // Two provisions of the same resource at once: one endpoint, made once.
    const same = await Promise.all([provision('third'), provision('third')]);
    expect(same.map((r) => r.status)).toEqual([200, 200]);
    expect(new Set(same.map((r) => r.body.id)).size).toBe(1);
  });
});

describe('source uploads', () => {
  const versions: Record<number, Buffer> = {};

  it('numbers concurrent uploads 1, 2, 3 and answers their digests', async () => {
    const bodies = [1, 2, 3].map((i) => gzipSync(Buffer.from(`source ${i}`)));
    const answers = await Promise.all(bodies.map((b) => putSource(b)));
    for (const a of answers) expect(a.status, JSON.stringify(a.body)).toBe(200);
    expect(answers.map((a) => a.body.version).sort()).toEqual([1, 2, 3]);
    answers.forEach((a, i) => {
      expect(a.body.sha256).toBe(sha256(bodies[i]!));
      versions[a.body.version] = bodies[i]!;
    });
    const env = await p.ctx.db.appEnvironment.findFirstOrThrow({ where: { name: 'live', app: { name: 'dev' } } });
    expect(env).toMatchObject({
      sourceVersion: 3,
      sourceSha256: sha256(versions[3]!),
      sourceBlobKey: `sources/${env.id}/3.tar.gz`,
    });
    // Only the newest version is kept.
    expect(await p.ctx.blobs.stat(`sources/${env.id}/3.tar.gz`)).not.toBeNull();
    for (const v of [1, 2]) expect(await p.ctx.blobs.stat(`sources/${env.id}/${v}.tar.gz`)).toBeNull();
  });

  it('sets the version on endpoints provisioned after it (a new release)', async () => {
    const r = await provision('worker');
    expect(r.status).toBe(200);
    expect((await envOf(r.body.id)).GANTRY_SOURCE_VERSION).toBe('3');
    expect((await p.ctx.db.endpoint.findUniqueOrThrow({ where: { id: r.body.id } })).currentReleaseVersion).toBe(2);
  });

  it('refuses more than 50 MB: 413 when the length says so, 422 when the stream turns out longer', async () => {
    // A declared length past the limit: refused before any byte is read (fetch sets Content-Length itself, so node:http).
    const declared = await new Promise<number>((resolve, reject) => {
      const req = httpRequest(
        `${p.url}${base}/source`,
        {
          method: 'PUT',
          headers: {
            authorization: `Bearer ${key}`,
            'content-type': 'application/gzip',
            'content-length': String(MAX_SOURCE_BYTES + 1),
          },
        },
        (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
          req.destroy();
        },
      );
      req.on('error', reject);
      req.write(Buffer.alloc(1024));
    });
    expect(declared).toBe(413);
    const chunk = Buffer.alloc(1024 * 1024, 1);
    chunk[0] = 0x1f;
    chunk[1] = 0x8b;
    let sent = 0;
    const stream = Readable.toWeb(
      Readable.from(
        (function* () {
          while (sent <= MAX_SOURCE_BYTES) {
            sent += chunk.length;
            yield chunk;
          }
        })(),
      ),
    ) as ReadableStream;
    const streamed = await putSource(stream).catch((err: unknown) => ({ status: 0, body: String(err) }));
    expect(streamed.status, JSON.stringify(streamed.body)).toBe(422);
    expect(JSON.stringify(streamed.body)).toMatch(/larger than 52428800 bytes/);
    // Nothing was numbered.
    expect(
      (await p.ctx.db.appEnvironment.findFirstOrThrow({ where: { name: 'live', app: { name: 'dev' } } })).sourceVersion,
    ).toBe(3);
  });

  it('refuses bodies that are no gzip, and callers without the right key', async () => {
    expect((await putSource(Buffer.from('plain text'))).status).toBe(422);
    expect((await putSource(Buffer.alloc(0))).status).toBe(422);
    const bytes = gzipSync(Buffer.from('x'));
    expect((await putSource(bytes, { key: '' })).status).toBe(401);
    expect((await putSource(bytes, { key: readKey })).status).toBe(403);
    expect((await putSource(bytes, { key: otherKey })).status).toBe(404);
    expect((await putSource(bytes, { path: '/v2/apps/dev/environments/nope' })).status).toBe(404);
    // Any content type is taken as bytes.
    expect(
      (await putSource(gzipSync(Buffer.from('octets')), { headers: { 'content-type': 'application/octet-stream' } }))
        .body.version,
    ).toBe(4);
    versions[4] = gzipSync(Buffer.from('octets'));
  });
});

describe('the worker source poll and the signed download', () => {
  let endpointId: string;
  let worker: { id: string; key: string };

  beforeAll(async () => {
    endpointId = (await call(p.url, 'GET', base, { key })).body.endpoints.find(
      (e: { resource: string }) => e.resource === 'worker',
    ).id;
    const id = newId();
    worker = { id, key: await registerWorkerCredential(p.ctx.db, { workerId: id, endpointId }) };
  });

  const poll = (after: string, opts: { endpoint?: string; workerId?: string; credential?: string } = {}) =>
    call(p.url, 'GET', `/v2/${opts.endpoint ?? endpointId}/source/${opts.workerId ?? worker.id}?after=${after}`, {
      headers: opts.credential === '' ? {} : { authorization: opts.credential ?? worker.key },
    });

  it('answers the newest version above `after`, then 204', async () => {
    const newest = await poll('0');
    expect(newest.status, JSON.stringify(newest.body)).toBe(200);
    expect(newest.body).toMatchObject({ version: 4, sha256: sha256(gzipSync(Buffer.from('octets'))) });
    expect(newest.body.url).toMatch(new RegExp(`/v2/sources/[a-z0-9]+/4\\?expires=\\d+&sig=`));
    expect((await poll('4')).status).toBe(204);
    expect((await poll('99')).status).toBe(204);
    // The worker's own credential, without Bearer, as the runtime sends it; with it too.
    expect((await poll('0', { credential: `Bearer ${worker.key}` })).status).toBe(200);
    expect((await poll('x')).status).toBe(422);

    const got = await fetch(newest.body.url);
    expect(got.status).toBe(200);
    expect(sha256(Buffer.from(await got.arrayBuffer()))).toBe(newest.body.sha256);
  });

  it('wants the worker credential of that endpoint', async () => {
    expect((await poll('0', { credential: '' })).status).toBe(401);
    expect((await poll('0', { credential: 'gntr_wk_not-a-real-one' })).status).toBe(401);
    expect((await poll('x', { credential: 'gntr_wk_not-a-real-one' })).status).toBe(401); // the credential before anything else
    // A worker of another endpoint: not on this endpoint's path; on its own path, its own environment's sources (none).
    const plain = await call(p.url, 'POST', '/v2/serverless', {
      key,
      body: { name: 'not-an-app', image: 'docker.io/library/busybox:1', workers: { min: 0, max: 1 } },
    });
    const otherId = newId();
    const otherKey = await registerWorkerCredential(p.ctx.db, { workerId: otherId, endpointId: plain.body.id });
    expect((await poll('0', { workerId: otherId, credential: otherKey })).status).toBe(403);
    expect((await poll('0', { endpoint: plain.body.id, workerId: otherId, credential: otherKey })).status).toBe(204);
    // Nor does a worker's credential stand for another worker of the same endpoint.
    const sibling = newId();
    await registerWorkerCredential(p.ctx.db, { workerId: sibling, endpointId });
    expect((await poll('0', { workerId: sibling })).status).toBe(403);
  });

  it('refuses forged or stale download URLs and answers 404 once a newer version replaced one', async () => {
    const { url } = (await poll('0')).body as { url: string };
    const forged = new URL(url);
    forged.searchParams.set('expires', String(Number(forged.searchParams.get('expires')) + 60));
    expect((await fetch(forged)).status).toBe(401);
    const otherVersion = new URL(url);
    otherVersion.pathname = otherVersion.pathname.replace(/\/4$/, '/3');
    expect((await fetch(otherVersion)).status).toBe(401);
    const unsigned = new URL(url);
    unsigned.search = '';
    expect((await fetch(unsigned)).status).toBe(401);

    expect((await putSource(gzipSync(Buffer.from('five')))).body.version).toBe(5);
    expect((await fetch(url)).status).toBe(404);
    expect((await poll('4')).body.version).toBe(5);
  });

  it('serves both on the worker-facing listener', () => {
    expect(isWorkerProtocolRoute('/v2/:endpointId/source/:workerId')).toBe(true);
    expect(isWorkerProtocolRoute('/v2/sources/:envId/:version')).toBe(true);
    expect(isWorkerProtocolRoute('/v2/apps/:app/environments/:env/source')).toBe(false);
  });
});
