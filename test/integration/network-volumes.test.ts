/**
 * Network volumes and locations on real containers: three OpenSSH test hosts in front of this
 * machine's Podman, in two data centers. dc-shared (US) has two hosts and shared storage (a
 * directory every host of it sees at the same path: here they are one machine, as NFS would make
 * them); dc-solo (CZ) has one host and no shared storage. Workers write and read files through the
 * volume, placement follows the volume and the endpoint's countries, and deletion removes the data.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issueApiKey } from '../../domain/accounts/index.ts';
import { hostVolumeName, sharedVolumeDir } from '../../domain/catalog/index.ts';
import { startSshTestHost, type SshTestHost } from '../support/ssh-test-host.ts';
import { call, startTestPlatform, type TestPlatform } from '../support/platform.ts';
import {
  ensureOrchestrationWorkerImage,
  FAST_ORCHESTRATION,
  ORCHESTRATION_WORKER_IMAGE,
  registerTestHost,
  removeManagedContainers,
  until,
} from '../support/orchestration.ts';
import { liveWorker } from '../../domain/workers/index.ts';

const IMAGE = ORCHESTRATION_WORKER_IMAGE;
let p: TestPlatform;
const sshHosts: SshTestHost[] = [];
const hostIds: Record<'a' | 'b' | 'solo', string> = { a: '', b: '', solo: '' };
let sharedDir: string;

beforeAll(async () => {
  ensureOrchestrationWorkerImage();
  sshHosts.push(...(await Promise.all([startSshTestHost(), startSshTestHost(), startSshTestHost()])));
  process.env.GANTRY_ORCHESTRATION = JSON.stringify(FAST_ORCHESTRATION);
  p = await startTestPlatform();
  sharedDir = mkdtempSync(path.join(tmpdir(), 'gantry-shared-'));
  for (const [id, body] of [
    ['dc-shared', { country: 'us', networkVolumePath: `${sharedDir}/` }],
    ['dc-solo', { country: 'CZ' }],
  ] as const) {
    const r = await call(p.url, 'PUT', `/v2/datacenters/${id}`, { key: p.adminKey, body });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
  }
  hostIds.a = await registerTestHost(p, sshHosts[0]!, 'nv-a', { dataCenterId: 'dc-shared' });
  hostIds.b = await registerTestHost(p, sshHosts[1]!, 'nv-b', { dataCenterId: 'dc-shared' });
  hostIds.solo = await registerTestHost(p, sshHosts[2]!, 'nv-solo', { dataCenterId: 'dc-solo' });
}, 600_000);

afterAll(async () => {
  await p?.stop();
  removeManagedContainers(Object.values(hostIds).filter(Boolean));
  for (const id of Object.values(hostIds).filter(Boolean)) {
    const vols = spawnSync('podman', ['volume', 'ls', '--quiet'], { encoding: 'utf8' })
      .stdout.split('\n')
      .filter((v) => v.startsWith(`gantry-nv-${id}-`));
    if (vols.length) spawnSync('podman', ['volume', 'rm', '--force', ...vols]);
  }
  await Promise.all(sshHosts.map((h) => h.stop()));
  if (sharedDir) rmSync(sharedDir, { recursive: true, force: true });
}, 120_000);

async function createVolume(
  name: string,
  dataCenter: string,
): Promise<{ status: number; body: { id: string; [k: string]: unknown } }> {
  return call(p.url, 'POST', '/v2/network-volumes', { key: p.adminKey, body: { name, size: 10, dataCenter } });
}

async function createEndpoint(body: Record<string, unknown>): Promise<string> {
  const r = await call(p.url, 'POST', '/v2/serverless', {
    key: p.adminKey,
    body: { image: IMAGE, workers: { min: 1, max: 1 }, ...body },
  });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  return r.body.id as string;
}

const liveWorkers = (endpointId: string) =>
  p.ctx.db.worker.findMany({ where: { endpointId, ...liveWorker }, include: { host: true } });

async function readyWorker(endpointId: string) {
  const [w] = await until(
    `a ready worker of ${endpointId}`,
    async () => {
      const ws = await liveWorkers(endpointId);
      return ws.length === 1 && ws[0]!.status === 'IDLE' ? ws : undefined;
    },
    90_000,
    200,
    () => liveWorkers(endpointId),
  );
  return w!;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- job outputs are arbitrary JSON
async function runsync(endpointId: string, input: unknown): Promise<any> {
  const r = await call(p.url, 'POST', `/v2/${endpointId}/runsync?wait=60000`, { key: p.adminKey, body: { input } });
  expect(r.body.status, JSON.stringify(r.body)).toBe('COMPLETED');
  return r.body.output;
}

async function scaleToZero(...endpointIds: string[]): Promise<void> {
  for (const id of endpointIds)
    await call(p.url, 'PATCH', `/v2/serverless/${id}`, { key: p.adminKey, body: { workers: { min: 0, max: 0 } } });
  await until(
    'the workers gone',
    async () => (await Promise.all(endpointIds.map(liveWorkers))).every((ws) => ws.length === 0),
    60_000,
  );
}

function mountsOf(workerId: string): Array<{ Type: string; Source: string; Destination: string; Name?: string }> {
  return JSON.parse(spawnSync('podman', ['inspect', `gantry-${workerId}`], { encoding: 'utf8' }).stdout)[0].Mounts;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- GraphQL answers are arbitrary JSON
async function gql(query: string, variables?: Record<string, unknown>): Promise<any> {
  const r = await call(p.url, 'POST', `/graphql?api_key=${encodeURIComponent(p.adminKey)}`, {
    body: { query, variables },
  });
  return r.body;
}

describe('network volumes', () => {
  it('shared storage: a file written through a worker on one host is read by a worker on another', async () => {
    const vol = await createVolume('models', 'dc-shared');
    expect(vol.status, JSON.stringify(vol.body)).toBe(201);
    const writer = await createEndpoint({ name: 'nv-writer', networkVolumes: [vol.body.id] });
    const w1 = await readyWorker(writer);
    const reader = await createEndpoint({ name: 'nv-reader', networkVolumes: [vol.body.id] });
    const w2 = await readyWorker(reader);
    // Only the volume's data center; the second endpoint's worker goes to the other host of it.
    expect(new Set([w1.hostId, w2.hostId])).toEqual(new Set([hostIds.a, hostIds.b]));

    const written = await runsync(writer, {
      writeFile: { path: '/runpod-volume/weights/model.txt', content: 'weights from the writer' },
    });
    expect(written.files).toBeUndefined();
    const read = await runsync(reader, { readFile: '/runpod-volume/weights/model.txt' });
    expect(read).toMatchObject({ worker: w2.id, read: 'weights from the writer' });
    // On the shared storage, in the volume's own directory; mounted at the hosted service's path.
    expect(readFileSync(path.join(sharedVolumeDir(sharedDir, vol.body.id), 'weights/model.txt'), 'utf8')).toBe(
      'weights from the writer',
    );
    expect(mountsOf(w2.id)).toContainEqual(
      expect.objectContaining({
        Type: 'bind',
        Source: sharedVolumeDir(sharedDir, vol.body.id),
        Destination: '/runpod-volume',
      }),
    );
    await scaleToZero(writer, reader);
  });

  it('a data center of one host keeps its volumes there: an endpoint worker writes, a pod reads at its mount path', async () => {
    const vol = await createVolume('solo-data', 'dc-solo');
    expect(vol.status, JSON.stringify(vol.body)).toBe(201);
    expect((await p.ctx.db.networkVolume.findUniqueOrThrow({ where: { id: vol.body.id } })).hostId).toBe(hostIds.solo);
    const writer = await createEndpoint({ name: 'solo-writer', networkVolumes: [vol.body.id] });
    const w = await readyWorker(writer);
    expect(w.hostId).toBe(hostIds.solo);
    await runsync(writer, { writeFile: { path: '/runpod-volume/note.txt', content: 'kept on the host' } });
    expect(mountsOf(w.id)).toContainEqual(
      expect.objectContaining({
        Type: 'volume',
        Name: hostVolumeName(hostIds.solo, vol.body.id),
        Destination: '/runpod-volume',
      }),
    );

    const deployed = await gql(
      `mutation D($input: PodFindAndDeployOnDemandInput!) { podFindAndDeployOnDemand(input: $input) { id } }`,
      {
        input: {
          name: 'nv-pod',
          imageName: IMAGE,
          gpuCount: 0,
          networkVolumeId: vol.body.id,
          volumeMountPath: '/data',
          dockerArgs: 'node -e "setInterval(() => {}, 1e9)"',
        },
      },
    );
    expect(deployed.errors).toBeUndefined();
    const podId = deployed.data.podFindAndDeployOnDemand.id as string;
    const podWorker = await until('the pod running', async () => {
      const ws = await p.ctx.db.worker.findMany({ where: { podId, status: 'RUNNING' } });
      return ws[0];
    });
    expect(podWorker.hostId).toBe(hostIds.solo);
    const cat = spawnSync(
      'podman',
      [
        'exec',
        `gantry-${podWorker.id}`,
        'node',
        '-e',
        "process.stdout.write(require('fs').readFileSync('/data/note.txt', 'utf8'))",
      ],
      { encoding: 'utf8' },
    );
    expect(cat.stdout, cat.stderr).toBe('kept on the host');

    // In use: not deleted.
    const inUse = await call(p.url, 'DELETE', `/v2/network-volumes/${vol.body.id}`, { key: p.adminKey });
    expect(inUse.status).toBe(400);
    expect(inUse.body.detail).toMatch(/in use by endpoint/);
    await gql(`mutation { podTerminate(input: {podId: "${podId}"}) }`);
    await scaleToZero(writer);
  });

  it('refuses what cannot be met, naming the field', async () => {
    // Two hosts and no shared storage: nowhere for one volume to live.
    await registerTestHost(p, sshHosts[0]!, 'two-1', { dataCenterId: 'dc-two' });
    await registerTestHost(p, sshHosts[1]!, 'two-2', { dataCenterId: 'dc-two' });
    const nowhere = await createVolume('nowhere', 'dc-two');
    expect(nowhere.status).toBe(422);
    expect(JSON.stringify(nowhere.body)).toMatch(
      /\$\.dataCenter: .*dc-two has 2 hosts and no shared storage.*networkVolumePath/,
    );

    const v1 = await createVolume('pair-1', 'dc-shared');
    const v2 = await createVolume('pair-2', 'dc-shared');
    const twoInOne = await call(p.url, 'POST', '/v2/serverless', {
      key: p.adminKey,
      body: { name: 'two-in-one', image: IMAGE, networkVolumes: [v1.body.id, v2.body.id] },
    });
    expect(twoInOne.status).toBe(422);
    expect(twoInOne.body.errors.join(' ')).toMatch(/\$\.networkVolumes\[1\]: .*both in data center dc-shared/);
    const unknown = await call(p.url, 'POST', '/v2/serverless', {
      key: p.adminKey,
      body: { name: 'ghost-vol', image: IMAGE, networkVolumes: ['nope'] },
    });
    expect(unknown.status).toBe(422);
    const pod = await gql(
      `mutation D($input: PodFindAndDeployOnDemandInput!) { podFindAndDeployOnDemand(input: $input) { id } }`,
      { input: { imageName: IMAGE, gpuCount: 0, networkVolumeId: 'nope' } },
    );
    expect(pod.errors[0].extensions.code).toBe('BAD_USER_INPUT');
    expect(JSON.stringify(pod.errors[0])).toMatch(/networkVolumeId: no network volume 'nope'/);
    const badPath = await call(p.url, 'PUT', '/v2/datacenters/dc-x', {
      key: p.adminKey,
      body: { networkVolumePath: 'relative,dir' },
    });
    expect(badPath.status).toBe(422);
    const badCountry = await call(p.url, 'PUT', '/v2/datacenters/dc-x', { key: p.adminKey, body: { country: 'USA' } });
    expect(badCountry.status).toBe(422);
    const admin = await p.ctx.db.account.findFirstOrThrow({ where: { isAdmin: true } });
    const notAdmin = await call(p.url, 'GET', '/v2/datacenters', {
      key: (await issueApiKey(p.ctx.db, admin.id, 'rw', ['READ', 'WRITE'])).key,
    });
    expect(notAdmin.status).toBe(403);
    const noKey = await call(p.url, 'GET', '/v2/datacenters');
    expect(noKey.status).toBe(401);
  });

  it('deleting a volume frees its name at once and removes its data at the next reconcile of a host holding it', async () => {
    const shared = await createVolume('to-delete', 'dc-shared');
    const dir = sharedVolumeDir(sharedDir, shared.body.id);
    mkdirSync(dir, { recursive: true });
    writeFileSync(path.join(dir, 'old.bin'), 'old');
    const solo = await createVolume('to-delete-solo', 'dc-solo');
    const named = hostVolumeName(hostIds.solo, solo.body.id);
    expect(spawnSync('podman', ['volume', 'create', named]).status).toBe(0);
    // A named volume of this host that no row knows (its account was deleted) goes as well.
    const orphan = hostVolumeName(hostIds.solo, 'orphan1');
    expect(spawnSync('podman', ['volume', 'create', orphan]).status).toBe(0);

    for (const v of [shared, solo])
      expect((await call(p.url, 'DELETE', `/v2/network-volumes/${v.body.id}`, { key: p.adminKey })).status).toBe(204);
    expect((await call(p.url, 'GET', `/v2/network-volumes/${shared.body.id}`, { key: p.adminKey })).status).toBe(404);
    expect((await createVolume('to-delete', 'dc-shared')).status).toBe(201);

    const volumes = () => spawnSync('podman', ['volume', 'ls', '--quiet'], { encoding: 'utf8' }).stdout.split('\n');
    await until(
      "the deleted volumes' data gone",
      async () => !existsSync(dir) && !volumes().includes(named) && !volumes().includes(orphan),
      30_000,
      500,
    );
    await until(
      'the rows gone',
      async () => (await p.ctx.db.networkVolume.count({ where: { id: { in: [shared.body.id, solo.body.id] } } })) === 0,
      10_000,
    );
  });

  it("the catalog shows each data center's country and whether it takes network volumes", async () => {
    const r = await call(p.url, 'GET', '/v2/catalog/datacenters', { key: p.adminKey });
    const byId = new Map((r.body.dataCenters as Array<{ id: string }>).map((d) => [d.id, d]));
    expect(byId.get('dc-shared')).toMatchObject({ country: 'US', networkVolumeTypes: ['STANDARD'] });
    expect(byId.get('dc-solo')).toMatchObject({ country: 'CZ', networkVolumeTypes: ['STANDARD'] });
    expect(byId.get('dc-two')).toMatchObject({ country: null, networkVolumeTypes: [] });
    const admin = await call(p.url, 'GET', '/v2/datacenters/dc-shared', { key: p.adminKey });
    expect(admin.body).toMatchObject({
      id: 'dc-shared',
      country: 'US',
      networkVolumePath: sharedDir,
      networkVolumes: 'shared-path',
      hosts: 2,
      source: 'api',
    });
  });
});

describe('locations', () => {
  it('places workers only in the data centers of the listed countries, and says why it waits when none fits', async () => {
    const t = await call(p.url, 'POST', '/v2/templates', {
      key: p.adminKey,
      body: { name: 'loc-tpl', image: IMAGE, serverless: true },
    });
    expect(t.status, JSON.stringify(t.body)).toBe(201);
    const save = `mutation S($input: EndpointInput!) { saveEndpoint(input: $input) { id locations instanceIds } }`;
    const cz = await gql(save, {
      input: {
        name: 'in-cz',
        templateId: t.body.id,
        instanceIds: ['cpu3c-2-4'],
        locations: 'cz',
        workersMin: 1,
        workersMax: 1,
      },
    });
    expect(cz.errors).toBeUndefined();
    expect(cz.data.saveEndpoint).toMatchObject({ locations: 'CZ', instanceIds: ['cpu3c-2-4'] });
    const w = await readyWorker(cz.data.saveEndpoint.id);
    expect(w.hostId).toBe(hostIds.solo);

    const fr = await gql(save, {
      input: {
        name: 'in-fr',
        templateId: t.body.id,
        instanceIds: ['cpu3c-2-4'],
        locations: 'FR,NO',
        workersMin: 1,
        workersMax: 1,
      },
    });
    const pending = await until('a PENDING worker saying why', async () => {
      const ws = await p.ctx.db.worker.findMany({ where: { endpointId: fr.data.saveEndpoint.id, status: 'PENDING' } });
      return ws.find((x) => x.statusReason?.includes('outside the locations'));
    });
    // No READY host is in those countries, so waiting cannot help: said so.
    expect(pending.statusReason).toMatch(/^cannot be placed: .*\d+ outside the locations FR, NO/);
    expect(pending.hostId).toBeNull();

    const bad = await gql(save, {
      input: { name: 'bad-loc', templateId: t.body.id, instanceIds: ['cpu3c-2-4'], locations: 'USA' },
    });
    expect(bad.errors[0].extensions.code).toBe('BAD_USER_INPUT');
    // A worker waiting for placement goes with its endpoint (scaling to zero removes idle workers only).
    expect((await call(p.url, 'DELETE', `/v2/serverless/${fr.data.saveEndpoint.id}`, { key: p.adminKey })).status).toBe(
      204,
    );
    await scaleToZero(cz.data.saveEndpoint.id);
    await until(
      'the waiting worker stopped',
      async () => (await liveWorkers(fr.data.saveEndpoint.id)).length === 0,
      30_000,
    );
  }, 180_000);
});
