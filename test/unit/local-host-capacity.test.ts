/**
 * The local host's CPU capacity (cpuOvercommitOf): without the label, the host GANTRY_LOCAL_HOST=1
 * registers holds the CPU workers of a `gantry init` and of a `flash init` project at once, however
 * small; hosts registered otherwise keep overcommit 1; the label wins everywhere.
 */
import { describe, expect, it } from 'vitest';
import { DEFAULT_CPU_INSTANCE } from '../../domain/catalog/index.ts';
import {
  cpuOvercommitOf,
  LOCAL_HOST_CPU_WORKERS,
  placeWorker,
  type OvercommitHost,
  type PlacedWorker,
  type PlacementHost,
} from '../../domain/workers/index.ts';

/** The default instance (cpu3c-2-4) as placement reserves it. */
const CPU = { vcpus: DEFAULT_CPU_INSTANCE.vcpus, memoryMb: DEFAULT_CPU_INSTANCE.memoryGb * 1024 };

/** A host row as placement reads it (activities/worker-placement.ts: cpuOvercommit from cpuOvercommitOf). */
function hostOf(row: OvercommitHost & { cpuCount: number | null; memoryMb: number | null }): PlacementHost {
  return {
    id: 'h',
    status: 'READY',
    dataCenterId: 'local',
    gpus: [],
    gpuMethod: 'none',
    maxWorkers: null,
    cpuCount: row.cpuCount,
    memoryMb: row.memoryMb,
    cpuOvercommit: cpuOvercommitOf(row),
  };
}

/**
 * Places the endpoints' workers one after the other (as the autoscaler asks, each a default CPU
 * instance) and says which were placed before the first that found no room.
 */
function placeAll(host: PlacementHost, endpoints: string[]): string[] {
  const placed: PlacedWorker[] = [];
  for (const endpointId of endpoints) {
    const p = placeWorker({ endpointId, gpuPools: [], gpuCount: 1, dataCenterIds: [], cpu: CPU }, [host], placed);
    if (!p.ok) break;
    placed.push({ hostId: p.hostId, endpointId, gpuUuids: [], cpu: CPU });
  }
  return placed.map((w) => w.endpointId!);
}

const times = (n: number, name: string): string[] => Array.from({ length: n }, () => name);
/** `gantry init`'s cpu-worker and lb-worker at their most (workers=(0, 3) each). */
const GANTRY_INIT = [...times(3, 'cpu-worker'), ...times(3, 'lb-worker')];
/**
 * `flash init`'s lb_worker at its most (workers=(1, 3)) and cpu_worker (flash's default max, 1),
 * plus a redeploy's replacements of the lb_worker's kept worker and of the cpu_worker's.
 */
const FLASH_INIT_REDEPLOY = [...times(3, 'lb_worker'), 'cpu_worker', 'lb_worker v2', 'cpu_worker v2'];

/** This test machine's size as the probe gives it (2 cores, MemTotal a little under 24 GB), and smaller ones. */
const TWO_CORES = [
  { cpuCount: 2, memoryMb: 24_105 },
  { cpuCount: 2, memoryMb: 7_900 },
  { cpuCount: 2, memoryMb: 3_900 },
];

describe('the local host runs the templates whole', () => {
  it('fits every CPU worker of a gantry init and of a flash init project (redeploying) on 2 cores', () => {
    expect(LOCAL_HOST_CPU_WORKERS).toBeGreaterThanOrEqual(Math.max(GANTRY_INIT.length, FLASH_INIT_REDEPLOY.length));
    for (const size of TWO_CORES) {
      const local = hostOf({ source: 'local', labels: {}, ...size });
      expect([size, placeAll(local, GANTRY_INIT)]).toEqual([size, GANTRY_INIT]);
      expect([size, placeAll(local, FLASH_INIT_REDEPLOY)]).toEqual([size, FLASH_INIT_REDEPLOY]);
      // And no more than the rule promises: the default is a bound, not "anything goes".
      expect([size, placeAll(local, times(LOCAL_HOST_CPU_WORKERS + 1, 'x')).length]).toEqual([
        size,
        LOCAL_HOST_CPU_WORKERS,
      ]);
    }
  });

  it('takes the smallest whole factor that fits six default workers in vCPUs and in memory', () => {
    expect(cpuOvercommitOf({ source: 'local', labels: {}, cpuCount: 2, memoryMb: 24_105 })).toBe(6);
    expect(cpuOvercommitOf({ source: 'local', labels: {}, cpuCount: 4, memoryMb: 64 * 1024 })).toBe(3);
    expect(cpuOvercommitOf({ source: 'local', labels: {}, cpuCount: 3, memoryMb: 64 * 1024 })).toBe(4);
    // Memory binds too: many cores, little memory.
    const lowMemory = { source: 'local', labels: {}, cpuCount: 32, memoryMb: 8 * 1024 };
    expect(cpuOvercommitOf(lowMemory)).toBe(3);
    expect(placeAll(hostOf(lowMemory), times(7, 'x'))).toHaveLength(6);
    // A big machine needs none.
    expect(cpuOvercommitOf({ source: 'local', labels: {}, cpuCount: 16, memoryMb: 64 * 1024 })).toBe(1);
    // Not probed yet: no size, no factor (and placement gives it no CPU worker).
    expect(cpuOvercommitOf({ source: 'local', labels: {}, cpuCount: null, memoryMb: null })).toBe(1);
    expect(placeAll(hostOf({ source: 'local', labels: {}, cpuCount: null, memoryMb: null }), ['x'])).toEqual([]);
  });

  it('leaves hosts registered any other way at overcommit 1', () => {
    for (const source of ['api', 'file', null, undefined]) {
      const row = { source, labels: {}, cpuCount: 2, memoryMb: 24_105 };
      expect([source, cpuOvercommitOf(row)]).toEqual([source, 1]);
      expect([source, placeAll(hostOf(row), GANTRY_INIT)]).toEqual([source, ['cpu-worker']]);
    }
  });

  it('lets the label gantry.io/cpu-overcommit override the default, on the local host and elsewhere', () => {
    const local = { source: 'local', cpuCount: 2, memoryMb: 24_105 };
    expect(cpuOvercommitOf({ ...local, labels: { 'gantry.io/cpu-overcommit': '1' } })).toBe(1);
    expect(placeAll(hostOf({ ...local, labels: { 'gantry.io/cpu-overcommit': '1' } }), GANTRY_INIT)).toEqual([
      'cpu-worker',
    ]);
    expect(cpuOvercommitOf({ ...local, labels: { 'gantry.io/cpu-overcommit': '2' } })).toBe(2);
    expect(cpuOvercommitOf({ ...local, labels: { 'gantry.io/cpu-overcommit': '32' } })).toBe(32);
    expect(cpuOvercommitOf({ ...local, labels: { 'gantry.io/cpu-overcommit': '1.5' } })).toBe(1.5);
    const api = { source: 'api', cpuCount: 2, memoryMb: 24_105, labels: { 'gantry.io/cpu-overcommit': '4' } };
    expect(cpuOvercommitOf(api)).toBe(4);
    expect(placeAll(hostOf(api), GANTRY_INIT)).toHaveLength(4);
    // A label that is no positive number counts as absent: the host's default.
    for (const bad of ['0', '-2', 'lots', '']) {
      expect([bad, cpuOvercommitOf({ ...local, labels: { 'gantry.io/cpu-overcommit': bad } })]).toEqual([bad, 6]);
      expect([bad, cpuOvercommitOf({ ...api, labels: { 'gantry.io/cpu-overcommit': bad } })]).toEqual([bad, 1]);
    }
  });
});
