/**
 * Apps, environments, builds and deployments through the REST API and GraphQL, against the whole
 * platform (PostgreSQL, Temporal and the deploy workflow; no host: endpoints keep zero workers, so
 * every release finishes at once). The CLI and real workers are in test/cli/deploy.test.ts.
 */
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { CreateBucketCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { artifactDownloadUrl, discoveryVariable, type Manifest } from '../../domain/apps/index.ts';
import { startVersityGw } from '../support/versitygw.ts';
import { call, startTestPlatform, type TestPlatform } from '../support/platform.ts';
import { until } from '../support/orchestration.ts';

let p: TestPlatform;
let key: string;

beforeAll(async () => {
  p = await startTestPlatform();
  key = p.adminKey;
}, 180_000);

afterAll(async () => {
  await p?.stop();
});

const sha256 = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

function manifest(
  resources: Array<Partial<Manifest['resources'][number]> & { name: string }>,
  fingerprint = 'a'.repeat(64),
): Manifest {
  return {
    format: 1,
    pythonVersion: '3.11',
    fingerprint,
    resources: resources.map((r) => ({
      kind: 'queue',
      file: 'worker.py',
      function: 'handler',
      params: [],
      compute: { cpu: 'cpu3c-2-4' },
      workers: { min: 0, max: 2 },
      idleTimeout: 5,
      scaler: { type: 'QUEUE_DELAY', value: 4 },
      timeout: 60,
      env: {},
      dependencies: [],
      ...r,
    })) as Manifest['resources'],
  };
}

/** prepare -> PUT -> finalize; the build id. */
async function upload(app: string, bytes: Buffer, m: Manifest): Promise<string> {
  const prepared = await call(p.url, 'POST', `/v2/apps/${app}/builds`, {
    key,
    body: { sha256: sha256(bytes), size: bytes.length, manifest: m },
  });
  expect(prepared.status, JSON.stringify(prepared.body)).toBe(201);
  const put = await fetch(prepared.body.upload.url, {
    method: 'PUT',
    headers: prepared.body.upload.headers,
    body: bytes,
  });
  expect(put.status).toBe(200);
  const fin = await call(p.url, 'POST', `/v2/apps/${app}/builds/${prepared.body.build.id}/finalize`, { key });
  expect(fin.status, JSON.stringify(fin.body)).toBe(200);
  expect(fin.body.status).toBe('READY');
  return prepared.body.build.id as string;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- JSON
async function deploy(app: string, env: string, buildId: string): Promise<any> {
  const started = await call(p.url, 'POST', `/v2/apps/${app}/environments/${env}/deployments`, {
    key,
    body: { buildId },
  });
  expect(started.status, JSON.stringify(started.body)).toBe(202);
  expect(started.body.workflowId).toBe(`deploy:${app}:${env}:${buildId}`);
  // The environment shows the deployment under way (when it is still under way after the read).
  const during = await call(p.url, 'GET', `/v2/apps/${app}/environments/${env}`, { key });
  const still = await call(p.url, 'GET', `/v2/apps/${app}/deployments/${started.body.id}`, { key });
  if (still.body.status === 'RUNNING')
    expect(during.body.deploying).toEqual({ deploymentId: started.body.id, buildId, startedAt: expect.any(String) });
  const finished = await until(
    'the deployment to finish',
    async () => {
      const d = await call(p.url, 'GET', `/v2/apps/${app}/deployments/${started.body.id}`, { key });
      return d.body.status === 'RUNNING' ? undefined : d.body;
    },
    60_000,
    200,
  );
  expect((await call(p.url, 'GET', `/v2/apps/${app}/environments/${env}`, { key })).body.deploying).toBeNull();
  return finished;
}

describe('apps and environments', () => {
  it('creates an app with its environment, refuses duplicates and bad names, lists and deletes', async () => {
    const created = await call(p.url, 'POST', '/v2/apps', { key, body: { name: 'shop', environment: 'production' } });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      name: 'shop',
      environments: [{ name: 'production', currentBuildId: null, endpoints: [] }],
    });
    expect((await call(p.url, 'POST', '/v2/apps', { key, body: { name: 'shop' } })).status).toBe(409);
    const bad = await call(p.url, 'POST', '/v2/apps', { key, body: { name: 'Shop_1' } });
    expect(bad.status).toBe(422);
    expect(bad.headers.get('content-type')).toContain('application/problem+json');
    expect((await call(p.url, 'POST', '/v2/apps/shop/environments', { key, body: { name: 'staging' } })).status).toBe(
      201,
    );
    expect((await call(p.url, 'POST', '/v2/apps/shop/environments', { key, body: { name: 'staging' } })).status).toBe(
      409,
    );
    const envs = await call(p.url, 'GET', '/v2/apps/shop/environments', { key });
    expect(envs.body.environments.map((e: { name: string }) => e.name)).toEqual(['production', 'staging']);
    expect((await call(p.url, 'DELETE', '/v2/apps/shop/environments/staging', { key })).status).toBe(204);
    expect((await call(p.url, 'GET', '/v2/apps/shop', { key })).body.environments).toHaveLength(1);
    expect((await call(p.url, 'GET', '/v2/apps/nope', { key })).status).toBe(404);
    expect((await call(p.url, 'GET', '/v2/apps')).status).toBe(401);
  });

  it('answers the same through GraphQL (the hosted deploy tool operation names)', async () => {
    const gql = (query: string, variables: Record<string, unknown> = {}) =>
      call(p.url, 'POST', `/graphql?api_key=${key}`, { body: { query, variables } });
    const made = await gql(
      'mutation($input: CreateFlashAppInput!) { createFlashApp(input: $input) { id name flashEnvironments { name } } }',
      { input: { name: 'gql-app', environmentName: 'dev' } },
    );
    expect(made.body.errors).toBeUndefined();
    expect(made.body.data.createFlashApp).toMatchObject({ name: 'gql-app', flashEnvironments: [{ name: 'dev' }] });
    const appId = made.body.data.createFlashApp.id as string;
    const env = await gql(
      'mutation($input: CreateFlashEnvironmentInput!) { createFlashEnvironment(input: $input) { id name activeBuildId } }',
      { input: { flashAppId: appId, name: 'prod' } },
    );
    expect(env.body.data.createFlashEnvironment).toMatchObject({ name: 'prod', activeBuildId: null });
    const bytes = Buffer.from('graphql artifact');
    const prepared = await gql(
      'mutation($input: PrepareFlashArtifactUploadInput!) { prepareFlashArtifactUpload(input: $input) { buildId uploadUrl expiresAt } }',
      {
        input: {
          flashAppId: appId,
          tarballSize: bytes.length,
          sha256: sha256(bytes),
          manifest: JSON.stringify(manifest([{ name: 'one' }])),
        },
      },
    );
    expect(prepared.body.errors).toBeUndefined();
    const { buildId, uploadUrl } = prepared.body.data.prepareFlashArtifactUpload;
    expect((await fetch(uploadUrl, { method: 'PUT', body: bytes })).status).toBe(200);
    const fin = await gql(
      'mutation($input: FinalizeFlashArtifactUploadInput!) { finalizeFlashArtifactUpload(input: $input) { id status } }',
      { input: { flashAppId: appId, buildId } },
    );
    expect(fin.body.data.finalizeFlashArtifactUpload).toEqual({ id: buildId, status: 'READY' });
    const dep = await gql(
      'mutation($input: DeployBuildToEnvironmentInput!) { deployBuildToEnvironment(input: $input) { id name status } }',
      {
        input: { flashEnvironmentId: env.body.data.createFlashEnvironment.id, flashBuildId: buildId },
      },
    );
    expect(dep.body.data.deployBuildToEnvironment).toMatchObject({
      name: `deploy:gql-app:prod:${buildId}`,
      status: 'RUNNING',
    });
    await until('the GraphQL deployment to succeed', async () => {
      const d = await gql(
        'query($a: String!, $d: String!) { flashDeployment(flashAppId: $a, deploymentId: $d) { status error } }',
        { a: appId, d: dep.body.data.deployBuildToEnvironment.id },
      );
      return d.body.data.flashDeployment.status === 'SUCCEEDED' ? true : undefined;
    });
    const listed = await gql(
      '{ myself { flashApps { name flashEnvironments { name activeBuildId endpoints { name resource } } } } }',
    );
    expect(listed.body.data.myself.flashApps).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          name: 'gql-app',
          flashEnvironments: expect.arrayContaining([
            { name: 'prod', activeBuildId: buildId, endpoints: [{ name: 'gql-app-prod-one', resource: 'one' }] },
          ]),
        }),
      ]),
    );
    // By name, with its builds, as the hosted deploy tool reads them.
    const byName = await gql(
      'query($n: String!) { flashAppByName(flashAppName: $n) { id name flashBuilds { id objectKey createdAt } } }',
      { n: 'gql-app' },
    );
    expect(byName.body.errors).toBeUndefined();
    expect(byName.body.data.flashAppByName).toMatchObject({
      id: appId,
      name: 'gql-app',
      flashBuilds: [{ id: buildId, objectKey: buildId, createdAt: expect.any(String) }],
    });
    const missing = await gql('{ flashAppByName(flashAppName: "no-such-app") { id } }');
    // The tool creates the app when the message says "app not found".
    expect(missing.body.errors[0]).toMatchObject({ message: 'app not found', extensions: { code: 'NOT_FOUND' } });
    const bad = await gql('mutation { createFlashApp(input: { name: "BAD NAME" }) { id } }');
    expect(bad.body.errors[0].extensions.code).toBe('BAD_USER_INPUT');
  });
});

describe('artifact upload', () => {
  beforeAll(async () => {
    await call(p.url, 'POST', '/v2/apps', { key, body: { name: 'uploads', environment: 'production' } });
  });

  it('takes the bytes at the signed URL only, checks size and digest at finalize, and refuses tampering', async () => {
    const bytes = Buffer.from('x'.repeat(1000));
    const prepared = await call(p.url, 'POST', '/v2/apps/uploads/builds', {
      key,
      body: { sha256: sha256(bytes), size: bytes.length, manifest: manifest([{ name: 'a' }]) },
    });
    expect(prepared.status).toBe(201);
    const url = new URL(prepared.body.upload.url);
    // A changed signature, a changed expiry, no signature: 401, nothing stored.
    for (const mutate of [
      (u: URL) => u.searchParams.set('sig', 'A'.repeat(43)),
      (u: URL) => u.searchParams.set('expires', String(Number(u.searchParams.get('expires')) + 60)),
      (u: URL) => u.searchParams.delete('sig'),
    ]) {
      const forged = new URL(url);
      mutate(forged);
      expect((await fetch(forged, { method: 'PUT', body: bytes })).status).toBe(401);
    }
    // Another build's URL cannot write this one.
    const other = await call(p.url, 'POST', '/v2/apps/uploads/builds', {
      key,
      body: { sha256: sha256(bytes), size: bytes.length, manifest: manifest([{ name: 'a' }]) },
    });
    const swapped = new URL(prepared.body.upload.url);
    swapped.pathname = swapped.pathname.replace(prepared.body.build.id, other.body.build.id);
    expect((await fetch(swapped, { method: 'PUT', body: bytes })).status).toBe(401);
    // More bytes than declared: refused while streaming.
    expect((await fetch(url, { method: 'PUT', body: Buffer.concat([bytes, Buffer.from('more')]) })).status).toBe(422);
    // Finalize before a good upload: 422.
    expect(
      (await call(p.url, 'POST', `/v2/apps/uploads/builds/${prepared.body.build.id}/finalize`, { key })).status,
    ).toBe(422);
    // Right size, wrong content: 422 at finalize, and the build stays unusable.
    expect((await fetch(url, { method: 'PUT', body: Buffer.from('y'.repeat(1000)) })).status).toBe(200);
    const wrong = await call(p.url, 'POST', `/v2/apps/uploads/builds/${prepared.body.build.id}/finalize`, { key });
    expect(wrong.status).toBe(422);
    expect(wrong.body.errors[0]).toMatch(/sha256/);
    const notReady = await call(p.url, 'POST', '/v2/apps/uploads/environments/production/deployments', {
      key,
      body: { buildId: prepared.body.build.id },
    });
    expect(notReady.status).toBe(422);
    // The right bytes: READY, and a second upload is refused.
    expect((await fetch(url, { method: 'PUT', body: bytes })).status).toBe(200);
    expect(
      (await call(p.url, 'POST', `/v2/apps/uploads/builds/${prepared.body.build.id}/finalize`, { key })).body.status,
    ).toBe('READY');
    expect((await fetch(url, { method: 'PUT', body: bytes })).status).toBe(409);
  });

  it('counts forged signatures as failed authentications: an address that keeps guessing is refused', async () => {
    const other = await startTestPlatform({ GANTRY_AUTH_FAILURES_PER_MINUTE: '5' });
    try {
      const statuses: number[] = [];
      for (let i = 0; i < 7; i++)
        statuses.push(
          (await fetch(`${other.url}/v2/artifacts/nobuild${i}?expires=4102444800&sig=${'A'.repeat(43)}`)).status,
        );
      expect(statuses.slice(0, 5)).toEqual([401, 401, 401, 401, 401]);
      expect(statuses.slice(5)).toEqual([429, 429]);
    } finally {
      await other.stop();
    }
  });

  it('validates the manifest, naming the field', async () => {
    const bad = manifest([
      { name: 'a', compute: { gpu: { pools: ['NOT_A_POOL'], count: 1 } } },
      { name: 'a' },
      { name: 'b', env: { GANTRY_APP: 'x' } },
    ]);
    const r = await call(p.url, 'POST', '/v2/apps/uploads/builds', {
      key,
      body: { sha256: 'b'.repeat(64), size: 10, manifest: bad },
    });
    expect(r.status).toBe(422);
    expect(r.body.errors.join('\n')).toMatch(/resources\[0\]\.compute\.gpu\.pools: unknown GPU pool 'NOT_A_POOL'/);
    expect(r.body.errors.join('\n')).toMatch(/resources\[1\]\.name: 'a' is declared twice/);
    expect(r.body.errors.join('\n')).toMatch(/resources\[2\]\.env\.GANTRY_APP/);
    const tooBig = await call(p.url, 'POST', '/v2/apps/uploads/builds', {
      key,
      body: { sha256: 'b'.repeat(64), size: 1_500_000_001, manifest: manifest([{ name: 'a' }]) },
    });
    expect(tooBig.status).toBe(422);
  });

  it("signs download URLs only for a build of the worker's own account", async () => {
    const bytes = Buffer.from('download me');
    const buildId = await upload('uploads', bytes, manifest([{ name: 'a' }]));
    const accountId = (await p.ctx.db.app.findFirstOrThrow({ where: { name: 'uploads' } })).accountId;
    const signed = await artifactDownloadUrl(p.ctx, p.url, accountId, buildId);
    expect(signed?.sha256).toBe(sha256(bytes));
    const got = await fetch(signed!.url);
    expect(got.status).toBe(200);
    expect(Buffer.from(await got.arrayBuffer())).toEqual(bytes);
    expect(await artifactDownloadUrl(p.ctx, p.url, 'another-account', buildId)).toBeUndefined();
    const forged = new URL(signed!.url);
    forged.searchParams.set('expires', '4102444800');
    expect((await fetch(forged)).status).toBe(401);
  });
});

describe('artifacts in an S3-compatible store', () => {
  it('uploads straight to the store by a presigned URL, checks the digest there, and serves workers from it', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'gantry-apps-s3-'));
    const gateway = await startVersityGw({ dir, accessKey: 'appsaccess', secretKey: 'appssecret0123456789' });
    const admin = new S3Client({
      endpoint: gateway.endpoint,
      region: 'us-east-1',
      forcePathStyle: true,
      credentials: { accessKeyId: 'appsaccess', secretAccessKey: 'appssecret0123456789' },
    });
    await admin.send(new CreateBucketCommand({ Bucket: 'artifacts' }));
    const s3 = await startTestPlatform({
      GANTRY_BLOB_STORE: 's3',
      GANTRY_S3_ENDPOINT: gateway.endpoint,
      GANTRY_S3_BUCKET: 'artifacts',
      GANTRY_S3_ACCESS_KEY_ID: 'appsaccess',
      GANTRY_S3_SECRET_ACCESS_KEY: 'appssecret0123456789',
    });
    try {
      await call(s3.url, 'POST', '/v2/apps', { key: s3.adminKey, body: { name: 'on-s3', environment: 'production' } });
      const bytes = Buffer.from('an artifact kept in S3');
      const prepared = await call(s3.url, 'POST', '/v2/apps/on-s3/builds', {
        key: s3.adminKey,
        body: { sha256: sha256(bytes), size: bytes.length, manifest: manifest([{ name: 'a' }]) },
      });
      expect(prepared.status).toBe(201);
      // The bytes go to the store, not through the API.
      expect(prepared.body.upload.url.startsWith(gateway.endpoint)).toBe(true);
      expect(
        (
          await fetch(prepared.body.upload.url, {
            method: 'PUT',
            headers: prepared.body.upload.headers,
            body: Buffer.from('not the declared bytes!'),
          })
        ).status,
      ).toBe(200);
      expect(
        (await call(s3.url, 'POST', `/v2/apps/on-s3/builds/${prepared.body.build.id}/finalize`, { key: s3.adminKey }))
          .status,
      ).toBe(422);
      expect(
        (await fetch(prepared.body.upload.url, { method: 'PUT', headers: prepared.body.upload.headers, body: bytes }))
          .status,
      ).toBe(200);
      const fin = await call(s3.url, 'POST', `/v2/apps/on-s3/builds/${prepared.body.build.id}/finalize`, {
        key: s3.adminKey,
      });
      expect(fin.body.status).toBe('READY');
      const stored = await admin.send(new ListObjectsV2Command({ Bucket: 'artifacts' }));
      expect(stored.Contents?.map((o) => o.Key)).toEqual([
        expect.stringMatching(new RegExp(`^artifacts/.+/${prepared.body.build.id}\\.tar\\.gz$`)),
      ]);
      const app = await s3.ctx.db.app.findFirstOrThrow({ where: { name: 'on-s3' } });
      const signed = await artifactDownloadUrl(s3.ctx, s3.url, app.accountId, prepared.body.build.id);
      const got = await fetch(signed!.url);
      expect(Buffer.from(await got.arrayBuffer())).toEqual(bytes);
      expect(got.headers.get('x-gantry-sha256')).toBe(sha256(bytes));
    } finally {
      await s3.stop();
      admin.destroy();
      await gateway.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 300_000);
});

describe('deployments', () => {
  beforeAll(async () => {
    await call(p.url, 'POST', '/v2/apps', { key, body: { name: 'web', environment: 'production' } });
  });

  it('creates one endpoint per resource with service discovery, releases a new artifact everywhere, and removes resources that left the code', async () => {
    const lb = {
      name: 'api',
      kind: 'lb' as const,
      object: 'api',
      function: undefined,
      routes: [
        { method: 'POST' as const, path: '/process', function: 'process' },
        { method: 'GET' as const, path: '/health', function: 'health' },
      ],
    };
    const first = await upload(
      'web',
      Buffer.from('build one'),
      manifest(
        [{ name: 'gpu-worker', compute: { gpu: { pools: ['ADA_24'], count: 1 } } }, { name: 'cpu-worker' }, lb],
        '1'.repeat(64),
      ),
    );
    const d1 = await deploy('web', 'production', first);
    expect(d1.status, d1.error).toBe('SUCCEEDED');
    expect(d1.endpoints.map((e: { name: string }) => e.name)).toEqual(['web-api', 'web-cpu-worker', 'web-gpu-worker']);
    const byResource = Object.fromEntries(d1.endpoints.map((e: { resource: string }) => [e.resource, e]));
    expect(byResource.api).toMatchObject({
      kind: 'lb',
      type: 'LOAD_BALANCING',
      routes: [
        { method: 'POST', path: '/process' },
        { method: 'GET', path: '/health' },
      ],
    });
    expect(byResource['cpu-worker'].url).toBe(`${p.url}/v2/${byResource['cpu-worker'].id}`);

    const rows = await p.ctx.db.endpoint.findMany({
      where: { appResource: { not: null }, name: { startsWith: 'web-' } },
    });
    for (const row of rows) {
      const env = row.env as Record<string, string>;
      expect(env).toMatchObject({
        GANTRY_APP: 'web',
        GANTRY_ENVIRONMENT: 'production',
        GANTRY_RESOURCE: row.appResource,
        GANTRY_BUILD_ID: first,
      });
      // Live reload is for provisioned endpoints only (docs/dev-loop.md).
      expect(env.GANTRY_LIVE_RELOAD).toBeUndefined();
      expect(env.GANTRY_SOURCE_VERSION).toBeUndefined();
      // Every endpoint finds every other.
      for (const e of d1.endpoints) expect(env[discoveryVariable(e.resource)]).toBe(e.url);
      expect(JSON.parse(env.GANTRY_ENDPOINTS!)).toEqual(
        Object.fromEntries(d1.endpoints.map((e: { resource: string; url: string }) => [e.resource, e.url])),
      );
      // GPU resources run on the GPU runtime image (domain/apps/runtime-images.ts), the others on the CPU one.
      expect(row.image).toMatch(
        row.gpuPools.length > 0
          ? /^localhost\/gantry-runtime-gpu:py3\.11-[0-9a-f]{12}$/
          : /^localhost\/gantry-runtime:py3\.11-[0-9a-f]{12}$/,
      );
    }
    const gpu = rows.find((r) => r.appResource === 'gpu-worker')!;
    expect(gpu.gpuPools).toEqual(['ADA_24']);
    expect(rows.find((r) => r.appResource === 'cpu-worker')!.cpuFlavorId).toBe('cpu3c');
    expect(rows.find((r) => r.appResource === 'api')!.ports).toEqual(['8000/http']);

    // Same configuration, new code: a new release on every endpoint (deploy rule 4); a resource dropped.
    const second = await upload(
      'web',
      Buffer.from('build two'),
      manifest([{ name: 'gpu-worker', compute: { gpu: { pools: ['ADA_24'], count: 1 } } }, lb], '2'.repeat(64)),
    );
    const d2 = await deploy('web', 'production', second);
    expect(d2.status, d2.error).toBe('SUCCEEDED');
    const after = await p.ctx.db.endpoint.findMany({ where: { id: { in: rows.map((r) => r.id) } } });
    for (const id of [gpu.id, rows.find((r) => r.appResource === 'api')!.id]) {
      const row = after.find((r) => r.id === id)!;
      expect(row.currentReleaseVersion).toBe(2);
      expect((row.env as Record<string, string>).GANTRY_BUILD_ID).toBe(second);
      const releases = await p.ctx.db.release.findMany({ where: { endpointId: id }, orderBy: { version: 'asc' } });
      expect(releases.map((r) => r.status)).toEqual(['SUPERSEDED', 'COMPLETED']);
      expect(releases[1]!.changes).toEqual(expect.arrayContaining([expect.objectContaining({ field: 'env' })]));
    }
    const cpu = after.find((r) => r.appResource === 'cpu-worker');
    expect(cpu === undefined || cpu.deletingAt !== null).toBe(true);
    const app = await call(p.url, 'GET', '/v2/apps/web', { key });
    expect(app.body.environments[0]).toMatchObject({ name: 'production', currentBuildId: second });
    expect(app.body.environments[0].endpoints.map((e: { resource: string }) => e.resource)).toEqual([
      'api',
      'gpu-worker',
    ]);
  });

  it('names endpoints <app>-<env>-<resource> outside production, one deployment per environment at a time, and fails clearly on a name taken', async () => {
    expect((await call(p.url, 'POST', '/v2/apps/web/environments', { key, body: { name: 'staging' } })).status).toBe(
      201,
    );
    const build = await upload('web', Buffer.from('staging build'), manifest([{ name: 'worker' }], '3'.repeat(64)));
    const d = await deploy('web', 'staging', build);
    expect(d.status).toBe('SUCCEEDED');
    expect(d.endpoints.map((e: { name: string }) => e.name)).toEqual(['web-staging-worker']);

    // An endpoint of the account already has the name a resource would get.
    const taken = await call(p.url, 'POST', '/v2/serverless', {
      key,
      body: { name: 'web-staging-clash', image: 'docker.io/library/busybox:1', workers: { min: 0, max: 1 } },
    });
    expect(taken.status).toBe(201);
    const clash = await upload(
      'web',
      Buffer.from('clash'),
      manifest([{ name: 'worker' }, { name: 'clash' }], '4'.repeat(64)),
    );
    const failed = await deploy('web', 'staging', clash);
    expect(failed.status).toBe('FAILED');
    expect(failed.error).toMatch(/web-staging-clash.*already exists/);
    // The environment stays on its build.
    expect((await call(p.url, 'GET', '/v2/apps/web/environments/staging', { key })).body.currentBuildId).toBe(build);
  });

  it('fails a deploy fast, naming the resource, when no READY host could ever run its release', async () => {
    // This platform has no host: a resource that keeps a worker can never be placed. Its first
    // release is the endpoint's creation (nothing to replace); its worker waits, saying why.
    await call(p.url, 'POST', '/v2/apps', { key, body: { name: 'always-on', environment: 'production' } });
    const resources = [{ name: 'idle' }, { name: 'warm', workers: { min: 1, max: 1 } }];
    const first = await upload('always-on', Buffer.from('always on'), manifest(resources, '5'.repeat(64)));
    expect((await deploy('always-on', 'production', first)).status).toBe('SUCCEEDED');
    const warm = await p.ctx.db.endpoint.findFirstOrThrow({ where: { name: 'always-on-warm' } });
    const waiting = await until('the warm worker waiting', async () => {
      const listed = await call(p.url, 'GET', `/v2/serverless/${warm.id}/workers`, { key });
      // THROTTLED with placement's verdict (its first word is 'waiting for placement').
      return listed.body.workers?.find(
        (w: { status: string; statusReason: string | null }) =>
          w.status === 'THROTTLED' && w.statusReason?.startsWith('cannot be placed'),
      );
    });
    expect(waiting.statusReason).toBe(
      'cannot be placed: no READY host has room for a CPU worker of 2 vCPUs and 4 GB (0 of 0 hosts READY)',
    );

    // New code: the release waits on a worker no host could take, so the deploy fails within a
    // minute (30 s of grace for hosts being registered), not after the release's 15 minutes.
    const second = await upload('always-on', Buffer.from('always on, v2'), manifest(resources, '6'.repeat(64)));
    const started = Date.now();
    const failed = await deploy('always-on', 'production', second);
    expect(failed.status).toBe('FAILED');
    expect(failed.error).toMatch(/^the release of warm \(its worker cannot be placed: no READY host has room/);
    expect(Date.now() - started).toBeLessThan(60_000);
    expect((await call(p.url, 'GET', '/v2/apps/always-on/environments/production', { key })).body.currentBuildId).toBe(
      first,
    );
  }, 120_000);

  it('keeps keys limited to endpoints and READ keys out', async () => {
    const readKey = await call(p.url, 'POST', '/v2/keys', { key, body: { name: 'reader', scopes: ['READ'] } });
    expect(readKey.status, JSON.stringify(readKey.body)).toBe(201);
    expect((await call(p.url, 'GET', '/v2/apps', { key: readKey.body.key })).status).toBe(200);
    expect((await call(p.url, 'POST', '/v2/apps', { key: readKey.body.key, body: { name: 'nope' } })).status).toBe(403);
  });
});
