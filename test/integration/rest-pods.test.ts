/**
 * REST /v2/pods end to end on real containers: an OpenSSH test host in front of Podman, the test
 * worker image (test/fixtures/lb-worker, an HTTP server on $PORT) run as a pod by the platform's own
 * workflows. Create, read, update (a container setting restarts the container with it), the state
 * actions, terminate; the same pods as GraphQL's; validation, scopes and account isolation.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issueApiKey } from '../../domain/accounts/index.ts';
import { newId } from '../../domain/shared/index.ts';
import { call, type TestPlatform } from '../support/platform.ts';
import { ensureLbWorkerImage, LB_WORKER_IMAGE, rawRequest } from '../support/lb.ts';
import { type OneHostPlatform, startOneHostPlatform, until } from '../support/orchestration.ts';
import { containerEnv, graphql, podContainers } from '../support/pods.ts';
import { podWorkflowId } from '../../contracts/workflows.ts';

const IMAGE = LB_WORKER_IMAGE;

let fixture: OneHostPlatform | undefined;
let p: TestPlatform;
let hostId: string;

beforeAll(async () => {
  ensureLbWorkerImage();
  fixture = await startOneHostPlatform('rest-pod-box');
  ({ p, hostId } = fixture);
}, 600_000);

afterAll(async () => {
  await fixture?.stop();
}, 120_000);

/** A REST call with the admin key, another key, or none (null). */
const rest = (method: string, route: string, body?: unknown, key: string | null = p.adminKey) =>
  call(p.url, method, route, { key: key ?? undefined, body });

/** A CPU pod of the test image serving HTTP on 8080, with `extra` over it. */
const webPod = (name: string, extra: Record<string, unknown> = {}) => ({
  name,
  image: IMAGE,
  cpu: { id: 'cpu3c', vcpuCount: 2 },
  ports: ['8080/http'],
  env: { PORT: '8080' },
  ...extra,
});

/** The pod once it is RUNNING and its first port answers on the host; `notStartedAt` waits for another container than the one started then. */
async function runningPod(podId: string, notStartedAt?: string) {
  return until(
    'the pod running and answering on its port',
    async () => {
      const r = await rest('GET', `/v2/pods/${podId}`);
      const pod = r.body;
      const port = pod?.runtime?.ports?.[0];
      if (pod?.status !== 'RUNNING' || !port || (notStartedAt && pod.startedAt === notStartedAt)) return undefined;
      const res = await fetch(`http://${port.ip}:${port.public}/health`, { signal: AbortSignal.timeout(2000) }).catch(
        () => undefined,
      );
      if (res?.status !== 200) return undefined;
      return { pod, health: await res.json() };
    },
    120_000,
    250,
    async () => ({
      pod: (await rest('GET', `/v2/pods/${podId}`)).body,
      workers: await p.ctx.db.worker.findMany({
        where: { podId },
        select: { id: true, status: true, statusReason: true },
      }),
    }),
  );
}

const running = (podId: string) => podContainers(hostId, podId).filter((c) => c.running);

describe('REST pods on real containers', () => {
  it('describes every pod operation in /v2/openapi.json, with its scope', async () => {
    const doc = (await call(p.url, 'GET', '/v2/openapi.json')).body as {
      paths: Record<string, Record<string, { operationId?: string; tags?: string[]; 'x-required-scope'?: string }>>;
    };
    const ops = Object.entries(doc.paths)
      .filter(([path]) => path.startsWith('/v2/pods'))
      .flatMap(([path, methods]) =>
        Object.entries(methods).map(([method, op]) => [
          `${method.toUpperCase()} ${path}`,
          op.operationId,
          op['x-required-scope'],
          op.tags,
        ]),
      );
    expect(ops.sort()).toEqual(
      [
        ['GET /v2/pods', 'listPods', 'READ', ['Pods']],
        ['POST /v2/pods', 'createPod', 'WRITE', ['Pods']],
        ['GET /v2/pods/{id}', 'getPod', 'READ', ['Pods']],
        ['PATCH /v2/pods/{id}', 'updatePod', 'WRITE', ['Pods']],
        ['DELETE /v2/pods/{id}', 'deletePod', 'WRITE', ['Pods']],
        ['POST /v2/pods/{id}/action', 'podAction', 'WRITE', ['Pods']],
        ['POST /v2/pods/{id}/stop', 'stopPod', 'WRITE', ['Pods']],
        ['POST /v2/pods/{id}/start', 'startPod', 'WRITE', ['Pods']],
      ].sort(),
    );
  });

  it('creates a pod that runs, updates it (a new container with the new settings), stops, starts, restarts and terminates it', async () => {
    const created = await rest(
      'POST',
      '/v2/pods',
      // With what clients of the hosted service send along: accepted, no effect.
      webPod('rest-web', {
        ports: ['8080/http', '9090/tcp'],
        env: { PORT: '8080', GREETING: 'hello rest' },
        disk: 5,
        cloud: 'SECURE',
        dataCenterIds: ['dc-1'],
        startSsh: true,
      }),
    );
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const pod = created.body;
    expect(pod).toMatchObject({
      name: 'rest-web',
      image: IMAGE,
      args: '',
      disk: 5,
      ports: ['8080/http', '9090/tcp'],
      env: { PORT: '8080', GREETING: 'hello rest' },
      registry: null,
      desiredStatus: 'RUNNING',
      mounts: {},
      template: null,
      cost: 0,
      locked: false,
      runtime: null,
      startedAt: null,
    });
    expect(['PROVISIONING', 'STARTING']).toContain(pod.status);
    expect(pod.actions).toEqual(['stop', 'terminate']);
    expect(pod.gpu).toBeUndefined();
    // Durable before answered: the row and the workflow exist.
    expect(await p.ctx.db.pod.findUnique({ where: { id: pod.id } })).not.toBeNull();
    expect((await p.ctx.temporal.workflow.getHandle(podWorkflowId(pod.id)).describe()).status.name).toBe('RUNNING');

    const first = await runningPod(pod.id);
    expect(first.health).toEqual({ status: 'ok', worker: pod.id });
    expect(first.pod).toMatchObject({
      status: 'RUNNING',
      actions: ['stop', 'restart', 'terminate'],
      dataCenterId: 'dc-1',
      startedAt: expect.any(String),
    });
    const [http, tcp] = first.pod.runtime.ports;
    expect(first.pod.runtime.ports).toEqual([
      { private: 8080, public: expect.any(Number), type: 'http', ip: http.ip },
      { private: 9090, public: http.public + 1, type: 'tcp', ip: tcp.ip },
    ]);
    const [container] = running(pod.id);
    expect(containerEnv(container!.id)).toEqual(expect.arrayContaining(['GREETING=hello rest', 'PORT=8080']));

    // GraphQL sees the same pod, and REST lists one made through GraphQL.
    const seen = await graphql(
      p,
      `query { pod(input: {podId: "${pod.id}"}) { id name imageName desiredStatus env ports containerDiskInGb runtime { ports { privatePort publicPort } } } }`,
    );
    expect(seen.errors).toBeUndefined();
    expect(seen.data.pod).toMatchObject({
      id: pod.id,
      name: 'rest-web',
      imageName: IMAGE,
      desiredStatus: 'RUNNING',
      ports: '8080/http,9090/tcp',
      containerDiskInGb: 5,
    });
    expect([...seen.data.pod.env].sort()).toEqual(['GREETING=hello rest', 'PORT=8080']);
    expect(seen.data.pod.runtime.ports).toEqual([
      { privatePort: 8080, publicPort: http.public },
      { privatePort: 9090, publicPort: tcp.public },
    ]);
    const viaGraphql = await graphql(
      p,
      `mutation { podFindAndDeployOnDemand(input: {name: "made-in-graphql", imageName: "${IMAGE}", gpuCount: 0}) { id } }`,
    );
    expect(viaGraphql.errors).toBeUndefined();
    const graphqlPodId = viaGraphql.data.podFindAndDeployOnDemand.id as string;
    const listed = await rest('GET', '/v2/pods');
    expect(listed.status).toBe(200);
    expect(listed.body.pods.map((x: { id: string; name: string }) => [x.id, x.name])).toEqual(
      expect.arrayContaining([
        [pod.id, 'rest-web'],
        [graphqlPodId, 'made-in-graphql'],
      ]),
    );
    expect((await rest('DELETE', `/v2/pods/${graphqlPodId}`)).status).toBe(204);

    // A new name: the same container.
    const renamed = await rest('PATCH', `/v2/pods/${pod.id}`, { name: 'rest-web-2' });
    expect(renamed.status, JSON.stringify(renamed.body)).toBe(200);
    expect(renamed.body).toMatchObject({ name: 'rest-web-2', status: 'RUNNING' });
    expect(running(pod.id).map((c) => c.id)).toEqual([container!.id]);

    // New container settings: the container is replaced by one with them.
    const updated = await rest('PATCH', `/v2/pods/${pod.id}`, {
      env: { PORT: '8080', GREETING: 'updated' },
      ports: ['8080/http'],
      locked: true,
    });
    expect(updated.status, JSON.stringify(updated.body)).toBe(200);
    expect(updated.body).toMatchObject({
      env: { PORT: '8080', GREETING: 'updated' },
      ports: ['8080/http'],
      locked: false,
    });
    const second = await runningPod(pod.id, first.pod.startedAt);
    expect(second.health).toEqual({ status: 'ok', worker: pod.id });
    expect(second.pod.runtime.ports).toHaveLength(1);
    await until(
      'one container, the new one',
      async () => running(pod.id).length === 1 && running(pod.id)[0]!.id !== container!.id,
      60_000,
      250,
    );
    expect(containerEnv(running(pod.id)[0]!.id)).toEqual(expect.arrayContaining(['GREETING=updated']));

    // Stop as the hosted service's clients send bodiless calls: Content-Type application/json, no body.
    const stopped = await rawRequest(`${p.url}/v2/pods/${pod.id}/stop`, {
      method: 'POST',
      headers: { authorization: `Bearer ${p.adminKey}`, 'content-type': 'application/json', 'content-length': '0' },
    });
    expect(stopped.status, stopped.text).toBe(200);
    expect(stopped.json()).toMatchObject({
      id: pod.id,
      status: 'EXITED',
      desiredStatus: 'EXITED',
      actions: ['start', 'terminate'],
      cost: 0,
    });
    await until('the container gone after stop', async () => podContainers(hostId, pod.id).length === 0, 60_000, 250);
    expect((await rest('GET', `/v2/pods/${pod.id}`)).body).toMatchObject({
      status: 'EXITED',
      runtime: null,
      startedAt: null,
    });
    expect((await graphql(p, `query { pod(input: {podId: "${pod.id}"}) { desiredStatus } }`)).data.pod).toEqual({
      desiredStatus: 'EXITED',
    });
    // What the status does not allow is 409.
    const again = await rest('POST', `/v2/pods/${pod.id}/action`, { action: 'stop' });
    expect(again.status).toBe(409);
    expect(again.body.detail).toMatch(/EXITED.*start, terminate/);
    expect((await rest('POST', `/v2/pods/${pod.id}/action`, { action: 'restart' })).status).toBe(409);

    // Start: a new container; restart: another one.
    const started = await rest('POST', `/v2/pods/${pod.id}/action`, { action: 'start' });
    expect(started.status, JSON.stringify(started.body)).toBe(200);
    expect(started.body.desiredStatus).toBe('RUNNING');
    const third = await runningPod(pod.id);
    const thirdContainer = running(pod.id)[0]!.id;
    const restarted = await rest('POST', `/v2/pods/${pod.id}/action`, { action: 'restart' });
    expect(restarted.status, JSON.stringify(restarted.body)).toBe(200);
    await runningPod(pod.id, third.pod.startedAt);
    await until(
      'one container, not the one before the restart',
      async () => running(pod.id).length === 1 && running(pod.id)[0]!.id !== thirdContainer,
      60_000,
      250,
    );

    // Terminate: 204, not found at once, container and row gone.
    const deleted = await rest('DELETE', `/v2/pods/${pod.id}`);
    expect(deleted.status).toBe(204);
    expect(deleted.body).toBeUndefined();
    expect((await rest('GET', `/v2/pods/${pod.id}`)).status).toBe(404);
    expect((await rest('DELETE', `/v2/pods/${pod.id}`)).status).toBe(404);
    await until(
      'the container and the row gone after terminate',
      async () =>
        podContainers(hostId, pod.id).length === 0 &&
        (await p.ctx.db.pod.findUnique({ where: { id: pod.id } })) === null,
      60_000,
      250,
    );
    await until(
      'the GraphQL-made pod gone',
      async () => (await p.ctx.db.pod.findUnique({ where: { id: graphqlPodId } })) === null,
      60_000,
      250,
    );
  }, 400_000);

  it('takes a persistent mount, a template and the action route for terminate', async () => {
    const t = await rest('POST', '/v2/templates', {
      name: 'rest-pod-tpl',
      image: IMAGE,
      args: 'node /app/index.js',
      disk: 7,
      ports: ['8080/http'],
      env: { PORT: '8080', FROM: 'template' },
    });
    expect(t.status, JSON.stringify(t.body)).toBe(201);
    const r = await rest('POST', '/v2/pods', {
      name: 'rest-from-template',
      templateId: t.body.id,
      cpu: { id: 'cpu3c', vcpuCount: 2 },
      env: { FROM: 'request' },
      mounts: { persistent: { size: 1, path: '/data' } },
    });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    expect(r.body).toMatchObject({
      image: IMAGE,
      args: 'node /app/index.js',
      disk: 7,
      ports: ['8080/http'],
      env: { PORT: '8080', FROM: 'request' },
      template: t.body.id,
      mounts: { persistent: { size: 1, path: '/data' } },
    });
    const podId = r.body.id as string;

    // The mount's size and path may change; its kind may not.
    const resized = await rest('PATCH', `/v2/pods/${podId}`, { mounts: { persistent: { size: 2, path: '/data' } } });
    expect(resized.status, JSON.stringify(resized.body)).toBe(200);
    expect(resized.body.mounts).toEqual({ persistent: { size: 2, path: '/data' } });
    const network = await rest('PATCH', `/v2/pods/${podId}`, {
      mounts: { network: [{ volumeId: 'somevolume', path: '/net' }] },
    });
    expect(network.status).toBe(422);
    expect(network.body.errors).toEqual([
      '$.mounts.network: the pod was made without a network volume; the kind of mount is fixed when a pod is made',
    ]);

    const ran = await runningPod(podId);
    expect(ran.health).toEqual({ status: 'ok', worker: podId });
    const terminated = await rest('POST', `/v2/pods/${podId}/action`, { action: 'terminate' });
    expect(terminated.status).toBe(204);
    await until(
      'the template pod gone',
      async () => (await p.ctx.db.pod.findUnique({ where: { id: podId } })) === null,
      60_000,
      250,
    );
  }, 180_000);

  it('refuses invalid input with 422 naming the field, in REST terms, and creates nothing', async () => {
    const before = await p.ctx.db.pod.count();
    const refused = async (body: unknown, route = '/v2/pods', method = 'POST') => {
      const r = await rest(method, route, body);
      expect(r.status, JSON.stringify(r.body)).toBe(422);
      expect(r.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      return r.body.errors as string[];
    };
    expect(await refused({ image: IMAGE, cpu: { id: 'cpu3c', vcpuCount: 2 } })).toEqual(["$: missing property 'name'"]);
    expect(await refused(webPod('bad', { imageName: IMAGE }))).toEqual([
      "$: additional properties 'imageName' not allowed",
    ]);
    expect((await refused(webPod('bad', { ports: ['8080/http', '22/tcpx'] }))).join('\n')).toMatch(/^\$\.ports\[1\]: /);
    expect((await refused(webPod('bad', { env: { 'A-B': '1' } }))).join('\n')).toMatch(/\$\.env/);
    expect(await refused(webPod('bad', { args: 'node "open' }))).toEqual(['$.args: unterminated " quote in args']);
    expect(await refused({ name: 'bad', image: IMAGE })).toEqual([
      '$.gpu: give exactly one of gpu (a GPU pod) and cpu (a CPU pod)',
    ]);
    expect(await refused(webPod('bad', { gpu: { id: 'NVIDIA GeForce RTX 4090' } }))).toEqual([
      '$.gpu: give exactly one of gpu (a GPU pod) and cpu (a CPU pod)',
    ]);
    // deployPod's rules, in REST's names. The test host has no GPU.
    expect(await refused({ name: 'bad', image: IMAGE, gpu: { id: 'NVIDIA GeForce RTX 4090', count: 2 } })).toEqual([
      "$.gpu.id: no registered host has a GPU of type 'NVIDIA GeForce RTX 4090' (the gpuTypes query lists the types there are)",
    ]);
    expect(await refused(webPod('bad', { registry: 'nosuchregistry' }))).toEqual([
      "$.registry: no registry credential 'nosuchregistry'",
    ]);
    const { image: _image, ...noImage } = webPod('bad', { templateId: 'nosuchtemplate' });
    expect(await refused(noImage)).toEqual([
      "$.templateId: no template 'nosuchtemplate'",
      '$.image: required (or a templateId whose template names the image)',
    ]);
    expect(
      await refused(
        webPod('bad', { mounts: { persistent: { size: 1, path: '/a' }, network: [{ volumeId: 'v', path: '/b' }] } }),
      ),
    ).toEqual(['$.mounts: a pod has a persistent mount or a network mount, not both']);
    // The network volume goes to the domain's network-volume rules, which name it in REST terms.
    expect(
      (
        await refused(webPod('bad', { mounts: { network: [{ volumeId: 'nosuchvolume', path: '/runpod-volume' }] } }))
      ).join('\n'),
    ).toMatch(/^\$\.mounts\.network\[0\]\.volumeId: /);
    expect(await p.ctx.db.pod.count()).toBe(before);

    // Update and action bodies too, on a pod that exists (it need not run for this).
    const pod = await rest('POST', '/v2/pods', webPod('valid'));
    expect(pod.status).toBe(201);
    const id = pod.body.id as string;
    expect((await refused({ ports: ['99999/tcp'] }, `/v2/pods/${id}`, 'PATCH')).join('\n')).toMatch(
      /^\$\.ports: '99999\/tcp' is not port\/protocol/,
    );
    expect(await refused({ mounts: { persistent: { size: 1, path: '/data' } } }, `/v2/pods/${id}`, 'PATCH')).toEqual([
      '$.mounts.persistent: the pod was made without a persistent mount; the kind of mount is fixed when a pod is made',
    ]);
    expect(await refused({ image: 'UPPER/app' }, `/v2/pods/${id}`, 'PATCH')).toEqual([
      expect.stringMatching(/^\$\.image: /),
    ]);
    expect((await refused({ action: 'reboot' }, `/v2/pods/${id}/action`)).join('\n')).toMatch(/^\$\.action: /);
    expect((await refused(undefined, `/v2/pods/${id}/action`)).join('\n')).toMatch(/^\$: /);
    expect((await rest('GET', `/v2/pods/${id}`)).body).toMatchObject({
      image: IMAGE,
      ports: ['8080/http'],
      mounts: {},
    });
    // Names stay unique within the account.
    const dup = await rest('POST', '/v2/pods', webPod('valid'));
    expect(dup.status).toBe(409);
    const other = await rest('POST', '/v2/pods', webPod('valid-2'));
    expect((await rest('PATCH', `/v2/pods/${other.body.id}`, { name: 'valid' })).status).toBe(409);
    for (const podId of [id, other.body.id]) expect((await rest('DELETE', `/v2/pods/${podId}`)).status).toBe(204);
  }, 120_000);

  it('needs a key (401), the write scope for changes (403), and never shows another account its pods (404)', async () => {
    const r = await rest('POST', '/v2/pods', webPod('mine'));
    expect(r.status).toBe(201);
    const podId = r.body.id as string;

    const none = await rest('GET', `/v2/pods/${podId}`, undefined, null);
    expect(none.status).toBe(401);
    expect((await rest('GET', '/v2/pods', undefined, null)).status).toBe(401);
    expect((await rest('POST', '/v2/pods', webPod('anonymous'), null)).status).toBe(401);

    const admin = await p.ctx.db.account.findFirstOrThrow({ where: { email: 'admin@gantry.local' } });
    const readOnly = (await issueApiKey(p.ctx.db, admin.id, 'ro', ['READ'])).key;
    expect((await rest('GET', `/v2/pods/${podId}`, undefined, readOnly)).body.id).toBe(podId);
    expect((await rest('GET', '/v2/pods', undefined, readOnly)).body.pods.map((x: { id: string }) => x.id)).toContain(
      podId,
    );
    for (const [method, route, body] of [
      ['POST', '/v2/pods', webPod('read-only')],
      ['PATCH', `/v2/pods/${podId}`, { name: 'read-only' }],
      ['POST', `/v2/pods/${podId}/action`, { action: 'stop' }],
      ['POST', `/v2/pods/${podId}/stop`, undefined],
      ['DELETE', `/v2/pods/${podId}`, undefined],
    ] as const) {
      const refused = await rest(method, route, body, readOnly);
      expect(refused.status, `${method} ${route}`).toBe(403);
    }
    // A key limited to some endpoints reaches no pod, not even to read.
    const limited = (await issueApiKey(p.ctx.db, admin.id, 'limited', ['READ', 'WRITE'], undefined, [newId()])).key;
    expect((await rest('GET', `/v2/pods/${podId}`, undefined, limited)).status).toBe(403);
    expect((await rest('POST', '/v2/pods', webPod('limited'), limited)).status).toBe(403);

    const other = await p.ctx.db.account.create({
      data: { id: newId(), email: `${newId()}@example.test`, name: 'other' },
    });
    const otherKey = (await issueApiKey(p.ctx.db, other.id, 'o', ['READ', 'WRITE'])).key;
    expect((await rest('GET', '/v2/pods', undefined, otherKey)).body).toEqual({ pods: [] });
    for (const [method, route, body] of [
      ['GET', `/v2/pods/${podId}`, undefined],
      ['PATCH', `/v2/pods/${podId}`, { name: 'taken' }],
      ['POST', `/v2/pods/${podId}/action`, { action: 'stop' }],
      ['POST', `/v2/pods/${podId}/start`, undefined],
      ['DELETE', `/v2/pods/${podId}`, undefined],
    ] as const) {
      const hidden = await rest(method, route, body, otherKey);
      expect(hidden.status, `${method} ${route}`).toBe(404);
    }
    // Names are unique per account, not across accounts.
    const sameName = await rest('POST', '/v2/pods', webPod('mine'), otherKey);
    expect(sameName.status).toBe(201);
    expect((await rest('DELETE', `/v2/pods/${sameName.body.id}`, undefined, otherKey)).status).toBe(204);

    const row = await p.ctx.db.pod.findUniqueOrThrow({ where: { id: podId } });
    expect([row.name, row.desiredStatus]).toEqual(['mine', 'RUNNING']);
    expect((await rest('DELETE', `/v2/pods/${podId}`)).status).toBe(204);
  }, 120_000);
});
