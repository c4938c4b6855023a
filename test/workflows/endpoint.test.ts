/**
 * The endpoint workflow (workflows/endpoint.ts) with its rollout and worker workflows, on Temporal's
 * time-skipping test server with fake activities (fake-world.ts): autoscaling, releases and their
 * halt, start back-off and idle scale-down run through minutes of workflow time in moments.
 */
import type { Client } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  cancelRollout,
  endpointChanged,
  endpointWorkflowId,
  getScalingStatus,
  getSpec,
  queueNonEmpty,
  rolloutWorkflowId,
  type RolloutResult,
} from '../../contracts/workflows.ts';
import type { RunTestOptions } from '../../workflows/continue-as-new.ts';
import type { EndpointRunInput } from '../../workflows/endpoint.ts';
import type { RolloutInput } from '../../workflows/rollout.ts';
import { testSettings, type FakeWorld } from './fake-world.ts';
import { queryHandedOn, signalLiveRun, TestBed } from './support.ts';

// A wedged workflow task is reported within 20 s of wedging (support.ts); a loaded machine takes up to 30 s for a scenario.
vi.setConfig({ testTimeout: 90_000 });

let bed: TestBed;
beforeAll(async () => {
  bed = await TestBed.start();
}, 180_000);
afterAll(async () => {
  await bed?.teardown();
});

/** Starts the endpoint's workflow as the domain does: signal-with-start of `endpointChanged`. */
async function startEndpoint(client: Client, taskQueue: string, endpointId: string, test?: RunTestOptions) {
  const input: EndpointRunInput = { endpointId, ...(test ? { test } : {}) };
  await client.workflow.signalWithStart('endpointWorkflow', {
    workflowId: endpointWorkflowId(endpointId),
    taskQueue,
    args: [input],
    signal: endpointChanged,
    signalArgs: [],
  });
  // Not bound to the first run: the handle follows continue-as-new.
  return client.workflow.getHandle(endpointWorkflowId(endpointId));
}

/** Commits a change to the endpoint's row and tells its workflow, as domain/endpoints/endpoints.ts does. */
async function changeEndpoint(
  client: Client,
  world: FakeWorld,
  endpointId: string,
  change: Parameters<FakeWorld['changeRow']>[1],
): Promise<void> {
  world.changeRow(endpointId, change);
  await signalLiveRun(client.workflow.getHandle(endpointWorkflowId(endpointId)), endpointChanged);
}

const versions = (world: FakeWorld, endpointId: string): number[] =>
  world.live(endpointId).map((w) => w.releaseVersion);
const allReady = (world: FakeWorld, endpointId: string, count: number, version: number): boolean => {
  const live = world.live(endpointId);
  return live.length === count && live.every((w) => w.status === 'IDLE' && w.releaseVersion === version);
};

describe('endpoint workflow', () => {
  it('scales idle workers down once their idle timeout has passed', async () => {
    await bed.scenario(async ({ env, world, taskQueue, advanceUntil }) => {
      world.addEndpoint({ endpointId: 'idle', workersMin: 2, workersMax: 3, idleTimeout: 30 });
      const handle = await startEndpoint(env.client, taskQueue, 'idle');
      await advanceUntil('two ready workers', () => world.live('idle').filter((w) => w.status === 'IDLE').length === 2);
      await changeEndpoint(env.client, world, 'idle', { workersMin: 0 });
      await advanceUntil('no worker left', () => world.live('idle').length === 0, 120_000);
      expect(world.drained).toHaveLength(2);
      for (const d of world.drained) expect(d.at - world.workers.get(d.id)!.idleSince).toBeGreaterThanOrEqual(30_000);
      expect(await handle.query(getSpec)).toMatchObject({ workersMin: 0 });
    });
  });
  it('halts a release whose workers cannot start, rolls back to the previous one, and rolls a later good release out', async () => {
    await bed.scenario(async ({ env, world, taskQueue, advanceUntil }) => {
      world.addEndpoint({ endpointId: 'halt', workersMin: 2, workersMax: 2 });
      const handle = await startEndpoint(env.client, taskQueue, 'halt');
      await advanceUntil('two ready workers of release 1', () => allReady(world, 'halt', 2, 1));
      const good = world
        .live('halt')
        .map((w) => w.id)
        .sort();

      world.failingVersions.add(2);
      await changeEndpoint(env.client, world, 'halt', { newRelease: true });
      await advanceUntil('release 2 halted', () => world.release('halt', 2)?.status === 'HALTED');
      expect(world.release('halt', 2)?.reason).toMatch(
        /^\d+ workers of release v2 failed to become ready; rolled back to v1$/,
      );
      expect(world.endpoints.get('halt')!.spec.releaseVersion).toBe(1);
      expect(world.release('halt', 1)?.status).toBe('COMPLETED');
      await advanceUntil(
        'the endpoint back on release 1 with no rollout',
        async () => (await handle.query(getScalingStatus))?.rollout === null,
      );
      expect((await handle.query(getSpec))?.releaseVersion).toBe(1);
      // The workers of release 1 were never touched; those of release 2 failed and are gone.
      expect(
        world
          .live('halt')
          .map((w) => w.id)
          .sort(),
      ).toEqual(good);
      expect(world.drained.map((d) => d.id).filter((id) => good.includes(id))).toEqual([]);
      const failed = [...world.workers.values()].filter((w) => w.releaseVersion === 2);
      expect(failed.length).toBeGreaterThanOrEqual(2);
      expect(failed.every((w) => w.status === 'FAILED' && /exited with code 3/.test(w.statusReason ?? ''))).toBe(true);

      // A later good release rolls out from there, replacing the workers of release 1.
      await changeEndpoint(env.client, world, 'halt', { newRelease: true });
      await advanceUntil(
        'release 3 everywhere',
        () => allReady(world, 'halt', 2, 3) && world.release('halt', 3)?.status === 'COMPLETED',
      );
      expect(
        world.drained
          .map((d) => d.id)
          .filter((id) => good.includes(id))
          .sort(),
      ).toEqual(good);
    });
  });

  it('a release with no room beside a worker that is never idle lets that worker go after twice the surge wait', async () => {
    await bed.scenario(async ({ env, world, taskQueue, advanceUntil }) => {
      world.room = 1;
      world.addEndpoint({ endpointId: 'busy', workersMin: 1, workersMax: 1 });
      await startEndpoint(env.client, taskQueue, 'busy');
      await advanceUntil('one ready worker of release 1', () => allReady(world, 'busy', 1, 1));
      // Steady traffic from now on: the old worker is busy at every look.
      const [old] = world.live('busy');
      world.alwaysBusy.add(old!.id);
      old!.status = 'RUNNING';

      await changeEndpoint(env.client, world, 'busy', { newRelease: true });
      await advanceUntil(
        'release 2 completed',
        () => world.release('busy', 2)?.status === 'COMPLETED' && allReady(world, 'busy', 1, 2),
      );
      const replacement = world.starts.find((s) => s.endpointId === 'busy' && s.releaseVersion === 2)!;
      const drained = world.drained.find((d) => d.id === old!.id)!;
      expect(drained).toBeDefined();
      // Not at the surge wait (it was busy then), at twice it.
      expect(drained.at - replacement.at).toBeGreaterThanOrEqual(2 * testSettings.surgeWaitSec * 1000);
    });
  });

  it('halts a release whose workers fail after the busy worker they replace was let go, and the endpoint gets a worker of the previous one', async () => {
    await bed.scenario(async ({ env, world, taskQueue, advanceUntil }) => {
      world.room = 1;
      world.addEndpoint({ endpointId: 'letgo', workersMin: 1, workersMax: 1 });
      const handle = await startEndpoint(env.client, taskQueue, 'letgo');
      await advanceUntil('one ready worker of release 1', () => allReady(world, 'letgo', 1, 1));
      const [old] = world.live('letgo');
      world.alwaysBusy.add(old!.id);
      old!.status = 'RUNNING';

      world.failingVersions.add(2);
      await changeEndpoint(env.client, world, 'letgo', { newRelease: true });
      // Not COMPLETED: with the old worker gone and its replacement failed, nothing of release 2 ran.
      await advanceUntil('release 2 finished', () =>
        ['HALTED', 'COMPLETED'].includes(world.release('letgo', 2)?.status ?? ''),
      );
      expect(world.release('letgo', 2)).toMatchObject({ status: 'HALTED' });
      expect(world.drained.map((d) => d.id)).toContain(old!.id);
      expect([...world.workers.values()].filter((w) => w.releaseVersion === 2).length).toBeGreaterThanOrEqual(
        testSettings.releaseMaxFailures,
      );
      await advanceUntil('a ready worker of release 1 again', () => allReady(world, 'letgo', 1, 1), 120_000);
      expect((await handle.query(getSpec))?.releaseVersion).toBe(1);
    });
  });

  it('backs off starting workers after failed starts, and stops backing off once one is ready', async () => {
    await bed.scenario(async ({ env, world, taskQueue, advanceUntil }) => {
      world.failingVersions.add(1);
      world.addEndpoint({ endpointId: 'backoff', workersMin: 1, workersMax: 1 });
      const handle = await startEndpoint(env.client, taskQueue, 'backoff');
      let sawReason = false;
      await advanceUntil('six failed starts', async () => {
        sawReason ||= /backing off after \d+ failed starts/.test((await handle.query(getScalingStatus))?.reason ?? '');
        return world.starts.length >= 6;
      });
      expect(sawReason).toBe(true);
      // Each start after a failed one waits twice as long as the one before: 1 s, 2 s, 4 s, 8 s, 16 s.
      const gaps = world.starts.slice(1, 6).map((s, i) => s.at - world.starts[i]!.at);
      gaps.forEach((gap, i) => expect(gap, `gap ${i}: ${gaps.join(', ')}`).toBeGreaterThanOrEqual(1000 * 2 ** i));
      expect(gaps[4]).toBeLessThan(16_000 + 5_000);

      // The image is fixed: the next start works, and a ready worker ends the back-off.
      world.failingVersions.delete(1);
      await advanceUntil('a ready worker', () => allReady(world, 'backoff', 1, 1), 120_000);
      await advanceUntil('no back-off', async () => (await handle.query(getScalingStatus))?.backoffUntil === 0);
    });
  });

  it('wakes at once for a job queued at zero workers', async () => {
    await bed.scenario(async ({ env, world, taskQueue, advanceUntil }) => {
      world.addEndpoint({ endpointId: 'wake', workersMin: 0, workersMax: 2 });
      const handle = await startEndpoint(env.client, taskQueue, 'wake');
      await advanceUntil('the first look', async () => (await handle.query(getScalingStatus)) !== null);
      // At rest the autoscaler looks every 30 s; the signal must not wait for that.
      world.endpoints.get('wake')!.queued = 1;
      const at = await env.currentTimeMs();
      await handle.signal(queueNonEmpty);
      await advanceUntil('a worker started', () => world.starts.length > 0, 60_000, 100);
      expect(world.starts[0]!.at - at).toBeLessThan(5_000);
    });
  });
});

describe('continue-as-new keeps everything (continueAsNewEvery: step)', () => {
  it('endpoint: a rollout that ends at a continue-as-new is taken in; a further release still rolls out and idle workers still scale down', async () => {
    await bed.scenario(async ({ env, world, taskQueue, advanceUntil }) => {
      world.addEndpoint({ endpointId: 'can', workersMin: 1, workersMax: 2, idleTimeout: 10 });
      const handle = await startEndpoint(env.client, taskQueue, 'can', { continueAsNewEvery: 'step' });
      const firstRun = (await handle.describe()).runId;
      await advanceUntil('a ready worker of release 1', () => allReady(world, 'can', 1, 1));

      // Every step ends in continue-as-new: the rollout's end reaches a run that continues at once.
      await changeEndpoint(env.client, world, 'can', { newRelease: true });
      await advanceUntil(
        'release 2 rolled out',
        () => allReady(world, 'can', 1, 2) && world.release('can', 2)?.status === 'COMPLETED',
      );
      // Asked of the run that last handed its state on: this one continues as new at every step.
      await advanceUntil(
        'the endpoint to know that the rollout ended',
        async () => (await queryHandedOn(env.client, endpointWorkflowId('can'), getScalingStatus))?.rollout === null,
        60_000,
      );

      await changeEndpoint(env.client, world, 'can', { newRelease: true });
      await advanceUntil(
        `release 3 rolled out (live workers of versions ${versions(world, 'can').join(', ')})`,
        () => allReady(world, 'can', 1, 3) && world.release('can', 3)?.status === 'COMPLETED',
        120_000,
      );

      await changeEndpoint(env.client, world, 'can', { workersMin: 0 });
      await advanceUntil('the idle worker scaled down', () => world.live('can').length === 0, 120_000);
      expect((await handle.describe()).runId).not.toBe(firstRun);
      expect(await queryHandedOn(env.client, endpointWorkflowId('can'), getSpec)).toMatchObject({
        workersMin: 0,
        releaseVersion: 3,
      });
    });
  });

  it('rollout: a cancel that arrives at a continue-as-new still ends it as superseded', async () => {
    await bed.scenario(async ({ env, world, taskQueue, advanceUntil }) => {
      world.addEndpoint({ endpointId: 'cancel', workersMin: 2, workersMax: 2 });
      world.changeRow('cancel', { newRelease: true });
      for (const id of ['old1', 'old2'])
        world.workers.set(id, { id, endpointId: 'cancel', releaseVersion: 1, status: 'IDLE', idleSince: 0 });
      // The new workers start but never become ready: the rollout keeps waiting for them.
      world.stuckVersions.add(2);
      const input: RolloutInput = {
        endpointId: 'cancel',
        version: 2,
        previousVersion: 1,
        rollback: false,
        settings: testSettings,
        drainTimeoutMs: 1000,
        test: { continueAsNewEvery: 'step' },
      };
      await env.client.workflow.start('rolloutWorkflow', {
        workflowId: rolloutWorkflowId('cancel', 2),
        taskQueue,
        args: [input],
      });
      await advanceUntil(
        'two replacements starting',
        () => versions(world, 'cancel').filter((v) => v === 2).length === 2,
      );

      await signalLiveRun(env.client.workflow.getHandle(rolloutWorkflowId('cancel', 2)), cancelRollout);
      // The latest run, not the first: the first one's result() would walk the whole chain of runs.
      const latest = env.client.workflow.getHandle(rolloutWorkflowId('cancel', 2));
      await advanceUntil(
        'the rollout to end',
        async () => (await latest.describe()).status.name !== 'RUNNING',
        600_000,
        5000,
      );
      const result: RolloutResult = await latest.result();
      expect(result).toMatchObject({ version: 2, status: 'SUPERSEDED' });
      expect(world.release('cancel', 2)?.status).toBe('SUPERSEDED');
    });
  });
});

describe('FlashBoot in the endpoint and worker workflows', () => {
  it('a FLASHBOOT standby expires after flashbootStandbySec, a PRIORITY_FLASHBOOT one stays; a job thaws it instead of a start', async () => {
    await bed.scenario(async ({ env, world, taskQueue, advanceUntil }) => {
      for (const [endpointId, flashboot] of [
        ['fb', 'FLASHBOOT'],
        ['prio', 'PRIORITY_FLASHBOOT'],
      ] as const) {
        world.addEndpoint({ endpointId, workersMin: 0, workersMax: 1, idleTimeout: 5, flashboot });
        await startEndpoint(env.client, taskQueue, endpointId);
        world.endpoints.get(endpointId)!.queued = 1;
        await signalLiveRun(env.client.workflow.getHandle(endpointWorkflowId(endpointId)), queueNonEmpty);
        await advanceUntil(`${endpointId}: a ready worker`, () =>
          world.live(endpointId).some((w) => w.status === 'IDLE'),
        );
        world.endpoints.get(endpointId)!.queued = 0;
        await advanceUntil(`${endpointId}: standing by`, () =>
          world.live(endpointId).some((w) => w.status === 'STANDBY'),
        );
      }
      const [prio] = world.live('prio');
      // A job at zero live workers thaws the standby: no new start.
      const starts = world.starts.length;
      world.endpoints.get('prio')!.queued = 1;
      await signalLiveRun(env.client.workflow.getHandle(endpointWorkflowId('prio')), queueNonEmpty);
      await advanceUntil('the standby thawed', () => world.workers.get(prio!.id)!.status === 'IDLE');
      expect(world.starts.length).toBe(starts);
      world.endpoints.get('prio')!.queued = 0;
      await advanceUntil('standing by again', () => world.workers.get(prio!.id)!.status === 'STANDBY');

      await advanceUntil(
        'the FLASHBOOT standby expired',
        () => world.live('fb').length === 0,
        testSettings.flashbootStandbySec * 1000 + 120_000,
      );
      expect([...world.workers.values()].find((w) => w.endpointId === 'fb')!.statusReason).toMatch(
        /standby expired after 300 s/,
      );
      expect(world.workers.get(prio!.id)!.status).toBe('STANDBY');
    });
  }, 240_000);
});
