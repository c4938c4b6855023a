/**
 * Placement on hosts built from recorded nvidia-smi outputs (test/fixtures/nvidia-smi), mapped to
 * pools the way a host probe does it.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { envFile, isHostLocalImage, registryOf, runArgs, type ContainerSpec } from '../../hostctl/containers.ts';
import { splitArgs } from '../../domain/containers/index.ts';
import { parseNvidiaSmi } from '../../activities/host-probe.ts';
import { describeGpu } from '../../domain/catalog/index.ts';
import {
  placeWorker,
  type PlacedWorker,
  type PlacementHost,
  type PlacementRequest,
} from '../../domain/workers/index.ts';

const fixtures = path.join(path.dirname(fileURLToPath(import.meta.url)), '../fixtures/nvidia-smi');

function host(id: string, fixture: string | null, extra: Partial<PlacementHost> = {}): PlacementHost {
  const gpus = fixture
    ? parseNvidiaSmi(readFileSync(path.join(fixtures, fixture), 'utf8')).map((g) => ({
        uuid: g.uuid,
        name: g.name,
        pool: describeGpu(g.name, g.memoryMb).pool,
      }))
    : [];
  return {
    id,
    status: 'READY',
    dataCenterId: 'dc-a',
    gpus,
    gpuMethod: gpus.length ? 'cdi' : 'none',
    maxWorkers: null,
    ...extra,
  };
}

const request = (extra: Partial<PlacementRequest> = {}): PlacementRequest => ({
  endpointId: 'ep1',
  gpuPools: [],
  gpuCount: 1,
  dataCenterIds: [],
  ...extra,
});

/** Places `n` workers one after another, as the serialized placement activity does. */
function placeMany(
  n: number,
  req: PlacementRequest,
  hosts: PlacementHost[],
  workers: PlacedWorker[] = [],
): PlacedWorker[] {
  const placed = [...workers];
  for (let i = 0; i < n; i++) {
    const p = placeWorker(req, hosts, placed);
    if (!p.ok) throw new Error(p.reason);
    placed.push({ hostId: p.hostId, endpointId: req.endpointId, gpuUuids: p.gpuUuids });
  }
  return placed.slice(workers.length);
}

describe('placeWorker', () => {
  it('gives an 8-GPU H100 box one device per worker, by UUID, never one device twice', () => {
    const box = host('h100x8', '8x-h100-80gb-hbm3.csv');
    const placed = placeMany(8, request({ gpuPools: ['ADA_80_PRO'] }), [box]);
    const uuids = placed.flatMap((w) => w.gpuUuids);
    expect(uuids).toHaveLength(8);
    expect(new Set(uuids).size).toBe(8);
    expect(new Set(uuids)).toEqual(new Set(box.gpus.map((g) => g.uuid)));
    const ninth = placeWorker(request({ gpuPools: ['ADA_80_PRO'] }), [box], placed);
    expect(ninth).toEqual({
      ok: false,
      reason: expect.stringMatching(
        /^no capacity: no READY host has 1 free GPU of pool ADA_80_PRO on one host \(1 of 1 host READY, 8 GPUs of those pools, 0 free\)$/,
      ),
    });
  });

  it('takes gpu.count devices on one host and never splits a worker over hosts', () => {
    const box = host('h100x8', '8x-h100-80gb-hbm3.csv');
    const req = request({ gpuPools: ['ADA_80_PRO'], gpuCount: 3 });
    const placed = placeMany(2, req, [box]);
    expect(placed.map((w) => w.gpuUuids.length)).toEqual([3, 3]);
    expect(new Set(placed.flatMap((w) => w.gpuUuids)).size).toBe(6);
    // Two devices are left: not enough for a third worker of three.
    expect(placeWorker(req, [box], placed).ok).toBe(false);
    // But a one-GPU worker of another endpoint fits.
    const other = placeWorker(request({ endpointId: 'ep2', gpuPools: ['ADA_80_PRO'] }), [box], placed);
    expect(other.ok && other.gpuUuids.length).toBe(1);
  });

  it('places only on pools the endpoint lists, in any listed pool with capacity', () => {
    const hosts = [
      host('rtx4090', 'rtx-4090.csv'),
      host('l40s', 'l40s.csv'),
      host('a100', 'a100-sxm4-80gb.csv'),
      host('a100-40', 'a100-pcie-40gb.csv'),
    ];
    const ada24 = placeWorker(request({ gpuPools: ['ADA_24'] }), hosts, []);
    expect(ada24).toMatchObject({ ok: true, hostId: 'rtx4090', pool: 'ADA_24', gpuName: 'NVIDIA GeForce RTX 4090' });
    const either = placeMany(2, request({ gpuPools: ['AMPERE_80', 'ADA_48_PRO'] }), hosts);
    expect(either.map((w) => w.hostId).sort()).toEqual(['a100', 'l40s']);
    // An A100 40GB is in no 80 GB pool, and no 16 GB card is here at all.
    expect(placeWorker(request({ gpuPools: ['AMPERE_16'] }), hosts, []).ok).toBe(false);
  });

  it('uses the old-driver RTX 3090 (name without NVIDIA prefix) in AMPERE_24', () => {
    expect(
      placeWorker(request({ gpuPools: ['AMPERE_24'] }), [host('old', 'rtx-3090-old-driver.csv')], []),
    ).toMatchObject({ ok: true, hostId: 'old', pool: 'AMPERE_24' });
  });

  it('prefers the listed data centers, but uses others when they are full', () => {
    const hosts = [
      host('a', 'h100-80gb-hbm3.csv', { dataCenterId: 'dc-a' }),
      host('b', 'h100-80gb-hbm3.csv', { dataCenterId: 'dc-b' }),
    ];
    const req = request({ gpuPools: ['ADA_80_PRO'], dataCenterIds: ['dc-b'] });
    const [first, second] = placeMany(2, req, hosts);
    expect(first!.hostId).toBe('b');
    expect(second!.hostId).toBe('a');
  });

  it("spreads an endpoint's workers over hosts, then fills", () => {
    const hosts = [
      host('x', '8x-h100-80gb-hbm3.csv'),
      host('y', '8x-h100-80gb-hbm3.csv'),
      host('z', '8x-h100-80gb-hbm3.csv'),
    ];
    const placed = placeMany(6, request({ gpuPools: ['ADA_80_PRO'] }), hosts);
    const perHost = (id: string): number => placed.filter((w) => w.hostId === id).length;
    expect([perHost('x'), perHost('y'), perHost('z')]).toEqual([2, 2, 2]);
    // Another endpoint's workers count too, after this endpoint's own spread.
    const busy: PlacedWorker[] = [{ hostId: 'x', endpointId: 'other', gpuUuids: [] }];
    expect(placeWorker(request({ endpointId: 'ep3' }), hosts, busy)).toMatchObject({ ok: true, hostId: 'y' });
  });

  it('skips hosts that are not READY, avoided, at maxWorkers, or cannot pass GPUs to containers', () => {
    const req = request({ gpuPools: ['ADA_48_PRO'] });
    const down = host('down', 'l40s.csv', { status: 'UNREACHABLE' });
    const mismatch = host('mismatch', 'l40s.csv', { status: 'HOST_KEY_MISMATCH' });
    const noCdi = host('nocdi', 'l40s.csv', { gpuMethod: 'none' });
    const capped = host('capped', 'l40s.csv', { maxWorkers: 1 });
    const avoided = host('avoided', 'l40s.csv');
    const workers: PlacedWorker[] = [{ hostId: 'capped', endpointId: 'x', gpuUuids: [] }];
    const none = placeWorker({ ...req, avoidHostIds: ['avoided'] }, [down, mismatch, noCdi, capped, avoided], workers);
    expect(none).toEqual({
      ok: false,
      reason:
        'no capacity: no READY host has 1 free GPU of pool ADA_48_PRO on one host (3 of 5 hosts READY, 1 avoided, 1 at maxWorkers, 1 GPU of those pools, 1 free, 1 host without GPU passthrough for containers)',
    });
    const ok = placeWorker(req, [down, mismatch, noCdi, capped, { ...avoided, id: 'fine' }], workers);
    expect(ok).toMatchObject({ ok: true, hostId: 'fine' });
  });

  it('places CPU workers on any READY host, GPU-less hosts first, up to maxWorkers', () => {
    const hosts = [host('gpu', 'h200.csv'), host('cpu', null, { maxWorkers: 2 })];
    const placed = placeMany(3, request(), hosts);
    expect(placed.map((w) => w.hostId)).toEqual(['cpu', 'gpu', 'cpu']);
    expect(placed.every((w) => w.gpuUuids.length === 0)).toBe(true);
    const fourth = placeWorker(request(), hosts, placed);
    expect(fourth).toMatchObject({ ok: true, hostId: 'gpu' });
    expect(placeWorker(request(), [], [])).toEqual({
      ok: false,
      reason: 'no capacity: no READY host has room for a CPU worker (0 of 0 hosts READY)',
    });
  });

  it('keeps one worker on one GPU model when a pool holds two models', () => {
    const mixed: PlacementHost = {
      ...host('mixed', null),
      gpuMethod: 'cdi',
      gpus: [
        { uuid: 'GPU-a', name: 'NVIDIA L40S', pool: 'ADA_48_PRO' },
        { uuid: 'GPU-b', name: 'NVIDIA RTX 6000 Ada Generation', pool: 'ADA_48_PRO' },
        { uuid: 'GPU-c', name: 'NVIDIA L40S', pool: 'ADA_48_PRO' },
      ],
    };
    const p = placeWorker(request({ gpuPools: ['ADA_48_PRO'], gpuCount: 2 }), [mixed], []);
    expect(p).toMatchObject({ ok: true, gpuUuids: ['GPU-a', 'GPU-c'], gpuName: 'NVIDIA L40S' });
  });
});

describe('from placement to container flags', () => {
  const spec = (extra: Partial<ContainerSpec>): ContainerSpec => ({
    name: 'gantry-w1',
    image: 'registry.example.com/team/model:2',
    args: [],
    env: {},
    labels: { 'gantry.worker': 'w1' },
    network: 'gantry-h1-a1',
    publishAddress: '10.0.0.5',
    publish: [],
    publishFixed: [],
    gpuUuids: [],
    gpuMethod: 'none',
    diskGb: undefined,
    ...extra,
  });

  it('hands the placed GPUs to the container by UUID: CDI devices, or Docker --gpus', () => {
    const box = host('h100x8', '8x-h100-80gb-hbm3.csv');
    const p = placeWorker(request({ gpuPools: ['ADA_80_PRO'], gpuCount: 2 }), [box], []);
    if (!p.ok) throw new Error(p.reason);
    const [a, b] = p.gpuUuids as [string, string];
    const cdi = runArgs(spec({ gpuUuids: p.gpuUuids, gpuMethod: 'cdi' }), '/tmp/env');
    expect(cdi.join(' ')).toContain(`--device nvidia.com/gpu=${a} --device nvidia.com/gpu=${b}`);
    const docker = runArgs(spec({ gpuUuids: p.gpuUuids, gpuMethod: 'docker-gpus' }), '/tmp/env');
    expect(docker.slice(docker.indexOf('--gpus'), docker.indexOf('--gpus') + 2)).toEqual([
      '--gpus',
      `"device=${a},${b}"`,
    ]);
    expect(runArgs(spec({ gpuUuids: [a], gpuMethod: 'docker-gpus' }), '/tmp/env')).toContain(`device=${a}`);
    expect(() => runArgs(spec({ gpuUuids: [a], gpuMethod: 'none' }), '/tmp/env')).toThrow(/cannot pass GPUs/);
  });

  it('builds the rest of the run command: no restart, env file, labels, network, ports, disk, args', () => {
    const args = runArgs(spec({ args: ['python', 'handler.py'], publish: ['8000/tcp'], diskGb: 20 }), '/tmp/env');
    expect(args.slice(0, 10)).toEqual([
      'run',
      '--detach',
      '--name',
      'gantry-w1',
      '--restart',
      'no',
      '--pull',
      'never',
      '--env-file',
      '/tmp/env',
    ]);
    expect(args).toContain('gantry.worker=w1');
    // Published ports answer on the one host address Gantry reaches them at, never on all of them.
    expect(args.join(' ')).toContain('--publish 10.0.0.5::8000/tcp');
    expect(runArgs(spec({ publishFixed: ['20000:80'] }), '/tmp/env').join(' ')).toContain(
      '--publish 10.0.0.5:20000:80',
    );
    expect(runArgs(spec({ publishAddress: '::1', publishFixed: ['20000:80'] }), '/tmp/env')).toContain(
      '[::1]:20000:80',
    );
    expect(args.join(' ')).toContain('--storage-opt size=20G');
    expect(args.slice(-4)).toEqual(['--', 'registry.example.com/team/model:2', 'python', 'handler.py']);
    // Whatever the image is called, the runtime's options have ended before it.
    const hostile = runArgs(spec({ image: '--privileged' }), '/tmp/env');
    expect(hostile.indexOf('--')).toBe(hostile.indexOf('--privileged') - 1);
    expect(runArgs(spec({ cpus: 4, memoryGb: 8 }), '/tmp/env').join(' ')).toContain('--cpus 4 --memory 8g');
    // Never the host's network: the account's bridge, without raw sockets.
    expect(args.join(' ')).toContain('--network gantry-h1-a1 --cap-drop NET_RAW');
    expect(args.join(' ')).not.toContain('--network host');
  });

  it('splits args like a shell, without expansion', () => {
    expect(splitArgs(`python handler.py --name "a b" --q 'it''s' \\$HOME "x\\"y" ''`)).toEqual([
      'python',
      'handler.py',
      '--name',
      'a b',
      '--q',
      'its',
      '$HOME',
      'x"y',
      '',
    ]);
    expect(splitArgs('  ')).toEqual([]);
    expect(() => splitArgs('"open')).toThrow(/unterminated/);
  });

  it('writes env files literally and refuses what they cannot carry', () => {
    expect(envFile({ A: 'x y', B: '"q" $HOME', C: '' })).toBe('A=x y\nB="q" $HOME\nC=\n');
    expect(() => envFile({ 'BAD-NAME': 'x' })).toThrow(/not valid/);
    expect(() => envFile({ A: 'two\nlines' })).toThrow(/line break/);
  });

  it("knows registries of image references, and which images are the host's own", () => {
    expect(registryOf('alpine:3.20')).toBe('docker.io');
    expect(registryOf('runpod/worker:1')).toBe('docker.io');
    expect(registryOf('ghcr.io/org/img:1')).toBe('ghcr.io');
    expect(registryOf('localhost:5000/img')).toBe('localhost:5000');
    expect(registryOf('localhost/img:1')).toBe('localhost');
    expect(isHostLocalImage('localhost/img:1')).toBe(true);
    // A registry on the host's loopback serves its images: they are pulled like any other.
    expect(isHostLocalImage('localhost:5000/img')).toBe(false);
    expect(isHostLocalImage('localhost')).toBe(false);
    expect(isHostLocalImage('docker.io/localhost/img')).toBe(false);
  });
});
