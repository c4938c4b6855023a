/**
 * A GPU worker's CUDA constraint (an endpoint's or pod's allowedCudaVersions and minCudaVersion)
 * against hosts' CUDA versions, as placement reads them (domain/workers/placement.ts).
 */
import { describe, expect, it } from 'vitest';
import {
  cudaAllows,
  parseCudaVersion,
  placeEvicting,
  placeWorker,
  type PlacementHost,
  type PlacementRequest,
} from '../../domain/workers/index.ts';

const h100 = (uuid: string) => ({ uuid, name: 'NVIDIA H100 80GB HBM3', pool: 'ADA_80_PRO' });
const gpuHost = (id: string, cudaVersion: string | null, extra: Partial<PlacementHost> = {}): PlacementHost => ({
  id,
  status: 'READY',
  dataCenterId: 'dc-a',
  gpus: [h100(`${id}-gpu0`)],
  gpuMethod: 'cdi',
  maxWorkers: null,
  cpuCount: 16,
  memoryMb: 64 * 1024,
  cudaVersion,
  ...extra,
});
const gpuRequest = (cuda: PlacementRequest['cuda'], extra: Partial<PlacementRequest> = {}): PlacementRequest => ({
  endpointId: 'ep',
  gpuPools: ['ADA_80_PRO'],
  gpuCount: 1,
  dataCenterIds: [],
  cuda,
  ...extra,
});

describe('CUDA versions', () => {
  it('reads major.minor, and nothing that is not a version', () => {
    expect(parseCudaVersion('12.4')).toEqual([12, 4]);
    expect(parseCudaVersion(' 13.0 ')).toEqual([13, 0]);
    expect(parseCudaVersion('12.4.1')).toEqual([12, 4]);
    expect(parseCudaVersion('12')).toEqual([12, 0]);
    for (const bad of ['', 'latest', '12.x', null, undefined])
      expect(parseCudaVersion(bad), String(bad)).toBeUndefined();
  });

  it('matches allowedCudaVersions exactly on major.minor, and minCudaVersion numerically', () => {
    const allowed = { allowed: ['12.4', '12.1'] };
    expect(cudaAllows(allowed, '12.4')).toBe(true);
    expect(cudaAllows(allowed, '12.1')).toBe(true);
    // Not a floor: a newer driver is not one of the versions asked for.
    expect(cudaAllows(allowed, '12.6')).toBe(false);
    expect(cudaAllows(allowed, '13.0')).toBe(false);
    expect(cudaAllows(allowed, '12.0')).toBe(false);
    expect(cudaAllows({ min: '12.8' }, '13.0')).toBe(true);
    expect(cudaAllows({ min: '12.8' }, '12.8')).toBe(true);
    expect(cudaAllows({ min: '12.8' }, '12.10')).toBe(true);
    expect(cudaAllows({ min: '12.8' }, '12.4')).toBe(false);
    // Both: one of the set and at least the floor.
    expect(cudaAllows({ allowed: ['12.4', '12.8'], min: '12.6' }, '12.8')).toBe(true);
    expect(cudaAllows({ allowed: ['12.4', '12.8'], min: '12.6' }, '12.4')).toBe(false);
    // No constraint: any host, a host of unknown version among them; a constraint: never an unknown one.
    for (const none of [undefined, {}, { allowed: [] }, { allowed: [], min: null }])
      expect(cudaAllows(none, null), JSON.stringify(none)).toBe(true);
    expect(cudaAllows(allowed, null)).toBe(false);
    expect(cudaAllows({ min: '12.0' }, undefined)).toBe(false);
  });
});

describe('placement with a CUDA constraint', () => {
  const hosts = [gpuHost('old', '12.2'), gpuHost('new', '13.0'), gpuHost('unknown', null)];

  it('places a GPU worker only on a host whose CUDA version is allowed', () => {
    const p = placeWorker(gpuRequest({ allowed: ['13.0'] }), hosts, []);
    expect(p).toMatchObject({ ok: true, hostId: 'new', gpuUuids: ['new-gpu0'] });
    expect(placeWorker(gpuRequest({ min: '12.0' }), [hosts[0]!, hosts[2]!], [])).toMatchObject({
      ok: true,
      hostId: 'old',
    });
    // Without a constraint every host will do (the first by id here).
    expect(placeWorker(gpuRequest(undefined), hosts, [])).toMatchObject({ ok: true, hostId: 'new' });
    expect(placeWorker(gpuRequest({ allowed: [] }), [hosts[2]!], [])).toMatchObject({ ok: true, hostId: 'unknown' });
  });

  it('says which hosts the constraint kept out and why when none is allowed', () => {
    const p = placeWorker(gpuRequest({ allowed: ['12.4', '12.1'] }), hosts, []);
    expect(p).toEqual({
      ok: false,
      reason:
        'no capacity: no READY host has 1 free GPU of pool ADA_80_PRO on one host (3 of 3 hosts READY, ' +
        '2 with CUDA 12.2 or 13.0, outside allowedCudaVersions 12.4, 12.1, ' +
        '1 of unknown CUDA version, which allowedCudaVersions 12.4, 12.1 excludes, 0 GPUs of those pools)',
    });
    const floor = placeWorker(gpuRequest({ min: '13.1' }), [hosts[1]!], []);
    expect(floor.ok).toBe(false);
    expect(!floor.ok && floor.reason).toContain('1 with CUDA 13.0, outside minCudaVersion 13.1');
  });

  it('leaves CPU workers and hosts without GPUs out of it', () => {
    const cpuHost: PlacementHost = { ...gpuHost('cpu', null), gpus: [], gpuMethod: 'none' };
    // A CPU worker ignores the constraint, as the hosted service's CPU pods do.
    const cpu = placeWorker(
      gpuRequest({ allowed: ['12.4'] }, { gpuPools: [], cpu: { vcpus: 2, memoryMb: 4096 } }),
      [cpuHost],
      [],
    );
    expect(cpu).toMatchObject({ ok: true, hostId: 'cpu' });
    // A host without GPUs is not counted as one the constraint kept out.
    const gpu = placeWorker(gpuRequest({ allowed: ['12.4'] }), [cpuHost, hosts[1]!], []);
    expect(!gpu.ok && gpu.reason).toMatch(
      /\(2 of 2 hosts READY, 1 with CUDA 13\.0, outside allowedCudaVersions 12\.4, /,
    );
  });

  it('never evicts a standby on a host the constraint keeps out', () => {
    const standby = { id: 's1', hostId: 'new', endpointId: 'other', gpuUuids: ['new-gpu0'], priority: false, since: 1 };
    const r = placeEvicting(
      gpuRequest({ allowed: ['12.2'] }),
      [hosts[0]!, hosts[1]!],
      [{ hostId: 'old', endpointId: 'x', gpuUuids: ['old-gpu0'] }],
      [standby],
    );
    expect(r.placement.ok).toBe(false);
    expect(r.evict).toEqual([]);
  });
});
