/**
 * A fresh `flash init` project, untouched, deployed with the hosted service's tool against Gantry with
 * nothing but its URL and key variables changed, for Python 3.11 (flash's own `--python-version`
 * flag; 3.11 is the version of flash's three that Debian ships, and so the one the suite has a base
 * image of): its CPU queue resource (flash's default size,
 * cpu3c-1-2), its load-balanced resource (same) and its GPU resource (GpuType.ANY: every pool, and
 * the hosted service's data-center ids as `locations`) become endpoints, and each answers: a job
 * through the job API, `POST /process` through Gantry's proxy, a job on a GPU test host (stand-in
 * devices, no torch: the skeleton says the GPU is not available). `flash undeploy` removes them.
 *
 * The GPU host is registered in a data center named as one of the hosted service's (EU-RO-1), as an
 * operator may name theirs: of the ids flash sends, that one is kept and places the worker there;
 * the others, which Gantry does not have, are dropped.
 *
 * The CPU resources run on Debian's Python 3.11 with flash's packages installed by this machine's
 * pip (activities/runtime-packages.ts): no base with flash in it is named for them.
 *
 * A plain `flash deploy` builds for Python 3.12, whose base image this platform cannot get: its
 * first endpoint's save is refused with the sentence that names the base and its setting, and
 * flash's deploy fails with it.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { liveWorker } from '../../domain/workers/index.ts';
import { ensureFlashBaseImage } from '../support/flash-base-image.ts';
import { flashCli as runFlash } from '../support/flash-cli.ts';
import { startGpuTestHost, type GpuTestHost } from '../support/gpu-test-host.ts';
import { call, type TestPlatform } from '../support/platform.ts';
import { ensurePythonClients, FLASH_CLIENT_REQUIREMENTS } from '../support/python-clients.ts';
import {
  managedContainers,
  registerTestHost,
  removeManagedContainers,
  startAppsPlatform,
  until,
  type OneHostPlatform,
} from '../support/orchestration.ts';

let fixture: OneHostPlatform | undefined;
let gpuHost: GpuTestHost | undefined;
let gpuHostId: string | undefined;
let p: TestPlatform;
let python: string;
const root = mkdtempSync(path.join(tmpdir(), 'flash-init-'));
const home = path.join(root, 'home');
/** flash names the app after the project's directory. */
const project = path.join(root, 'freshflash');

/** `flash <args>` in `cwd`, as a user with nothing but the URL and key variables set runs it. */
const flashCli = (args: string[], cwd = project): ReturnType<typeof runFlash> =>
  runFlash({ python, project: cwd, home, url: p.url, key: p.adminKey }, args);

beforeAll(async () => {
  const [venv, base] = await Promise.all([
    ensurePythonClients({ requirements: FLASH_CLIENT_REQUIREMENTS }),
    ensureFlashBaseImage('3.11'),
  ]);
  python = venv;
  mkdirSync(home);
  // The CPU flash runtime is left to the platform: Debian's Python 3.11 base (the apps platform's
  // GANTRY_RUNTIME_BASE_IMAGE) with flash's packages installed by this machine's pip. The GPU one,
  // whose packages the platform leaves to the base, is made on a base that already has flash's
  // packages and asks for nothing more (no torch, as the skeleton expects).
  process.env.GANTRY_RUNTIME_GPU_BASE_IMAGE = base.replace(':3.11-', ':{python}-');
  process.env.GANTRY_RUNTIME_GPU_PACKAGES = 'runpod==1.12.0';
  fixture = await startAppsPlatform('flash-init-box', path.join(root, 'host-cache'));
  p = fixture.p;
  gpuHost = await startGpuTestHost('h100-and-rtx-4090.csv');
  gpuHostId = await registerTestHost(p, gpuHost, 'flash-init-gpu', { dataCenterId: 'EU-RO-1' });
}, 900_000);

afterAll(async () => {
  for (const v of ['GANTRY_RUNTIME_GPU_BASE_IMAGE', 'GANTRY_RUNTIME_GPU_PACKAGES']) delete process.env[v];
  await fixture?.stop();
  if (gpuHostId) removeManagedContainers([gpuHostId]);
  await gpuHost?.stop();
}, 180_000);

/** What the endpoint's workers are doing and what their containers printed last: for a timeout's message. */
async function workersState(endpointId: string): Promise<unknown> {
  const workers = await p.ctx.db.worker.findMany({
    where: { endpointId },
    select: { id: true, status: true, statusReason: true, hostId: true },
  });
  const logs = [fixture!.hostId, gpuHostId!]
    .flatMap((h) => managedContainers(h))
    .filter((c) => workers.some((w) => w.id === c.workerId))
    .map((c) => spawnSync('podman', ['logs', '--tail', '15', c.id], { encoding: 'utf8' }))
    .map((r) => `${r.stdout}${r.stderr}`.slice(-3000));
  return { workers, logs };
}

/** A job through the job API, waited for to its end. */
async function job(endpointId: string, input: unknown): Promise<{ status: string; output?: unknown }> {
  const submitted = await call(`${p.url}/v2/${endpointId}`, 'POST', '/run', { key: p.adminKey, body: { input } });
  expect(submitted.status, JSON.stringify(submitted.body)).toBe(200);
  return until(
    `job ${submitted.body.id} of ${endpointId}`,
    async () => {
      const s = await call(`${p.url}/v2/${endpointId}`, 'GET', `/status/${submitted.body.id}`, { key: p.adminKey });
      return ['COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT'].includes(s.body.status) ? s.body : undefined;
    },
    420_000,
    500,
    () => workersState(endpointId),
  );
}

describe('a fresh `flash init` project on Gantry', () => {
  it('deploys unchanged, its three resources answer, and undeploy removes them', async () => {
    const init = await flashCli(['init', 'freshflash'], root);
    expect(init.code, init.output).toBe(0);
    // The skeleton as flash makes it: the sizes and GPU choice this test is about.
    expect(readFileSync(path.join(project, 'cpu_worker.py'), 'utf8')).toContain('cpu="cpu3c-1-2"');
    expect(readFileSync(path.join(project, 'gpu_worker.py'), 'utf8')).toContain('gpu=GpuType.ANY');

    // As a user runs it: flash pip-installs the skeleton's requirements (runpod-flash and its
    // dependencies, compiled ones among them) for the Python it is told into the build.
    const deploy = await flashCli(['deploy', '--python-version', '3.11']);
    expect(deploy.code, deploy.output).toBe(0);
    const app = await p.ctx.db.app.findFirstOrThrow({ where: { name: 'freshflash' }, include: { environments: true } });
    const env = app.environments[0]!;
    const build = await p.ctx.db.build.findUniqueOrThrow({ where: { id: env.currentBuildId ?? '' } });
    expect([build.pythonVersion, build.size > 10_000_000n]).toEqual(['3.11', true]);
    const endpoints = await p.ctx.db.endpoint.findMany({
      where: { appEnvironmentId: env.id, deletingAt: null },
      orderBy: { name: 'asc' },
    });
    expect(endpoints.map((e) => e.name)).toEqual(['cpu_worker', 'gpu_worker', 'lb_worker']);
    const [cpu, gpu, lb] = endpoints as [(typeof endpoints)[0], (typeof endpoints)[0], (typeof endpoints)[0]];
    // flash's 1-vCPU default runs at the smallest size there is.
    for (const e of [cpu, lb])
      expect([e.name, e.cpuFlavorId, e.cpuVcpuCount, e.cpuMemoryGb]).toEqual([e.name, 'cpu3c', 2, 4]);
    expect([gpu.workersMin, gpu.workersMax, gpu.cpuFlavorId]).toEqual([0, 1, null]);
    expect([...gpu.gpuPools].sort()).toEqual([
      'ADA_24',
      'ADA_32_PRO',
      'ADA_48_PRO',
      'ADA_80_PRO',
      'AMPERE_16',
      'AMPERE_24',
      'AMPERE_48',
      'AMPERE_80',
      'BLACKWELL_180',
      'BLACKWELL_96',
      'HOPPER_141',
    ]);
    // Of the hosted service's eleven data centers flash named, the one Gantry has is kept.
    expect(gpu.locations).toBe('EU-RO-1');
    const listed = await call(p.url, 'POST', '/graphql', {
      key: p.adminKey,
      body: { query: '{ myself { endpoints { name instanceIds locations } } }' },
    });
    expect(listed.body.data.myself.endpoints).toEqual(
      expect.arrayContaining([
        { name: 'cpu_worker', instanceIds: ['cpu3c-2-4'], locations: '' },
        { name: 'gpu_worker', instanceIds: [], locations: 'EU-RO-1' },
        { name: 'lb_worker', instanceIds: ['cpu3c-2-4'], locations: '' },
      ]),
    );

    // All three at once: each scales up (lb_worker keeps one worker) and answers with the skeleton's code.
    const [cpuDone, lbAnswer, gpuDone] = await Promise.all([
      job(cpu.id, { input_data: { message: 'hi from gantry' } }),
      until(
        'POST /process on lb_worker',
        async () => {
          const r = await call(`${p.url}/lb/${lb.id}`, 'POST', '/process', {
            key: p.adminKey,
            body: { input_data: { text: 'two words' } },
          });
          return r.status === 200 ? r.body : undefined;
        },
        420_000,
        500,
        () => workersState(lb.id),
      ),
      job(gpu.id, { input_data: {} }),
    ]);
    expect(cpuDone, JSON.stringify(cpuDone)).toMatchObject({
      status: 'COMPLETED',
      output: { message: 'hi from gantry', platform: 'Linux', python_version: expect.stringMatching(/^3\.11\./) },
    });
    expect(lbAnswer).toMatchObject({ status: 'success', echo: { text: 'two words' }, timestamp: expect.any(String) });
    expect(gpuDone, JSON.stringify(gpuDone)).toMatchObject({
      status: 'COMPLETED',
      output: { message: 'Hello from GPU worker!', gpu: { available: false } },
    });
    expect((gpuDone.output as { gpu: { name: string } }).gpu.name).toMatch(/torch/);
    // The GPU job ran on the GPU host, with one of its GPUs.
    const gpuWorker = await p.ctx.db.worker.findFirstOrThrow({ where: { endpointId: gpu.id } });
    expect(gpuWorker.hostId).toBe(gpuHostId);
    expect(gpuHost!.gpus.map((g) => g.uuid)).toContain(gpuWorker.gpuUuids[0]);
    // A warm worker answers /runsync at once, with the skeleton's own greeting.
    const sync = await call(`${p.url}/v2/${cpu.id}`, 'POST', '/runsync', {
      key: p.adminKey,
      body: { input: { input_data: {} } },
    });
    expect(sync.body).toMatchObject({ status: 'COMPLETED', output: { message: 'Hello from CPU worker!' } });

    const undeploy = await flashCli(['undeploy', '--all', '--force']);
    expect(undeploy.code, undeploy.output).toBe(0);
    expect(undeploy.output).toContain('deleted 3/3 endpoints');
    expect(await p.ctx.db.endpoint.count({ where: { appEnvironmentId: env.id, deletingAt: null } })).toBe(0);
    // Their workers drain away, on both hosts.
    const ids = endpoints.map((e) => e.id);
    await until(
      'the undeployed endpoints without workers',
      async () => (await p.ctx.db.worker.count({ where: { endpointId: { in: ids }, ...liveWorker } })) === 0,
      120_000,
      500,
    );
    const left = [fixture!.hostId, gpuHostId!].flatMap((h) => managedContainers(h));
    expect(left.filter((c) => ids.includes(c.endpointId) && c.running)).toEqual([]);
  }, 1_200_000);

  it('stops a plain deploy (Python 3.12) at the endpoint no host can get the base of, naming it and its setting', async () => {
    const twelve = path.join(root, 'flashtwelve');
    const init = await flashCli(['init', 'flashtwelve'], root);
    expect(init.code, init.output).toBe(0);
    // flash's default Python: the build is made, and its first saveEndpoint is refused with the sentence.
    const started = Date.now();
    const deploy = await flashCli(['deploy'], twelve);
    expect(deploy.code, deploy.output).not.toBe(0);
    // It stops instead of waiting on workers that cannot start. Most of the time is the build and its
    // upload: 163-282 s in full runs on 2 shared cores, 407 s once under a heavier load.
    expect(Date.now() - started).toBeLessThan(540_000);
    // flash saves its resources at once: whichever is refused first names its own runtime's base and
    // setting, the GPU runtime's (this suite's flash base, per version) or the CPU flash runtime's.
    const gpuBase = process.env.GANTRY_RUNTIME_GPU_BASE_IMAGE!.replace('{python}', '3.12');
    const cpuBase = process.env.GANTRY_RUNTIME_BASE_IMAGE!.replace('{python}', '3.12');
    const named = deploy.output.includes(`could not get the base image ${gpuBase} `)
      ? { base: gpuBase, setting: 'GANTRY_RUNTIME_GPU_BASE_IMAGE' }
      : { base: cpuBase, setting: 'GANTRY_FLASH_RUNTIME_BASE_IMAGE' };
    expect(deploy.output).toContain(`could not get the base image ${named.base} of the Python 3.12 runtime`);
    expect(deploy.output).toContain('Debian ships no Python 3.12');
    expect(deploy.output).toContain(`name a base the hosts can pull with ${named.setting}`);
    const app = await p.ctx.db.app.findFirstOrThrow({
      where: { name: 'flashtwelve' },
      include: { environments: true },
    });
    const build = await p.ctx.db.build.findUniqueOrThrow({ where: { id: app.environments[0]!.currentBuildId ?? '' } });
    expect(build.pythonVersion).toBe('3.12');
    // Nothing that would take jobs it can never run was made.
    expect(
      await p.ctx.db.endpoint.count({ where: { appEnvironmentId: app.environments[0]!.id, deletingAt: null } }),
    ).toBe(0);
  }, 600_000);
});
