/**
 * CPU endpoints and container disk limits on real containers (OpenSSH test hosts in front of this
 * machine's Podman): CPU instances applied as the container's CPU and memory limits, reserved on
 * their host and billed per vCPU-hour; a worker that writes more than its disk is stopped by the
 * watchdog on a host whose storage has no size option (this machine's overlay on ext4).
 */
import { spawnSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { priceTable, cpuRate } from '../../domain/billing/index.ts';
import { startSshTestHost, type SshTestHost } from '../support/ssh-test-host.ts';
import { call, type TestPlatform } from '../support/platform.ts';
import {
  ensureOrchestrationWorkerImage,
  ORCHESTRATION_WORKER_IMAGE,
  registerTestHost,
  removeManagedContainers,
  startOneHostPlatform,
  until,
  type OneHostPlatform,
} from '../support/orchestration.ts';
import { liveWorker } from '../../domain/workers/index.ts';

const IMAGE = ORCHESTRATION_WORKER_IMAGE;
let fixture: OneHostPlatform | undefined;
let p: TestPlatform;
let hostId: string;
let strictHost: SshTestHost | undefined;
let strictHostId = '';

beforeAll(async () => {
  ensureOrchestrationWorkerImage();
  fixture = await startOneHostPlatform('cpu-box');
  ({ p, hostId } = fixture);
  // A host that reserves no more than it has (no overcommit label), alone in its country.
  strictHost = await startSshTestHost();
  expect((await call(p.url, 'PUT', '/v2/datacenters/dc-no', { key: p.adminKey, body: { country: 'NO' } })).status).toBe(
    200,
  );
  strictHostId = await registerTestHost(p, strictHost, 'strict-box', { dataCenterId: 'dc-no', labels: {} });
}, 600_000);

afterAll(async () => {
  await fixture?.stop();
  if (strictHostId) removeManagedContainers([strictHostId]);
  await strictHost?.stop();
}, 120_000);

const liveWorkers = (endpointId: string) =>
  p.ctx.db.worker.findMany({ where: { endpointId, ...liveWorker }, orderBy: { createdAt: 'asc' } });

async function readyWorker(endpointId: string) {
  return until(
    `a ready worker of ${endpointId}`,
    async () => (await liveWorkers(endpointId)).find((w) => w.status === 'IDLE'),
    90_000,
    200,
    () => liveWorkers(endpointId),
  );
}

function hostConfig(workerId: string): { NanoCpus: number; Memory: number } {
  return JSON.parse(spawnSync('podman', ['inspect', `gantry-${workerId}`], { encoding: 'utf8' }).stdout)[0].HostConfig;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- GraphQL answers are arbitrary JSON
async function gql(query: string, variables?: Record<string, unknown>): Promise<any> {
  const r = await call(p.url, 'POST', `/graphql?api_key=${encodeURIComponent(p.adminKey)}`, {
    body: { query, variables },
  });
  return r.body;
}

const SAVE = `mutation S($input: EndpointInput!) { saveEndpoint(input: $input) { id gpuIds gpuCount instanceIds locations } }`;

async function template(name: string): Promise<string> {
  const t = await call(p.url, 'POST', '/v2/templates', {
    key: p.adminKey,
    body: { name, image: IMAGE, serverless: true },
  });
  expect(t.status, JSON.stringify(t.body)).toBe(201);
  return t.body.id as string;
}

describe('CPU endpoints', () => {
  it("REST: leaving out gpu makes a CPU endpoint of the default size, applied as the container's limits; cpu stays read-only", async () => {
    const r = await call(p.url, 'POST', '/v2/serverless', {
      key: p.adminKey,
      body: { name: 'rest-cpu', image: IMAGE, workers: { min: 1, max: 1 } },
    });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    expect(r.body).toMatchObject({ gpu: null, cpu: { id: 'cpu3c', vcpuCount: 2, memory: 4 } });
    const w = await readyWorker(r.body.id);
    expect(w.cpuFlavorId).toBe('cpu3c-2-4');
    expect(hostConfig(w.id)).toMatchObject({ NanoCpus: 2e9, Memory: 4 * 1024 ** 3 });

    const withCpu = await call(p.url, 'POST', '/v2/serverless', {
      key: p.adminKey,
      body: { name: 'rest-cpu-2', image: IMAGE, cpu: { id: 'cpu3c', vcpuCount: 4, memory: 8 } },
    });
    expect(withCpu.status).toBe(400);
    expect(withCpu.body.detail).toMatch(/`cpu` is read-only: leave `gpu` out/);
    const patchCpu = await call(p.url, 'PATCH', `/v2/serverless/${r.body.id}`, {
      key: p.adminKey,
      body: { cpu: { id: 'cpu3g' } },
    });
    expect(patchCpu.status).toBe(400);
    // Other fields of a CPU endpoint change as for any endpoint.
    const patched = await call(p.url, 'PATCH', `/v2/serverless/${r.body.id}`, {
      key: p.adminKey,
      body: { workers: { min: 0, max: 0 } },
    });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    expect(patched.body.cpu).toEqual({ id: 'cpu3c', vcpuCount: 2, memory: 4 });
  });

  it('GraphQL: saveEndpoint(instanceIds) names the instance; bad instances are refused with the rule', async () => {
    const tpl = await template('cpu-tpl');
    const saved = await gql(SAVE, {
      input: {
        name: 'gql-cpu',
        templateId: tpl,
        gpuIds: '',
        instanceIds: ['cpu3g-4-16'],
        workersMin: 1,
        workersMax: 1,
      },
    });
    expect(saved.errors).toBeUndefined();
    expect(saved.data.saveEndpoint).toMatchObject({ gpuIds: '', gpuCount: 0, instanceIds: ['cpu3g-4-16'] });
    const id = saved.data.saveEndpoint.id as string;
    const rest = await call(p.url, 'GET', `/v2/serverless/${id}`, { key: p.adminKey });
    expect(rest.body.cpu).toEqual({ id: 'cpu3g', vcpuCount: 4, memory: 16 });
    const w = await readyWorker(id);
    expect(hostConfig(w.id)).toMatchObject({ NanoCpus: 4e9, Memory: 16 * 1024 ** 3 });

    for (const [instance, message] of [
      ['cpu3c-3-6', /vcpuCount must be a power of two from 2/],
      // 1 vCPU is taken only with its flavor's memory (cpu3c-1-2 runs as cpu3c-2-4: graphql.test.ts).
      ['cpu3c-1-99', /vcpuCount must be a power of two from 2/],
      ['cpu3c-2-8', /cpu3c gives 2 GB per vCPU: 2 vCPUs come with 4 GB, not 8/],
      ['cpu9x-2-4', /unknown CPU flavor 'cpu9x'/],
      ['2vcpu', /not a CPU instance id such as cpu3c-2-4/],
    ] as const) {
      const bad = await gql(SAVE, { input: { name: `bad-${instance}`, templateId: tpl, instanceIds: [instance] } });
      expect(bad.errors?.[0]?.extensions?.code, instance).toBe('BAD_USER_INPUT');
      expect(JSON.stringify(bad.errors[0]), instance).toMatch(message);
    }
    const both = await gql(SAVE, {
      input: { name: 'both', templateId: tpl, gpuIds: 'ADA_24', instanceIds: ['cpu3c-2-4'] },
    });
    expect(JSON.stringify(both.errors?.[0])).toMatch(/gpuIds: a CPU endpoint \(instanceIds\) names no GPU pools/);
    const neither = await gql(SAVE, { input: { name: 'neither', templateId: tpl } });
    expect(JSON.stringify(neither.errors?.[0])).toMatch(/name at least one GPU pool, or a CPU instance/);

    // Saved again without gpuIds or instanceIds: keeps its instance; a new instance is what new workers get.
    const again = await gql(SAVE, { input: { id, name: 'gql-cpu', templateId: tpl, workersMin: 0, workersMax: 1 } });
    expect(again.data.saveEndpoint.instanceIds).toEqual(['cpu3g-4-16']);
    const resized = await gql(SAVE, {
      input: { id, name: 'gql-cpu', templateId: tpl, instanceIds: ['cpu3c-8-16'], workersMin: 0, workersMax: 0 },
    });
    expect(resized.data.saveEndpoint.instanceIds).toEqual(['cpu3c-8-16']);
  });

  it('bills a CPU worker per vCPU-hour of its instance', async () => {
    const r = await call(p.url, 'POST', '/v2/serverless', {
      key: p.adminKey,
      body: {
        name: 'billed-cpu',
        image: IMAGE,
        workers: { min: 1, max: 1 },
        scaling: { type: 'QUEUE_DELAY', value: 4, idleTimeout: 0 },
      },
    });
    const w = await readyWorker(r.body.id);
    await new Promise((resolve) => setTimeout(resolve, 3000));
    await call(p.url, 'PATCH', `/v2/serverless/${r.body.id}`, {
      key: p.adminKey,
      body: { workers: { min: 0, max: 0 } },
    });
    await until('the worker stopped', async () => (await liveWorkers(r.body.id)).length === 0, 60_000);
    const usage = await p.ctx.db.usageRecord.findMany({ where: { workerId: w.id } });
    expect(usage).toHaveLength(1);
    expect(usage[0]).toMatchObject({ endpointId: r.body.id, cpuFlavorId: 'cpu3c-2-4', gpuCount: 0, gpuTypeId: null });
    expect(usage[0]!.seconds).toBeGreaterThanOrEqual(3);

    const day = new Date(Date.now() - 60 * 60 * 1000).toISOString();
    const bill = await call(
      p.url,
      'GET',
      `/v2/billing/serverless?endpointId=${r.body.id}&bucketSize=day&startTime=${encodeURIComponent(day)}`,
      { key: p.adminKey },
    );
    expect(bill.status, JSON.stringify(bill.body)).toBe(200);
    // The bill is the endpoint's: every worker it ran, also one that failed to start under load before
    // this one (each is a 2-vCPU cpu3c worker).
    const endpointUsage = await p.ctx.db.usageRecord.findMany({ where: { endpointId: r.body.id } });
    const seconds = endpointUsage.reduce((sum, u) => sum + u.seconds, 0);
    const expected = seconds * 2 * (cpuRate(priceTable(undefined), 'cpu3c').serverlessPerVcpuHour / 3600);
    expect(bill.body.metadata.totals.cpuAmount, `${endpointUsage.length} usage rows, ${seconds} s`).toBeCloseTo(
      expected,
      5,
    );
    expect(bill.body.metadata.totals.gpuAmount).toBe(0);
  });

  it("reserves an instance's vCPUs and memory on its host: a full host leaves the next worker waiting, saying why", async () => {
    const tpl = await template('strict-tpl');
    // Only the strict host is in NO; it has this machine's CPUs, which one 2-vCPU worker fills (2 cores).
    const cpus = (await p.ctx.db.host.findUniqueOrThrow({ where: { id: strictHostId } })).cpuCount!;
    const saved = await gql(SAVE, {
      input: {
        name: 'strict',
        templateId: tpl,
        instanceIds: [`cpu3c-${cpus}-${cpus * 2}`],
        locations: 'NO',
        workersMin: 2,
        workersMax: 2,
      },
    });
    expect(saved.errors).toBeUndefined();
    const id = saved.data.saveEndpoint.id as string;
    const first = await readyWorker(id);
    expect(first.hostId).toBe(strictHostId);
    const waiting = await until('the second worker waiting', async () =>
      (await liveWorkers(id)).find(
        (w) => w.status === 'PENDING' && /without free vCPUs or memory/.test(w.statusReason ?? ''),
      ),
    );
    expect(waiting.statusReason).toMatch(new RegExp(`room for a CPU worker of ${cpus} vCPUs`));
    expect((await call(p.url, 'DELETE', `/v2/serverless/${id}`, { key: p.adminKey })).status).toBe(204);
    await until("the strict endpoint's workers gone", async () => (await liveWorkers(id)).length === 0, 60_000);
  });
});

describe('container disk', () => {
  it('the probe says how each host enforces disk sizes', async () => {
    const h = await call(p.url, 'GET', `/v2/hosts/${hostId}`, { key: p.adminKey });
    // This machine: overlay on ext4, which has no size option.
    expect(h.body.probe.diskLimit).toEqual({
      method: 'watchdog',
      why: expect.stringMatching(/overlay storage on ext4 has no size option/),
    });
    expect((await p.ctx.db.host.findUniqueOrThrow({ where: { id: hostId } })).diskLimitMethod).toBe('watchdog');
  });

  it('stops a worker that writes more than its disk and says so; its endpoint replaces it', async () => {
    const r = await call(p.url, 'POST', '/v2/serverless', {
      key: p.adminKey,
      body: { name: 'disk-hog', image: IMAGE, disk: 1, workers: { min: 1, max: 1 } },
    });
    const w = await readyWorker(r.body.id);
    // The job fills 1.1 GB and holds it: the watchdog finds the container over its 1 GB.
    const job = await call(p.url, 'POST', `/v2/${r.body.id}/run`, {
      key: p.adminKey,
      body: { input: { fillMb: 1100, holdMs: 60_000 } },
    });
    expect(job.status, JSON.stringify(job.body)).toBe(200);
    // Cancelled once the worker has it (the fixture goes on filling): the lost worker's job then does
    // not go back to the queue to fill the next worker too.
    await until(
      'the worker to take the job',
      async () => (await p.ctx.db.job.findUniqueOrThrow({ where: { id: job.body.id } })).status === 'IN_PROGRESS',
    );
    expect((await call(p.url, 'POST', `/v2/${r.body.id}/cancel/${job.body.id}`, { key: p.adminKey })).status).toBe(200);
    const failed = await until(
      'the worker stopped for its disk',
      async () => {
        const row = await p.ctx.db.worker.findUniqueOrThrow({ where: { id: w.id } });
        return row.status === 'FAILED' ? row : undefined;
      },
      30_000,
    );
    expect(failed.statusReason).toMatch(
      /the container wrote 1\.\d\d GB outside its volumes, more than its disk of 1 GB/,
    );
    const replacement = await readyWorker(r.body.id);
    expect(replacement.id).not.toBe(w.id);
    // Within its size nothing happens.
    const small = await call(p.url, 'POST', `/v2/${r.body.id}/runsync?wait=60000`, {
      key: p.adminKey,
      body: { input: { fillMb: 100 } },
    });
    expect(small.body.status).toBe('COMPLETED');
    await new Promise((resolve) => setTimeout(resolve, 3000));
    expect((await p.ctx.db.worker.findUniqueOrThrow({ where: { id: replacement.id } })).status).toBe('IDLE');
    expect((await call(p.url, 'DELETE', `/v2/serverless/${r.body.id}`, { key: p.adminKey })).status).toBe(204);
  }, 120_000);
});
