/**
 * What test/replay/record.ts records with: a local Temporal server, a worker whose activities
 * return fixed data from small in-memory worlds the scenarios set, and the functions that run a
 * scenario and write the histories of its workflows into histories/.
 */
import { existsSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { spawnSync } from 'node:child_process';
import type { WorkflowHandle } from '@temporalio/client';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import { loadConfig } from '../../infra/config.ts';
import { resolveTemporalBinary } from '../../infra/temporal.ts';
import type { EndpointActivities, EndpointScalingState } from '../../activities/endpoint.ts';
import type { HostActivities } from '../../activities/host.ts';
import { DEFAULT_ORCHESTRATION_SETTINGS } from '../../domain/shared/index.ts';
import type { RolloutActivities } from '../../activities/rollout.ts';
import type { WorkerActivities } from '../../activities/worker.ts';
import type { EndpointSpec, JobSnapshot } from '../../contracts/workflows.ts';
import type { DeployActivities } from '../../activities/deploy.ts';
import type { JobActivities } from '../../activities/job.ts';
import type { OutputActivities } from '../../activities/purge-outputs.ts';
import type { ImagePrepullActivities } from '../../activities/image-prepull.ts';
import type { MetricsRollupActivities } from '../../activities/metrics-rollup.ts';
import { ApplicationFailure } from '@temporalio/common';
import { GANTRY_SEARCH_ATTRIBUTES } from '../../contracts/search-attributes.ts';

const here = path.dirname(fileURLToPath(import.meta.url));
const dir = path.join(here, 'histories');
/** The worker's bundle entry (workers/temporal-worker.ts bundles the same file). */
const workflowsPath = path.join(here, '..', '..', 'workflows', 'index.ts');
const binary = resolveTemporalBinary(loadConfig());
if (!binary) throw new Error('no Temporal CLI');
export const env = await TestWorkflowEnvironment.createLocal({
  server: { executable: { type: 'existing-path', path: binary }, searchAttributes: [...GANTRY_SEARCH_ATTRIBUTES] },
});

/**
 * A small in-memory world for the orchestration workflows: workers become ready at once, the queue
 * holds what a scenario puts in it. Enough for the workflows to walk every path of a scenario.
 */
export const world = {
  queued: 0,
  workers: new Map<string, { endpointId: string; status: string; releaseVersion: number }>(),
  /** Endpoint rows a scenario changed (the others hold the default below). */
  rows: new Map<string, EndpointSpec>(),
  /** Releases whose workers never become ready. */
  stuckVersions: new Set<number>(),
  /** Releases whose workers fail before they are ready (a bad image). */
  failingVersions: new Set<number>(),
  /** Most workers placed at once per endpoint (unset: any number). */
  room: undefined as number | undefined,
};
export const defaultRow = (endpointId: string): EndpointSpec => ({
  endpointId,
  workersMin: 0,
  workersMax: 3,
  scalerType: 'QUEUE_DELAY',
  scalerValue: 4,
  idleTimeout: 5,
  timeoutMs: 600_000,
  releaseVersion: 1,
});
export const liveStatuses = ['PENDING', 'INITIALIZING', 'IDLE', 'RUNNING', 'DRAINING', 'STANDBY'];
export const fastSettings = {
  ...DEFAULT_ORCHESTRATION_SETTINGS,
  autoscaleActiveMs: 200,
  autoscaleRestMs: 1000,
  readyPollMs: 100,
  watchIntervalSec: 1,
  rolloutPollMs: 200,
};

const orchestration: HostActivities &
  WorkerActivities &
  RolloutActivities &
  Pick<EndpointActivities, 'createWorkerRecords' | 'endpointScalingState' | 'closeOrphanWorkers'> = {
  async orchestrationSettings() {
    return fastSettings;
  },
  async probeAndRecordHost() {
    return { status: 'READY', statusReason: null, becameReady: true };
  },
  async reconcileHostContainers() {
    return { adopted: [], removed: [], closed: [], removedVolumes: [], removedNetworks: [] };
  },
  async liveWorkersOnHost() {
    return [];
  },
  async deleteHostRecord() {},
  async createWorkerRecords({ endpointId, releaseVersion, workerIds }) {
    for (const id of workerIds)
      if (!world.workers.has(id)) world.workers.set(id, { endpointId, status: 'PENDING', releaseVersion });
    return workerIds.length;
  },
  async endpointScalingState(endpointId): Promise<EndpointScalingState> {
    const workers = [...world.workers.entries()].filter(
      ([, w]) => w.endpointId === endpointId && liveStatuses.includes(w.status),
    );
    return {
      exists: true,
      queue: { queued: world.queued, queuedLowPriority: 0, inProgress: 0, oldestQueuedAgeMs: world.queued ? 10 : null },
      workers: workers.map(([id, w]) => {
        const ready = w.status === 'IDLE' || w.status === 'RUNNING';
        const state =
          w.status === 'DRAINING'
            ? 'draining'
            : w.status === 'STANDBY'
              ? 'standby'
              : w.status === 'RUNNING'
                ? 'busy'
                : ready
                  ? 'idle'
                  : 'starting';
        return { id, status: w.status, hostId: 'host1', ready, releaseVersion: w.releaseVersion, idleForMs: 0, state };
      }),
    };
  },
  async placeWorker(workerId) {
    const w = world.workers.get(workerId)!;
    const placed = [...world.workers.entries()].filter(
      ([id, o]) =>
        id !== workerId &&
        o.endpointId === w.endpointId &&
        ['INITIALIZING', 'IDLE', 'RUNNING', 'DRAINING'].includes(o.status),
    ).length;
    if (world.room !== undefined && placed >= world.room) return { placed: false, reason: 'no room' };
    w.status = 'INITIALIZING';
    return { placed: true, hostId: 'host1' };
  },
  async prepareWorkerImage() {
    return { image: 'localhost/recorded:1', outcome: 'present', ms: 1 };
  },
  async startWorkerContainer() {
    return { containerId: 'c0ffee', adopted: false };
  },
  async checkWorkerReady(workerId) {
    if (world.failingVersions.has(world.workers.get(workerId)!.releaseVersion))
      return { state: 'failed', reason: 'the container exited with code 1 before the worker was ready' };
    if (world.stuckVersions.has(world.workers.get(workerId)!.releaseVersion)) return { state: 'waiting' };
    world.workers.get(workerId)!.status = 'IDLE';
    return { state: 'ready' };
  },
  async markWorkerReady() {},
  async inspectWorker() {
    return { state: 'ok' };
  },
  async beginDrain(workerId) {
    world.workers.get(workerId)!.status = 'DRAINING';
  },
  async workerJobsInFlight() {
    return 0;
  },
  async removeWorkerContainer() {
    return true;
  },
  async freezeWorker(workerId) {
    world.workers.get(workerId)!.status = 'STANDBY';
    return { frozen: true, holdMs: null };
  },
  async thawStandbyWorker(workerId) {
    world.workers.get(workerId)!.status = 'IDLE';
    return { thawed: true };
  },
  async finishWorker(workerId, outcome) {
    world.workers.get(workerId)!.status = outcome.status;
    return { requeued: 0 };
  },
  async finishRelease() {},
  async closeOrphanWorkers() {
    return [];
  },
};

/** The job workflow's activities over one job whose state the scenario sets. */
export const jobWorld: {
  snapshot: JobSnapshot | null;
  supervised: number;
  webhooks: number;
  onWebhook?: () => Promise<void>;
} = { snapshot: null, supervised: 0, webhooks: 0 };
const jobActivities: JobActivities = {
  async readJob() {
    return jobWorld.snapshot as JobSnapshot;
  },
  async expireJob() {
    return { ...(jobWorld.snapshot as JobSnapshot), status: 'GONE' };
  },
  async superviseJob() {
    jobWorld.supervised++;
    return jobWorld.snapshot as JobSnapshot;
  },
  async deliverWebhook() {
    jobWorld.webhooks++;
    await jobWorld.onWebhook?.();
  },
};

/** The deploy workflow's activities over one in-memory deployment: releases finish or halt as the scenario says. */
export const deployWorld = { halt: false, reverted: 0, outcome: '' };
const deployActivities: DeployActivities = {
  async applyDeployment() {
    return {
      releases: [
        { endpointId: 'recorded-ep-1', resource: 'api', version: 2, created: false },
        { endpointId: 'recorded-ep-2', resource: 'worker', version: 1, created: true },
      ],
    };
  },
  async waitForReleases() {
    return { failed: deployWorld.halt ? [{ resource: 'api', reason: 'workers of v2 never became ready' }] : [] };
  },
  async revertDeployment() {
    deployWorld.reverted++;
  },
  async completeDeployment() {
    deployWorld.outcome = 'SUCCEEDED';
  },
  async failDeployment() {
    deployWorld.outcome = 'FAILED';
  },
};

/** The purge workflow's activity over an in-memory backlog of expired outputs. */
export const purgeWorld = { expired: 0 };
const outputActivities: OutputActivities = {
  async purgeExpiredOutputs(limit) {
    const n = Math.min(limit, purgeWorld.expired);
    purgeWorld.expired -= n;
    return n;
  },
};

/** The metrics rollup's activity: one run that rolled two minutes. */
const metricsRollupActivities: MetricsRollupActivities = {
  async rollupEndpointMetrics() {
    return {
      from: '2026-11-28T13:00:00.000Z',
      to: '2026-11-28T13:02:00.000Z',
      jobs: 42,
      coldStarts: 1,
      thaws: 0,
      sampledSeconds: 60,
      purged: 3,
    };
  },
};

/** The pre-pull workflow's activities: the hosts a scenario ranks, the ones among them whose pull fails for good. */
export const prepullWorld = { hostIds: [] as string[], failing: new Set<string>() };
const prepullActivities: ImagePrepullActivities = {
  async planImagePrepull() {
    return { image: 'localhost/recorded:1', hostIds: prepullWorld.hostIds, pullTimeoutSec: 60 };
  },
  async prepullImage({ hostId }) {
    if (prepullWorld.failing.has(hostId))
      throw ApplicationFailure.nonRetryable('could not pull localhost/recorded:1: no such image', 'PullFailed');
    return { image: 'localhost/recorded:1', outcome: 'pulled' };
  },
};

const activities: EndpointActivities &
  typeof orchestration &
  JobActivities &
  DeployActivities &
  OutputActivities &
  ImagePrepullActivities &
  MetricsRollupActivities = {
  ...deployActivities,
  ...outputActivities,
  ...prepullActivities,
  ...metricsRollupActivities,
  async loadEndpointSpec(endpointId) {
    return world.rows.get(endpointId) ?? defaultRow(endpointId);
  },
  async readEndpointSpec(endpointId) {
    return world.rows.get(endpointId) ?? defaultRow(endpointId);
  },
  async removeEndpointRecord() {},
  ...orchestration,
  ...jobActivities,
};

export async function until(what: string, fn: () => boolean | Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await fn())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The history holds the marker of the patch (local activities write markers too, so the name is checked). */
export function patchMarked(history: Awaited<ReturnType<WorkflowHandle['fetchHistory']>>, patchId: string): boolean {
  return (history.events ?? []).some((e) => {
    const marker = e.markerRecordedEventAttributes;
    if (marker?.markerName !== 'core_patch') return false;
    const payloads = Object.values(marker.details ?? {}).flatMap((d) => d.payloads ?? []);
    return payloads.some((pl) =>
      Buffer.from(pl.data ?? new Uint8Array())
        .toString('utf8')
        .includes(patchId),
    );
  });
}

export async function record(name: string, scenario: () => Promise<string>): Promise<void> {
  await recordMany([name], async () => [await scenario()]);
}

/** Runs one scenario and keeps the histories of several of its workflows (names[i] for ids[i]). */
export async function recordMany(names: string[], scenario: () => Promise<string[]>): Promise<void> {
  const files = names.map((name) => path.join(dir, `${name}.json`));
  if (files.every((f) => existsSync(f))) {
    for (const f of files) console.log(`kept ${f} (histories are never overwritten)`);
    return;
  }
  const worker = await Worker.create({
    connection: env.nativeConnection,
    taskQueue: 'record',
    workflowsPath,
    activities,
  });
  const workflowIds = await worker.runUntil(scenario);
  files.forEach((file, i) => {
    if (existsSync(file)) {
      console.log(`kept ${file} (histories are never overwritten)`);
      return;
    }
    // The CLI writes the standard JSON history format (the one the Temporal UI downloads).
    const shown = spawnSync(
      binary as string,
      ['workflow', 'show', '--address', env.address, '--workflow-id', workflowIds[i]!, '--output', 'json'],
      { encoding: 'utf8' },
    );
    if (shown.status !== 0) throw new Error(`temporal workflow show failed: ${shown.stderr}`);
    writeFileSync(file, shown.stdout);
    console.log(`wrote ${file}`);
  });
}
