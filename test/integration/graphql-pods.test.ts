/**
 * GraphQL pods end to end on real containers: an OpenSSH test host in front of Podman, the test
 * worker image (test/fixtures/lb-worker, an HTTP server on $PORT) run as a pod by the platform's
 * own workflows, reached on its published host port; stop, resume, replacement of a dead
 * container, terminate; validation, scopes and account isolation.
 */
import { spawnSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { podVolumeName } from '../../hostctl/containers.ts';
import { issueApiKey } from '../../domain/accounts/index.ts';
import { newId } from '../../domain/shared/index.ts';
import type { SshTestHost } from '../support/ssh-test-host.ts';
import type { TestPlatform } from '../support/platform.ts';
import { ensureLbWorkerImage, LB_WORKER_IMAGE } from '../support/lb.ts';
import { podVolumes, type OneHostPlatform, startOneHostPlatform, until } from '../support/orchestration.ts';
import { containerEnv, graphql, podContainers as podContainersOn } from '../support/pods.ts';
import { podWorkflowId } from '../../contracts/workflows.ts';

const IMAGE = LB_WORKER_IMAGE;
const POD_FIELDS =
  'id name imageName desiredStatus gpuCount env ports containerDiskInGb dockerArgs templateId machine { podHostId } runtime { uptimeInSeconds ports { ip isIpPublic privatePort publicPort type } }';

let fixture: OneHostPlatform | undefined;
let sshHost: SshTestHost;
let p: TestPlatform;
let hostId: string;

beforeAll(async () => {
  ensureLbWorkerImage();
  fixture = await startOneHostPlatform('pod-box');
  ({ p, sshHost, hostId } = fixture);
}, 600_000);

afterAll(async () => {
  await fixture?.stop();
}, 120_000);

const gql = (query: string, variables?: Record<string, unknown>, key: string | null = p.adminKey) =>
  graphql(p, query, variables, key);

const DEPLOY = `mutation Deploy($input: PodFindAndDeployOnDemandInput!) { podFindAndDeployOnDemand(input: $input) { ${POD_FIELDS} } }`;
const GET = `query Pod($podId: String!) { pod(input: {podId: $podId}) { ${POD_FIELDS} } }`;

async function deploy(input: Record<string, unknown>, key?: string) {
  return gql(DEPLOY, { input }, key);
}

/** The pod once its container runs and its first port answers on the host. */
async function runningPod(podId: string, notWorker?: string) {
  return until(
    'the pod running and answering on its port',
    async () => {
      const r = await gql(GET, { podId });
      const pod = r.data?.pod;
      const port = pod?.runtime?.ports?.[0];
      if (!port || (notWorker && pod.machine?.podHostId === notWorker)) return undefined;
      const res = await fetch(`http://${port.ip}:${port.publicPort}/health`, {
        signal: AbortSignal.timeout(2000),
      }).catch(() => undefined);
      if (res?.status !== 200) return undefined;
      return { pod, health: await res.json() };
    },
    120_000,
    250,
    async () => ({
      pod: (await gql(GET, { podId })).data?.pod,
      workers: await p.ctx.db.worker.findMany({
        where: { podId },
        select: { id: true, status: true, statusReason: true },
      }),
    }),
  );
}

const podContainers = (podId: string) => podContainersOn(hostId, podId);

describe('GraphQL pods on real containers', () => {
  it('deploys a pod whose container runs with its env and a mapped port, stops, resumes, survives its container dying, and terminates', async () => {
    const created = await deploy({
      name: 'web',
      imageName: IMAGE,
      gpuCount: 0,
      ports: '8080/http,9090/tcp',
      containerDiskInGb: 5,
      env: [
        { key: 'PORT', value: '8080' },
        { key: 'GREETING', value: 'hello pod' },
      ],
      // What clients of the hosted service send along; accepted, no effect.
      cloudType: 'ALL',
      templateId: null,
      volumeMountPath: '/workspace',
    });
    expect(created.errors, JSON.stringify(created.errors)).toBeUndefined();
    const pod = created.data.podFindAndDeployOnDemand;
    expect(pod).toMatchObject({
      name: 'web',
      imageName: IMAGE,
      desiredStatus: 'RUNNING',
      gpuCount: 0,
      ports: '8080/http,9090/tcp',
      containerDiskInGb: 5,
      dockerArgs: '',
      templateId: null,
    });
    // A JSON object in PostgreSQL: the order of the keys is its own.
    expect([...pod.env].sort()).toEqual(['GREETING=hello pod', 'PORT=8080']);
    // Durable before answered: the row and the workflow exist.
    expect(await p.ctx.db.pod.findUnique({ where: { id: pod.id } })).not.toBeNull();
    expect((await p.ctx.temporal.workflow.getHandle(podWorkflowId(pod.id)).describe()).status.name).toBe('RUNNING');

    // The name is unique within the account.
    const dup = await deploy({ name: 'web', imageName: IMAGE, gpuCount: 0 });
    expect(dup.errors[0].extensions.code).toBe('CONFLICT');
    expect(dup.errors[0].message).toMatch(/a pod named 'web' already exists/);

    const first = await runningPod(pod.id);
    // The app names itself after RUNPOD_POD_ID: the pod's id reached the container.
    expect(first.health).toEqual({ status: 'ok', worker: pod.id });
    expect(first.pod.runtime.ports).toEqual([
      { ip: sshHost.host, isIpPublic: false, privatePort: 8080, publicPort: expect.any(Number), type: 'http' },
      {
        ip: sshHost.host,
        isIpPublic: false,
        privatePort: 9090,
        publicPort: first.pod.runtime.ports[0].publicPort + 1,
        type: 'tcp',
      },
    ]);
    expect(first.pod.runtime.uptimeInSeconds).toBeGreaterThanOrEqual(0);
    const firstWorker = first.pod.machine.podHostId as string;
    const containers = podContainers(pod.id);
    expect(containers.map((c) => [c.workerId, c.running])).toEqual([[firstWorker, true]]);
    expect(containerEnv(containers[0]!.id)).toEqual(
      expect.arrayContaining([
        'GREETING=hello pod',
        'PORT=8080',
        `RUNPOD_POD_ID=${pod.id}`,
        `RUNPOD_TCP_PORT_9090=${first.pod.runtime.ports[1].publicPort}`,
      ]),
    );
    const listed = await gql('{ myself { pods { id name desiredStatus } } }');
    expect(listed.data.myself.pods).toContainEqual({ id: pod.id, name: 'web', desiredStatus: 'RUNNING' });

    // A container that dies is replaced by a new worker.
    spawnSync('podman', ['rm', '--force', '--time', '0', containers[0]!.id]);
    const replaced = await runningPod(pod.id, firstWorker);
    expect(replaced.health).toEqual({ status: 'ok', worker: pod.id });
    expect(replaced.pod.machine.podHostId).not.toBe(firstWorker);
    expect((await p.ctx.db.worker.findUnique({ where: { id: firstWorker } }))?.status).toBe('FAILED');

    // Stop: the container goes, the pod stays EXITED.
    const stopped = await gql(`mutation { podStop(input: {podId: "${pod.id}"}) { id desiredStatus } }`);
    expect(stopped.errors).toBeUndefined();
    expect(stopped.data.podStop).toEqual({ id: pod.id, desiredStatus: 'EXITED' });
    await until('the container gone after podStop', async () => podContainers(pod.id).length === 0, 60_000, 250);
    const afterStop = await gql(GET, { podId: pod.id });
    expect(afterStop.data.pod).toMatchObject({ desiredStatus: 'EXITED', runtime: null });
    const oldPort = replaced.pod.runtime.ports[0].publicPort as number;
    await expect(
      fetch(`http://${sshHost.host}:${oldPort}/health`, { signal: AbortSignal.timeout(2000) }),
    ).rejects.toThrow();

    // Resume: running again, on a new worker.
    const resumed = await gql(`mutation { podResume(input: {podId: "${pod.id}", gpuCount: 0}) { id desiredStatus } }`);
    expect(resumed.errors).toBeUndefined();
    expect(resumed.data.podResume).toEqual({ id: pod.id, desiredStatus: 'RUNNING' });
    const again = await runningPod(pod.id, replaced.pod.machine.podHostId);
    expect(again.health).toEqual({ status: 'ok', worker: pod.id });
    expect(podContainers(pod.id).filter((c) => c.running)).toHaveLength(1);

    // Terminate: answers null, the pod is not found at once, its container and row go.
    const terminated = await gql(`mutation { podTerminate(input: {podId: "${pod.id}"}) }`);
    expect(terminated.errors).toBeUndefined();
    expect(terminated.data).toEqual({ podTerminate: null });
    const gone = await gql(GET, { podId: pod.id });
    expect(gone.errors[0].extensions.code).toBe('NOT_FOUND');
    expect((await gql('{ myself { pods { id } } }')).data.myself.pods).not.toContainEqual({ id: pod.id });
    await until(
      'the container and the row gone after podTerminate',
      async () =>
        podContainers(pod.id).length === 0 && (await p.ctx.db.pod.findUnique({ where: { id: pod.id } })) === null,
      60_000,
      250,
    );
    await p.ctx.temporal.workflow.getHandle(podWorkflowId(pod.id)).result();

    // Its name is free again.
    const reused = await deploy({ name: 'web', imageName: IMAGE, gpuCount: 0 });
    expect(reused.errors).toBeUndefined();
    expect(
      (await gql(`mutation { podTerminate(input: {podId: "${reused.data.podFindAndDeployOnDemand.id}"}) }`)).errors,
    ).toBeUndefined();
  }, 300_000);

  it('keeps a pod volume across a dead container, stop and resume, on the host that holds it, and removes it with the pod', async () => {
    const created = await deploy({
      name: 'with-volume',
      imageName: IMAGE,
      gpuCount: 0,
      ports: '8080/http',
      env: [{ key: 'PORT', value: '8080' }],
      volumeInGb: 1,
      volumeMountPath: '/data',
    });
    expect(created.errors, JSON.stringify(created.errors)).toBeUndefined();
    const podId = created.data.podFindAndDeployOnDemand.id as string;
    const volume = podVolumeName(hostId, podId);
    const file = async (
      method: 'PUT' | 'GET',
      pod: { runtime: { ports: Array<{ ip: string; publicPort: number }> } },
      body?: string,
    ) => {
      const port = pod.runtime.ports[0]!;
      const r = await fetch(`http://${port.ip}:${port.publicPort}/file?path=/data/notes.txt`, { method, body });
      return { status: r.status, body: (await r.json()) as { content?: string } };
    };

    const first = await runningPod(podId);
    expect((await gql(`query { pod(input: {podId: "${podId}"}) { volumeInGb volumeMountPath } }`)).data.pod).toEqual({
      volumeInGb: 1,
      volumeMountPath: '/data',
    });
    expect((await p.ctx.db.pod.findUniqueOrThrow({ where: { id: podId } })).volumeHostId).toBe(hostId);
    expect(podVolumes(hostId)).toContain(volume);
    expect((await file('PUT', first.pod, 'written before')).status).toBe(200);

    // A dead container's replacement sees the file.
    const [container] = podContainers(podId);
    spawnSync('podman', ['rm', '--force', '--time', '0', container!.id]);
    const replaced = await runningPod(podId, first.pod.machine.podHostId);
    expect((await file('GET', replaced.pod)).body.content).toBe('written before');

    // So does the container after a stop and a resume.
    expect((await gql(`mutation { podStop(input: {podId: "${podId}"}) { id } }`)).errors).toBeUndefined();
    await until('the container gone after podStop', async () => podContainers(podId).length === 0, 60_000, 250);
    expect(podVolumes(hostId)).toContain(volume);
    // While the host holding the volume is away, the pod waits for it rather than starting elsewhere
    // on an empty volume (another host row, not READY, stands in for that host here).
    const away = await p.ctx.db.host.create({
      data: {
        id: newId(),
        name: `away-${newId()}`,
        address: '127.0.0.1',
        user: 'test',
        dataCenterId: 'dc-1',
        status: 'UNREACHABLE',
      },
    });
    await p.ctx.db.pod.update({ where: { id: podId }, data: { volumeHostId: away.id } });
    expect(
      (await gql(`mutation { podResume(input: {podId: "${podId}", gpuCount: 0}) { id } }`)).errors,
    ).toBeUndefined();
    const waiting = await until('the pod waiting for the host of its volume', async () =>
      (await p.ctx.db.worker.findMany({ where: { podId, status: 'PENDING' } })).find((w) =>
        w.statusReason?.includes(`waiting for host ${away.id}, which holds the pod's volume`),
      ),
    );
    expect(waiting.hostId).toBeNull();
    await p.ctx.db.pod.update({ where: { id: podId }, data: { volumeHostId: hostId } });
    await p.ctx.db.host.delete({ where: { id: away.id } });
    const resumed = await runningPod(podId, replaced.pod.machine.podHostId);
    expect((await file('GET', resumed.pod)).body.content).toBe('written before');

    // Terminate removes the volume with the pod.
    expect((await gql(`mutation { podTerminate(input: {podId: "${podId}"}) }`)).errors).toBeUndefined();
    const workerIds = (
      await p.ctx.db.worker.findMany({ where: { podId, startedAt: { not: null } }, select: { id: true } })
    ).map((w) => w.id);
    await until(
      'the pod row gone after podTerminate',
      async () => (await p.ctx.db.pod.findUnique({ where: { id: podId } })) === null,
      60_000,
      250,
    );
    expect(podVolumes(hostId)).not.toContain(volume);

    // The running time of each of its containers (three, or more where a start under load was retried)
    // stays metered (pod usage: no endpoint) after the pod and its worker rows are gone.
    const usage = await p.ctx.db.usageRecord.findMany({ where: { workerId: { in: workerIds } } });
    expect(workerIds.length).toBeGreaterThanOrEqual(3);
    expect(usage.map((u) => u.workerId).sort()).toEqual([...workerIds].sort());
    for (const u of usage) {
      expect(u.endpointId).toBeNull();
      expect(u.seconds).toBeGreaterThan(0);
      expect(u.endedAt.getTime()).toBeGreaterThan(u.startedAt.getTime());
    }
  }, 300_000);

  it("removes pod volumes the database no longer knows in the host's reconcile, and leaves other installations' alone", async () => {
    const orphan = podVolumeName(hostId, `nosuchpod${newId()}`);
    const foreign = `gantry-pod-otherhost${newId()}-somepod`;
    for (const v of [orphan, foreign]) expect(spawnSync('podman', ['volume', 'create', v]).status).toBe(0);
    try {
      await until(
        'the orphan volume removed by a reconcile',
        async () => !podVolumes(hostId).includes(orphan),
        60_000,
        500,
      );
      expect(spawnSync('podman', ['volume', 'exists', foreign]).status).toBe(0);
    } finally {
      spawnSync('podman', ['volume', 'rm', '--force', orphan, foreign]);
    }
  });

  it('takes defaults from a template, the request overriding them', async () => {
    const t = await gql(
      `mutation { saveTemplate(input: {name: "pod-tpl", imageName: "${IMAGE}", dockerArgs: "node /app/index.js", containerDiskInGb: 7, ports: "8080/http", env: [{key: "PORT", value: "8080"}, {key: "FROM", value: "template"}]}) { id } }`,
    );
    expect(t.errors).toBeUndefined();
    const templateId = t.data.saveTemplate.id;
    const r = await deploy({
      name: 'from-template',
      templateId,
      gpuCount: 0,
      env: [{ key: 'FROM', value: 'request' }],
    });
    expect(r.errors).toBeUndefined();
    const pod = r.data.podFindAndDeployOnDemand;
    expect(pod).toMatchObject({
      imageName: IMAGE,
      dockerArgs: 'node /app/index.js',
      containerDiskInGb: 7,
      ports: '8080/http',
      templateId,
    });
    expect([...pod.env].sort()).toEqual(['FROM=request', 'PORT=8080']);
    const running = await runningPod(pod.id);
    expect(running.health).toEqual({ status: 'ok', worker: pod.id });
    expect((await gql(`mutation { podTerminate(input: {podId: "${pod.id}"}) }`)).errors).toBeUndefined();
    await until(
      'the template pod gone',
      async () => (await p.ctx.db.pod.findUnique({ where: { id: pod.id } })) === null,
      60_000,
      250,
    );
  }, 180_000);

  it('refuses invalid input with clear messages and creates nothing', async () => {
    const before = await p.ctx.db.pod.count();
    const badPorts = await deploy({
      name: 'bad-ports',
      imageName: IMAGE,
      gpuCount: 0,
      ports: '8888/http,22/tcpx,70000/tcp',
    });
    expect(badPorts.errors[0].extensions.code).toBe('BAD_USER_INPUT');
    expect(badPorts.errors[0].extensions.errors).toEqual([
      "$.ports: '22/tcpx' is not port/protocol with a port 1-65535 and protocol http, tcp or udp",
      "$.ports: '70000/tcp' is not port/protocol with a port 1-65535 and protocol http, tcp or udp",
    ]);

    const noTemplate = await deploy({ name: 'no-tpl', templateId: 'nosuchtemplate', gpuCount: 0 });
    expect(noTemplate.errors[0].extensions.code).toBe('BAD_USER_INPUT');
    expect(noTemplate.errors[0].extensions.errors).toEqual([
      "$.templateId: no template 'nosuchtemplate'",
      '$.imageName: required (or a templateId whose template names the image)',
    ]);

    const noRegistry = await deploy({
      name: 'no-reg',
      imageName: IMAGE,
      gpuCount: 0,
      containerRegistryAuthId: 'nosuchregistry',
    });
    expect(noRegistry.errors[0].extensions.errors).toEqual([
      "$.containerRegistryAuthId: no registry credential 'nosuchregistry'",
    ]);

    // The test host has no GPU: no GPU pod could ever be placed.
    const tooMany = await deploy({ name: 'gpus', imageName: IMAGE, gpuCount: 2 });
    expect(tooMany.errors[0].extensions.code).toBe('BAD_USER_INPUT');
    expect(tooMany.errors[0].extensions.errors).toEqual([
      '$.gpuCount: 2 GPUs asked for, but no registered host has more than 0',
    ]);
    const unknownType = await deploy({
      name: 'gpus',
      imageName: IMAGE,
      gpuTypeId: 'NVIDIA GeForce RTX 4090',
      gpuCount: 1,
    });
    expect(unknownType.errors[0].extensions.errors).toEqual([
      "$.gpuTypeId: no registered host has a GPU of type 'NVIDIA GeForce RTX 4090' (the gpuTypes query lists the types there are)",
    ]);
    // Left out, gpuCount is 1, as in the hosted service.
    const defaultCount = await deploy({ name: 'gpus', imageName: IMAGE });
    expect(defaultCount.errors[0].extensions.errors).toEqual([
      '$.gpuCount: 1 GPUs asked for, but no registered host has more than 0',
    ]);

    const badEnv = await deploy({ name: 'bad-env', imageName: IMAGE, gpuCount: 0, env: [{ key: 'A-B', value: '1' }] });
    expect(badEnv.errors[0].extensions.code).toBe('BAD_USER_INPUT');
    expect(badEnv.errors[0].extensions.errors.join('\n')).toMatch(/\$\.env\[0\]\.key/);

    const unterminated = await deploy({ name: 'bad-args', imageName: IMAGE, gpuCount: 0, dockerArgs: 'node "open' });
    expect(unterminated.errors[0].extensions.errors).toEqual(['$.dockerArgs: unterminated " quote in args']);

    expect(await p.ctx.db.pod.count()).toBe(before);
  });

  it('needs a key (401), the write scope for mutations (403), and never shows another account its pods', async () => {
    const r = await deploy({
      name: 'mine',
      imageName: IMAGE,
      gpuCount: 0,
      ports: '8080/http',
      env: [{ key: 'PORT', value: '8080' }],
    });
    expect(r.errors).toBeUndefined();
    const podId = r.data.podFindAndDeployOnDemand.id as string;

    const none = await gql(GET, { podId }, null);
    expect(none.status).toBe(401);
    expect(none.errors[0].extensions.code).toBe('UNAUTHENTICATED');

    const admin = await p.ctx.db.account.findFirstOrThrow({ where: { email: 'admin@gantry.local' } });
    const readOnly = await issueApiKey(p.ctx.db, admin.id, 'ro', ['READ']);
    const read = await gql(GET, { podId }, readOnly.key);
    expect(read.errors).toBeUndefined();
    expect(read.data.pod.id).toBe(podId);
    for (const mutation of [
      `mutation { podFindAndDeployOnDemand(input: {name: "ro", imageName: "${IMAGE}", gpuCount: 0}) { id } }`,
      `mutation { podStop(input: {podId: "${podId}"}) { id } }`,
      `mutation { podResume(input: {podId: "${podId}"}) { id } }`,
      `mutation { podTerminate(input: {podId: "${podId}"}) }`,
    ]) {
      const refused = await gql(mutation, undefined, readOnly.key);
      expect(refused.errors?.[0]?.extensions.code, mutation).toBe('FORBIDDEN');
    }
    expect((await p.ctx.db.pod.findUnique({ where: { id: podId } }))?.desiredStatus).toBe('RUNNING');

    const other = await p.ctx.db.account.create({
      data: { id: newId(), email: `${newId()}@example.test`, name: 'other' },
    });
    const otherKey = (await issueApiKey(p.ctx.db, other.id, 'o', ['READ', 'WRITE'])).key;
    expect((await gql(GET, { podId }, otherKey)).errors[0].extensions.code).toBe('NOT_FOUND');
    expect((await gql('{ myself { pods { id } } }', undefined, otherKey)).data.myself.pods).toEqual([]);
    expect(
      (await gql(`mutation { podStop(input: {podId: "${podId}"}) { id } }`, undefined, otherKey)).errors[0].extensions
        .code,
    ).toBe('NOT_FOUND');
    expect(
      (await gql(`mutation { podTerminate(input: {podId: "${podId}"}) }`, undefined, otherKey)).errors[0].extensions
        .code,
    ).toBe('NOT_FOUND');
    // Names are unique per account, not across accounts.
    const sameName = await deploy({ name: 'mine', imageName: IMAGE, gpuCount: 0 }, otherKey);
    expect(sameName.errors).toBeUndefined();
    expect(
      (
        await gql(
          `mutation { podTerminate(input: {podId: "${sameName.data.podFindAndDeployOnDemand.id}"}) }`,
          undefined,
          otherKey,
        )
      ).errors,
    ).toBeUndefined();
    expect((await p.ctx.db.pod.findUnique({ where: { id: podId } }))?.desiredStatus).toBe('RUNNING');

    expect((await gql(`mutation { podTerminate(input: {podId: "${podId}"}) }`)).errors).toBeUndefined();
  }, 120_000);

  it('takes a GPU count a registered host has, waits (PENDING, with the reason) while none can take it, then gets the cards of its type', async () => {
    // A GPU box that is registered but unreachable: it counts for what could ever fit, not for placement.
    const gpuType = 'NVIDIA GeForce RTX 4090';
    await p.ctx.db.host.create({
      data: {
        id: newId(),
        name: `gpu-${newId()}`,
        address: '192.0.2.1',
        port: 1,
        user: 'root',
        dataCenterId: 'dc-2',
        status: 'UNREACHABLE',
        gpuPassthrough: true,
        gpuMethod: 'cdi',
        gpus: [1, 2].map((i) => ({
          uuid: `GPU-${i}`,
          name: gpuType,
          memoryMb: 24564,
          driverVersion: '550.54.15',
          pool: 'ADA_24',
        })),
      },
    });
    const three = await deploy({ name: 'gpu3', imageName: IMAGE, gpuTypeId: gpuType, gpuCount: 3 });
    expect(three.errors[0].extensions.errors).toEqual([
      `$.gpuCount: 3 GPUs of type '${gpuType}' asked for, but no registered host has more than 2`,
    ]);

    const two = await deploy({ name: 'gpu2', imageName: IMAGE, gpuTypeId: gpuType, gpuCount: 2 });
    expect(two.errors).toBeUndefined();
    const podId = two.data.podFindAndDeployOnDemand.id as string;
    expect(two.data.podFindAndDeployOnDemand).toMatchObject({ gpuCount: 2, desiredStatus: 'RUNNING', runtime: null });
    const pending = await until('the pod worker waiting for capacity', async () => {
      const w = await p.ctx.db.worker.findFirst({ where: { podId } });
      // The only GPU host is not READY: no READY host could take it, busy or not.
      return w?.status === 'PENDING' && w.statusReason?.startsWith('cannot be placed') ? w : undefined;
    });
    expect(pending.statusReason).toMatch(/2 free GPUs/);
    expect(pending.hostId).toBeNull();

    // Capacity appears: the pod's worker gets both cards of its type, by UUID. (The box itself does
    // not answer SSH, so the start fails after that; only the placement matters here.)
    await p.ctx.db.host.updateMany({
      where: { address: '192.0.2.1' },
      data: { status: 'READY', address: '127.0.0.1' },
    });
    const placed = await until('the pod worker placed on the GPU box', async () => {
      const w = await p.ctx.db.worker.findFirst({ where: { podId, hostId: { not: null } } });
      return w ?? undefined;
    });
    expect([...placed.gpuUuids].sort()).toEqual(['GPU-1', 'GPU-2']);
    expect(placed.gpuTypeId).toBe(gpuType);

    // Terminated: the worker stops, the pod goes.
    expect((await gql(`mutation { podTerminate(input: {podId: "${podId}"}) }`)).errors).toBeUndefined();
    await until(
      'the GPU pod gone',
      async () => (await p.ctx.db.pod.findUnique({ where: { id: podId } })) === null,
      90_000,
      250,
    );
  }, 120_000);
});
