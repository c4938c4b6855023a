/**
 * The GPU path on a GPU test host (test/support/gpu-test-host.ts): captured nvidia-smi answers and a
 * CDI spec in nvidia-ctk's layout whose device nodes are stand-ins, in front of this machine's real
 * Podman, which resolves and injects the devices. What is checked: the probe of each captured host,
 * placement by pool and GPU count, each container seeing the device nodes of its own GPUs, two
 * workers never sharing a GPU, a worker waiting with its reason, a freed GPU taken again, and a
 * rolling release of a GPU endpoint.
 */
import { spawnSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { probeHost } from '../../activities/host-probe.ts';
import { connectSsh } from '../../hostctl/ssh.ts';
import { startGpuTestHost, type GpuTestHost } from '../support/gpu-test-host.ts';
import { call, type TestPlatform } from '../support/platform.ts';
import { graphql } from '../support/pods.ts';
import {
  ensureOrchestrationWorkerImage,
  managedContainers,
  type OneHostPlatform,
  ORCHESTRATION_WORKER_IMAGE,
  startOneHostPlatform,
  until,
} from '../support/orchestration.ts';

async function probeOf(host: GpuTestHost) {
  const conn = await connectSsh({ host: host.host, port: host.port, user: host.user, privateKey: host.privateKey });
  try {
    return await probeHost(conn);
  } finally {
    conn.close();
  }
}

describe('the probe of a GPU host', () => {
  it('reads each captured nvidia-smi answer, the CDI devices and the spec version', async () => {
    const cases = [
      { fixture: 'h200-captured.csv', pools: ['HOPPER_141'], types: ['NVIDIA H200'] },
      { fixture: 'h100-80gb-hbm3.csv', pools: ['ADA_80_PRO'], types: ['NVIDIA H100 80GB HBM3'] },
      { fixture: '2x-h100-80gb-hbm3.csv', pools: ['ADA_80_PRO', 'ADA_80_PRO'], types: ['NVIDIA H100 80GB HBM3'] },
      {
        fixture: 'h100-and-rtx-4090.csv',
        pools: ['ADA_80_PRO', 'ADA_24'],
        types: ['NVIDIA H100 80GB HBM3', 'NVIDIA GeForce RTX 4090'],
      },
    ];
    for (const c of cases) {
      const host = await startGpuTestHost(c.fixture);
      try {
        const probe = await probeOf(host);
        expect(probe.gpuError, c.fixture).toBeUndefined();
        expect(probe.gpus.map((g) => g.pool)).toEqual(c.pools);
        expect(new Set(probe.gpus.map((g) => g.gpuTypeId))).toEqual(new Set(c.types));
        expect(probe.gpus.map((g) => g.uuid)).toEqual(host.gpus.map((g) => g.uuid));
        expect(new Set(probe.gpus.map((g) => g.uuid)).size).toBe(probe.gpus.length);
        expect(probe.cudaVersion).toBe('13.0');
        expect(probe.gpuPassthrough.method).toBe('cdi');
        expect(probe.gpuPassthrough.hint).toBeUndefined();
        expect(probe.gpuPassthrough.cdiDevices).toEqual(
          expect.arrayContaining(['nvidia.com/gpu=0', `nvidia.com/gpu=${host.gpus[0]!.uuid}`, 'nvidia.com/gpu=all']),
        );
        expect(probe.gpuPassthrough.cdiSpecVersions).toContainEqual({
          file: host.cdiSpec,
          version: '0.5.0',
          kind: 'nvidia.com/gpu',
        });
      } finally {
        await host.stop();
      }
    }

    // A driver that is not loaded: no GPUs, nvidia-smi's own words, no passthrough.
    const broken = await startGpuTestHost('driver-not-loaded.txt');
    try {
      const probe = await probeOf(broken);
      expect(probe.gpus).toEqual([]);
      expect(probe.gpuError).toMatch(
        /^nvidia-smi exited with 9: NVIDIA-SMI has failed because it couldn't communicate/,
      );
      expect(probe.gpuPassthrough.method).toBe('none');
    } finally {
      await broken.stop();
    }

    // A spec newer than this Podman reads (4.3 refuses anything after 0.5.0): said, and no passthrough.
    const podmanVersion = /(\d+\.\d+\.\d+)/.exec(spawnSync('podman', ['--version'], { encoding: 'utf8' }).stdout)![1]!;
    const tooNew = await startGpuTestHost('h200-captured.csv', { cdiVersion: '0.6.0' });
    try {
      const probe = await probeOf(tooNew);
      if (Number(podmanVersion.split('.')[0]) === 4 && Number(podmanVersion.split('.')[1]) < 6) {
        expect(probe.gpuPassthrough.method).toBe('none');
        expect(probe.gpuPassthrough.hint).toBe(
          `the CDI spec ${tooNew.cdiSpec} is version 0.6.0, newer than Podman ${podmanVersion} reads (0.5.0 at most): ` +
            'upgrade podman, or write the spec with a toolkit whose specs it reads',
        );
        // What the runtime itself says of such a spec.
        const run = spawnSync(
          'podman',
          [
            'run',
            '--rm',
            '--network',
            'none',
            '--device',
            `nvidia.com/gpu=${tooNew.gpus[0]!.uuid}`,
            ensureOrchestrationWorkerImage(),
          ],
          { encoding: 'utf8' },
        );
        expect(run.stderr).toMatch(/unresolvable CDI devices/);
      } else expect(probe.gpuPassthrough.method).toBe('cdi');
    } finally {
      await tooNew.stop();
    }
  }, 120_000);
});

describe('GPU workers on a host with two H100s', () => {
  let fixture: OneHostPlatform | undefined;
  let p: TestPlatform;
  let host: GpuTestHost;

  beforeAll(async () => {
    ensureOrchestrationWorkerImage();
    fixture = await startOneHostPlatform('gpu-box', {}, async () => {
      host = await startGpuTestHost('2x-h100-80gb-hbm3.csv');
      return host;
    });
    ({ p } = fixture);
  }, 600_000);

  afterAll(async () => {
    await fixture?.stop();
  }, 120_000);

  const create = async (name: string, gpu: { pools: string[]; count: number }, min: number, env = {}) => {
    const r = await call(p.url, 'POST', '/v2/serverless', {
      key: p.adminKey,
      body: { name, image: ORCHESTRATION_WORKER_IMAGE, gpu, env, workers: { min, max: Math.max(min, 1) } },
    });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    return r.body.id as string;
  };

  const serving = (endpointId: string) =>
    p.ctx.db.worker.findMany({ where: { endpointId, status: { in: ['IDLE', 'RUNNING'] } }, orderBy: { id: 'asc' } });

  const listed = async (endpointId: string) =>
    (await call(p.url, 'GET', `/v2/serverless/${endpointId}/workers`, { key: p.adminKey })).body.workers as Array<{
      id: string;
      status: string;
      statusReason: string | null;
    }>;

  /** What a worker's container sees of GPUs: its NVIDIA device nodes and variables. */
  function containerView(workerId: string): { dev: string[]; visible: string; count: string } {
    const c = managedContainers(fixture!.hostId).find((x) => x.workerId === workerId && x.running);
    if (!c) throw new Error(`no running container of worker ${workerId}`);
    const r = spawnSync(
      'podman',
      [
        'exec',
        c.id,
        'node',
        '-e',
        // The worker process's own environment: an exec'd process gets the container's configured
        // variables, without what CDI added to the process it started.
        `const fs = require('fs'); const env = Object.fromEntries(fs.readFileSync('/proc/1/environ', 'utf8').split('\\0').filter(Boolean).map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)])); console.log(JSON.stringify({ dev: fs.readdirSync('/dev').filter((n) => n.startsWith('nvidia')).sort(), visible: env.NVIDIA_VISIBLE_DEVICES, count: env.RUNPOD_GPU_COUNT }))`,
      ],
      { encoding: 'utf8' },
    );
    expect(r.status, r.stderr).toBe(0);
    return JSON.parse(r.stdout) as { dev: string[]; visible: string; count: string };
  }

  const indexOf = (uuid: string) => host.gpus.find((g) => g.uuid === uuid)!.index;
  const CONTROL_NODES = ['nvidia-uvm', 'nvidia-uvm-tools', 'nvidiactl'];

  it('places workers by pool and count on GPUs of their own, and says why the next one waits', async () => {
    const row = await p.ctx.db.host.findUniqueOrThrow({ where: { id: fixture!.hostId } });
    expect(row.gpuMethod).toBe('cdi');

    // Two one-GPU workers: each gets a GPU of its own and sees that one's device node alone.
    const pair = await create('pair', { pools: ['ADA_80_PRO'], count: 1 }, 2);
    const workers = await until('two serving workers', async () => {
      const w = await serving(pair);
      return w.length === 2 ? w : undefined;
    });
    const [a, b] = workers.map((w) => w.gpuUuids);
    expect(a).toHaveLength(1);
    expect(b).toHaveLength(1);
    expect(a![0]).not.toBe(b![0]);
    expect(new Set([...a!, ...b!])).toEqual(new Set(host.gpus.map((g) => g.uuid)));
    for (const w of workers) {
      const view = containerView(w.id);
      expect(view.dev).toEqual([`nvidia${indexOf(w.gpuUuids[0]!)}`, ...CONTROL_NODES].sort());
      // The toolkit's spec voids the variable for every CDI container: the devices are the GPUs.
      expect(view.visible).toBe('void');
      expect(view.count).toBe('1');
      expect(w.gpuTypeId).toBe('NVIDIA H100 80GB HBM3');
    }
    const run = await call(p.url, 'POST', `/v2/${pair}/runsync`, { key: p.adminKey, body: { input: { n: 1 } } });
    expect(run.body).toMatchObject({ status: 'COMPLETED', output: { echo: { n: 1 } } });
    // The host's answer names the GPUs held (the console's Hosts page counts the free ones from it).
    const hostView = await call(p.url, 'GET', `/v2/hosts/${fixture!.hostId}`, { key: p.adminKey });
    expect(new Set(hostView.body.gpusInUse)).toEqual(new Set([...a!, ...b!]));

    // A third GPU worker waits while both are held: THROTTLED in the API with the reason.
    const third = await create('third', { pools: ['ADA_80_PRO'], count: 1 }, 1);
    const waiting = await until('the third worker waiting with its reason', async () => {
      const [w] = await listed(third);
      return w?.status === 'THROTTLED' && w.statusReason?.startsWith('no capacity') ? w : undefined;
    });
    expect(waiting.statusReason).toBe(
      'no capacity: no READY host has 1 free GPU of pool ADA_80_PRO on one host (1 of 1 host READY, 2 GPUs of those pools, 0 free)',
    );
    // GraphQL says the same of the endpoint's workers (its `pods`).
    const gql = await graphql(p, 'query($id: String!) { myself { endpoint(id: $id) { pods { id statusReason } } } }', {
      id: third,
    });
    expect(gql.data.myself.endpoint.pods).toEqual([{ id: waiting.id, statusReason: waiting.statusReason }]);

    // Never placeable here: more GPUs than the host has, or a pool it lacks.
    const never: Array<[string, { pools: string[]; count: number }]> = [
      ['four', { pools: ['ADA_80_PRO'], count: 4 }],
      ['ada', { pools: ['ADA_24'], count: 1 }],
    ];
    for (const [name, gpu] of never) {
      const id = await create(name, gpu, 1);
      const [w] = await until(`${name}: cannot be placed`, async () => {
        const l = await listed(id);
        return l[0]?.statusReason?.startsWith('cannot be placed: ') ? l : undefined;
      });
      expect(w!.status).toBe('THROTTLED');
      expect((await call(p.url, 'DELETE', `/v2/serverless/${id}`, { key: p.adminKey })).status).toBe(204);
    }

    // Scaling the pair down frees a GPU; the waiting worker takes it.
    const patched = await call(p.url, 'PATCH', `/v2/serverless/${pair}`, {
      key: p.adminKey,
      body: { workers: { min: 1, max: 1 } },
    });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    const [placed] = await until(
      'the third worker on the freed GPU',
      async () => {
        const w = await serving(third);
        return w.length === 1 ? w : undefined;
      },
      120_000,
    );
    const [left] = await until('one worker of the pair left', async () => {
      const w = await serving(pair);
      return w.length === 1 ? w : undefined;
    });
    expect(placed!.gpuUuids).toHaveLength(1);
    expect(placed!.gpuUuids[0]).not.toBe(left!.gpuUuids[0]);
    expect(containerView(placed!.id).dev).toContain(`nvidia${indexOf(placed!.gpuUuids[0]!)}`);
    for (const id of [pair, third])
      expect((await call(p.url, 'DELETE', `/v2/serverless/${id}`, { key: p.adminKey })).status).toBe(204);
    await until('no workers left', async () => managedContainers(fixture!.hostId).every((c) => !c.running), 60_000);
  }, 400_000);

  it('gives a two-GPU worker both GPUs and rolls it to a new release', async () => {
    const both = await create('both', { pools: ['ADA_80_PRO'], count: 2 }, 1, { GANTRY_TEST_RELEASE: 'one' });
    const [w] = await until('a two-GPU worker', async () => {
      const x = await serving(both);
      return x.length === 1 ? x : undefined;
    });
    expect(new Set(w!.gpuUuids)).toEqual(new Set(host.gpus.map((g) => g.uuid)));
    expect(containerView(w!.id)).toMatchObject({ dev: ['nvidia0', 'nvidia1', ...CONTROL_NODES].sort(), count: '2' });

    // A new release with every GPU of the host held by the old one: the rollout replaces it in place.
    const patched = await call(p.url, 'PATCH', `/v2/serverless/${both}`, {
      key: p.adminKey,
      body: { env: { GANTRY_TEST_RELEASE: 'two' } },
    });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    await until(
      'release 2 completed',
      async () =>
        (await p.ctx.db.release.findFirst({ where: { endpointId: both, version: 2, status: 'COMPLETED' } })) ??
        undefined,
      180_000,
      500,
    );
    const run = await call(p.url, 'POST', `/v2/${both}/runsync`, { key: p.adminKey, body: { input: { n: 2 } } });
    expect(run.body).toMatchObject({ status: 'COMPLETED', output: { release: 'two' } });
    const [next] = await serving(both);
    expect(next!.id).not.toBe(w!.id);
    expect(new Set(next!.gpuUuids)).toEqual(new Set(host.gpus.map((g) => g.uuid)));
    expect((await call(p.url, 'DELETE', `/v2/serverless/${both}`, { key: p.adminKey })).status).toBe(204);
  }, 400_000);
});
