/**
 * GPU types no host has (issue #45): GraphQL `gpuTypes` and REST `GET /v2/catalog/gpus` list every
 * type of the pools, a type no READY host has with no stock, and the hosted service's Python client
 * (`runpod.get_gpu`) answers such a type instead of raising "No GPU found". Through `app.inject`
 * and, for the client, the same app on a socket of its own: no Temporal worker and no host.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GPU_MODELS } from '../../domain/catalog/index.ts';
import { newId } from '../../domain/shared/index.ts';
import { startTestApp, type TestApp } from '../support/app.ts';
import { ensurePythonClients } from '../support/python-clients.ts';

const H100 = 'NVIDIA H100 80GB HBM3';
const RTX4090 = 'NVIDIA GeForce RTX 4090';

let t: TestApp;

beforeAll(async () => {
  t = await startTestApp();
  // One READY host with one H100, as a probe writes it; it is never reached.
  await t.ctx.db.host.create({
    data: {
      id: newId(),
      name: `gpu-${newId()}`,
      address: '127.0.0.1',
      user: 'root',
      dataCenterId: 'US-TX-3',
      status: 'READY',
      gpuPassthrough: true,
      gpuMethod: 'cdi',
      cpuCount: 32,
      memoryMb: 256000,
      gpus: [{ uuid: 'GPU-1', name: H100, memoryMb: 81559, driverVersion: '550.54.15', pool: 'ADA_80_PRO' }],
    },
  });
}, 120_000);

afterAll(async () => {
  await t?.stop();
});

const GPU_FIELDS =
  'id displayName memoryInGb pool secureCloud securePrice maxGpuCount totalCount availableCount lowestPrice(input: {gpuCount: 1}) { uninterruptablePrice stockStatus }';

async function gql(query: string) {
  const r = await t.call('POST', '/graphql', { key: t.adminKey, body: { query } });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  expect(r.body.errors, JSON.stringify(r.body.errors)).toBeUndefined();
  return r.body.data;
}

describe('GPU types no host has', () => {
  it('GraphQL gpuTypes lists every type of the pools, one no host has with no stock, and filters by id', async () => {
    const all = (await gql(`{ gpuTypes { ${GPU_FIELDS} } }`)).gpuTypes as Array<Record<string, unknown>>;
    const ids = all.map((g) => g.id);
    for (const m of GPU_MODELS) expect(ids, m.gpuTypeId).toContain(m.gpuTypeId);
    expect(all.find((g) => g.id === RTX4090)).toEqual({
      id: RTX4090,
      displayName: 'RTX 4090',
      memoryInGb: 24,
      pool: 'ADA_24',
      secureCloud: false,
      securePrice: expect.any(Number),
      maxGpuCount: 0,
      totalCount: 0,
      availableCount: 0,
      lowestPrice: { uninterruptablePrice: null, stockStatus: null },
    });
    // The host's type keeps its stock.
    expect(all.find((g) => g.id === H100)).toMatchObject({
      secureCloud: true,
      maxGpuCount: 1,
      totalCount: 1,
      availableCount: 1,
      lowestPrice: { uninterruptablePrice: expect.any(Number), stockStatus: 'Low' },
    });

    const one = await gql(`{ gpuTypes(input: {id: "${RTX4090}"}) { id maxGpuCount } }`);
    expect(one.gpuTypes).toEqual([{ id: RTX4090, maxGpuCount: 0 }]);
    const some = await gql(`{ gpuTypes(input: {ids: ["${H100}", "${RTX4090}", "NVIDIA No Such Card"]}) { id } }`);
    expect(some.gpuTypes.map((g: { id: string }) => g.id).sort()).toEqual([RTX4090, H100].sort());
    expect((await gql('{ gpuTypes(input: {id: "NVIDIA No Such Card"}) { id } }')).gpuTypes).toEqual([]);
  });

  it('REST /v2/catalog/gpus lists it with no stock, and answers it by id', async () => {
    const list = await t.call('GET', '/v2/catalog/gpus?include=AVAILABILITY&product=POD', { key: t.adminKey });
    expect(list.status, JSON.stringify(list.body)).toBe(200);
    expect(list.body.gpus.length).toBeGreaterThanOrEqual(GPU_MODELS.length);
    const rtx = list.body.gpus.find((g: { id: string }) => g.id === RTX4090);
    expect(rtx).toMatchObject({
      pool: 'ADA_24',
      secure: false,
      maxCount: { secure: 0, community: 0 },
      count: { total: 0, available: 0 },
      availability: 'NONE',
    });
    // Unavailable everywhere: no data centers, as the hosted service answers.
    expect(rtx.dataCenters).toBeUndefined();
    expect(rtx.price.secure).toBeGreaterThan(0);
    const hopper = list.body.gpus.find((g: { id: string }) => g.id === H100);
    expect(hopper).toMatchObject({ secure: true, count: { total: 1, available: 1 }, availability: 'LOW' });
    expect(hopper.dataCenters).toEqual([{ id: 'US-TX-3', name: 'US-TX-3', availability: 'LOW' }]);

    const one = await t.call('GET', `/v2/catalog/gpus/${encodeURIComponent(RTX4090)}`, { key: t.adminKey });
    expect(one.status).toBe(200);
    expect(one.body).toMatchObject({ id: RTX4090, count: { total: 0, available: 0 } });
    const none = await t.call('GET', `/v2/catalog/gpus/${encodeURIComponent('NVIDIA No Such Card')}`, {
      key: t.adminKey,
    });
    expect(none.status).toBe(404);
  });

  it("the hosted Python client's get_gpu answers a type no host has, with no stock", async () => {
    const python = await ensurePythonClients();
    await t.app.listen({ host: '127.0.0.1', port: 0 });
    const url = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    const callPy = path.join(
      path.dirname(fileURLToPath(import.meta.url)),
      '..',
      'fixtures',
      'hosted-python-client',
      'call.py',
    );
    const home = mkdtempSync(path.join(tmpdir(), 'runpod-home-'));
    const getGpu = async (gpuId: string) => {
      const r = await promisify(execFile)(python, [callPy, 'get_gpu', JSON.stringify({ gpu_id: gpuId })], {
        encoding: 'utf8',
        timeout: 60_000,
        env: { PATH: process.env.PATH, HOME: home, RUNPOD_API_KEY: t.adminKey, RUNPOD_API_BASE_URL: url },
      }).catch((e: { stdout?: string; stderr?: string }) => e);
      try {
        return JSON.parse(r.stdout ?? '') as { result?: Record<string, unknown>; error?: string; message?: string };
      } catch {
        throw new Error(`get_gpu: no JSON answer: ${r.stdout} ${r.stderr}`);
      }
    };
    const rtx = await getGpu(RTX4090);
    expect(rtx.error, rtx.message).toBeUndefined();
    expect(rtx.result).toMatchObject({
      id: RTX4090,
      displayName: 'RTX 4090',
      memoryInGb: 24,
      manufacturer: 'Nvidia',
      secureCloud: false,
      maxGpuCount: 0,
      lowestPrice: { minimumBidPrice: null, uninterruptablePrice: null },
    });
    // A type neither the pools nor a host know: still the client's own "No GPU found".
    expect(await getGpu('NVIDIA No Such Card')).toMatchObject({ error: 'ValueError' });
  }, 120_000);
});
