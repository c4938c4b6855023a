import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { bucketShift, bucketStart } from '../../domain/billing/index.ts';
import { availabilityLevel, regionOf } from '../../domain/catalog/index.ts';
import { CPU_FLAVORS, maxVcpusOnHost, recordedCpuInstance } from '../../domain/catalog/index.ts';
import {
  cpuRate,
  DEFAULT_PRICES,
  gpuRate,
  loadPriceFile,
  poolOfGpuType,
  priceTable,
} from '../../domain/billing/index.ts';

const d = (iso: string): Date => new Date(iso);
const flavor = (id: string) => CPU_FLAVORS.find((f) => f.id === id)!;

describe('billing buckets', () => {
  it('snaps to UTC hours, days, Monday weeks, months and years', () => {
    const t = d('2026-03-04T17:45:12.345Z'); // a Wednesday
    expect(bucketStart(t, 'hour').toISOString()).toBe('2026-03-04T17:00:00.000Z');
    expect(bucketStart(t, 'day').toISOString()).toBe('2026-03-04T00:00:00.000Z');
    expect(bucketStart(t, 'week').toISOString()).toBe('2026-03-02T00:00:00.000Z');
    expect(bucketStart(d('2026-03-08T23:59:59Z'), 'week').toISOString()).toBe('2026-03-02T00:00:00.000Z'); // Sunday
    expect(bucketStart(d('2026-03-09T00:00:00Z'), 'week').toISOString()).toBe('2026-03-09T00:00:00.000Z'); // Monday
    expect(bucketStart(t, 'month').toISOString()).toBe('2026-03-01T00:00:00.000Z');
    expect(bucketStart(t, 'year').toISOString()).toBe('2026-01-01T00:00:00.000Z');
  });

  it('steps by calendar units, backwards too', () => {
    expect(bucketShift(d('2026-01-31T00:00:00Z'), 'day').toISOString()).toBe('2026-02-01T00:00:00.000Z');
    expect(bucketShift(d('2026-12-01T00:00:00Z'), 'month').toISOString()).toBe('2027-01-01T00:00:00.000Z');
    expect(bucketShift(d('2026-03-01T00:00:00Z'), 'month', -3).toISOString()).toBe('2025-12-01T00:00:00.000Z');
    expect(bucketShift(d('2026-03-02T00:00:00Z'), 'week', -1).toISOString()).toBe('2026-02-23T00:00:00.000Z');
    expect(bucketShift(d('2026-03-02T23:00:00Z'), 'hour', 2).toISOString()).toBe('2026-03-03T01:00:00.000Z');
  });

  it('reads vCPUs from a CPU instance id, else from the endpoint, else the smallest size', () => {
    expect(recordedCpuInstance('cpu3c-8-16', 4)).toEqual({ flavorId: 'cpu3c', vcpus: 8, memoryGb: 16 });
    expect(recordedCpuInstance('cpu3g', 4)).toEqual({ flavorId: 'cpu3g', vcpus: 4, memoryGb: 16 });
    expect(recordedCpuInstance('cpu3m', null)).toEqual({ flavorId: 'cpu3m', vcpus: 2, memoryGb: 16 });
  });
});

describe('price table', () => {
  it('prices a GPU by its own entry, else its pool, else the fallback', () => {
    expect(poolOfGpuType('NVIDIA H100 80GB HBM3')).toBe('ADA_80_PRO');
    expect(poolOfGpuType('AMPERE_24')).toBe('AMPERE_24');
    expect(poolOfGpuType('NVIDIA Tesla T4')).toBeUndefined();
    expect(gpuRate(DEFAULT_PRICES, 'NVIDIA H100 80GB HBM3')).toEqual(DEFAULT_PRICES.gpuPools.ADA_80_PRO);
    expect(gpuRate(DEFAULT_PRICES, 'NVIDIA Tesla T4')).toEqual(DEFAULT_PRICES.otherGpu);
    const table = { ...DEFAULT_PRICES, gpuTypes: { 'NVIDIA H100 NVL': { serverlessPerHour: 5 } } };
    expect(gpuRate(table, 'NVIDIA H100 NVL')).toEqual({
      serverlessPerHour: 5,
      podPerHour: DEFAULT_PRICES.gpuPools.ADA_80_PRO.podPerHour,
    });
    expect(cpuRate(DEFAULT_PRICES, 'cpu5x')).toEqual(DEFAULT_PRICES.otherCpu);
  });

  it('merges a price file over the defaults and re-reads it when it changes', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'gantry-prices-unit-'));
    const file = path.join(dir, 'prices.json');
    writeFileSync(
      file,
      JSON.stringify({
        gpuPools: { AMPERE_16: { podPerHour: 0.2 } },
        cpuFlavors: { cpu5c: { serverlessPerVcpuHour: 0.1 } },
      }),
    );
    const table = loadPriceFile(file);
    expect(table.gpuPools.AMPERE_16).toEqual({
      serverlessPerHour: DEFAULT_PRICES.gpuPools.AMPERE_16.serverlessPerHour,
      podPerHour: 0.2,
    });
    expect(table.gpuPools.ADA_24).toEqual(DEFAULT_PRICES.gpuPools.ADA_24);
    expect(table.cpuFlavors.cpu5c).toEqual({
      serverlessPerVcpuHour: 0.1,
      podPerVcpuHour: DEFAULT_PRICES.otherCpu.podPerVcpuHour,
    });
    expect(table.cpuFlavors.cpu3c).toEqual(DEFAULT_PRICES.cpuFlavors.cpu3c);

    expect(priceTable(undefined)).toBe(DEFAULT_PRICES);
    expect(priceTable(file).gpuPools.AMPERE_16.podPerHour).toBe(0.2);
    writeFileSync(
      file,
      JSON.stringify({ gpuPools: { AMPERE_16: { podPerHour: 0.25 } }, otherGpu: { podPerHour: 0.3 } }),
    );
    expect(priceTable(file).gpuPools.AMPERE_16.podPerHour).toBe(0.25);
  });

  it('names the file and every problem of a bad price file', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'gantry-prices-unit-'));
    const file = path.join(dir, 'bad.json');
    writeFileSync(file, JSON.stringify({ gpuPools: { AMPERE_16: { serverlessPerHour: -1 } }, currency: 'EUR' }));
    expect(() => loadPriceFile(file)).toThrow(
      `GANTRY_PRICES_FILE ${file}: $.currency: must be equal to constant; $.gpuPools.AMPERE_16.serverlessPerHour: must be >= 0`,
    );
    writeFileSync(file, '{ not json');
    expect(() => loadPriceFile(file)).toThrow(/^GANTRY_PRICES_FILE .*bad\.json: /);
    expect(() => priceTable(path.join(dir, 'missing.json'))).toThrow(/no such file/);
  });
});

describe('catalog rules', () => {
  it('sizes CPU flavors to powers of two within host CPUs and memory', () => {
    expect(maxVcpusOnHost(flavor('cpu3c'), 32, 256 * 1024)).toBe(32);
    expect(maxVcpusOnHost(flavor('cpu3m'), 32, 64 * 1024)).toBe(8);
    expect(maxVcpusOnHost(flavor('cpu3g'), 12, 64 * 1024)).toBe(8);
    expect(maxVcpusOnHost(flavor('cpu3m'), 4, 8 * 1024)).toBe(0); // one vCPU's worth of memory: below the minimum of 2
    expect(maxVcpusOnHost(flavor('cpu3c'), null, 1024)).toBe(0);
  });

  it('names regions from data center ids and grades availability', () => {
    expect(regionOf('EU-RO-1')).toBe('EUROPE');
    expect(regionOf('us-tx-3')).toBe('NORTH_AMERICA');
    expect(regionOf('SEA-SG-1')).toBe('ASIA');
    expect(regionOf('rack-7')).toBe('UNKNOWN');
    expect(availabilityLevel(0, 8)).toBe('NONE');
    expect(availabilityLevel(1, 1)).toBe('LOW');
    expect(availabilityLevel(1, 8)).toBe('LOW');
    expect(availabilityLevel(3, 8)).toBe('MEDIUM');
    expect(availabilityLevel(4, 8)).toBe('HIGH');
  });
});
