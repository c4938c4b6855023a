/**
 * Search attributes of the orchestration workflows against real parts (an SSH test host in front of
 * Podman, the suite's Temporal): the host's workflow, a worker that upserts its host once placed,
 * and a release's rollout and new worker, as the operator's visibility queries find them.
 */
import type { WorkflowExecutionInfo } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  GantryAccountId,
  GantryEndpointId,
  GantryHostId,
  GantryKind,
  GantryReleaseVersion,
} from '../../contracts/search-attributes.ts';
import { call, type TestPlatform } from '../support/platform.ts';
import {
  ensureOrchestrationWorkerImage,
  type OneHostPlatform,
  ORCHESTRATION_WORKER_IMAGE,
  startOneHostPlatform,
  until,
} from '../support/orchestration.ts';
import { graphql } from '../support/pods.ts';
import { liveWorker } from '../../domain/workers/index.ts';
import { hostWorkflowId, podWorkflowId, rolloutWorkflowId, workerWorkflowId } from '../../contracts/workflows.ts';

let fixture: OneHostPlatform | undefined;
let p: TestPlatform;
let hostId: string;

beforeAll(async () => {
  ensureOrchestrationWorkerImage();
  fixture = await startOneHostPlatform('sa-box');
  ({ p, hostId } = fixture);
}, 600_000);

afterAll(async () => {
  await fixture?.stop();
}, 120_000);

/** Polls a visibility query until it finds exactly `expectedIds` (the dev server's visibility lags a little). */
async function listEventually(
  query: string,
  expectedIds: string[],
  timeoutMs = 30_000,
): Promise<WorkflowExecutionInfo[]> {
  const want = JSON.stringify([...expectedIds].sort());
  let last: WorkflowExecutionInfo[] = [];
  return until(
    `query ${query} to find ${want}`,
    async () => {
      last = [];
      for await (const wf of p.ctx.temporal.workflow.list({ query })) last.push(wf);
      return JSON.stringify(last.map((w) => w.workflowId).sort()) === want ? last : undefined;
    },
    timeoutMs,
    250,
    async () => last.map((w) => w.workflowId),
  );
}

const liveWorkers = (endpointId: string) => p.ctx.db.worker.findMany({ where: { endpointId, ...liveWorker } });

describe('search attributes of hosts, workers and rollouts', () => {
  it('finds the host, the workers on it with their endpoint and release, and a release rollout', async () => {
    const [host] = await listEventually(`GantryKind = 'host' AND GantryHostId = '${hostId}'`, [hostWorkflowId(hostId)]);
    expect(host!.memo).toEqual({ hostName: 'sa-box' });

    const name = 'sa-workers';
    const created = await call(p.url, 'POST', '/v2/serverless', {
      key: p.adminKey,
      body: {
        name,
        image: ORCHESTRATION_WORKER_IMAGE,
        env: { GANTRY_TEST_RELEASE: 'one' },
        workers: { min: 1, max: 1 },
      },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const endpointId = created.body.id as string;
    const accountId = (await p.ctx.db.endpoint.findUniqueOrThrow({ where: { id: endpointId } })).accountId;
    const [first] = await until('a ready worker', async () => {
      const ws = await liveWorkers(endpointId);
      return ws.length === 1 && ws[0]!.status === 'IDLE' ? ws : undefined;
    });

    // "The workers on host Y": placed, the worker upserted its host.
    const [onHost] = await listEventually(
      `GantryKind = 'worker' AND GantryHostId = '${hostId}' AND ExecutionStatus = 'Running'`,
      [workerWorkflowId(first!.id)],
    );
    expect(onHost!.typedSearchAttributes.get(GantryEndpointId)).toBe(endpointId);
    expect(onHost!.typedSearchAttributes.get(GantryAccountId)).toBe(accountId);
    expect(onHost!.typedSearchAttributes.get(GantryReleaseVersion)).toBe(1);
    expect(onHost!.memo).toEqual({ endpointName: name });

    // A release: its rollout, and the worker of release 2 on the same host.
    const patched = await call(p.url, 'PATCH', `/v2/serverless/${endpointId}`, {
      key: p.adminKey,
      body: { env: { GANTRY_TEST_RELEASE: 'two' } },
    });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    const [rollout] = await listEventually(`GantryKind = 'rollout' AND GantryEndpointId = '${endpointId}'`, [
      rolloutWorkflowId(endpointId, 2),
    ]);
    expect(rollout!.typedSearchAttributes.get(GantryReleaseVersion)).toBe(2);
    expect(rollout!.typedSearchAttributes.get(GantryAccountId)).toBe(accountId);
    const [second] = await until('the worker of release 2 ready', async () => {
      const ws = (await liveWorkers(endpointId)).filter((w) => w.releaseVersion === 2 && w.status === 'IDLE');
      return ws.length === 1 ? ws : undefined;
    });
    const [v2] = await listEventually(
      `GantryEndpointId = '${endpointId}' AND GantryKind = 'worker' AND GantryReleaseVersion = 2`,
      [workerWorkflowId(second!.id)],
    );
    expect(v2!.typedSearchAttributes.get(GantryHostId)).toBe(hostId);
    expect(v2!.memo).toEqual({ endpointName: name });
  }, 180_000);

  it("finds a pod's workflow and its worker by pod id, with the pod's name in the memo", async () => {
    const created = await graphql(
      p,
      'mutation Deploy($input: PodFindAndDeployOnDemandInput!) { podFindAndDeployOnDemand(input: $input) { id } }',
      {
        input: { name: 'sa-pod', imageName: ORCHESTRATION_WORKER_IMAGE, gpuCount: 0 },
      },
    );
    expect(created.errors, JSON.stringify(created.errors)).toBeUndefined();
    const podId = created.data.podFindAndDeployOnDemand.id as string;
    const accountId = (await p.ctx.db.pod.findUniqueOrThrow({ where: { id: podId } })).accountId;
    const worker = await until('the pod worker row', async () => p.ctx.db.worker.findFirst({ where: { podId } }));
    const found = await listEventually(`GantryPodId = '${podId}'`, [podWorkflowId(podId), workerWorkflowId(worker.id)]);
    for (const wf of found) {
      expect(wf.typedSearchAttributes.get(GantryAccountId)).toBe(accountId);
      expect(wf.memo).toEqual({ podName: 'sa-pod' });
    }
    expect(found.map((wf) => wf.typedSearchAttributes.get(GantryKind)).sort()).toEqual(['pod', 'worker']);
    expect((await graphql(p, `mutation { podTerminate(input: {podId: "${podId}"}) }`)).errors).toBeUndefined();
  }, 120_000);
});
