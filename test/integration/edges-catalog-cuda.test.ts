/**
 * allowedCudaVersions and minCudaVersion in placement (issue #45), on a GPU test host
 * (test/support/gpu-test-host.ts: captured nvidia-smi answers, CUDA 13.0 in its header) in front of
 * this machine's Podman: a GPU worker or pod whose CUDA constraint the host does not meet is not put
 * there and says why; one whose constraint it meets is placed.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGpuTestHost } from '../support/gpu-test-host.ts';
import { call, type TestPlatform } from '../support/platform.ts';
import { graphql } from '../support/pods.ts';
import {
  ensureOrchestrationWorkerImage,
  type OneHostPlatform,
  ORCHESTRATION_WORKER_IMAGE,
  startOneHostPlatform,
  until,
} from '../support/orchestration.ts';

const H100 = 'NVIDIA H100 80GB HBM3';

describe('CUDA versions in placement, on a GPU host of CUDA 13.0', () => {
  let fixture: OneHostPlatform | undefined;
  let p: TestPlatform;
  let templateId: string;

  beforeAll(async () => {
    ensureOrchestrationWorkerImage();
    fixture = await startOneHostPlatform('cuda-box', {}, () => startGpuTestHost('2x-h100-80gb-hbm3.csv'));
    ({ p } = fixture);
    const t = await graphql(p, 'mutation($input: SaveTemplateInput) { saveTemplate(input: $input) { id } }', {
      input: { name: 'cuda-tpl', imageName: ORCHESTRATION_WORKER_IMAGE, isServerless: true },
    });
    expect(t.errors, JSON.stringify(t.errors)).toBeUndefined();
    templateId = t.data.saveTemplate.id;
  }, 600_000);

  afterAll(async () => {
    await fixture?.stop();
  }, 120_000);

  const saveEndpoint = async (name: string, cuda: Record<string, string>) => {
    const r = await graphql(p, 'mutation($input: EndpointInput!) { saveEndpoint(input: $input) { id } }', {
      input: { name, templateId, gpuIds: 'ADA_80_PRO', gpuCount: 1, workersMin: 1, workersMax: 1, ...cuda },
    });
    expect(r.errors, JSON.stringify(r.errors)).toBeUndefined();
    return r.data.saveEndpoint.id as string;
  };
  const workerOf = (where: { endpointId?: string; podId?: string }) =>
    p.ctx.db.worker.findFirst({ where, orderBy: { createdAt: 'desc' } });

  it('keeps a GPU worker off a host whose CUDA version is not allowed, says why, and places one that is', async () => {
    const row = await p.ctx.db.host.findUniqueOrThrow({ where: { id: fixture!.hostId } });
    expect((row.probe as { cudaVersion?: string }).cudaVersion).toBe('13.0');

    const refused = await saveEndpoint('cuda-124', { allowedCudaVersions: '12.4,12.1' });
    const waiting = await until('the worker waiting with the CUDA reason', async () => {
      const w = await workerOf({ endpointId: refused });
      return w?.statusReason?.startsWith('cannot be placed: ') ? w : undefined;
    });
    expect(waiting.hostId).toBeNull();
    expect(waiting.gpuUuids).toEqual([]);
    expect(waiting.statusReason).toBe(
      'cannot be placed: no READY host has 1 free GPU of pool ADA_80_PRO on one host ' +
        '(1 of 1 host READY, 1 with CUDA 13.0, outside allowedCudaVersions 12.4, 12.1, 0 GPUs of those pools)',
    );
    // The API shows it: THROTTLED with the reason, and GraphQL's workerProblem.
    const listed = await call(p.url, 'GET', `/v2/serverless/${refused}/workers`, { key: p.adminKey });
    expect(listed.body.workers[0]).toMatchObject({ status: 'THROTTLED', statusReason: waiting.statusReason });
    const problem = await graphql(
      p,
      'query($id: String!) { myself { endpoint(id: $id) { workerProblem { kind reason } } } }',
      { id: refused },
    );
    expect(problem.data.myself.endpoint.workerProblem).toEqual({ kind: 'placement', reason: waiting.statusReason });

    // flash's floor (minCudaVersion 12.8) is met by 13.0: placed on the host's GPUs.
    const placed = await saveEndpoint('cuda-floor', { minCudaVersion: '12.8' });
    const w = await until('the worker placed', async () => {
      const x = await workerOf({ endpointId: placed });
      return x?.hostId ? x : undefined;
    });
    expect(w.hostId).toBe(fixture!.hostId);
    expect(w.gpuUuids).toHaveLength(1);
    for (const id of [refused, placed])
      expect((await call(p.url, 'DELETE', `/v2/serverless/${id}`, { key: p.adminKey })).status).toBe(204);
  }, 300_000);

  it('keeps a GPU pod off it too (REST gpu.allowedCudaVersions), with the reason', async () => {
    const made = await call(p.url, 'POST', '/v2/pods', {
      key: p.adminKey,
      body: { name: 'cuda-pod', image: ORCHESTRATION_WORKER_IMAGE, gpu: { id: H100, allowedCudaVersions: ['12.4'] } },
    });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    expect((await p.ctx.db.pod.findUniqueOrThrow({ where: { id: made.body.id } })).allowedCudaVersions).toEqual([
      '12.4',
    ]);
    const w = await until('the pod waiting with the CUDA reason', async () => {
      const x = await workerOf({ podId: made.body.id });
      return x?.statusReason?.includes('CUDA') ? x : undefined;
    });
    expect(w.hostId).toBeNull();
    expect(w.statusReason).toMatch(/1 with CUDA 13\.0, outside allowedCudaVersions 12\.4/);
    expect((await call(p.url, 'DELETE', `/v2/pods/${made.body.id}`, { key: p.adminKey })).status).toBeLessThan(300);
  }, 120_000);
});
