/**
 * nvidia-smi parsing, GPU pool mapping and host-probe output parsing. The fixtures follow the exact
 * output of `nvidia-smi --query-gpu=name,memory.total,uuid,driver_version --format=csv,noheader,nounits`
 * (names and MiB sizes as the drivers print them; UUIDs are made up).
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { NvidiaSmiParseError, parseNvidiaSmi, parseProbeOutput, PROBE_SCRIPT } from '../../activities/host-probe.ts';
import {
  describeGpu,
  GPU_MODELS,
  GPU_POOL_IDS,
  GPU_POOLS,
  gpuTypeId,
  isGpuPoolId,
  poolForGpu,
} from '../../domain/catalog/index.ts';

const fixtures = path.join(path.dirname(fileURLToPath(import.meta.url)), '../fixtures/nvidia-smi');
const fixture = (name: string): string => readFileSync(path.join(fixtures, name), 'utf8');

/**
 * A probe's output on a Podman host with nvidia specs: `uuids` given, the specs' GPUs section too
 * (what the probe reads since it checks which GPUs a spec names); `smi` is an nvidia-smi fixture.
 */
function podmanGpuProbe(
  podman: string,
  specs: Array<{ file: string; version: string; uuids?: string[] }>,
  smi = 'h200.csv',
): ReturnType<typeof parseProbeOutput> {
  const named = specs.filter((s) => s.uuids);
  return parseProbeOutput(
    [
      '@@gantry-probe:nproc',
      '8',
      '@@gantry-probe:runtime:podman',
      'path=/usr/bin/podman',
      `version=podman version ${podman}`,
      'usable=1',
      '@@gantry-probe:cdi-specs',
      ...specs.map((s) => s.file),
      '@@gantry-probe:cdi-spec-versions',
      ...specs.map((s) => `${s.file}\t${s.version}\tnvidia.com/gpu`),
      ...(named.length > 0
        ? ['@@gantry-probe:cdi-spec-gpus', ...named.map((s) => `${s.file}\t${s.uuids!.join(' ')} `)]
        : []),
      '@@gantry-probe:nvidia-smi',
      fixture(smi),
      '@@gantry-probe:nvidia-smi-exit',
      smi.endsWith('.csv') ? '0' : '9',
      '@@gantry-probe:end',
      '',
    ].join('\n'),
  );
}

describe('parseNvidiaSmi', () => {
  it('parses one H100 80GB HBM3', () => {
    expect(parseNvidiaSmi(fixture('h100-80gb-hbm3.csv'))).toEqual([
      {
        name: 'NVIDIA H100 80GB HBM3',
        memoryMb: 81559,
        uuid: 'GPU-5b8e2c3a-4f1d-9e7b-2a6c-0d3f8e1b7c45',
        driverVersion: '550.54.15',
      },
    ]);
  });

  it.each([
    ['a100-sxm4-80gb.csv', 'NVIDIA A100-SXM4-80GB', 81920, '535.129.03'],
    ['rtx-4090.csv', 'NVIDIA GeForce RTX 4090', 24564, '550.120'],
    ['l40s.csv', 'NVIDIA L40S', 46068, '550.90.07'],
    ['h200.csv', 'NVIDIA H200', 143771, '560.35.03'],
    ['rtx-3090-old-driver.csv', 'GeForce RTX 3090', 24268, '470.199.02'],
  ])('parses %s', (file, name, memoryMb, driverVersion) => {
    const [gpu, ...rest] = parseNvidiaSmi(fixture(file));
    expect(rest).toEqual([]);
    expect(gpu).toMatchObject({ name, memoryMb, driverVersion });
    expect(gpu!.uuid).toMatch(/^GPU-[0-9a-f-]{36}$/);
  });

  it('parses an 8-GPU box in order, with distinct UUIDs', () => {
    const gpus = parseNvidiaSmi(fixture('8x-h100-80gb-hbm3.csv'));
    expect(gpus).toHaveLength(8);
    expect(new Set(gpus.map((g) => g.uuid)).size).toBe(8);
    expect(gpus.every((g) => g.name === 'NVIDIA H100 80GB HBM3' && g.memoryMb === 81559)).toBe(true);
    expect(gpus[7]!.uuid).toBe('GPU-8495a6b7-9c1a-4e7b-b2d8-5f6a7c8e9d07');
  });

  it('returns no GPUs for empty output', () => {
    expect(parseNvidiaSmi(fixture('empty.csv'))).toEqual([]);
    expect(parseNvidiaSmi('\n\n')).toEqual([]);
  });

  it('accepts CRLF line ends and spaces around fields', () => {
    expect(parseNvidiaSmi('NVIDIA L4 ,  23034 , GPU-11111111-2222-3333-4444-555555555555 , 535.104.05\r\n')).toEqual([
      {
        name: 'NVIDIA L4',
        memoryMb: 23034,
        uuid: 'GPU-11111111-2222-3333-4444-555555555555',
        driverVersion: '535.104.05',
      },
    ]);
  });

  it('rejects what is not GPU data rather than dropping a card', () => {
    expect(() => parseNvidiaSmi(fixture('driver-not-loaded.txt'))).toThrow(NvidiaSmiParseError);
    expect(() =>
      parseNvidiaSmi('NVIDIA H100 80GB HBM3, [N/A], GPU-5b8e2c3a-4f1d-9e7b-2a6c-0d3f8e1b7c45, 550.54.15'),
    ).toThrow(/memory/);
    expect(() => parseNvidiaSmi('NVIDIA H100 80GB HBM3, 81559, not-a-uuid, 550.54.15')).toThrow(/uuid/);
  });
});

describe('GPU pools', () => {
  it.each([
    ['h100-80gb-hbm3.csv', 'ADA_80_PRO', 'NVIDIA H100 80GB HBM3'],
    ['a100-sxm4-80gb.csv', 'AMPERE_80', 'NVIDIA A100-SXM4-80GB'],
    ['rtx-4090.csv', 'ADA_24', 'NVIDIA GeForce RTX 4090'],
    ['l40s.csv', 'ADA_48_PRO', 'NVIDIA L40S'],
    ['h200.csv', 'HOPPER_141', 'NVIDIA H200'],
    ['rtx-3090-old-driver.csv', 'AMPERE_24', 'NVIDIA GeForce RTX 3090'],
    ['a100-pcie-40gb.csv', undefined, 'NVIDIA A100-PCIE-40GB'],
  ])('maps %s to %s', (file, pool, typeId) => {
    const [gpu] = parseNvidiaSmi(fixture(file));
    expect(poolForGpu(gpu!.name, gpu!.memoryMb)).toBe(pool);
    expect(gpuTypeId(gpu!.name)).toBe(typeId);
  });

  it.each([
    ['NVIDIA RTX A4000', 16376, 'AMPERE_16'],
    ['NVIDIA RTX A4500', 20470, 'AMPERE_16'],
    ['NVIDIA RTX 4000 Ada Generation', 20475, 'AMPERE_16'],
    ['NVIDIA RTX A5000', 24564, 'AMPERE_24'],
    ['NVIDIA L4', 23034, 'AMPERE_24'],
    ['NVIDIA GeForce RTX 3090', 24576, 'AMPERE_24'],
    ['NVIDIA GeForce RTX 5090', 32607, 'ADA_32_PRO'],
    ['NVIDIA RTX A6000', 49140, 'AMPERE_48'],
    ['NVIDIA A40', 46068, 'AMPERE_48'],
    ['NVIDIA L40', 46068, 'ADA_48_PRO'],
    ['NVIDIA RTX 6000 Ada Generation', 49140, 'ADA_48_PRO'],
    ['NVIDIA A100 80GB PCIe', 81920, 'AMPERE_80'],
    ['NVIDIA H100 PCIe', 81559, 'ADA_80_PRO'],
    ['NVIDIA H100 NVL', 95830, 'ADA_80_PRO'],
    ['NVIDIA H200 NVL', 143771, 'HOPPER_141'],
    ['NVIDIA RTX PRO 6000 Blackwell Server Edition', 97887, 'BLACKWELL_96'],
    ['NVIDIA B200', 183359, 'BLACKWELL_180'],
    ['A100-SXM4-80GB', 81920, 'AMPERE_80'],
  ])('%s (%i MiB) → %s', (name, memoryMb, pool) => {
    expect(poolForGpu(name, memoryMb)).toBe(pool);
  });

  it('gives no pool to unknown cards, or to known ones with too little memory', () => {
    expect(poolForGpu('NVIDIA GeForce RTX 3060', 12288)).toBeUndefined();
    expect(poolForGpu('Tesla V100-SXM2-16GB', 16160)).toBeUndefined();
    expect(poolForGpu('NVIDIA A100-SXM4-40GB', 40960)).toBeUndefined();
    // A4000 vs A40: the names share a prefix.
    expect(poolForGpu('NVIDIA A40', 46068)).toBe('AMPERE_48');
    expect(poolForGpu('NVIDIA RTX A4000', 16376)).toBe('AMPERE_16');
  });

  it('lists every pool once, with memory and a display name, and every model in a listed pool', () => {
    expect(GPU_POOLS.map((p) => p.id)).toEqual([...GPU_POOL_IDS]);
    for (const pool of GPU_POOLS) {
      expect(pool.memoryGb).toBeGreaterThan(0);
      expect(pool.displayName).toMatch(/GB/);
    }
    // The seven tiers the API reference documents.
    expect(GPU_POOLS.filter((p) => p.documented).map((p) => p.id)).toEqual([
      'AMPERE_16',
      'AMPERE_24',
      'ADA_24',
      'AMPERE_48',
      'ADA_48_PRO',
      'AMPERE_80',
      'ADA_80_PRO',
    ]);
    for (const m of GPU_MODELS) {
      expect(isGpuPoolId(m.pool)).toBe(true);
      // Each model's own nvidia-smi name and size maps back to its pool.
      expect(poolForGpu(m.gpuTypeId, m.memoryGb * 1024 * 0.97)).toBe(m.pool);
    }
    expect(isGpuPoolId('AMPERE_32')).toBe(false);
  });

  it('describes cards for the catalog', () => {
    expect(describeGpu('NVIDIA GeForce RTX 4090', 24564)).toEqual({
      gpuTypeId: 'NVIDIA GeForce RTX 4090',
      displayName: 'RTX 4090',
      memoryGb: 24,
      pool: 'ADA_24',
    });
    expect(describeGpu('NVIDIA GeForce RTX 3060', 12288)).toEqual({
      gpuTypeId: 'NVIDIA GeForce RTX 3060',
      displayName: 'RTX 3060',
      memoryGb: 12,
      pool: undefined,
    });
    expect(gpuTypeId('  Tesla   V100-SXM2-16GB ')).toBe('Tesla V100-SXM2-16GB');
  });
});

/** What PROBE_SCRIPT prints on a Docker GPU host with the NVIDIA runtime (shape of a real run). */
const DOCKER_GPU_HOST = `
@@gantry-probe:nproc
64
@@gantry-probe:meminfo
MemTotal:       528263828 kB
MemAvailable:   501234567 kB
@@gantry-probe:uname
gpu-box-1
5.15.0-105-generic
x86_64
@@gantry-probe:os
Ubuntu 22.04.4 LTS
@@gantry-probe:uid
0
@@gantry-probe:disk:/
/dev/nvme0n1p2   102626232  30123456  67234567  31% /
@@gantry-probe:runtime:docker
path=/usr/bin/docker
version=Docker version 26.1.3, build b72abbb
usable=1
root=/data/docker
runtimes=io.containerd.runc.v2 nvidia runc 
disk=/dev/md0   7501465600 1200000000 6301465600  16% /data
@@gantry-probe:nvidia-ctk
NVIDIA Container Toolkit CLI version 1.15.0
@@gantry-probe:nvidia-container-cli
cli-version: 1.15.0
@@gantry-probe:cdi-specs
@@gantry-probe:cdi-devices
@@gantry-probe:nvidia-smi
${fixture('8x-h100-80gb-hbm3.csv')}
@@gantry-probe:nvidia-smi-exit
0
@@gantry-probe:cuda
12.4
@@gantry-probe:end
`;

describe('parseProbeOutput', () => {
  it('reads a Docker GPU host', () => {
    const p = parseProbeOutput(DOCKER_GPU_HOST);
    expect(p).toMatchObject({
      hostname: 'gpu-box-1',
      arch: 'x86_64',
      os: 'Ubuntu 22.04.4 LTS',
      uid: 0,
      cpuCount: 64,
      memoryMb: 515882,
      cudaVersion: '12.4',
      gpuError: undefined,
    });
    expect(p.containerRuntime).toMatchObject({
      name: 'docker',
      version: '26.1.3',
      usable: true,
      rootDir: '/data/docker',
      dockerRuntimes: ['io.containerd.runc.v2', 'nvidia', 'runc'],
    });
    expect(p.diskPath).toBe('/data/docker');
    expect(p.diskFreeGb).toBeCloseTo(6009.5, 1);
    expect(p.gpuPassthrough).toMatchObject({
      method: 'docker-gpus',
      nvidiaCtkVersion: '1.15.0',
      nvidiaContainerCliVersion: '1.15.0',
      hint: undefined,
    });
    expect(p.gpus).toHaveLength(8);
    expect(p.gpus[0]).toMatchObject({
      name: 'NVIDIA H100 80GB HBM3',
      gpuTypeId: 'NVIDIA H100 80GB HBM3',
      pool: 'ADA_80_PRO',
    });
  });

  it('reads a Podman host with CDI, a Podman docker wrapper, and a failed nvidia-smi', () => {
    const out = [
      '@@gantry-probe:nproc',
      '16',
      '@@gantry-probe:meminfo',
      'MemTotal: 65536000 kB',
      '@@gantry-probe:disk:/',
      '/dev/sda1 1000000 500000 500000 50% /',
      '@@gantry-probe:runtime:docker',
      'path=/usr/bin/docker',
      'version=podman version 4.9.3',
      '@@gantry-probe:runtime:podman',
      'path=/usr/bin/podman',
      'version=podman version 4.9.3',
      'usable=1',
      'root=/var/lib/containers/storage',
      'disk=/dev/sda1 1000000 500000 500000 50% /',
      '@@gantry-probe:nvidia-ctk',
      'NVIDIA Container Toolkit CLI version 1.16.2',
      '@@gantry-probe:cdi-specs',
      '/etc/cdi/nvidia.yaml',
      '@@gantry-probe:cdi-devices',
      'nvidia.com/gpu=0',
      'nvidia.com/gpu=GPU-5b8e2c3a-4f1d-9e7b-2a6c-0d3f8e1b7c45',
      'nvidia.com/gpu=all',
      '@@gantry-probe:nvidia-smi',
      fixture('driver-not-loaded.txt'),
      '@@gantry-probe:nvidia-smi-exit',
      '9',
      '@@gantry-probe:end',
      '',
    ].join('\n');
    const p = parseProbeOutput(out);
    expect(p.runtimes.find((r) => r.name === 'docker')).toMatchObject({ podmanWrapper: true, usable: false });
    expect(p.containerRuntime?.name).toBe('podman');
    expect(p.gpuPassthrough.method).toBe('cdi');
    expect(p.gpuPassthrough.cdiDevices).toContain('nvidia.com/gpu=all');
    expect(p.gpus).toEqual([]);
    expect(p.gpuError).toMatch(/exited with 9: NVIDIA-SMI has failed/);
  });

  it('says when the CDI spec is newer than Podman reads, and reads older Podman as able to use it', () => {
    const probeWith = (podman: string, version: string) =>
      podmanGpuProbe(podman, [{ file: '/etc/cdi/nvidia.yaml', version }]);
    const old = probeWith('4.3.1', '0.6.0');
    expect(old.gpuPassthrough.cdiSpecVersions).toEqual([
      { file: '/etc/cdi/nvidia.yaml', version: '0.6.0', kind: 'nvidia.com/gpu' },
    ]);
    expect(old.gpuPassthrough.method).toBe('none');
    expect(old.gpuPassthrough.hint).toMatch(
      /^the CDI spec \/etc\/cdi\/nvidia.yaml is version 0.6.0, newer than Podman 4.3.1 reads/,
    );
    expect(probeWith('4.3.1', '0.5.0').gpuPassthrough.method).toBe('cdi');
    expect(probeWith('5.2.2', '0.6.0').gpuPassthrough.method).toBe('cdi');
  });

  it("counts only CDI specs that name this host's GPUs, where the probe read which they name", () => {
    const h200 = parseNvidiaSmi(fixture('h200.csv'))[0]!.uuid;
    const other = 'GPU-00000000-1111-2222-3333-444444444444';
    const probeWith = podmanGpuProbe;
    const mine = { file: '/etc/cdi/nvidia.yaml', version: '0.5.0', uuids: [h200] };
    const stale = { file: '/var/run/cdi/old.json', version: '0.5.0', uuids: [other] };
    const ok = probeWith('4.3.1', [mine, stale]);
    expect(ok.gpuPassthrough.method).toBe('cdi');
    expect(ok.gpuPassthrough.cdiSpecGpus).toEqual({ [mine.file]: [h200], [stale.file]: [other] });
    // A spec of other GPUs only (stale, or another machine's): Podman would resolve nothing.
    const onlyStale = probeWith('5.2.2', [stale]);
    expect(onlyStale.gpuPassthrough.method).toBe('none');
    expect(onlyStale.gpuPassthrough.hint).toBe(
      `no CDI spec in /etc/cdi or /var/run/cdi names GPU ${h200}: regenerate it with \`nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml\``,
    );
    // This host's spec too new for Podman 4.3: another GPU's readable spec does not make up for it.
    const tooNew = probeWith('4.3.1', [{ ...mine, version: '0.6.0' }, stale]);
    expect(tooNew.gpuPassthrough.method).toBe('none');
    expect(tooNew.gpuPassthrough.hint).toMatch(/^the CDI spec \/etc\/cdi\/nvidia.yaml is version 0.6.0, newer than/);
    // No GPU answered: nothing to pass through, whatever specs there are.
    expect(probeWith('4.3.1', [mine], 'driver-not-loaded.txt').gpuPassthrough.method).toBe('none');
  });

  it('refuses output of a probe that did not finish', () => {
    expect(() => parseProbeOutput('@@gantry-probe:nproc\n4\n')).toThrow(/incomplete/);
  });

  it('keeps the probe script free of template leftovers', () => {
    expect(PROBE_SCRIPT).not.toContain('${');
    expect(PROBE_SCRIPT).toContain("printf '\\n@@gantry-probe:%s\\n'");
  });
});
