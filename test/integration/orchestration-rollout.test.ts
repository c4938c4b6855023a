/**
 * Rolling releases against real parts: a container-affecting PATCH makes release N+1; its rollout
 * replaces every worker, new ones ready before old ones go; a release whose workers cannot start is
 * halted and rolled back.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { endpointWorkflowId, getScalingStatus, getSpec } from '../../contracts/workflows.ts';
import { call, type TestPlatform } from '../support/platform.ts';
import {
  ensureOrchestrationWorkerImage,
  managedContainers,
  type OneHostPlatform,
  ORCHESTRATION_WORKER_IMAGE,
  startOneHostPlatform,
  until,
} from '../support/orchestration.ts';

const IMAGE = ORCHESTRATION_WORKER_IMAGE;

let fixture: OneHostPlatform | undefined;
let p: TestPlatform;
let hostId: string;

beforeAll(async () => {
  ensureOrchestrationWorkerImage();
  fixture = await startOneHostPlatform('box-1');
  ({ p, hostId } = fixture);
}, 600_000);

afterAll(async () => {
  await fixture?.stop();
}, 120_000);

const workersOf = (endpointId: string) =>
  p.ctx.db.worker.findMany({ where: { endpointId }, orderBy: { createdAt: 'asc' } });
const live = (ws: Awaited<ReturnType<typeof workersOf>>) => ws.filter((w) => !['STOPPED', 'FAILED'].includes(w.status));

describe('releases', () => {
  it('rolls a new release out: every worker replaced, new ones ready before old ones go', async () => {
    const created = await call(p.url, 'POST', '/v2/serverless', {
      key: p.adminKey,
      body: { name: 'rolling', image: IMAGE, env: { GANTRY_TEST_RELEASE: 'one' }, workers: { min: 3, max: 3 } },
    });
    const endpointId = created.body.id as string;
    const old = await until('three ready workers', async () => {
      const ws = live(await workersOf(endpointId));
      return ws.length === 3 && ws.every((w) => w.status === 'IDLE') ? ws : undefined;
    });

    // Sampled all along the rollout: ready workers never fall below the minimum.
    let minReady = Infinity;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const ws = await workersOf(endpointId);
        minReady = Math.min(minReady, ws.filter((w) => w.status === 'IDLE' || w.status === 'RUNNING').length);
        await new Promise((r) => setTimeout(r, 100));
      }
    })();

    // One old worker is busy when the release comes: it finishes its job before it goes.
    const run = await call(p.url, 'POST', `/v2/${endpointId}/run`, {
      key: p.adminKey,
      body: { input: { sleepMs: 4000 } },
    });
    expect(run.status).toBe(200);
    const busyJob = await until('the job to be taken', async () => {
      const j = await p.ctx.db.job.findUniqueOrThrow({ where: { id: run.body.id } });
      return j.status === 'IN_PROGRESS' ? j : undefined;
    });

    const started = Date.now();
    const patched = await call(p.url, 'PATCH', `/v2/serverless/${endpointId}`, {
      key: p.adminKey,
      body: { env: { GANTRY_TEST_RELEASE: 'two' } },
    });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    await until(
      'release 2 to complete',
      async () =>
        (await p.ctx.db.release.findUnique({ where: { endpointId_version: { endpointId, version: 2 } } }))?.status ===
        'COMPLETED',
      120_000,
    );
    console.info(`rollout of 3 workers: ${Date.now() - started} ms`);
    sampling = false;
    await sampler;

    const ws = await workersOf(endpointId);
    const now = live(ws);
    expect(now).toHaveLength(3);
    expect(now.every((w) => w.releaseVersion === 2 && w.status === 'IDLE')).toBe(true);
    for (const o of old) {
      const after = ws.find((w) => w.id === o.id)!;
      expect(after.status).toBe('STOPPED');
      expect(after.statusReason).toMatch(/replaced by release v2/);
    }
    // Each old worker stopped only after some new worker was ready.
    const firstNewReady = Math.min(...now.map((w) => w.readyAt!.getTime()));
    expect(Math.min(...old.map((o) => ws.find((w) => w.id === o.id)!.stoppedAt!.getTime()))).toBeGreaterThanOrEqual(
      firstNewReady,
    );
    expect(minReady).toBeGreaterThanOrEqual(3);
    const job = await p.ctx.db.job.findUniqueOrThrow({ where: { id: busyJob.id } });
    expect(job).toMatchObject({ status: 'COMPLETED', retries: 0, workerId: busyJob.workerId });
    const busyWorker = ws.find((w) => w.id === busyJob.workerId)!;
    expect(busyWorker.releaseVersion).toBe(1);
    expect(busyWorker.stoppedAt!.getTime()).toBeGreaterThanOrEqual(job.completedAt!.getTime());
    const containers = managedContainers(hostId).filter((c) => c.endpointId === endpointId);
    expect(containers.map((c) => c.workerId).sort()).toEqual(now.map((w) => w.id).sort());
    expect(
      (await p.ctx.db.release.findUniqueOrThrow({ where: { endpointId_version: { endpointId, version: 1 } } })).status,
    ).toBe('SUPERSEDED');
    const spec = await p.ctx.temporal.workflow.getHandle(endpointWorkflowId(endpointId)).query(getSpec);
    expect(spec?.releaseVersion).toBe(2);
  }, 240_000);

  it('halts a release whose workers cannot start and rolls the endpoint back', async () => {
    const created = await call(p.url, 'POST', '/v2/serverless', {
      key: p.adminKey,
      body: { name: 'halting', image: IMAGE, env: { GANTRY_TEST_RELEASE: 'good' }, workers: { min: 2, max: 2 } },
    });
    const endpointId = created.body.id as string;
    const good = await until('two ready workers', async () => {
      const ws = live(await workersOf(endpointId));
      return ws.length === 2 && ws.every((w) => w.status === 'IDLE') ? ws : undefined;
    });

    const patched = await call(p.url, 'PATCH', `/v2/serverless/${endpointId}`, {
      key: p.adminKey,
      body: { env: { GANTRY_TEST_RELEASE: 'bad', FAIL_ON_START: '3' } },
    });
    expect(patched.status).toBe(200);
    const halted = await until(
      'release 2 to halt',
      async () => {
        const r = await p.ctx.db.release.findUnique({ where: { endpointId_version: { endpointId, version: 2 } } });
        return r?.status === 'HALTED' ? r : undefined;
      },
      120_000,
    );
    expect(halted.statusReason).toMatch(/workers of release v2 failed to become ready; rolled back to v1/);
    const endpoint = await p.ctx.db.endpoint.findUniqueOrThrow({ where: { id: endpointId } });
    expect(endpoint.currentReleaseVersion).toBe(1);
    expect(endpoint.env).toEqual({ GANTRY_TEST_RELEASE: 'good' });
    expect(
      (await p.ctx.db.release.findUniqueOrThrow({ where: { endpointId_version: { endpointId, version: 1 } } })).status,
    ).toBe('COMPLETED');
    const view = await call(p.url, 'GET', `/v2/serverless/${endpointId}`, { key: p.adminKey });
    expect(view.body.env).toEqual({ GANTRY_TEST_RELEASE: 'good' });

    // The failed workers said why; the good ones were never touched.
    const bad = await until('the workers of release 2 to be gone', async () => {
      const ws = (await workersOf(endpointId)).filter((w) => w.releaseVersion === 2);
      return ws.every((w) => w.status === 'FAILED' || w.status === 'STOPPED') ? ws : undefined;
    });
    expect(bad.length).toBeGreaterThanOrEqual(2);
    expect(
      bad.some(
        (w) => /exited with code 3/.test(w.statusReason ?? '') && /failing on start as told/.test(w.statusReason ?? ''),
      ),
    ).toBe(true);
    await until('the workflow to be back on v1 with no rollout', async () => {
      const s = await p.ctx.temporal.workflow.getHandle(endpointWorkflowId(endpointId)).query(getScalingStatus);
      return s?.rollout === null ? s : undefined;
    });
    const still = live(await workersOf(endpointId));
    expect(still.map((w) => w.id).sort()).toEqual(good.map((w) => w.id).sort());
    expect(
      (await p.ctx.temporal.workflow.getHandle(endpointWorkflowId(endpointId)).query(getSpec))?.releaseVersion,
    ).toBe(1);

    // A later good release rolls out from there.
    const fixed = await call(p.url, 'PATCH', `/v2/serverless/${endpointId}`, {
      key: p.adminKey,
      body: { env: { GANTRY_TEST_RELEASE: 'fixed' } },
    });
    expect(fixed.status).toBe(200);
    const v3 = await until(
      'release 3 to complete',
      async () => {
        const r = await p.ctx.db.release.findFirst({ where: { endpointId, status: 'COMPLETED', version: { gt: 2 } } });
        return r ?? undefined;
      },
      120_000,
    );
    const after = live(await workersOf(endpointId));
    expect(after).toHaveLength(2);
    expect(after.every((w) => w.releaseVersion === v3.version)).toBe(true);
  }, 240_000);
});
