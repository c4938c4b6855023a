/**
 * Endpoints made by the hosted service's deploy tool actually serve on Gantry: `flash deploy` of the
 * fixture project (test/fixtures/flash-app), then a job on its queue resource and a request to its
 * load-balanced resource, each answered by a real worker on the SSH test host. Their endpoints name
 * flash's images (runpod/flash-cpu, runpod/flash-lb-cpu), which no registry here serves; Gantry runs
 * its flash runtime in their place (gantry.flash of sdk/python, built on the host on a base with flash's
 * packages: test/support/flash-base-image.ts), which fetches the environment's active build by a
 * signed URL, checks it and serves the resource's generated handler.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureFlashBaseImage } from '../support/flash-base-image.ts';
import { call, type TestPlatform } from '../support/platform.ts';
import { flashCli as runFlash } from '../support/flash-cli.ts';
import { ensurePythonClients, FLASH_CLIENT_REQUIREMENTS } from '../support/python-clients.ts';
import { managedContainers, startAppsPlatform, until, type OneHostPlatform } from '../support/orchestration.ts';

const FIXTURE = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'fixtures', 'flash-app');

let fixture: OneHostPlatform | undefined;
let p: TestPlatform;
let python: string;
const root = mkdtempSync(path.join(tmpdir(), 'flash-workers-'));
const home = path.join(root, 'home');
/** flash names the app after the project's directory. */
const project = path.join(root, 'flashwork');

beforeAll(async () => {
  const [venv, base] = await Promise.all([
    ensurePythonClients({ requirements: FLASH_CLIENT_REQUIREMENTS }),
    ensureFlashBaseImage(),
  ]);
  python = venv;
  mkdirSync(home);
  mkdirSync(project);
  cpSync(FIXTURE, project, { recursive: true });
  process.env.GANTRY_FLASH_RUNTIME_BASE_IMAGE = base;
  fixture = await startAppsPlatform('flash-workers-box', path.join(root, 'host-cache'));
  p = fixture.p;
}, 900_000);

afterAll(async () => {
  delete process.env.GANTRY_FLASH_RUNTIME_BASE_IMAGE;
  await fixture?.stop();
}, 180_000);

/** `flash <args>` in the project, as a user with nothing but the URL and key variables set runs it. */
const flashCli = (args: string[]): ReturnType<typeof runFlash> =>
  runFlash({ python, project, home, url: p.url, key: p.adminKey }, args);

/** What the endpoint's workers are doing and what their containers printed last: for a timeout's message. */
async function workersState(endpointId: string): Promise<unknown> {
  const workers = await p.ctx.db.worker.findMany({
    where: { endpointId },
    select: { id: true, status: true, statusReason: true },
  });
  const logs = managedContainers(fixture!.hostId)
    .filter((c) => workers.some((w) => w.id === c.workerId))
    .map((c) => spawnSync('podman', ['logs', '--tail', '15', c.id], { encoding: 'utf8' }))
    .map((r) => `${r.stdout}${r.stderr}`.slice(-3000));
  return { workers, logs };
}

describe("flash's endpoints on Gantry's workers", () => {
  it('answers a job on the queue resource and a request to the load-balanced one with the functions’ results', async () => {
    // Python 3.11: the version this machine's base images have (flash's default is 3.12).
    const deploy = await flashCli(['deploy', '--no-deps', '--python-version', '3.11']);
    expect(deploy.code, deploy.output).toBe(0);
    const app = await p.ctx.db.app.findFirstOrThrow({ where: { name: 'flashwork' }, include: { environments: true } });
    const env = app.environments[0]!;
    const build = await p.ctx.db.build.findUniqueOrThrow({ where: { id: env.currentBuildId ?? '' } });
    const [cpu, lb] = await p.ctx.db.endpoint.findMany({
      where: { appEnvironmentId: env.id, deletingAt: null },
      orderBy: { name: 'asc' },
    });
    // The endpoints keep flash's image names (flash names its default Python's whatever the build's
    // is); what runs is Gantry's flash runtime of the build's Python version.
    expect(build.pythonVersion).toBe('3.11');
    expect([cpu!.name, cpu!.image]).toEqual(['cpu_worker', 'runpod/flash-cpu:py3.12-latest']);
    expect([lb!.name, lb!.image]).toEqual(['lb_worker', 'runpod/flash-lb-cpu:py3.12-latest']);

    // The queue resource: scaled from zero by the job, the fixture's function's own answer.
    const submitted = await call(`${p.url}/v2/${cpu!.id}`, 'POST', '/run', {
      key: p.adminKey,
      body: { input: { input_data: { message: 'hi from gantry' } } },
    });
    expect(submitted.status, JSON.stringify(submitted.body)).toBe(200);
    const done = await until(
      `the cpu_worker job ${submitted.body.id}`,
      async () => {
        const s = await call(`${p.url}/v2/${cpu!.id}`, 'GET', `/status/${submitted.body.id}`, { key: p.adminKey });
        return ['COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT'].includes(s.body.status) ? s.body : undefined;
      },
      420_000,
      500,
      () => workersState(cpu!.id),
    );
    expect(done.status, JSON.stringify(done)).toBe('COMPLETED');
    expect(done.output).toEqual({ message: 'hi from gantry', worker: 'cpu' });
    // A warm worker answers /runsync at once.
    const sync = await call(`${p.url}/v2/${cpu!.id}`, 'POST', '/runsync', {
      key: p.adminKey,
      body: { input: { input_data: {} } },
    });
    expect(sync.body).toMatchObject({ status: 'COMPLETED', output: { message: 'hello', worker: 'cpu' } });

    // The worker ran Gantry's flash runtime, with the build staged where flash's workers keep it.
    const worker = managedContainers(fixture!.hostId).find((c) => c.endpointId === cpu!.id && c.running);
    expect(worker, 'the cpu_worker container').toBeDefined();
    const image = spawnSync('podman', ['inspect', '--format', '{{.ImageName}}', worker!.id], { encoding: 'utf8' });
    expect(image.stdout.trim()).toMatch(/^localhost\/gantry-flash-runtime:py3\.11-[0-9a-f]{12}$/);
    const staged = spawnSync('podman', ['exec', worker!.id, 'sha256sum', '/root/.runpod/artifact.tar.gz'], {
      encoding: 'utf8',
    });
    expect(staged.stdout.split(' ')[0], staged.stderr).toBe(build.sha256);

    // The load-balanced resource, through Gantry's proxy: scaled from zero by the request.
    const echoed = await until(
      'POST /process on lb_worker',
      async () => {
        const r = await call(`${p.url}/lb/${lb!.id}`, 'POST', '/process', {
          key: p.adminKey,
          body: { input_data: { text: 'two words' } },
        });
        return r.status === 200 ? r.body : undefined;
      },
      300_000,
      500,
      () => workersState(lb!.id),
    );
    expect(echoed).toEqual({ status: 'success', echo: { text: 'two words' } });
    const health = await call(`${p.url}/lb/${lb!.id}`, 'GET', '/health', { key: p.adminKey });
    expect([health.status, health.body]).toEqual([200, { status: 'healthy' }]);
    // Without a key the proxy refuses.
    expect((await call(`${p.url}/lb/${lb!.id}`, 'GET', '/health')).status).toBe(401);

    // New code deployed again: the environment's endpoints roll (docs/apps.md "Releases"), and the
    // queue resource's new workers run the new build.
    const source = path.join(project, 'cpu_worker.py');
    writeFileSync(source, readFileSync(source, 'utf8').replace('"worker": "cpu"', '"worker": "cpu-v2"'));
    const again = await flashCli(['deploy', '--no-deps', '--python-version', '3.11']);
    expect(again.code, again.output).toBe(0);
    const newBuildId = (await p.ctx.db.appEnvironment.findUniqueOrThrow({ where: { id: env.id } })).currentBuildId;
    expect(newBuildId).not.toBe(build.id);
    for (const e of [cpu!, lb!]) {
      const releases = await p.ctx.db.release.findMany({ where: { endpointId: e.id } });
      const changes = releases.flatMap((r) => r.changes as Array<{ field: string; old: unknown; new: unknown }>);
      expect(changes, e.name).toContainEqual({ field: 'build', old: build.id, new: newBuildId });
    }
    const v2 = await until(
      'cpu_worker answering with the new code',
      async () => {
        const r = await call(`${p.url}/v2/${cpu!.id}`, 'POST', '/runsync', {
          key: p.adminKey,
          body: { input: { input_data: {} } },
        });
        return r.body?.output?.worker === 'cpu-v2' ? r.body : undefined;
      },
      420_000,
      1_000,
      () => workersState(cpu!.id),
    );
    expect(v2.output).toEqual({ message: 'hello', worker: 'cpu-v2' });
  }, 1_200_000);
});
