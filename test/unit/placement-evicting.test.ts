/**
 * FlashBoot eviction (domain/workers/placement.ts, placeEvicting): a standby's room is reclaimable,
 * FLASHBOOT before PRIORITY_FLASHBOOT, oldest first, only on the chosen host, only standbys whose
 * room the worker takes, and never a running or starting worker.
 */
import { describe, expect, it } from 'vitest';
import {
  placeEvicting,
  type PlacedWorker,
  type PlacementHost,
  type PlacementRequest,
  type StandbyWorker,
} from '../../domain/workers/index.ts';

const gpu = (uuid: string, pool: string) => ({ uuid, name: pool, pool });
const host = (id: string, gpus: ReturnType<typeof gpu>[], extra: Partial<PlacementHost> = {}): PlacementHost => ({
  id,
  status: 'READY',
  dataCenterId: 'dc-a',
  gpus,
  gpuMethod: gpus.length > 0 ? 'cdi' : 'none',
  maxWorkers: null,
  cpuCount: 2,
  memoryMb: 8192,
  ...extra,
});
const gpuRequest = (pool = 'ADA_80_PRO'): PlacementRequest => ({
  endpointId: 'new',
  gpuPools: [pool],
  gpuCount: 1,
  dataCenterIds: [],
});
const standby = (id: string, hostId: string, gpuUuids: string[], since: number, priority = false): StandbyWorker => ({
  id,
  hostId,
  endpointId: `ep-${id}`,
  gpuUuids,
  since,
  priority,
});

describe('placement that may evict FlashBoot standbys', () => {
  const h1 = host('h1', [gpu('g1', 'ADA_80_PRO'), gpu('g2', 'ADA_80_PRO')]);

  it('evicts nothing while a host has room', () => {
    const r = placeEvicting(gpuRequest(), [h1], [], [standby('s1', 'h1', ['g1'], 1)]);
    expect(r).toMatchObject({ placement: { ok: true, gpuUuids: ['g2'] }, evict: [] });
  });

  it('evicts FLASHBOOT before PRIORITY_FLASHBOOT, and the oldest first', () => {
    const older = standby('old-priority', 'h1', ['g1'], 1, true);
    const newer = standby('new-flashboot', 'h1', ['g2'], 2);
    expect(placeEvicting(gpuRequest(), [h1], [], [older, newer])).toMatchObject({
      placement: { ok: true, gpuUuids: ['g2'] },
      evict: ['new-flashboot'],
    });
    const a = standby('a', 'h1', ['g1'], 5);
    const b = standby('b', 'h1', ['g2'], 3);
    expect(placeEvicting(gpuRequest(), [h1], [], [a, b]).evict).toEqual(['b']);
  });

  it('never evicts a running or starting worker', () => {
    const running: PlacedWorker[] = [
      { hostId: 'h1', endpointId: 'x', gpuUuids: ['g1'] },
      { hostId: 'h1', endpointId: 'y', gpuUuids: ['g2'] },
    ];
    const r = placeEvicting(gpuRequest(), [h1], running, []);
    expect(r.placement.ok).toBe(false);
    expect(r.evict).toEqual([]);
  });

  it('evicts only the standbys whose room the worker takes, on the chosen host', () => {
    const mixed = host('mixed', [gpu('h100', 'ADA_80_PRO'), gpu('4090', 'ADA_24')]);
    const onOtherPool = standby('4090-standby', 'mixed', ['4090'], 1);
    const cpuStandby: StandbyWorker = { ...standby('cpu-standby', 'mixed', [], 0), cpu: { vcpus: 2, memoryMb: 4096 } };
    const onPool = standby('h100-standby', 'mixed', ['h100'], 2, true);
    const elsewhere = standby('elsewhere', 'h2', ['g9'], 0);
    const full = host('h2', [gpu('g9', 'ADA_24')]);
    const r = placeEvicting(gpuRequest(), [mixed, full], [], [onOtherPool, cpuStandby, onPool, elsewhere]);
    expect(r).toMatchObject({ placement: { ok: true, hostId: 'mixed', gpuUuids: ['h100'] }, evict: ['h100-standby'] });
  });

  it('counts standbys against a host’s maxWorkers and evicts one to stay under it', () => {
    const capped = host('capped', [], { maxWorkers: 1, cpuCount: 64, memoryMb: 1 << 20 });
    const cpuRequest: PlacementRequest = { ...gpuRequest(), gpuPools: [], cpu: { vcpus: 2, memoryMb: 4096 } };
    const r = placeEvicting(cpuRequest, [capped], [], [standby('s', 'capped', [], 1)]);
    expect(r).toMatchObject({ placement: { ok: true, hostId: 'capped' }, evict: ['s'] });
  });
});
