/**
 * The GPU path on a Docker host: a GPU test host (test/support/gpu-test-host.ts, `runtime: 'docker'`)
 * whose sessions reach a real dockerd (Debian's docker.io 20.10, started by the test on a socket of
 * its own) and whose GPUs are stand-ins: captured nvidia-smi answers, and the NVIDIA Container
 * Toolkit's `nvidia-container-cli` and `nvidia-container-runtime-hook`.
 *
 * What is checked: the probe reports Docker, the GPUs and `docker-gpus`; a one-GPU worker is
 * started with `--gpus device=<uuid>`, which the daemon turns into a device request and into
 * `NVIDIA_VISIBLE_DEVICES=<uuid>` for the prestart hook it runs (the stand-in records what it was
 * asked, and makes that GPU's stand-in device node in the container); a runsync job runs on it; a
 * second worker gets the other GPU. What is not: real devices, driver libraries or device cgroups
 * (the hook is a stand-in), and CDI on Docker (`--device nvidia.com/gpu=...` needs Docker 25; Debian
 * has 20.10).
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { probeHost } from '../../activities/host-probe.ts';
import { connectSsh } from '../../hostctl/ssh.ts';
import { startGpuTestHost, type GpuTestHost } from '../support/gpu-test-host.ts';
import { call, type TestPlatform } from '../support/platform.ts';
import {
  ensureOrchestrationWorkerImage,
  type OneHostPlatform,
  ORCHESTRATION_WORKER_IMAGE,
  startOneHostPlatform,
  until,
} from '../support/orchestration.ts';

describe('GPU workers on a Docker host with two H100s', () => {
  let fixture: OneHostPlatform | undefined;
  let p: TestPlatform;
  let host: GpuTestHost;

  beforeAll(async () => {
    ensureOrchestrationWorkerImage();
    fixture = await startOneHostPlatform('docker-gpu-box', {}, async () => {
      host = await startGpuTestHost('2x-h100-80gb-hbm3.csv', {
        runtime: 'docker',
        images: [ORCHESTRATION_WORKER_IMAGE],
      });
      return host;
    });
    ({ p } = fixture);
  }, 600_000);

  afterAll(async () => {
    await fixture?.stop();
  }, 120_000);

  const docker = (args: string[]) => {
    const r = host.dockerd!.docker(args);
    expect(r.status, r.stderr).toBe(0);
    return r.stdout;
  };

  const serving = (endpointId: string) =>
    p.ctx.db.worker.findMany({ where: { endpointId, status: { in: ['IDLE', 'RUNNING'] } }, orderBy: { id: 'asc' } });

  /** The worker's container in Docker: its id, the GPUs it asked the daemon for, and what it sees. */
  function container(workerId: string) {
    const id = docker(['ps', '--no-trunc', '--quiet', '--filter', `label=gantry.worker=${workerId}`]).trim();
    expect(id).toMatch(/^[0-9a-f]{64}$/);
    const requests = docker(['inspect', '--format', '{{json .HostConfig.DeviceRequests}}', id]);
    const view = JSON.parse(
      docker([
        'exec',
        id,
        'node',
        '-e',
        `const fs = require('fs'); const env = Object.fromEntries(fs.readFileSync('/proc/1/environ', 'utf8').split('\\0').filter(Boolean).map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)])); console.log(JSON.stringify({ dev: fs.readdirSync('/dev').filter((n) => n.startsWith('nvidia')).sort(), visible: env.NVIDIA_VISIBLE_DEVICES, count: env.RUNPOD_GPU_COUNT }))`,
      ]),
    ) as { dev: string[]; visible: string; count: string };
    return { id, requests: JSON.parse(requests) as Array<{ DeviceIDs: string[]; Capabilities: string[][] }>, view };
  }

  /** What the stand-in hook was asked: container id → NVIDIA_VISIBLE_DEVICES. */
  const hooked = (): Map<string, string> =>
    new Map(
      readFileSync(host.hookLog!, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((l) => l.split(' ') as [string, string]),
    );

  const indexOf = (uuid: string) => host.gpus.find((g) => g.uuid === uuid)!.index;
  const CONTROL_NODES = ['nvidia-uvm', 'nvidia-uvm-tools', 'nvidiactl'];

  it('probes Docker and its GPUs, gives each worker its own GPU through --gpus, and serves a job', async () => {
    const row = await p.ctx.db.host.findUniqueOrThrow({ where: { id: fixture!.hostId } });
    expect(row.containerRuntime).toBe('docker');
    expect(row.gpuMethod).toBe('docker-gpus');
    expect(row.probe).toMatchObject({ runtime: { name: 'docker' }, storage: { driver: 'overlay2' }, gpuHint: null });
    expect((row.gpus as Array<{ uuid: string }>).map((g) => g.uuid)).toEqual(host.gpus.map((g) => g.uuid));
    // The probe itself: the engine behind DOCKER_HOST wins over the machine's Podman, the toolkit's
    // CLI makes it a `--gpus` host, and no CDI is there to fall back on.
    const conn = await connectSsh({ host: host.host, port: host.port, user: host.user, privateKey: host.privateKey });
    try {
      const probe = await probeHost(conn);
      expect(probe.containerRuntime).toMatchObject({ name: 'docker', usable: true, podmanWrapper: false });
      expect(probe.runtimes.map((r) => [r.name, r.usable])).toEqual([
        ['docker', true],
        ['podman', true],
      ]);
      expect(probe.gpuPassthrough).toMatchObject({ method: 'docker-gpus', nvidiaContainerCliVersion: '1.17.8' });
      expect(probe.gpuPassthrough.cdiDevices).toEqual([]);
      expect(probe.gpus.map((g) => [g.uuid, g.pool])).toEqual(host.gpus.map((g) => [g.uuid, 'ADA_80_PRO']));
    } finally {
      conn.close();
    }

    const created = await call(p.url, 'POST', '/v2/serverless', {
      key: p.adminKey,
      body: {
        name: 'docker-gpus',
        image: ORCHESTRATION_WORKER_IMAGE,
        gpu: { pools: ['ADA_80_PRO'], count: 1 },
        workers: { min: 1, max: 2 },
      },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const endpointId = created.body.id as string;
    const [first] = await until('a serving worker', async () => {
      const w = await serving(endpointId);
      return w.length === 1 ? w : undefined;
    });
    expect(first!.gpuUuids).toHaveLength(1);
    const uuid = first!.gpuUuids[0]!;
    const c = container(first!.id);
    // The daemon got the device request `--gpus device=<uuid>` makes, and ran the hook with it.
    expect(c.requests).toEqual([expect.objectContaining({ DeviceIDs: [uuid], Capabilities: [['gpu']] })]);
    expect(hooked().get(c.id)).toBe(uuid);
    expect(c.view).toEqual({ dev: [`nvidia${indexOf(uuid)}`, ...CONTROL_NODES].sort(), visible: uuid, count: '1' });

    const run = await call(p.url, 'POST', `/v2/${endpointId}/runsync`, { key: p.adminKey, body: { input: { n: 1 } } });
    expect(run.body).toMatchObject({ status: 'COMPLETED', output: { echo: { n: 1 } } });

    // A second worker: the other GPU, asked for and handed to its container alone.
    const patched = await call(p.url, 'PATCH', `/v2/serverless/${endpointId}`, {
      key: p.adminKey,
      body: { workers: { min: 2, max: 2 } },
    });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    const second = await until('a second serving worker', async () => {
      const w = (await serving(endpointId)).find((x) => x.id !== first!.id);
      return w;
    });
    const other = second.gpuUuids[0]!;
    expect(second.gpuUuids).toHaveLength(1);
    expect(other).not.toBe(uuid);
    expect(new Set([uuid, other])).toEqual(new Set(host.gpus.map((g) => g.uuid)));
    const d = container(second.id);
    expect(d.requests).toEqual([expect.objectContaining({ DeviceIDs: [other] })]);
    expect(hooked().get(d.id)).toBe(other);
    expect(d.view.dev).toEqual([`nvidia${indexOf(other)}`, ...CONTROL_NODES].sort());

    expect((await call(p.url, 'DELETE', `/v2/serverless/${endpointId}`, { key: p.adminKey })).status).toBe(204);
    await until('no worker containers left', async () => docker(['ps', '--quiet']).trim() === '', 60_000);
  }, 300_000);
});
