/**
 * From Python code to URLs, as a user does it: the real `gantry` CLI (a child process) in a temporary
 * project against the whole platform with an SSH test host in front of this machine's Podman.
 * Hosts build the runtime image from sdk/python/Containerfile on a Debian-made Python base
 * (test/support/python-base-image.ts; no registry is reachable here), workers fetch their artifact by a
 * signed URL, and every call goes through the public job API or the load-balancing proxy.
 *
 * The GPU template's endpoint is created and takes jobs, but the test host has no GPU, so nothing
 * runs them here: the queue runtime is exercised by the CPU template (the same code path).
 */
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, type TestPlatform } from '../support/platform.ts';
import { gantry, gantryInTerminal, tempDir } from '../support/cli.ts';
import { startGpuTestHost, type GpuTestHost } from '../support/gpu-test-host.ts';
import { ensurePythonBaseImage } from '../support/python-base-image.ts';
import {
  registerTestHost,
  removeManagedContainers,
  startAppsPlatform,
  until,
  type OneHostPlatform,
} from '../support/orchestration.ts';

let fixture: OneHostPlatform | undefined;
let p: TestPlatform;
/** Registered once the deploy without it has failed. */
let gpuHost: GpuTestHost | undefined;
let gpuHostId: string | undefined;
const root = tempDir('gantry-deploy-');
const home = path.join(root, 'home');
const project = path.join(root, 'shop');
const cli = (args: string[], cwd = project, env: Record<string, string | undefined> = {}, timeoutMs = 300_000) =>
  gantry(args, { cwd, home, env: { SERVICE_API_KEY: p.adminKey, GANTRY_API_URL: p.url, ...env }, timeoutMs });

beforeAll(async () => {
  // GPU resources' runtime image: on a base that has numpy (Debian's), so nothing is pip-installed;
  // torch is not there, which the last test relies on.
  await ensurePythonBaseImage('3.11', { extraPackages: ['python3-numpy'] });
  process.env.GANTRY_RUNTIME_GPU_BASE_IMAGE = 'localhost/gantry-python:{python}-python3-numpy';
  process.env.GANTRY_RUNTIME_GPU_PACKAGES = 'numpy';
  fixture = await startAppsPlatform('apps-box', path.join(root, 'host-cache'), ['3.11', '3.13']);
  p = fixture.p;
}, 900_000);

afterAll(async () => {
  delete process.env.GANTRY_RUNTIME_GPU_BASE_IMAGE;
  delete process.env.GANTRY_RUNTIME_GPU_PACKAGES;
  await fixture?.stop();
  if (gpuHostId) removeManagedContainers([gpuHostId]);
  await gpuHost?.stop();
}, 180_000);

interface DeployedEndpoint {
  resource: string;
  id: string;
  name: string;
  kind: 'queue' | 'lb';
  url: string;
  routes: Array<{ method: string; path: string }>;
}

async function deployJson(
  args: string[] = [],
  cwd = project,
): Promise<{
  deployment: {
    status: string;
    endpoints: DeployedEndpoint[];
    resources: Array<{ resource: string; state: string; release: number | null }>;
  };
  stderr: string;
}> {
  const r = await cli(['deploy', '--json', ...args], cwd);
  expect(r.code, r.stderr).toBe(0);
  return { ...JSON.parse(r.stdout), stderr: r.stderr };
}

/** Submits a job and waits for its end through the public job API. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- JSON
async function runJob(url: string, input: unknown, timeoutMs = 240_000): Promise<any> {
  const submitted = await call(url, 'POST', '/run', { key: p.adminKey, body: { input } });
  expect(submitted.status, JSON.stringify(submitted.body)).toBe(200);
  return until(
    `job ${submitted.body.id}`,
    async () => {
      const s = await call(url, 'GET', `/status/${submitted.body.id}`, { key: p.adminKey });
      return ['COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT'].includes(s.body.status) ? s.body : undefined;
    },
    timeoutMs,
    250,
  );
}

/** A load-balanced route, retried while the first worker starts (the proxy answers 503 until one is ready). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- JSON
async function lbCall(base: string, method: string, route: string, body?: unknown, timeoutMs = 240_000): Promise<any> {
  return until(
    `${method} ${route}`,
    async () => {
      const r = await call(base, method, route, { key: p.adminKey, body });
      return r.status === 200 ? r.body : undefined;
    },
    timeoutMs,
    500,
  );
}

describe('gantry init, build and deploy on real workers', () => {
  let endpoints: Record<string, DeployedEndpoint>;

  it("fails the deploy within a minute on hosts without the GPU worker's GPUs, naming it and why", async () => {
    const init = await gantry(['init', 'shop'], { cwd: root, home });
    expect(init.code, init.stderr).toBe(0);
    // The platform's one host has no GPU: the template's gpu-worker (ADA_24) could never run.
    const r = await cli(['deploy']);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain(
      'the release of gpu-worker (its workers cannot be placed: no READY host has 1 free GPU of pool ADA_24 on one host (1 of 1 host READY, 0 GPUs of those pools)) did not finish',
    );
    expect(r.stderr).toContain('Nothing of it stays: endpoints it created are removed');
    // Released with no worker kept is not ready: the deploy was still checking that a host could run it.
    expect(`${r.stdout}${r.stderr}`).not.toMatch(/gpu-worker release \d+: ready/);
    expect(`${r.stdout}${r.stderr}`).toMatch(/gpu-worker release \d+: released \(checking that a host can run it\)/);
    const d = await p.ctx.db.deployment.findFirstOrThrow({ orderBy: { createdAt: 'desc' } });
    expect(d.status).toBe('FAILED');
    expect(d.finishedAt!.getTime() - d.createdAt.getTime()).toBeLessThan(60_000);
    expect(await p.ctx.db.endpoint.count({ where: { name: { startsWith: 'shop-' }, deletingAt: null } })).toBe(0);

    // A GPU host with the card: the same deploy goes through (next test).
    gpuHost = await startGpuTestHost('h100-and-rtx-4090.csv');
    gpuHostId = await registerTestHost(p, gpuHost, 'gpu-box');
  }, 300_000);

  it('deploys the three template workers and each URL answers', async () => {
    const out = await deployJson();
    expect(out.deployment.status).toBe('SUCCEEDED');
    // Where each resource stood, in the answer and as events on stderr as it changed.
    expect(out.deployment.resources.map((r) => [r.resource, r.state, r.release])).toEqual([
      ['cpu-worker', 'ready', 1],
      ['gpu-worker', 'ready', 1],
      ['lb-worker', 'ready', 1],
    ]);
    // With --json, stderr is a JSON event a line: steps, and each resource as its state changed.
    const events = out.stderr
      .trim()
      .split('\n')
      .map(
        (line) =>
          JSON.parse(line) as { type: string; status?: string; text?: string; resource?: string; state?: string },
      );
    expect(events.every((e) => typeof e.type === 'string')).toBe(true);
    expect(events).toContainEqual(
      expect.objectContaining({ type: 'step', status: 'succeeded', text: expect.stringMatching(/^Uploaded build /) }),
    );
    for (const resource of ['cpu-worker', 'gpu-worker', 'lb-worker']) {
      const seen = events
        .filter((e) => e.type === 'resource' && e.resource === resource)
        .map(({ time: _time, ...e }: { time?: string; state?: string }) => e);
      expect(seen.at(-1)?.state, resource).toBe('ready');
      // An event per change: never the same one twice in a row.
      const same = seen.filter((e, i) => i > 0 && JSON.stringify(e) === JSON.stringify(seen[i - 1]));
      expect(same).toEqual([]);
    }
    endpoints = Object.fromEntries(out.deployment.endpoints.map((e) => [e.resource, e]));
    expect(Object.keys(endpoints).sort()).toEqual(['cpu-worker', 'gpu-worker', 'lb-worker']);
    expect(endpoints['lb-worker']!.routes).toEqual(
      expect.arrayContaining([
        { method: 'POST', path: '/process' },
        { method: 'GET', path: '/health' },
      ]),
    );

    // The queue-based CPU function, through /run and /status, then /runsync once it is warm.
    const job = await runJob(endpoints['cpu-worker']!.url, { a: 2, b: 3 });
    expect(job, JSON.stringify(job)).toMatchObject({ status: 'COMPLETED', output: { sum: 5 } });
    const sync = await call(endpoints['cpu-worker']!.url, 'POST', '/runsync', {
      key: p.adminKey,
      body: { input: { a: 40, b: 2 } },
    });
    expect(sync.body).toMatchObject({ status: 'COMPLETED', output: { sum: 42 } });
    // Bad input is the job's error, not a dead worker.
    const bad = await runJob(endpoints['cpu-worker']!.url, { a: 1 });
    expect(bad.status).toBe('FAILED');
    expect(JSON.stringify(bad)).toMatch(/b/);

    // The load-balanced routes.
    const base = endpoints['lb-worker']!.url;
    expect(await lbCall(base, 'POST', '/process', { text: 'one two three' })).toEqual({
      text: 'one two three',
      words: 3,
    });
    expect(await lbCall(base, 'GET', '/health')).toEqual({ status: 'ok' });
    expect((await call(base, 'GET', '/health')).status).toBe(401);

    // The GPU function runs on the GPU host's RTX 4090 (ADA_24), not on its H100.
    const gpu = await call(endpoints['gpu-worker']!.url, 'POST', '/runsync', {
      key: p.adminKey,
      body: { input: { prompt: 'a cat' } },
    });
    expect(gpu.body).toMatchObject({ status: 'COMPLETED', output: { prompt: 'a cat', steps: 20, tokens: 2 } });
    const ran = await p.ctx.db.worker.findFirstOrThrow({
      where: { endpointId: endpoints['gpu-worker']!.id, hostId: gpuHostId },
    });
    expect(ran.gpuUuids).toEqual([gpuHost!.gpus.find((g) => g.name === 'NVIDIA GeForce RTX 4090')!.uuid]);
  }, 900_000);

  it('rolls a source change out with no failed call on the way', async () => {
    const cpuFile = path.join(project, 'cpu_worker.py');
    writeFileSync(
      cpuFile,
      readFileSync(cpuFile, 'utf8').replace('return {"sum": a + b}', 'return {"sum": a + b, "version": 2}'),
    );
    const lbFile = path.join(project, 'lb_worker.py');
    writeFileSync(
      lbFile,
      readFileSync(lbFile, 'utf8').replace('return {"status": "ok"}', 'return {"status": "ok", "version": 2}'),
    );

    // Calls keep going while the release replaces the workers.
    let stop = false;
    const failures: string[] = [];
    let calls = 0;
    const loop = (async () => {
      while (!stop) {
        const [q, l] = await Promise.all([
          call(endpoints['cpu-worker']!.url, 'POST', '/runsync', { key: p.adminKey, body: { input: { a: 1, b: 1 } } }),
          call(endpoints['lb-worker']!.url, 'GET', '/health', { key: p.adminKey }),
        ]);
        calls++;
        if (q.status !== 200 || q.body.status !== 'COMPLETED')
          failures.push(`queue: ${q.status} ${JSON.stringify(q.body)}`);
        if (l.status !== 200) failures.push(`lb: ${l.status} ${JSON.stringify(l.body)}`);
      }
    })();
    try {
      const out = await deployJson();
      expect(out.deployment.status).toBe('SUCCEEDED');
      // The same endpoints (same URLs), new code.
      expect(Object.fromEntries(out.deployment.endpoints.map((e) => [e.resource, e.url]))).toEqual(
        Object.fromEntries(Object.values(endpoints).map((e) => [e.resource, e.url])),
      );
      await until(
        'the new code to answer',
        async () => {
          const r = await call(endpoints['cpu-worker']!.url, 'POST', '/runsync', {
            key: p.adminKey,
            body: { input: { a: 1, b: 1 } },
          });
          return r.body.output?.version === 2;
        },
        120_000,
      );
      expect(await lbCall(endpoints['lb-worker']!.url, 'GET', '/health')).toEqual({ status: 'ok', version: 2 });
    } finally {
      stop = true;
      await loop;
    }
    expect(calls).toBeGreaterThan(3);
    expect(failures).toEqual([]);
    const releases = await p.ctx.db.release.findMany({
      where: { endpointId: endpoints['cpu-worker']!.id },
      orderBy: { version: 'asc' },
    });
    expect(releases.at(-1)).toMatchObject({ version: 2, status: 'COMPLETED' });
  }, 900_000);

  it('leaves the environment on its previous build when a release fails', async () => {
    const before = (await call(p.url, 'GET', '/v2/apps/shop/environments/production', { key: p.adminKey })).body
      .currentBuildId;
    const cpuFile = path.join(project, 'cpu_worker.py');
    const good = readFileSync(cpuFile, 'utf8');
    writeFileSync(cpuFile, `${good}\nraise RuntimeError("broken at import")\n`);
    // Calls keep a worker of the good build busy, so the release has one to replace (and must not lose it).
    let stop = false;
    const failures: string[] = [];
    const loop = (async () => {
      while (!stop) {
        const q = await call(endpoints['cpu-worker']!.url, 'POST', '/runsync', {
          key: p.adminKey,
          body: { input: { a: 2, b: 2 } },
        });
        if (q.status !== 200 || q.body.status !== 'COMPLETED') failures.push(`${q.status} ${JSON.stringify(q.body)}`);
      }
    })();
    try {
      await until(
        'a worker of the good build',
        async () =>
          (await p.ctx.db.worker.count({
            where: { endpointId: endpoints['cpu-worker']!.id, status: { in: ['IDLE', 'RUNNING'] } },
          })) > 0,
        120_000,
      );
      const r = await cli(['deploy', '--env', 'production']);
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/cpu-worker/);
      expect(r.stderr).toMatch(/previous build/);
      // The release was followed as it went, and its end says why.
      expect(r.stderr).toMatch(/^ {2}cpu-worker release \d+: (starting|releasing)/m);
      expect(r.stderr).toMatch(/^ {2}cpu-worker release \d+: failed \(.+\)$/m);
    } finally {
      stop = true;
      await loop;
      writeFileSync(cpuFile, good);
    }
    expect(failures).toEqual([]);
    expect(
      (await call(p.url, 'GET', '/v2/apps/shop/environments/production', { key: p.adminKey })).body.currentBuildId,
    ).toBe(before);
    const answer = await call(endpoints['cpu-worker']!.url, 'POST', '/runsync', {
      key: p.adminKey,
      body: { input: { a: 1, b: 1 } },
    });
    expect(answer.body).toMatchObject({ status: 'COMPLETED', output: { sum: 2, version: 2 } });
    const releases = await p.ctx.db.release.findMany({
      where: { endpointId: endpoints['cpu-worker']!.id },
      orderBy: { version: 'asc' },
    });
    expect(releases.map((x) => x.status)).toContain('HALTED');
  }, 600_000);

  it('follows the environment rules and undeploys', async () => {
    // Rule 3: several environments and no --env: the command fails naming them.
    expect((await cli(['env', 'create', 'staging'])).code).toBe(0);
    const ambiguous = await cli(['deploy']);
    expect(ambiguous.code).toBe(1);
    expect(ambiguous.stderr).toMatch(/production/);
    expect(ambiguous.stderr).toMatch(/staging/);
    // With a terminal it is a question instead: Enter takes the first environment listed.
    const asked = await gantryInTerminal(['deploy'], {
      cwd: project,
      home,
      env: { SERVICE_API_KEY: p.adminKey, GANTRY_API_URL: p.url },
      when: /Deploy shop to which environment\?/,
      keys: '\r',
    });
    expect(asked.code, asked.output).toBe(0);
    expect(asked.output).toMatch(/to shop\/production/);
    // Rule 1: an app that does not exist is made with the named environment.
    const other = await deployJson(['--app', 'shop-two', '--env', 'dev']);
    expect(other.deployment.status).toBe('SUCCEEDED');
    expect(other.deployment.endpoints.map((e) => e.name).sort()).toEqual([
      'shop-two-dev-cpu-worker',
      'shop-two-dev-gpu-worker',
      'shop-two-dev-lb-worker',
    ]);
    const apps = await call(p.url, 'GET', '/v2/apps', { key: p.adminKey });
    expect(
      apps.body.apps.map((a: { name: string; environments: Array<{ name: string }> }) => [
        a.name,
        a.environments.map((e) => e.name),
      ]),
    ).toEqual([
      ['shop', ['production', 'staging']],
      ['shop-two', ['dev']],
    ]);

    const listed = await cli(['undeploy', 'list', '--json', '--env', 'production']);
    expect(listed.code, listed.stderr).toBe(0);
    expect(JSON.stringify(JSON.parse(listed.stdout))).toMatch(/shop-cpu-worker/);
    const one = await cli(['undeploy', 'gpu-worker', '--env', 'production']);
    expect(one.code, one.stderr).toBe(0);
    expect(
      (await call(p.url, 'GET', `/v2/serverless/${endpoints['gpu-worker']!.id}`, { key: p.adminKey })).status,
    ).toBe(404);
    // --all without a terminal and without --yes refuses; with --yes it removes the rest.
    expect((await cli(['undeploy', '--all', '--env', 'production'])).code).toBe(1);
    const all = await cli(['undeploy', '--all', '--yes', '--env', 'production']);
    expect(all.code, all.stderr).toBe(0);
    expect(
      (await call(p.url, 'GET', `/v2/serverless/${endpoints['cpu-worker']!.id}`, { key: p.adminKey })).status,
    ).toBe(404);
  }, 600_000);

  it('deploys for another Python version (3.13)', async () => {
    const dir = path.join(root, 'py313');
    expect((await gantry(['init', 'py313'], { cwd: root, home })).code).toBe(0);
    rmSync(path.join(dir, 'gpu_worker.py'));
    rmSync(path.join(dir, 'lb_worker.py'));
    writeFileSync(
      path.join(dir, 'cpu_worker.py'),
      'import platform\nfrom gantry import endpoint\n\n@endpoint(name="version", cpu="cpu3c-2-4")\ndef version() -> dict:\n    """Which Python runs me."""\n    return {"python": platform.python_version()}\n',
    );
    const out = await deployJson(['--python-version', '3.13'], dir);
    const [e] = out.deployment.endpoints;
    const job = await runJob(e!.url, {});
    expect(job.output.python).toMatch(/^3\.13\./);
  }, 600_000);

  it('refuses at once a Python (3.12) whose base no host can get, naming the base and its setting', async () => {
    const dir = path.join(root, 'py313');
    const before = await p.ctx.db.deployment.count();
    const r = await cli(['deploy', '--python-version', '3.12'], dir);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('could not get the base image localhost/gantry-python:3.12 of the Python 3.12 runtime');
    expect(r.stderr).toContain('Debian ships no Python 3.12');
    expect(r.stderr).toContain('name a base the hosts can pull with GANTRY_RUNTIME_BASE_IMAGE');
    // Refused before anything was written: no deployment, the 3.13 build still serves.
    expect(await p.ctx.db.deployment.count()).toBe(before);
  }, 300_000);

  it('says clearly what is wrong: a refused key, a broken file', async () => {
    const wrong = await cli(['deploy'], project, { SERVICE_API_KEY: 'gntr_not_a_real_key_0000000000000000000000' });
    expect(wrong.code).toBe(1);
    expect(wrong.stderr.trim().split('\n').at(-1)).toMatch(/key/i);
    writeFileSync(path.join(project, 'broken.py'), 'from gantry import endpoint\n\ndef oops(:\n    pass\n');
    const broken = await cli(['deploy', '--env', 'production']);
    expect(broken.code).toBe(1);
    expect(broken.stderr).toMatch(/broken\.py:3/);
  }, 120_000);
});

describe('what a GPU function may import without shipping it', () => {
  const gpuOnly = path.join(root, 'gpuonly');

  it('runs a GPU-only project importing numpy from the GPU runtime image, and refuses torch, which that image lacks', async () => {
    expect((await gantry(['init', 'gpuonly'], { cwd: root, home })).code).toBe(0);
    for (const f of ['cpu_worker.py', 'lb_worker.py']) rmSync(path.join(gpuOnly, f));
    const worker = (imports: string) =>
      `${imports}\nfrom gantry import endpoint\n\n\n@endpoint(name="gpu-worker", gpu=["ADA_24"], workers=(2, 2), idle_timeout=5)\n` +
      'def generate(n: int = 3) -> dict:\n    return {"numpy": numpy.__version__, "sum": int(numpy.arange(n).sum())}\n';
    writeFileSync(path.join(gpuOnly, 'gpu_worker.py'), worker('import numpy'));
    const out = await deployJson([], gpuOnly);
    expect(out.deployment.status).toBe('SUCCEEDED');
    const url = out.deployment.endpoints.find((e) => e.resource === 'gpu-worker')!.url;
    const sync = await call(url, 'POST', '/runsync', { key: p.adminKey, body: { input: { n: 5 } } });
    expect(sync.body).toMatchObject({ status: 'COMPLETED', output: { sum: 10, numpy: expect.any(String) } });
    // Two workers kept, one RTX 4090 here: the second waits, and `gantry env show` says why.
    await until('the second worker waiting for the GPU', async () => {
      const r = await call(p.url, 'GET', `/v2/serverless/${out.deployment.endpoints[0]!.id}/workers`, {
        key: p.adminKey,
      });
      return (r.body.workers as Array<{ statusReason: string | null }>).some((w) =>
        w.statusReason?.startsWith('no capacity'),
      );
    });
    const shown = await cli(['env', 'show', 'production'], gpuOnly);
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toMatch(
      /gpu-worker +\S+ +THROTTLED +no capacity: no READY host has 1 free GPU of pool ADA_24 on one host \(2 of 2 hosts READY, 1 GPU of those pools, 0 free\)/,
    );
    expect(shown.stdout, shown.stdout).toMatch(/gpu-worker +\S+ +(INITIALIZING|IDLE|RUNNING)\b/);
    // numpy came from the image: the artifact left it out.
    const build = await p.ctx.db.build.findFirstOrThrow({ orderBy: { createdAt: 'desc' } });
    expect((build.manifest as { excluded: string[] }).excluded).toContain('numpy');

    // torch is left out as well, but this platform's GPU image has numpy alone: refused, saying so.
    writeFileSync(path.join(gpuOnly, 'gpu_worker.py'), worker('import numpy\nimport torch'));
    const refused = await cli(['deploy'], gpuOnly);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain(
      'gpu-worker imports torch, left out of the artifact as preinstalled, but its GPU runtime image ' +
        '(localhost/gantry-python:3.11-python3-numpy with numpy) does not have it',
    );
    // The endpoint stays on the build that works.
    const again = await call(url, 'POST', '/runsync', { key: p.adminKey, body: { input: { n: 4 } } });
    expect(again.body).toMatchObject({ status: 'COMPLETED', output: { sum: 6 } });
  }, 600_000);
});
