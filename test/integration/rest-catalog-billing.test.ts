import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { gpuTypes } from '../../domain/catalog/index.ts';
import { newId } from '../../domain/shared/index.ts';
import { call, startTestPlatform, type TestPlatform } from '../support/platform.ts';

const H100 = 'NVIDIA H100 80GB HBM3';
const RTX4090 = 'NVIDIA GeForce RTX 4090';
const gpu = (name: string, memoryMb: number, pool: string | null) => ({
  uuid: `GPU-${newId()}`,
  name,
  memoryMb,
  driverVersion: '550.54.15',
  pool,
});

/** GET /v2/catalog/* from hosts written straight into the Host table, and /v2/billing/* from usage rows. */
describe('REST catalog and billing', () => {
  let p: TestPlatform;
  const h100 = gpu(H100, 81559, 'ADA_80_PRO');
  const rtxA = gpu(RTX4090, 24564, 'ADA_24');
  const rtxB = gpu(RTX4090, 24564, 'ADA_24');

  beforeAll(async () => {
    p = await startTestPlatform();
    const db = p.ctx.db;
    const host = (name: string, dataCenterId: string, data: object) =>
      db.host.create({
        data: { id: newId(), name, address: '10.1.0.1', user: 'gantry', dataCenterId, gpuMethod: 'cdi', ...data },
      });
    const hopper = await host('hopper-1', 'US-TX-3', {
      status: 'READY',
      cpuCount: 256,
      memoryMb: 1024 * 1024,
      gpus: [h100],
    });
    const ada = await host('ada-1', 'EU-RO-1', {
      status: 'READY',
      cpuCount: 16,
      memoryMb: 64 * 1024,
      gpus: [rtxA, rtxB],
    });
    // Not READY: its GPUs are in no count, but its data center is known.
    await host('down-1', 'AP-JP-1', {
      status: 'UNREACHABLE',
      cpuCount: 64,
      memoryMb: 512 * 1024,
      gpus: [gpu('NVIDIA A100-SXM4-80GB', 81920, 'AMPERE_80')],
    });
    // READY but unable to hand GPUs to containers: counted, never available.
    await host('no-cdi-1', 'EU-RO-1', {
      status: 'READY',
      cpuCount: 8,
      memoryMb: 16 * 1024,
      gpuMethod: 'none',
      gpus: [gpu(RTX4090, 24564, 'ADA_24')],
    });
    // A live worker holds one 4090; a stopped one held the H100 and gave it back.
    await db.worker.create({ data: { id: newId(), hostId: ada.id, gpuUuids: [rtxA.uuid], status: 'RUNNING' } });
    await db.worker.create({ data: { id: newId(), hostId: hopper.id, gpuUuids: [h100.uuid], status: 'STOPPED' } });
  });
  afterAll(async () => {
    await p?.stop();
  });

  describe('catalog', () => {
    it('lists GPU types of READY hosts with pools, counts and prices', async () => {
      const res = await call(p.url, 'GET', '/v2/catalog/gpus', { key: p.adminKey });
      expect(res.status).toBe(200);
      const ids = res.body.gpus.map((g: { id: string }) => g.id);
      // Every type of the pools is listed; those with stock are the READY hosts' (test/api/edges-catalog.test.ts).
      const stocked = res.body.gpus.filter((g: { count: { total: number } }) => g.count.total > 0);
      // pool order: ADA_24 before ADA_80_PRO; the A100 host is down
      expect(stocked.map((g: { id: string }) => g.id)).toEqual([RTX4090, H100]);
      const [rtx, hopper] = stocked;
      expect(rtx).toEqual({
        id: RTX4090,
        name: 'RTX 4090',
        pool: 'ADA_24',
        manufacturer: 'NVIDIA',
        memory: 24,
        secure: true,
        community: false,
        price: { secure: 0.59, community: 0.59, serverless: 1.1, serverlessPerSecond: 1.1 / 3600 },
        maxCount: { secure: 2, community: 0 },
        count: { total: 3, available: 1 },
      });
      expect(hopper).toMatchObject({
        pool: 'ADA_80_PRO',
        memory: 80,
        count: { total: 1, available: 1 },
        price: { serverless: 4.18 },
        maxCount: { secure: 1 },
      });
      expect(rtx.availability).toBeUndefined();
      // GraphQL's gpuTypes reads the same list.
      expect((await gpuTypes(p.ctx)).map((g) => g.id)).toEqual(ids);
    });

    it('reports availability for a GPU count on one host, per data center', async () => {
      const one = await call(p.url, 'GET', '/v2/catalog/gpus?include=AVAILABILITY&product=SERVERLESS', {
        key: p.adminKey,
      });
      const rtx = one.body.gpus.find((g: { id: string }) => g.id === RTX4090);
      expect(rtx.availability).toBe('LOW');
      expect(rtx.dataCenters).toEqual([{ id: 'EU-RO-1', name: 'EU-RO-1', availability: 'LOW' }]);
      const hopper = one.body.gpus.find((g: { id: string }) => g.id === H100);
      // One free GPU is scarce whatever the share.
      expect(hopper.availability).toBe('LOW');
      expect(hopper.count).toEqual({ total: 1, available: 1 });

      const two = await call(p.url, 'GET', '/v2/catalog/gpus?include=AVAILABILITY&product=POD,SERVERLESS&count=2', {
        key: p.adminKey,
      });
      expect(new Set(two.body.gpus.map((g: { availability: string }) => g.availability))).toEqual(new Set(['NONE']));

      const single = await call(p.url, 'GET', `/v2/catalog/gpus/${encodeURIComponent(RTX4090)}`, { key: p.adminKey });
      expect(single.status).toBe(200);
      expect(single.body).toEqual(rtx && { ...rtx, availability: undefined, dataCenters: undefined });
    });

    it('answers 400, 404 and 422 for bad catalog requests', async () => {
      const noProduct = await call(p.url, 'GET', '/v2/catalog/gpus?include=AVAILABILITY', { key: p.adminKey });
      expect(noProduct.status).toBe(400);
      expect(noProduct.body.detail).toBe('include=AVAILABILITY needs product (POD, CLUSTER or SERVERLESS)');
      expect((await call(p.url, 'GET', '/v2/catalog/gpus?count=2', { key: p.adminKey })).status).toBe(400);
      const unknownParam = await call(p.url, 'GET', '/v2/catalog/gpus?colour=red', { key: p.adminKey });
      expect(unknownParam.status).toBe(422);
      expect(unknownParam.body.errors).toEqual(["$: additional properties 'colour' not allowed"]);
      expect(
        (await call(p.url, 'GET', '/v2/catalog/gpus?include=EVERYTHING&product=POD', { key: p.adminKey })).status,
      ).toBe(422);
      expect(
        (
          await call(p.url, 'GET', `/v2/catalog/gpus/${encodeURIComponent('NVIDIA No Such Card')}`, {
            key: p.adminKey,
          })
        ).status,
      ).toBe(404);
      expect((await call(p.url, 'GET', '/v2/catalog/gpus')).status).toBe(401);
      expect((await call(p.url, 'GET', '/v2/catalog/cpus/cpu9z', { key: p.adminKey })).status).toBe(404);
      expect((await call(p.url, 'GET', '/v2/catalog/datacenters/MARS-1', { key: p.adminKey })).status).toBe(404);
    });

    it('derives CPU flavors from host CPUs and memory', async () => {
      const res = await call(p.url, 'GET', '/v2/catalog/cpus', { key: p.adminKey });
      expect(res.status).toBe(200);
      const byId = Object.fromEntries(res.body.cpus.map((c: { id: string }) => [c.id, c]));
      // The 256-CPU, 1 TiB host bounds each flavor: 2, 4 and 8 GB per vCPU.
      expect(byId.cpu3c).toEqual({
        id: 'cpu3c',
        name: 'Compute-Optimized',
        group: 'cpu3',
        vcpu: { min: 2, max: 256 },
        ramGbPerVcpu: 2,
        price: { securePerVcpu: 0.03, serverlessPerVcpu: 0.07 },
        hosts: expect.any(Number),
      });
      expect(byId.cpu3c.hosts).toBeGreaterThanOrEqual(3);
      expect(byId.cpu3g.vcpu.max).toBe(256);
      expect(byId.cpu3m.vcpu.max).toBe(128);
      expect((await call(p.url, 'GET', '/v2/catalog/cpus/cpu3m', { key: p.adminKey })).body).toEqual(byId.cpu3m);
    });

    it('lists data centers of every registered host with counts and regions', async () => {
      const res = await call(p.url, 'GET', '/v2/catalog/datacenters?include=GPU_AVAILABILITY', { key: p.adminKey });
      expect(res.status).toBe(200);
      const byId = Object.fromEntries(res.body.dataCenters.map((d: { id: string }) => [d.id, d]));
      expect(byId['EU-RO-1']).toEqual({
        id: 'EU-RO-1',
        name: 'EU-RO-1',
        region: 'EUROPE',
        country: null,
        globalNetwork: false,
        // Two hosts and no shared storage: no network volumes there.
        networkVolumeTypes: [],
        compliance: [],
        hosts: { total: 2, ready: 2 },
        gpus: { total: 3, available: 1 },
        gpuAvailability: [{ id: RTX4090, name: 'RTX 4090', availability: 'LOW' }],
      });
      expect(byId['AP-JP-1']).toMatchObject({
        region: 'ASIA',
        hosts: { total: 1, ready: 0 },
        gpus: { total: 0, available: 0 },
      });
      expect(byId['AP-JP-1'].gpuAvailability).toBeUndefined();
      expect(byId['US-TX-3']).toMatchObject({
        region: 'NORTH_AMERICA',
        gpus: { total: 1, available: 1 },
        networkVolumeTypes: ['STANDARD'],
      });
      const one = await call(p.url, 'GET', '/v2/catalog/datacenters/US-TX-3', { key: p.adminKey });
      expect(one.body.gpuAvailability).toBeUndefined();
      expect(one.body.hosts).toEqual({ total: 1, ready: 1 });
    });
  });

  describe('billing', () => {
    let account: { id: string; key: string };
    let e1: string;
    let e2: string;
    const priceDir = mkdtempSync(path.join(tmpdir(), 'gantry-prices-'));

    beforeAll(async () => {
      const db = p.ctx.db;
      const created = await call(p.url, 'POST', '/v2/accounts', {
        key: p.adminKey,
        body: {
          email: 'billing@example.test',
          name: 'Billing',
          serverlessDiscount: { discountFactor: 0.8, type: 'VOLUME' },
        },
      });
      const key = await call(p.url, 'POST', '/v2/keys', {
        key: p.adminKey,
        body: { name: 'billing', scopes: ['READ'], accountId: created.body.id },
      });
      account = { id: created.body.id, key: key.body.key };
      e1 = newId();
      e2 = newId();
      await db.endpoint.create({
        data: {
          id: e1,
          accountId: account.id,
          name: 'gpu-endpoint',
          image: 'i',
          gpuPools: ['ADA_80_PRO'],
          gpuCount: 2,
        },
      });
      await db.endpoint.create({
        data: {
          id: e2,
          accountId: account.id,
          name: 'cpu-endpoint',
          image: 'i',
          cpuFlavorId: 'cpu3c',
          cpuVcpuCount: 4,
          cpuMemoryGb: 8,
        },
      });
      const worker = async (endpointId: string | null) =>
        (await db.worker.create({ data: { id: newId(), endpointId, status: 'STOPPED' } })).id;
      const [w1, w2, w3, w4] = [await worker(e1), await worker(e1), await worker(e2), await worker(null)];
      const usage = (
        workerId: string,
        endpointId: string | null,
        startedAt: string,
        endedAt: string,
        seconds: number,
        what: object,
      ) =>
        db.usageRecord.create({
          data: {
            id: newId(),
            accountId: account.id,
            workerId,
            endpointId,
            startedAt: new Date(startedAt),
            endedAt: new Date(endedAt),
            seconds,
            ...what,
          },
        });
      // 30 min on 2 H100s: 1800 s x 2 x 4.18/3600 = 4.18, discounted 3.344.
      await usage(w1, e1, '2026-03-02T10:00:00Z', '2026-03-02T10:30:00Z', 1800, { gpuTypeId: H100, gpuCount: 2 });
      // An hour on a 4090 across midnight: 0.55 on each day, discounted 0.44.
      await usage(w2, e1, '2026-03-02T23:30:00Z', '2026-03-03T00:30:00Z', 3600, { gpuTypeId: RTX4090, gpuCount: 1 });
      // An hour of cpu3c with the endpoint's 4 vCPUs: 4 x 0.07 = 0.28, discounted 0.224.
      await usage(w3, e2, '2026-03-03T05:00:00Z', '2026-03-03T06:00:00Z', 3600, { cpuFlavorId: 'cpu3c' });
      // A pod's hour on a 4090 at the pod price, never discounted: 0.59.
      await usage(w4, null, '2026-03-03T08:00:00Z', '2026-03-03T09:00:00Z', 3600, { gpuTypeId: RTX4090, gpuCount: 1 });
      // Outside every window below.
      await usage(w1, e1, '2026-02-01T00:00:00Z', '2026-02-01T01:00:00Z', 3600, { gpuTypeId: H100, gpuCount: 2 });
    });
    afterEach(async () => {
      p.ctx.settings.pricesFile = undefined;
      await p.ctx.db.account.update({ where: { id: account.id }, data: { serverlessDiscountExpires: null } });
    });

    const days = 'startTime=2026-03-02T00:00:00Z&endTime=2026-03-04T00:00:00Z';
    const window = `${days}&bucketSize=day`;

    it('bills worker seconds by GPU type and count or CPU flavor and vCPUs, with the discount, per endpoint per day', async () => {
      const res = await call(p.url, 'GET', `/v2/billing/serverless?${window}`, { key: account.key });
      expect(res.status).toBe(200);
      const amounts = (gpuAmount: number, cpuAmount: number) => ({
        totalAmount: Math.round((gpuAmount + cpuAmount) * 1e6) / 1e6,
        gpuAmount,
        cpuAmount,
        diskAmount: 0,
        feeAmount: 0,
      });
      // Within a bucket, records are ordered by endpoint id.
      const day3 = [
        {
          startTime: '2026-03-03T00:00:00.000Z',
          endTime: '2026-03-04T00:00:00.000Z',
          serverlessId: e1,
          ...amounts(0.44, 0),
        },
        {
          startTime: '2026-03-03T00:00:00.000Z',
          endTime: '2026-03-04T00:00:00.000Z',
          serverlessId: e2,
          ...amounts(0, 0.224),
        },
      ].sort((a, b) => a.serverlessId.localeCompare(b.serverlessId));
      expect(res.body.records).toEqual([
        {
          startTime: '2026-03-02T00:00:00.000Z',
          endTime: '2026-03-03T00:00:00.000Z',
          serverlessId: e1,
          ...amounts(3.784, 0),
        },
        ...day3,
      ]);
      expect(res.body.metadata).toEqual({
        query: {
          startTime: '2026-03-02T00:00:00.000Z',
          endTime: '2026-03-04T00:00:00.000Z',
          bucketSize: 'day',
          serverlessId: null,
        },
        recordCount: 3,
        uniqueServerlessCount: 2,
        totals: amounts(4.224, 0.224),
        discount: { discountFactor: 0.8, type: 'VOLUME', expirationDate: null },
      });

      const onlyCpu = await call(p.url, 'GET', `/v2/billing/serverless?${window}&serverlessId=${e2}`, {
        key: account.key,
      });
      expect(onlyCpu.body.records).toEqual([expect.objectContaining({ serverlessId: e2, cpuAmount: 0.224 })]);
      expect(onlyCpu.body.metadata.query.serverlessId).toBe(e2);
      const alias = await call(p.url, 'GET', `/v2/billing/serverless?${window}&endpointId=${e2}`, { key: account.key });
      expect(alias.body).toEqual(onlyCpu.body);
    });

    it('stops the discount at its expiry, splitting usage at that instant', async () => {
      await p.ctx.db.account.update({
        where: { id: account.id },
        data: { serverlessDiscountExpires: new Date('2026-03-03T00:00:00Z') },
      });
      const res = await call(p.url, 'GET', `/v2/billing/serverless?${days}&bucketSize=month`, { key: account.key });
      // Before midnight: 3.344 + 0.44 discounted; after: 0.55 and 0.28 at list price.
      expect(res.body.metadata.totals).toEqual({
        totalAmount: 4.614,
        gpuAmount: 4.334,
        cpuAmount: 0.28,
        diskAmount: 0,
        feeAmount: 0,
      });
      expect(res.body.metadata.query).toMatchObject({
        startTime: '2026-03-01T00:00:00.000Z',
        endTime: '2026-04-01T00:00:00.000Z',
        bucketSize: 'month',
      });
      expect(res.body.records.map((r: { startTime: string }) => r.startTime)).toEqual([
        '2026-03-01T00:00:00.000Z',
        '2026-03-01T00:00:00.000Z',
      ]);
    });

    it('splits hourly and totals everything in /v2/billing, pods at pod prices', async () => {
      const hourly = await call(
        p.url,
        'GET',
        '/v2/billing/serverless?startTime=2026-03-02T23:00:00Z&endTime=2026-03-03T01:00:00Z&bucketSize=hour',
        { key: account.key },
      );
      expect(
        hourly.body.records.map((r: { startTime: string; gpuAmount: number }) => [r.startTime, r.gpuAmount]),
      ).toEqual([
        ['2026-03-02T23:00:00.000Z', 0.44],
        ['2026-03-03T00:00:00.000Z', 0.44],
      ]);

      const all = await call(p.url, 'GET', `/v2/billing?${window}`, { key: account.key });
      expect(all.status).toBe(200);
      expect(all.body.records).toHaveLength(2);
      expect(all.body.records[1]).toMatchObject({
        startTime: '2026-03-03T00:00:00.000Z',
        serverlessGpuAmount: 0.44,
        serverlessCpuAmount: 0.224,
        podGpuAmount: 0.59,
        totalAmount: 1.254,
        clusterGpuAmount: 0,
      });
      expect(all.body.metadata.totals).toMatchObject({
        totalAmount: 5.038,
        serverlessGpuAmount: 4.224,
        serverlessCpuAmount: 0.224,
        podGpuAmount: 0.59,
      });

      const publicEndpoints = await call(p.url, 'GET', `/v2/billing/endpoints?${window}`, { key: account.key });
      expect(publicEndpoints.body).toEqual({
        records: [],
        metadata: {
          query: { startTime: '2026-03-02T00:00:00.000Z', endTime: '2026-03-04T00:00:00.000Z', bucketSize: 'day' },
          recordCount: 0,
          totals: { totalAmount: 0 },
        },
      });
    });

    it('charges the prices of GANTRY_PRICES_FILE, in the catalog too', async () => {
      const file = path.join(priceDir, 'prices.json');
      writeFileSync(
        file,
        JSON.stringify({
          gpuPools: { ADA_80_PRO: { serverlessPerHour: 3.6 } },
          gpuTypes: { [RTX4090]: { serverlessPerHour: 0.72 } },
        }),
      );
      // The running platform's settings (what GANTRY_PRICES_FILE sets at start); the file is re-read when it changes.
      p.ctx.settings.pricesFile = file;
      const res = await call(p.url, 'GET', `/v2/billing/serverless?${window}&serverlessId=${e1}`, { key: account.key });
      // 1800 s x 2 x 3.6/3600 x 0.8 = 2.88; the 4090 hour: 0.72 x 0.8 = 0.576, half on each day.
      expect(res.body.metadata.totals.gpuAmount).toBe(3.456);
      const catalog = await call(p.url, 'GET', '/v2/catalog/gpus', { key: account.key });
      const price = (id: string) =>
        catalog.body.gpus.find((g: { id: string }) => g.id === id).price.serverless as number;
      expect([price(RTX4090), price(H100)]).toEqual([0.72, 3.6]);

      writeFileSync(file, JSON.stringify({ gpuPools: { NOT_A_POOL: { serverlessPerHour: 1 } } }));
      const broken = await call(p.url, 'GET', '/v2/catalog/gpus', { key: account.key });
      expect(broken.status).toBe(500);
    });

    it('keeps accounts apart and limits endpoint-scoped keys to their endpoints', async () => {
      const admins = await call(p.url, 'GET', `/v2/billing/serverless?${window}`, { key: p.adminKey });
      expect(admins.body.records).toEqual([]);
      const limited = await call(p.url, 'POST', '/v2/keys', {
        key: p.adminKey,
        body: { name: 'e1 only', scopes: ['READ'], accountId: account.id, endpointIds: [e1] },
      });
      const mine = await call(p.url, 'GET', `/v2/billing/serverless?${window}`, { key: limited.body.key });
      expect(new Set(mine.body.records.map((r: { serverlessId: string }) => r.serverlessId))).toEqual(new Set([e1]));
      expect(
        (await call(p.url, 'GET', `/v2/billing/serverless?${window}&serverlessId=${e2}`, { key: limited.body.key }))
          .status,
      ).toBe(403);
      const all = await call(p.url, 'GET', `/v2/billing?${window}`, { key: limited.body.key });
      expect(all.body.metadata.totals.podGpuAmount).toBe(0);
    });

    it('refuses contradictory or oversized windows', async () => {
      const both = await call(p.url, 'GET', '/v2/billing/serverless?lastN=3&startTime=2026-03-01T00:00:00Z', {
        key: account.key,
      });
      expect(both.status).toBe(400);
      expect(
        (
          await call(p.url, 'GET', '/v2/billing?startTime=2026-03-05T00:00:00Z&endTime=2026-03-01T00:00:00Z', {
            key: account.key,
          })
        ).status,
      ).toBe(400);
      expect(
        (await call(p.url, 'GET', '/v2/billing?bucketSize=hour&startTime=2000-01-01T00:00:00Z', { key: account.key }))
          .status,
      ).toBe(400);
      const badSize = await call(p.url, 'GET', '/v2/billing?bucketSize=fortnight', { key: account.key });
      expect(badSize.status).toBe(422);
      expect(badSize.body.errors[0]).toMatch(/^\$\.bucketSize: /);
      const lastN = await call(p.url, 'GET', '/v2/billing/serverless?lastN=2&bucketSize=day', { key: account.key });
      expect(lastN.status).toBe(200);
      const { startTime, endTime } = lastN.body.metadata.query;
      expect(Date.parse(endTime) - Date.parse(startTime)).toBe(2 * 86_400_000);
      expect(Date.parse(endTime)).toBeGreaterThan(Date.now());
      expect(
        (await call(p.url, 'GET', '/v2/billing/serverless?serverlessId=a&endpointId=b', { key: account.key })).status,
      ).toBe(400);
    });
  });
});
