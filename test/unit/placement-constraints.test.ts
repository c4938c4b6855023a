/**
 * The rules behind countries, network volumes, CPU instances and container disk limits, one
 * function at a time (the integration tests run them on real containers).
 */
import { describe, expect, it } from 'vitest';
import { runArgs, type ContainerSpec } from '../../hostctl/containers.ts';
import { diskLimitOf, parseProbeOutput } from '../../activities/host-probe.ts';
import { effectiveDiskLimit } from '../../activities/host.ts';
import {
  cpuInstanceId,
  cpuInstanceProblems,
  DEFAULT_CPU_INSTANCE,
  parseCpuInstanceId,
  smallestForOneVcpu,
} from '../../domain/catalog/index.ts';
import { sharedVolumeDir, volumeStorage } from '../../domain/catalog/index.ts';
import {
  placeWorker,
  type PlacedWorker,
  type PlacementHost,
  type PlacementRequest,
} from '../../domain/workers/index.ts';

const host = (id: string, extra: Partial<PlacementHost> = {}): PlacementHost => ({
  id,
  status: 'READY',
  dataCenterId: 'dc-a',
  gpus: [],
  gpuMethod: 'none',
  maxWorkers: null,
  cpuCount: 8,
  memoryMb: 32 * 1024,
  ...extra,
});
const request = (extra: Partial<PlacementRequest> = {}): PlacementRequest => ({
  endpointId: 'ep',
  gpuPools: [],
  gpuCount: 1,
  dataCenterIds: [],
  ...extra,
});

describe('CPU instances of the hosted service', () => {
  it("runs a 1-vCPU instance (flash's default) at the smallest size, and nothing else changes size", () => {
    const at = (id: string) => smallestForOneVcpu(parseCpuInstanceId(id)!);
    expect(cpuInstanceId(at('cpu3c-1-2'))).toBe('cpu3c-2-4');
    expect(cpuInstanceId(at('cpu3g-1-4'))).toBe('cpu3g-2-8');
    expect(cpuInstanceId(at('cpu3m-1-8'))).toBe('cpu3m-2-16');
    // Not the flavor's memory for one vCPU, not one vCPU, or no such flavor: as asked, and refused.
    for (const id of ['cpu3c-1-99', 'cpu3c-1-4', 'cpu3c-0-0', 'cpu3c-3-6', 'cpu9x-1-2']) {
      expect(cpuInstanceId(at(id))).toBe(id);
      expect(cpuInstanceProblems(at(id)), id).not.toEqual([]);
    }
    expect(at('cpu3c-4-8')).toEqual({ flavorId: 'cpu3c', vcpus: 4, memoryGb: 8 });
  });
});

describe('placement constraints', () => {
  it('keeps workers in the countries asked for, and says how many hosts were outside them', () => {
    const hosts = [
      host('us-1', { country: 'US' }),
      host('cz-1', { country: 'CZ', dataCenterId: 'dc-cz' }),
      host('none-1', { country: null }),
    ];
    expect(placeWorker(request({ countries: ['CZ'] }), hosts, [])).toMatchObject({ ok: true, hostId: 'cz-1' });
    expect(
      placeWorker(request({ countries: ['US', 'CZ'] }), hosts, [{ hostId: 'cz-1', endpointId: 'ep', gpuUuids: [] }]),
    ).toMatchObject({ ok: true, hostId: 'us-1' });
    // Empty: anywhere, hosts without a country included.
    expect(placeWorker(request({ countries: [] }), [host('none-1')], [])).toMatchObject({ ok: true });
    const none = placeWorker(request({ countries: ['FR'] }), hosts, []);
    expect(none).toEqual({
      ok: false,
      reason: 'no capacity: no READY host has room for a CPU worker (3 of 3 hosts READY, 3 outside the locations FR)',
    });
  });

  it('keeps workers in the data centers `locations` names, beside its countries', () => {
    const hosts = [
      host('us-1', { country: 'US', dataCenterId: 'US-CA-2' }),
      host('ro-1', { country: null, dataCenterId: 'EU-RO-1' }),
      host('cz-1', { country: 'CZ', dataCenterId: 'dc-cz' }),
    ];
    expect(placeWorker(request({ countries: ['EU-RO-1'] }), hosts, [])).toMatchObject({ ok: true, hostId: 'ro-1' });
    const busy: PlacedWorker[] = [{ hostId: 'ro-1', endpointId: 'ep', gpuUuids: [] }];
    expect(placeWorker(request({ countries: ['EU-RO-1', 'CZ'] }), hosts, busy)).toMatchObject({ hostId: 'cz-1' });
    // A data center id is matched as the operator spells it, not as a country.
    const none = placeWorker(request({ countries: ['eu-ro-1'] }), hosts, []);
    expect(!none.ok && none.reason).toMatch(/3 outside the locations eu-ro-1/);
  });

  it('keeps workers where their network volume is', () => {
    const hosts = [host('a'), host('b'), host('c')];
    expect(placeWorker(request({ onlyHostIds: ['c'] }), hosts, [])).toMatchObject({ ok: true, hostId: 'c' });
    const none = placeWorker(request({ onlyHostIds: [] }), hosts, []);
    expect(none.ok).toBe(false);
    expect(!none.ok && none.reason).toMatch(/3 not where the network volume is/);
  });

  it("reserves CPU instances against the host's CPUs and memory, times its overcommit; GPU workers reserve none", () => {
    const box = host('box', { cpuCount: 8, memoryMb: 16 * 1024 });
    const cpu = { vcpus: 4, memoryMb: 8 * 1024 };
    const placed: PlacedWorker[] = [];
    for (let i = 0; i < 2; i++) {
      const p = placeWorker(request({ cpu }), [box], placed);
      expect(p.ok).toBe(true);
      placed.push({ hostId: 'box', endpointId: 'ep', gpuUuids: [], cpu });
    }
    placed.push({ hostId: 'box', endpointId: 'gpu-ep', gpuUuids: ['GPU-1'], cpu: null });
    const third = placeWorker(request({ cpu }), [box], placed);
    expect(third).toEqual({
      ok: false,
      reason:
        'no capacity: no READY host has room for a CPU worker of 4 vCPUs and 8 GB (1 of 1 host READY, 1 without free vCPUs or memory for it)',
    });
    expect(placeWorker(request({ cpu }), [{ ...box, cpuOvercommit: 2 }], placed).ok).toBe(true);
    // Memory binds too.
    expect(
      placeWorker(
        request({ cpu: { vcpus: 2, memoryMb: 17 * 1024 } }),
        [host('m', { cpuCount: 8, memoryMb: 16 * 1024 })],
        [],
      ).ok,
    ).toBe(false);
    // A host whose size was never probed takes none.
    expect(placeWorker(request({ cpu }), [host('unknown', { cpuCount: null, memoryMb: null })], []).ok).toBe(false);
  });
});

describe('CPU instances', () => {
  it("reads and writes the hosted service's instance ids", () => {
    expect(parseCpuInstanceId('cpu3c-2-4')).toEqual({ flavorId: 'cpu3c', vcpus: 2, memoryGb: 4 });
    expect(cpuInstanceId({ flavorId: 'cpu3m', vcpus: 8, memoryGb: 64 })).toBe('cpu3m-8-64');
    expect(parseCpuInstanceId('cpu3c-2')).toBeUndefined();
    expect(parseCpuInstanceId('CPU3C-2-4')).toBeUndefined();
    expect(cpuInstanceId(DEFAULT_CPU_INSTANCE)).toBe('cpu3c-2-4');
  });

  it("holds the spec's rules: vCPUs a power of two >= 2, memory as the flavor gives per vCPU", () => {
    expect(cpuInstanceProblems({ flavorId: 'cpu3g', vcpus: 16, memoryGb: 64 })).toEqual([]);
    expect(cpuInstanceProblems({ flavorId: 'cpu3c', vcpus: 6, memoryGb: 12 })[0]).toMatch(/power of two/);
    expect(cpuInstanceProblems({ flavorId: 'cpu3c', vcpus: 1, memoryGb: 2 })[0]).toMatch(/power of two from 2/);
    expect(cpuInstanceProblems({ flavorId: 'cpu3m', vcpus: 2, memoryGb: 4 })[0]).toMatch(
      /8 GB per vCPU: 2 vCPUs come with 16 GB, not 4/,
    );
    expect(cpuInstanceProblems({ flavorId: 'gpu1', vcpus: 2, memoryGb: 4 })[0]).toMatch(/unknown CPU flavor/);
  });
});

describe('network volume storage', () => {
  it("lives on shared storage, else on its data center's single host, else nowhere", () => {
    expect(volumeStorage({ dataCenterId: 'd', hostId: null }, { networkVolumePath: '/mnt/nv' }, ['h1', 'h2'])).toEqual({
      kind: 'shared-path',
      dataCenterId: 'd',
      path: '/mnt/nv',
    });
    expect(volumeStorage({ dataCenterId: 'd', hostId: null }, null, ['h1'])).toEqual({
      kind: 'host',
      dataCenterId: 'd',
      hostId: 'h1',
      bindTo: 'h1',
    });
    // Once bound, it stays on its host, even after shared storage was added.
    expect(volumeStorage({ dataCenterId: 'd', hostId: 'h1' }, { networkVolumePath: '/mnt/nv' }, ['h1', 'h2'])).toEqual({
      kind: 'host',
      dataCenterId: 'd',
      hostId: 'h1',
    });
    expect(volumeStorage({ dataCenterId: 'd', hostId: null }, { networkVolumePath: null }, ['h1', 'h2'])).toMatchObject(
      { kind: 'none', reason: expect.stringMatching(/2 hosts and no shared storage/) },
    );
    expect(volumeStorage({ dataCenterId: 'd', hostId: null }, null, [])).toMatchObject({
      kind: 'none',
      reason: expect.stringMatching(/no host/),
    });
    expect(sharedVolumeDir('/mnt/nv/', 'v1')).toBe('/mnt/nv/gantry-nv-v1');
  });

  it('mounts shared directories as binds and named volumes as volumes', () => {
    const spec: ContainerSpec = {
      name: 'gantry-w1',
      image: 'img:1',
      args: [],
      env: {},
      labels: {},
      network: 'gantry-h1-a1',
      publishAddress: '10.0.0.5',
      publish: [],
      publishFixed: [],
      gpuUuids: [],
      gpuMethod: 'none',
      diskGb: 5,
      cpus: 2,
      memoryGb: 4,
      binds: [{ source: '/mnt/nv/gantry-nv-v1', path: '/runpod-volume' }],
      volumes: [{ name: 'gantry-nv-h1-v2', path: '/data' }],
    };
    const args = runArgs(spec, '/env').join(' ');
    expect(args).toContain('--storage-opt size=5G --cpus 2 --memory 4g');
    expect(args).toContain('--mount type=volume,source=gantry-nv-h1-v2,target=/data');
    expect(args).toContain('--mount type=bind,source=/mnt/nv/gantry-nv-v1,target=/runpod-volume -- img:1');
  });
});

describe('container disk limits', () => {
  it("uses the runtime's size option only where the storage has quotas", () => {
    expect(
      diskLimitOf({ name: 'podman', storageDriver: 'overlay', storageFs: 'xfs rw,relatime,prjquota' }),
    ).toMatchObject({ method: 'storage-opt' });
    expect(diskLimitOf({ name: 'docker', storageDriver: 'overlay2', storageFs: 'xfs rw,pquota' })).toMatchObject({
      method: 'storage-opt',
    });
    expect(diskLimitOf({ name: 'docker', storageDriver: 'zfs', storageFs: 'zfs rw' })).toMatchObject({
      method: 'storage-opt',
    });
    expect(diskLimitOf({ name: 'podman', storageDriver: 'overlay', storageFs: 'xfs rw,relatime' })).toEqual({
      method: 'watchdog',
      why: "podman's overlay storage on xfs without project quotas has no size option",
    });
    expect(diskLimitOf({ name: 'podman', storageDriver: 'overlay', storageFs: 'ext4 rw,relatime' })).toMatchObject({
      method: 'watchdog',
    });
    expect(diskLimitOf({ name: 'podman', storageDriver: 'vfs', storageFs: undefined })).toMatchObject({
      method: 'watchdog',
    });
    expect(diskLimitOf(undefined)).toMatchObject({ method: 'watchdog' });
  });

  it("reads the storage driver and file system from the probe, and lets the operator's label decide", () => {
    const out = [
      '@@gantry-probe:nproc',
      '4',
      '@@gantry-probe:meminfo',
      'MemTotal: 8000000 kB',
      '@@gantry-probe:disk:/',
      '/dev/sda1 1000000 500000 500000 50% /',
      '@@gantry-probe:runtime:podman',
      'path=/usr/bin/podman',
      'version=podman version 4.3.1',
      'usable=1',
      'root=/var/lib/containers/storage',
      'driver=overlay',
      'disk=/dev/sdb1 1000000 500000 500000 50% /var/lib/containers',
      'fs=xfs rw,relatime,attr2,inode64,prjquota',
      '@@gantry-probe:end',
      '',
    ].join('\n');
    const probe = parseProbeOutput(out);
    expect(probe.containerRuntime).toMatchObject({
      storageDriver: 'overlay',
      storageFs: 'xfs rw,relatime,attr2,inode64,prjquota',
    });
    expect(probe.diskLimit).toEqual({ method: 'storage-opt', why: 'overlay on xfs with project quotas' });
    expect(effectiveDiskLimit(probe, { 'gantry.io/disk-quota': 'false' }).method).toBe('watchdog');
    expect(
      effectiveDiskLimit({ ...probe, diskLimit: { method: 'watchdog', why: 'x' } }, { 'gantry.io/disk-quota': 'true' })
        .method,
    ).toBe('storage-opt');
  });
});
