/**
 * Edges of what endpoint workers and pods get on a real host (an OpenSSH test host in front of this
 * machine's Podman): a queue endpoint's `ports` are not published on the host, a load-balancing
 * endpoint publishes only its app port (for the proxy); a network volume is at /runpod-volume
 * whatever the template's volumeMountPath says, and the API says both; the account's SSH keys reach
 * a pod as PUBLIC_KEY, line breaks and all, unless the pod sets its own.
 */
import { spawnSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { liveWorker } from '../../domain/workers/index.ts';
import { hostVolumePrefix } from '../../domain/catalog/index.ts';
import { call, type TestPlatform } from '../support/platform.ts';
import { ensureLbWorkerImage, LB_WORKER_IMAGE } from '../support/lb.ts';
import {
  ensureOrchestrationWorkerImage,
  ORCHESTRATION_WORKER_IMAGE,
  type OneHostPlatform,
  startOneHostPlatform,
  until,
} from '../support/orchestration.ts';
import { containerEnv, graphql } from '../support/pods.ts';

const IMAGE = ORCHESTRATION_WORKER_IMAGE;
let fixture: OneHostPlatform | undefined;
let p: TestPlatform;
let hostId: string;

beforeAll(async () => {
  ensureOrchestrationWorkerImage();
  ensureLbWorkerImage();
  fixture = await startOneHostPlatform('edges-box');
  ({ p, hostId } = fixture);
}, 600_000);

afterAll(async () => {
  await fixture?.stop();
  if (hostId) {
    const volumes = spawnSync('podman', ['volume', 'ls', '--quiet'], { encoding: 'utf8' })
      .stdout.split('\n')
      .filter((v) => v.startsWith(hostVolumePrefix(hostId)));
    if (volumes.length) spawnSync('podman', ['volume', 'rm', '--force', ...volumes]);
  }
}, 120_000);

const gql = (query: string, variables?: Record<string, unknown>) => graphql(p, query, variables);

interface Inspect {
  HostConfig: { PortBindings: Record<string, Array<{ HostIp: string; HostPort: string }>> | null };
  Mounts: Array<{ Type: string; Name?: string; Destination: string }>;
}
const inspect = (workerId: string): Inspect =>
  JSON.parse(spawnSync('podman', ['inspect', `gantry-${workerId}`], { encoding: 'utf8' }).stdout)[0];

async function readyWorker(endpointId: string) {
  const rows = () => p.ctx.db.worker.findMany({ where: { endpointId, ...liveWorker } });
  const [w] = await until(
    `a ready worker of ${endpointId}`,
    async () => {
      const ws = await rows();
      return ws.length === 1 && ws[0]!.status === 'IDLE' ? ws : undefined;
    },
    120_000,
    250,
    rows,
  );
  return w!;
}

/** What a process in the worker's container sees as `name` (the test image has no shell: node it is). */
function envInside(workerId: string, name: string): string {
  const r = spawnSync(
    'podman',
    ['exec', `gantry-${workerId}`, 'node', '-e', `process.stdout.write(process.env.${name} ?? '<unset>')`],
    { encoding: 'utf8' },
  );
  expect(r.status, r.stderr).toBe(0);
  return r.stdout;
}

describe('endpoint workers on the host', () => {
  it("publishes no port of a queue endpoint and only a load-balancing endpoint's app port; mounts a network volume at /runpod-volume whatever the template says", async () => {
    const template = await gql(
      'mutation T($input: SaveTemplateInput!) { saveTemplate(input: $input) { id volumeMountPath ports } }',
      {
        input: {
          name: 'edges-tpl',
          imageName: IMAGE,
          isServerless: true,
          ports: '8000/http,9000/tcp',
          volumeMountPath: '/data',
        },
      },
    );
    expect(template.errors, JSON.stringify(template.errors)).toBeUndefined();
    const volume = await call(p.url, 'POST', '/v2/network-volumes', {
      key: p.adminKey,
      body: { name: 'edges-vol', size: 10, dataCenter: 'dc-1' },
    });
    expect(volume.status, JSON.stringify(volume.body)).toBe(201);
    const saved = await gql(
      'mutation S($input: EndpointInput!) { saveEndpoint(input: $input) { id networkVolumeId } }',
      {
        input: {
          name: 'edges-queue',
          templateId: template.data.saveTemplate.id,
          instanceIds: ['cpu3c-2-4'],
          networkVolumeId: volume.body.id,
          workersMin: 1,
          workersMax: 1,
        },
      },
    );
    expect(saved.errors, JSON.stringify(saved.errors)).toBeUndefined();
    const queueId = saved.data.saveEndpoint.id as string;
    const lb = await call(p.url, 'POST', '/v2/serverless', {
      key: p.adminKey,
      body: {
        name: 'edges-lb',
        type: 'LOAD_BALANCING',
        image: LB_WORKER_IMAGE,
        ports: ['8080/http', '9000/tcp'],
        workers: { min: 1, max: 1 },
      },
    });
    expect(lb.status, JSON.stringify(lb.body)).toBe(201);
    expect((await call(p.url, 'GET', `/v2/serverless/${queueId}`, { key: p.adminKey })).body.ports).toEqual([
      '8000/http',
      '9000/tcp',
    ]);

    const [queueWorker, lbWorker] = await Promise.all([readyWorker(queueId), readyWorker(lb.body.id as string)]);
    // The queue worker: nothing on the host.
    const q = inspect(queueWorker.id);
    expect(q.HostConfig.PortBindings ?? {}).toEqual({});
    // Its volume at the hosted service's serverless path, not at the template's /data.
    expect(q.Mounts).toContainEqual(expect.objectContaining({ Type: 'volume', Destination: '/runpod-volume' }));
    expect(q.Mounts.map((m) => m.Destination)).not.toContain('/data');
    // The load-balancing worker: its app port on its one host port, for the proxy (it became ready
    // through it); the other port stays in the container.
    expect(lbWorker.hostPort).toEqual(expect.any(Number));
    expect(inspect(lbWorker.id).HostConfig.PortBindings).toEqual({
      '8080/tcp': [expect.objectContaining({ HostPort: String(lbWorker.hostPort) })],
    });

    // The API says so, where the fields are written.
    const openapi = (await call(p.url, 'GET', '/v2/openapi.json')).body;
    for (const op of [openapi.paths['/v2/serverless'].post, openapi.paths['/v2/serverless/{id}'].patch]) {
      expect(op.description).toMatch(/`ports` are not published/);
      expect(op.description).toMatch(/mounted at `\/runpod-volume` in every worker, whatever a template's/);
    }
    const described = await gql(
      '{ save: __type(name: "SaveTemplateInput") { inputFields { name description } } endpoint: __type(name: "EndpointInput") { inputFields { name description } } }',
    );
    const descriptionOf = (type: 'save' | 'endpoint', field: string): string =>
      described.data[type].inputFields.find((f: { name: string }) => f.name === field).description;
    expect(descriptionOf('save', 'volumeMountPath')).toMatch(/Endpoint workers mount .* at \/runpod-volume/);
    expect(descriptionOf('endpoint', 'networkVolumeId')).toMatch(/^Mounted at \/runpod-volume/);

    for (const id of [queueId, lb.body.id as string])
      expect((await call(p.url, 'DELETE', `/v2/serverless/${id}`, { key: p.adminKey })).status).toBe(204);
    await until('the endpoints gone', async () => (await p.ctx.db.endpoint.count()) === 0, 60_000);
  }, 300_000);
});

describe('pods and the account’s SSH keys', () => {
  it('gives every pod the account’s keys as PUBLIC_KEY, one a line, unless the pod sets its own', async () => {
    const keys = [
      'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEdgesTestKeyOne000000000000000000000000000 me@laptop',
      'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEdgesTestKeyTwo000000000000000000000000000 ci@runner',
    ].join('\n');
    const settings = await gql('mutation U($k: String!) { updateUserSettings(input: {pubKey: $k}) { pubKey } }', {
      k: keys,
    });
    expect(settings.errors, JSON.stringify(settings.errors)).toBeUndefined();
    expect((await gql('{ __type(name: "User") { fields { name description } } }')).data.__type.fields).toContainEqual({
      name: 'pubKey',
      description: expect.stringMatching(/gets them as PUBLIC_KEY/),
    });

    const deploy = async (name: string, env: Array<{ key: string; value: string }>) => {
      const r = await gql(
        'mutation D($input: PodFindAndDeployOnDemandInput!) { podFindAndDeployOnDemand(input: $input) { id } }',
        {
          input: { name, imageName: IMAGE, gpuCount: 0, env, dockerArgs: 'node -e "setInterval(() => {}, 1e9)"' },
        },
      );
      expect(r.errors, JSON.stringify(r.errors)).toBeUndefined();
      return r.data.podFindAndDeployOnDemand.id as string;
    };
    const [withKeys, ownKey] = await Promise.all([
      deploy('ssh-pod', [{ key: 'GREETING', value: 'hi' }]),
      deploy('own-key-pod', [{ key: 'PUBLIC_KEY', value: 'ssh-ed25519 AAAAOwnKey pod@own' }]),
    ]);
    const running = (podId: string) =>
      until(`pod ${podId} running`, async () => p.ctx.db.worker.findFirst({ where: { podId, status: 'RUNNING' } }));
    const [a, b] = await Promise.all([running(withKeys), running(ownKey)]);

    // What the container's processes see: both keys, one a line, ready for authorized_keys.
    expect(envInside(a.id, 'PUBLIC_KEY')).toBe(keys);
    expect(envInside(a.id, 'GREETING')).toBe('hi');
    expect(containerEnv(a.containerId!)).toContain(`PUBLIC_KEY=${keys}`);
    // The pod's own value wins; the account's keys are not added beside it.
    expect(envInside(b.id, 'PUBLIC_KEY')).toBe('ssh-ed25519 AAAAOwnKey pod@own');
    // Not part of what the pod reads back as its env.
    const pod = await gql(`{ pod(input: {podId: "${withKeys}"}) { env } }`);
    expect(pod.data.pod.env).toEqual(['GREETING=hi']);

    for (const id of [withKeys, ownKey]) await gql(`mutation { podTerminate(input: {podId: "${id}"}) }`);
    await until('the pods gone', async () => (await p.ctx.db.pod.count()) === 0, 60_000);
  }, 300_000);
});
