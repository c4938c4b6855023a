/**
 * The hosted service's own Python client (`runpod`, pinned in test/fixtures/image-model/requirements.txt)
 * pointed at Gantry by RUNPOD_API_BASE_URL alone: every GraphQL helper it has (runpod.api.ctl_commands)
 * is called as its users call it, against a platform with an SSH test host in front of this machine's
 * Podman, and answers with Gantry's data.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../../domain/shared/index.ts';
import { ensurePythonClients } from '../support/python-clients.ts';
import { call, type TestPlatform } from '../support/platform.ts';
import { ensureLbWorkerImage, LB_WORKER_IMAGE } from '../support/lb.ts';
import { type OneHostPlatform, startOneHostPlatform, until } from '../support/orchestration.ts';

const CALL_PY = path.join(
  path.dirname(fileURLToPath(import.meta.url)),
  '..',
  'fixtures',
  'hosted-python-client',
  'call.py',
);

let fixture: OneHostPlatform | undefined;
let p: TestPlatform;
let python: string;
/** A home of its own: the client reads ~/.runpod/config.toml when there is one. */
const home = mkdtempSync(path.join(tmpdir(), 'runpod-home-'));

beforeAll(async () => {
  ensureLbWorkerImage();
  python = await ensurePythonClients();
  fixture = await startOneHostPlatform('client-box');
  ({ p } = fixture);
}, 600_000);

afterAll(async () => {
  await fixture?.stop();
}, 120_000);

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- the helpers answer arbitrary JSON
type Answer = { result?: any; error?: string; message?: string };

/** `runpod.<helper>(**kwargs)` in a Python process of its own, with the key a user would give. */
async function helper(name: string, kwargs: Record<string, unknown> = {}, key = p.adminKey): Promise<Answer> {
  const r = await promisify(execFile)(python, [CALL_PY, name, JSON.stringify(kwargs)], {
    encoding: 'utf8',
    timeout: 60_000,
    env: { PATH: process.env.PATH, HOME: home, RUNPOD_API_KEY: key, RUNPOD_API_BASE_URL: p.url },
  }).catch((e: { stdout?: string; stderr?: string }) => e);
  try {
    return JSON.parse(r.stdout ?? '') as Answer;
  } catch {
    throw new Error(`${name}: no JSON answer: ${r.stdout} ${r.stderr}`);
  }
}

/** The helper's result; a failure shows the client's own message. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- as above
async function ok(name: string, kwargs: Record<string, unknown> = {}, key?: string): Promise<any> {
  const a = await helper(name, kwargs, key);
  expect(a.error, `${name}: ${a.error}: ${a.message}`).toBeUndefined();
  return a.result;
}

/**
 * Runs `fn` while a host record with one H100 is registered, as a probe of a GPU host writes it. The
 * host is never reached: nothing is placed while it is there (no GPU host is on this machine).
 */
async function withGpuHostRecord(fn: () => Promise<void>): Promise<void> {
  const gpuHost = await p.ctx.db.host.create({
    data: {
      id: newId(),
      name: `gpu-${newId()}`,
      address: '127.0.0.1',
      user: 'root',
      dataCenterId: 'dc-1',
      status: 'READY',
      gpuPassthrough: true,
      gpuMethod: 'cdi',
      cpuCount: 32,
      memoryMb: 256000,
      gpus: [{ uuid: 'GPU-1', name: 'NVIDIA H100 80GB HBM3', memoryMb: 81559, driverVersion: '550.54.15' }],
    },
  });
  try {
    await fn();
  } finally {
    await p.ctx.db.host.delete({ where: { id: gpuHost.id } });
  }
}

describe('the hosted Python client against Gantry', () => {
  it('reads the user, keeps its SSH public key, and lists its network volumes', async () => {
    const vol = await call(p.url, 'POST', '/v2/network-volumes', {
      key: p.adminKey,
      body: { name: 'models', size: 10, dataCenter: 'dc-1' },
    });
    expect(vol.status, JSON.stringify(vol.body)).toBe(201);
    const user = await ok('get_user');
    expect(user).toMatchObject({ pubKey: null });
    expect(user.id).toEqual(expect.any(String));
    expect(user.networkVolumes).toContainEqual({ id: vol.body.id, name: 'models', size: 10, dataCenterId: 'dc-1' });

    const pubKey = 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGantryTestKeyForTheClientHelpers0000000000 me@laptop';
    expect(await ok('update_user_settings', { pubkey: pubKey })).toEqual({ id: user.id, pubKey });
    expect((await ok('get_user')).pubKey).toBe(pubKey);
    // Two keys, one a line each, as the hosted service keeps them.
    const two = `${pubKey}\nssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAISecondKey000000000000000000000000000000 ci@runner`;
    expect((await ok('update_user_settings', { pubkey: two })).pubKey).toBe(two);
    // Not a public key: refused with the reason, and the stored one stays.
    const bad = await helper('update_user_settings', { pubkey: 'not a key' });
    expect(bad).toMatchObject({ error: 'QueryError' });
    expect(bad.message).toMatch(/pubKey: line 1 is not an OpenSSH public key/);
    expect((await ok('get_user')).pubKey).toBe(two);
  }, 120_000);

  it('lists GPU types and reads one with its prices', () => withGpuHostRecord(readGpus), 120_000);

  async function readGpus(): Promise<void> {
    const gpus = await ok('get_gpus');
    expect(gpus.length).toBeGreaterThan(0);
    // Every type of the pools is listed (a type no host has with no stock: test/api/edges-catalog.test.ts).
    const first = gpus.find((g: { id: string }) => g.id === 'NVIDIA H100 80GB HBM3');
    expect(Object.keys(first).sort()).toEqual(['displayName', 'id', 'memoryInGb']);
    const one = await ok('get_gpu', { gpu_id: first.id, gpu_quantity: 2 });
    expect(one).toMatchObject({ id: first.id, displayName: first.displayName, memoryInGb: first.memoryInGb });
    expect(one.manufacturer).toBe('Nvidia');
    expect(typeof one.secureCloud).toBe('boolean');
    // The price of two, when the type has one; no bids here.
    expect(one.lowestPrice.minimumBidPrice).toBeNull();
    if (one.securePrice !== null) expect(one.lowestPrice.uninterruptablePrice).toBeCloseTo(one.securePrice * 2, 6);
    // An id no type has: the client's own "No GPU found".
    expect(await helper('get_gpu', { gpu_id: 'NVIDIA No Such Card' })).toMatchObject({ error: 'ValueError' });
  }

  it('keeps registry credentials: creates, updates and deletes one', async () => {
    const made = await ok('create_container_registry_auth', { name: 'ghcr.io', username: 'me', password: 's3cret' });
    expect(made).toMatchObject({ id: expect.any(String), name: 'ghcr.io' });
    expect(
      await ok('update_container_registry_auth', { registry_auth_id: made.id, username: 'me2', password: 'other' }),
    ).toEqual({ id: made.id, name: 'ghcr.io' });
    await ok('delete_container_registry_auth', { registry_auth_id: made.id });
    expect(await p.ctx.db.registryCredential.findUnique({ where: { id: made.id } })).toBeNull();
  }, 120_000);

  it('creates templates and endpoints, lists the endpoints with their fields, and moves one to another template', async () => {
    const template = await ok('create_template', {
      name: 'client-tpl',
      image_name: LB_WORKER_IMAGE,
      docker_start_cmd: 'python3 -u handler.py',
      // The client writes values into the document unescaped: no quotes in them.
      env: { MODEL: 'small', GREETING: 'hello there' },
      is_serverless: true,
    });
    expect(template).toMatchObject({
      id: expect.any(String),
      name: 'client-tpl',
      imageName: LB_WORKER_IMAGE,
      dockerArgs: 'python3 -u handler.py',
      containerDiskInGb: 10,
      volumeInGb: 0,
      ports: '',
      isServerless: true,
    });
    expect(template.env).toEqual([
      { key: 'MODEL', value: 'small' },
      { key: 'GREETING', value: 'hello there' },
    ]);

    const created = await ok('create_endpoint', {
      name: 'client-ep',
      template_id: template.id,
      gpu_ids: 'AMPERE_16',
      workers_min: 0,
      workers_max: 2,
      idle_timeout: 7,
      scaler_value: 3,
      flashboot: true,
      allowed_cuda_versions: '12.4,12.6',
    });
    expect(created).toMatchObject({
      id: expect.any(String),
      name: 'client-ep',
      templateId: template.id,
      gpuIds: 'AMPERE_16',
      idleTimeout: 7,
      scalerType: 'QUEUE_DELAY',
      scalerValue: 3,
      workersMin: 0,
      workersMax: 2,
      gpuCount: 1,
      flashBootType: 'FLASHBOOT',
      allowedCudaVersions: '12.4,12.6',
    });
    // Stored as a list (placement keeps GPU workers to hosts of those CUDA versions: docs/graphql.md).
    expect((await p.ctx.db.endpoint.findUniqueOrThrow({ where: { id: created.id } })).allowedCudaVersions).toEqual([
      '12.4',
      '12.6',
    ]);
    // A CUDA version that is not one: refused, nothing made.
    const refused = await helper('create_endpoint', {
      name: 'bad-cuda',
      template_id: template.id,
      allowed_cuda_versions: '12.x',
    });
    expect(refused).toMatchObject({ error: 'QueryError' });
    expect(await p.ctx.db.endpoint.count({ where: { name: 'bad-cuda' } })).toBe(0);

    const account = await p.ctx.db.account.findFirstOrThrow({ where: { isAdmin: true } });
    const listed = (await ok('get_endpoints')).find((e: { id: string }) => e.id === created.id);
    expect(listed).toMatchObject({
      id: created.id,
      name: 'client-ep',
      templateId: template.id,
      gpuIds: 'AMPERE_16',
      userId: account.id,
      version: 1,
      workersMin: 0,
      workersMax: 2,
      workersStandby: null,
      gpuCount: 1,
      networkVolume: null,
      aiKey: null,
      env: [
        { key: 'MODEL', value: 'small' },
        { key: 'GREETING', value: 'hello there' },
      ],
    });
    expect(new Date(listed.createdAt).getTime()).toBeGreaterThan(Date.now() - 120_000);

    const other = await ok('create_template', {
      name: 'client-tpl-2',
      image_name: LB_WORKER_IMAGE,
      is_serverless: true,
    });
    expect(await ok('update_endpoint_template', { endpoint_id: created.id, template_id: other.id })).toEqual({
      id: created.id,
      templateId: other.id,
    });
    const moved = (await ok('get_endpoints')).find((e: { id: string }) => e.id === created.id);
    expect(moved).toMatchObject({ templateId: other.id, version: 2, env: [] });
    // Another account's template, or none: refused.
    expect(await helper('update_endpoint_template', { endpoint_id: created.id, template_id: 'nope' })).toMatchObject({
      error: 'QueryError',
    });
  }, 120_000);

  it('deploys a CPU pod, reads it among the pods and by id, stops, resumes and terminates it', async () => {
    // The GPU form of create_pod (the client first looks the type up with get_gpu) reaches the same
    // rules: two GPUs where hosts have one is refused, with the reason.
    await withGpuHostRecord(async () => {
      const gpu = await helper('create_pod', {
        name: 'client-gpu-pod',
        image_name: LB_WORKER_IMAGE,
        gpu_type_id: 'NVIDIA H100 80GB HBM3',
        gpu_count: 2,
        allowed_cuda_versions: ['12.4'],
        min_download: 100,
      });
      expect(gpu).toMatchObject({ error: 'QueryError' });
      expect(gpu.message).toMatch(
        /gpuCount: 2 GPUs of type 'NVIDIA H100 80GB HBM3' asked for, but no registered host has more than 1/,
      );
    });

    const made = await ok('create_pod', {
      name: 'client-pod',
      image_name: LB_WORKER_IMAGE,
      instance_id: 'cpu3c-2-4',
      ports: '8080/http',
      env: { PORT: '8080', HELLO: 'there' },
      container_disk_in_gb: 5,
      template_id: null,
    });
    expect(made).toMatchObject({ id: expect.any(String), imageName: LB_WORKER_IMAGE });
    expect(made.env).toEqual(expect.arrayContaining(['PORT=8080', 'HELLO=there']));

    const running = await until(
      'the pod running',
      async () => {
        const pod = await ok('get_pod', { pod_id: made.id });
        return pod?.runtime && pod.dockerId ? pod : undefined;
      },
      120_000,
      500,
    );
    expect(running).toMatchObject({
      id: made.id,
      name: 'client-pod',
      desiredStatus: 'RUNNING',
      podType: 'RESERVED',
      port: null,
      ports: '8080/http',
      containerDiskInGb: 5,
      gpuCount: 0,
    });
    const container = await p.ctx.db.worker.findFirstOrThrow({ where: { podId: made.id, containerId: { not: null } } });
    expect(running.dockerId).toBe(container.containerId);
    expect(running.runtime.ports[0]).toMatchObject({ privatePort: 8080, type: 'http' });
    expect((await ok('get_pods')).map((x: { id: string }) => x.id)).toContain(made.id);

    expect(await ok('stop_pod', { pod_id: made.id })).toMatchObject({ id: made.id, desiredStatus: 'EXITED' });
    expect(await ok('resume_pod', { pod_id: made.id, gpu_count: 0 })).toMatchObject({
      id: made.id,
      desiredStatus: 'RUNNING',
    });
    await ok('terminate_pod', { pod_id: made.id });
    expect(await helper('get_pod', { pod_id: made.id })).toMatchObject({
      error: 'QueryError',
      message: 'pod not found',
    });
  }, 240_000);

  it("answers a refused key with the client's own AuthenticationError", async () => {
    expect(await helper('get_user', {}, 'gntr_wrong')).toMatchObject({ error: 'AuthenticationError' });
  }, 60_000);
});
