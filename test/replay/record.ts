/**
 * Records the workflow histories that test/replay/replay.test.ts replays. Run it after a deliberate,
 * patched workflow change to add a history of the new shape, never to overwrite an old one:
 *   node --import tsx test/replay/record.ts
 * Activities here return fixed data: replay checks workflow determinism, and activity results are
 * read back from the history.
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
import {
  cancelRollout,
  deleteEndpoint,
  deployWorkflowId,
  endpointChanged,
  endpointWorkflowId,
  getScalingStatus,
  getSpec,
  hostWorkflowId,
  jobChanged,
  jobWorkflowId,
  probeHostNow,
  queueNonEmpty,
  recheckJob,
  removeHost,
  rolloutWorkflowId,
  updateSpec,
  workerWorkflowId,
  type EndpointSpec,
  type JobSnapshot,
} from '../../contracts/workflows.ts';
import type { EndpointRunInput } from '../../workflows/endpoint.ts';
import type { JobRunInput } from '../../workflows/job.ts';
import type { RolloutInput } from '../../workflows/rollout.ts';
import type { DeployActivities } from '../../activities/deploy.ts';
import type { JobActivities } from '../../activities/job.ts';
import type { OutputActivities } from '../../activities/purge-outputs.ts';
import { GANTRY_SEARCH_ATTRIBUTES, gantryMemo, gantrySearchAttributes } from '../../contracts/search-attributes.ts';

const here = path.dirname(fileURLToPath(import.meta.url));
const dir = path.join(here, 'histories');
/** The worker's bundle entry (infra/temporal-worker.ts bundles the same file). */
const workflowsPath = path.join(here, '..', '..', 'workflows', 'index.ts');
const binary = resolveTemporalBinary(loadConfig());
if (!binary) throw new Error('no Temporal CLI');
const env = await TestWorkflowEnvironment.createLocal({
  server: { executable: { type: 'existing-path', path: binary }, searchAttributes: [...GANTRY_SEARCH_ATTRIBUTES] },
});

/**
 * A small in-memory world for the orchestration workflows: workers become ready at once, the queue
 * holds what a scenario puts in it. Enough for the workflows to walk every path of a scenario.
 */
const world = {
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
const defaultRow = (endpointId: string): EndpointSpec => ({
  endpointId,
  workersMin: 0,
  workersMax: 3,
  scalerType: 'QUEUE_DELAY',
  scalerValue: 4,
  idleTimeout: 5,
  timeoutMs: 600_000,
  releaseVersion: 1,
});
const liveStatuses = ['PENDING', 'INITIALIZING', 'IDLE', 'RUNNING', 'DRAINING'];
const fastSettings = {
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
    return { adopted: [], removed: [], closed: [], removedVolumes: [] };
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
          w.status === 'DRAINING' ? 'draining' : w.status === 'RUNNING' ? 'busy' : ready ? 'idle' : 'starting';
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
const jobWorld: {
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
const deployWorld = { halt: false, reverted: 0, outcome: '' };
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
const purgeWorld = { expired: 0 };
const outputActivities: OutputActivities = {
  async purgeExpiredOutputs(limit) {
    const n = Math.min(limit, purgeWorld.expired);
    purgeWorld.expired -= n;
    return n;
  },
};

const activities: EndpointActivities & typeof orchestration & JobActivities & DeployActivities & OutputActivities = {
  ...deployActivities,
  ...outputActivities,
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

async function until(what: string, fn: () => boolean | Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await fn())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The history holds the marker of the patch (local activities write markers too, so the name is checked). */
function patchMarked(history: Awaited<ReturnType<WorkflowHandle['fetchHistory']>>, patchId: string): boolean {
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

async function record(name: string, scenario: () => Promise<string>): Promise<void> {
  await recordMany([name], async () => [await scenario()]);
}

/** Runs one scenario and keeps the histories of several of its workflows (names[i] for ids[i]). */
async function recordMany(names: string[], scenario: () => Promise<string[]>): Promise<void> {
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

try {
  await record('endpointWorkflow-v1-update-and-delete', async () => {
    const workflowId = 'endpoint:recorded00000001';
    const handle = await env.client.workflow.start('endpointWorkflow', {
      workflowId,
      taskQueue: 'record',
      args: [{ endpointId: 'recorded00000001' }],
    });
    await handle.executeUpdate(updateSpec, { args: [{ workersMin: 1, workersMax: 4 }] });
    // A rejected update leaves no trace in the history but must not disturb it either.
    await handle.executeUpdate(updateSpec, { args: [{ workersMin: 9, workersMax: 1 }] }).catch(() => undefined);
    await handle.query(getSpec);
    await handle.signal(deleteEndpoint);
    await handle.result();
    return workflowId;
  });

  // The autoscaler: a queued job at zero workers starts one; a release rolls it over; deletion drains.
  const autoscaleReleaseDelete = async (
    endpointId: string,
    labels: { typedSearchAttributes?: ReturnType<typeof gantrySearchAttributes>; memo?: Record<string, string> },
  ): Promise<string[]> => {
    const handle = await env.client.workflow.start('endpointWorkflow', {
      workflowId: endpointWorkflowId(endpointId),
      taskQueue: 'record',
      args: [{ endpointId }],
      ...labels,
    });
    await until('the spec', async () => (await handle.query(getSpec)) !== null);
    world.queued = 1;
    await handle.signal(queueNonEmpty);
    await until('a ready worker', () =>
      [...world.workers.values()].some((w) => w.endpointId === endpointId && w.status === 'IDLE'),
    );
    const firstWorker = [...world.workers.entries()].find(([, w]) => w.endpointId === endpointId)![0];
    world.queued = 0;
    await handle.executeUpdate(updateSpec, { args: [{ releaseVersion: 2 }] });
    await until('release 2 everywhere', () => {
      const mine = [...world.workers.values()].filter(
        (w) => w.endpointId === endpointId && liveStatuses.includes(w.status),
      );
      return mine.length === 1 && mine[0]!.releaseVersion === 2 && mine[0]!.status === 'IDLE';
    });
    await until('the rollout to finish', async () => (await handle.query(getScalingStatus))?.rollout === null);
    await handle.signal(deleteEndpoint);
    await handle.result();
    await env.client.workflow.getHandle(workerWorkflowId(firstWorker)).result();
    return [endpointWorkflowId(endpointId), workerWorkflowId(firstWorker), rolloutWorkflowId(endpointId, 2)];
  };
  await recordMany(
    [
      'endpointWorkflow-v2-autoscale-release-delete',
      'workerWorkflow-v1-start-ready-drain',
      'rolloutWorkflow-v1-replace-one',
    ],
    () => autoscaleReleaseDelete('recorded00000002', {}),
  );
  // The same with search attributes and memo (contracts/search-attributes.ts): the endpoint started
  // with them as domain/endpoints/endpoints.ts starts it, its worker and rollout inheriting them, the worker
  // upserting its host once placed.
  await recordMany(
    [
      'endpointWorkflow-v3-search-attributes',
      'workerWorkflow-v3-host-search-attribute',
      'rolloutWorkflow-v2-search-attributes',
    ],
    () =>
      autoscaleReleaseDelete('recorded00000004', {
        typedSearchAttributes: gantrySearchAttributes('endpoint', {
          endpointId: 'recorded00000004',
          accountId: 'recordedaccount1',
        }),
        memo: gantryMemo({ endpointName: 'recorded-endpoint' }),
      }),
  );

  const probeRemove = async (
    hostId: string,
    labels: { typedSearchAttributes?: ReturnType<typeof gantrySearchAttributes>; memo?: Record<string, string> },
  ): Promise<string> => {
    const workflowId = hostWorkflowId(hostId);
    const handle = await env.client.workflow.start('hostWorkflow', {
      workflowId,
      taskQueue: 'record',
      args: [{ hostId }],
      ...labels,
    });
    await handle.executeUpdate(probeHostNow, { args: [{}] });
    await handle.signal(removeHost);
    await handle.result();
    return workflowId;
  };
  await record('hostWorkflow-v1-probe-remove', () => probeRemove('recorded00000003', {}));
  // Started without search attributes (as before they existed), today's code labels the run itself once.
  await record('hostWorkflow-v2-labels-old-run', () => probeRemove('recorded00000005', {}));
  // Started as domain/hosts/hosts.ts starts it now.
  await record('hostWorkflow-v3-search-attributes', () =>
    probeRemove('recorded00000006', {
      typedSearchAttributes: gantrySearchAttributes('host', { hostId: 'recorded00000006' }),
      memo: gantryMemo({ hostName: 'recorded-host' }),
    }),
  );

  // A job: queued, taken, a liveness check while it runs, completed, its webhook delivered.
  const runSuperviseWebhook = async (jobId: string, withAttributes: boolean): Promise<string> => {
    const workflowId = jobWorkflowId(jobId);
    const now = Date.now();
    jobWorld.supervised = 0;
    jobWorld.webhooks = 0;
    const queued: JobSnapshot = {
      seq: 0,
      status: 'IN_QUEUE',
      ttlDeadline: now + 86_400_000,
      startedAt: null,
      livenessDeadline: null,
      executionDeadline: null,
      webhookPending: true,
    };
    // As domain/jobs.ts starts it: endpoint, account and the status of the state it carries.
    const typedSearchAttributes = withAttributes
      ? gantrySearchAttributes('job', {
          endpointId: 'recorded00000004',
          accountId: 'recordedaccount1',
          jobStatus: 'IN_QUEUE',
        })
      : undefined;
    const handle = await env.client.workflow.signalWithStart('jobWorkflow', {
      workflowId,
      taskQueue: 'record',
      args: [{ jobId, lostAfterMs: 30_000 }],
      ...(typedSearchAttributes ? { typedSearchAttributes } : {}),
      signal: jobChanged,
      signalArgs: [queued],
    });
    const running: JobSnapshot = {
      ...queued,
      seq: 1,
      status: 'IN_PROGRESS',
      startedAt: now,
      livenessDeadline: now + 1_500,
      executionDeadline: now + 600_000,
    };
    // The liveness check finds the worker alive: a later deadline.
    jobWorld.snapshot = { ...running, livenessDeadline: now + 600_000 };
    await handle.signal(jobChanged, running);
    await until('a liveness check', () => jobWorld.supervised > 0);
    await handle.signal(jobChanged, { ...running, seq: 2, status: 'COMPLETED' });
    await handle.result();
    if (jobWorld.webhooks !== 1) throw new Error(`expected one webhook delivery, saw ${jobWorld.webhooks}`);
    return workflowId;
  };
  await record('jobWorkflow-v1-run-supervise-webhook', () => runSuperviseWebhook('recorded-job-00000001', false));
  // The same started with search attributes: GantryJobStatus upserted on IN_PROGRESS and COMPLETED.
  await record('jobWorkflow-v2-status-search-attribute', () => runSuperviseWebhook('recorded-job-00000002', true));

  // The row as the one truth (endpoint-reread-on-change-v1): started as domain/endpoints/endpoints.ts starts it
  // (signal-with-start of `endpointChanged`), a release reaching it as a changed row and a signal.
  await record('endpointWorkflow-v4-reread-on-change', async () => {
    const endpointId = 'recorded00000007';
    const workflowId = endpointWorkflowId(endpointId);
    const handle = await env.client.workflow.signalWithStart('endpointWorkflow', {
      workflowId,
      taskQueue: 'record',
      args: [{ endpointId } satisfies EndpointRunInput],
      typedSearchAttributes: gantrySearchAttributes('endpoint', { endpointId, accountId: 'recordedaccount1' }),
      memo: gantryMemo({ endpointName: 'recorded-endpoint-7' }),
      signal: endpointChanged,
      signalArgs: [],
    });
    world.rows.set(endpointId, { ...defaultRow(endpointId), workersMin: 1 });
    await handle.signal(endpointChanged);
    await until('a ready worker', () =>
      [...world.workers.values()].some((w) => w.endpointId === endpointId && w.status === 'IDLE'),
    );
    world.rows.set(endpointId, { ...defaultRow(endpointId), workersMin: 1, releaseVersion: 2 });
    await handle.signal(endpointChanged);
    await until('release 2 everywhere', () => {
      const mine = [...world.workers.values()].filter(
        (w) => w.endpointId === endpointId && liveStatuses.includes(w.status),
      );
      return mine.length === 1 && mine[0]!.releaseVersion === 2 && mine[0]!.status === 'IDLE';
    });
    await until('the rollout to finish', async () => (await handle.query(getScalingStatus))?.rollout === null);
    await handle.signal(deleteEndpoint);
    await handle.result();
    return workflowId;
  });

  // Runs continued by today's code carry their whole state (workflows/continue-as-new.ts): the last
  // run of a chain that continued as new after every step.
  await record('endpointWorkflow-v5-continued-run', async () => {
    const endpointId = 'recorded00000008';
    const workflowId = endpointWorkflowId(endpointId);
    world.rows.set(endpointId, { ...defaultRow(endpointId), workersMin: 1 });
    await env.client.workflow.signalWithStart('endpointWorkflow', {
      workflowId,
      taskQueue: 'record',
      args: [{ endpointId, test: { continueAsNewEvery: 'step' } } satisfies EndpointRunInput],
      signal: endpointChanged,
      signalArgs: [],
    });
    const latest = env.client.workflow.getHandle(workflowId);
    await until('a ready worker', () =>
      [...world.workers.values()].some((w) => w.endpointId === endpointId && w.status === 'IDLE'),
    );
    world.rows.set(endpointId, { ...defaultRow(endpointId), workersMin: 1, releaseVersion: 2 });
    await latest.signal(endpointChanged);
    await until(
      'release 2 rolled out and taken in',
      async () =>
        (await latest.query(getSpec))?.releaseVersion === 2 && (await latest.query(getScalingStatus))?.rollout === null,
    );
    await latest.signal(deleteEndpoint);
    await latest.result();
    return workflowId;
  });

  await record('rolloutWorkflow-v3-continued-cancelled', async () => {
    const endpointId = 'recorded00000009';
    const workflowId = rolloutWorkflowId(endpointId, 2);
    world.workers.set('recordedold0001', { endpointId, status: 'IDLE', releaseVersion: 1 });
    world.stuckVersions.add(2);
    const input: RolloutInput = {
      endpointId,
      version: 2,
      previousVersion: 1,
      rollback: false,
      settings: fastSettings,
      drainTimeoutMs: 1000,
      test: { continueAsNewEvery: 'step' },
    };
    await env.client.workflow.start('rolloutWorkflow', { workflowId, taskQueue: 'record', args: [input] });
    await until('a replacement starting', () =>
      [...world.workers.values()].some((w) => w.endpointId === endpointId && w.releaseVersion === 2),
    );
    const latest = env.client.workflow.getHandle(workflowId);
    await latest.signal(cancelRollout);
    const result = await latest.result();
    if (result.status !== 'SUPERSEDED') throw new Error(`expected a superseded rollout, got ${result.status}`);
    return workflowId;
  });

  await record('jobWorkflow-v3-continued-recheck', async () => {
    const jobId = 'recorded-job-00000003';
    const workflowId = jobWorkflowId(jobId);
    const done: JobSnapshot = {
      seq: 3,
      status: 'COMPLETED',
      ttlDeadline: Date.now() + 3_600_000,
      startedAt: Date.now(),
      livenessDeadline: null,
      executionDeadline: null,
      webhookPending: true,
    };
    jobWorld.snapshot = done;
    jobWorld.webhooks = 0;
    // A recheck while the webhook is on its way: the run that follows carries it, and the webhook is not sent twice.
    jobWorld.onWebhook = async () => {
      jobWorld.onWebhook = undefined;
      await env.client.workflow.getHandle(workflowId).signal(recheckJob);
    };
    await env.client.workflow.signalWithStart('jobWorkflow', {
      workflowId,
      taskQueue: 'record',
      args: [{ jobId, lostAfterMs: 30_000, test: { continueAsNewEvery: 'step' } } satisfies JobRunInput],
      signal: jobChanged,
      signalArgs: [done],
    });
    await env.client.workflow.getHandle(workflowId).result();
    if (jobWorld.webhooks !== 1) throw new Error(`expected one webhook delivery, saw ${jobWorld.webhooks}`);
    return workflowId;
  });
  // A second run started by a held-back queued state after the job had finished: it looks at the
  // job after its first look (patch job-first-look-v1, 30 s) and ends, instead of waiting for the TTL.
  await record('jobWorkflow-v4-first-look', async () => {
    const jobId = 'recorded-job-00000004';
    const workflowId = jobWorkflowId(jobId);
    jobWorld.snapshot = {
      seq: 3,
      status: 'COMPLETED',
      ttlDeadline: Date.now() + 86_400_000,
      startedAt: Date.now(),
      livenessDeadline: null,
      executionDeadline: null,
      webhookPending: false,
    };
    const stale: JobSnapshot = {
      seq: 1,
      status: 'IN_QUEUE',
      ttlDeadline: Date.now() + 86_400_000,
      startedAt: null,
      livenessDeadline: null,
      executionDeadline: null,
      webhookPending: false,
    };
    await env.client.workflow.signalWithStart('jobWorkflow', {
      workflowId,
      taskQueue: 'record',
      args: [{ jobId, lostAfterMs: 30_000 } satisfies JobRunInput],
      signal: jobChanged,
      signalArgs: [stale],
    });
    await env.client.workflow.getHandle(workflowId).result();
    if (!patchMarked(await env.client.workflow.getHandle(workflowId).fetchHistory(), 'job-first-look-v1'))
      throw new Error('expected the first-look patch marker');
    return workflowId;
  });

  await record('deployWorkflow-v1-released', async () => {
    deployWorld.halt = false;
    const workflowId = deployWorkflowId('recorded', 'production', 'build00000001');
    const result = await env.client.workflow.execute('deployWorkflow', {
      workflowId,
      taskQueue: 'record',
      args: [{ deploymentId: 'recorded-deployment-1' }],
    });
    if (result.status !== 'SUCCEEDED' || deployWorld.outcome !== 'SUCCEEDED')
      throw new Error(`expected a successful deployment, got ${JSON.stringify(result)}`);
    return workflowId;
  });

  await record('deployWorkflow-v1-halted-reverted', async () => {
    deployWorld.halt = true;
    const workflowId = deployWorkflowId('recorded', 'production', 'build00000002');
    const result = await env.client.workflow.execute('deployWorkflow', {
      workflowId,
      taskQueue: 'record',
      args: [{ deploymentId: 'recorded-deployment-2' }],
    });
    if (result.status !== 'FAILED' || deployWorld.reverted !== 1)
      throw new Error(`expected a reverted deployment, got ${JSON.stringify(result)}`);
    return workflowId;
  });

  // No room beside an old worker that is never idle: the rollout lets it go after twice the surge
  // wait (patch rollout-make-room-when-busy-v1), then its replacement is placed and ready.
  await record('rolloutWorkflow-v4-make-room-when-busy', async () => {
    const endpointId = 'recorded0000000a';
    const workflowId = rolloutWorkflowId(endpointId, 2);
    world.room = 1;
    world.workers.set('recordedold0002', { endpointId, status: 'RUNNING', releaseVersion: 1 });
    const input: RolloutInput = {
      endpointId,
      version: 2,
      previousVersion: 1,
      rollback: false,
      settings: { ...fastSettings, surgeWaitSec: 1, placementRetryMaxMs: 500 },
      drainTimeoutMs: 1000,
    };
    const handle = await env.client.workflow.start('rolloutWorkflow', {
      workflowId,
      taskQueue: 'record',
      args: [input],
    });
    // The old worker has no workflow here: once the rollout let it go (the marker is in its history), it stops.
    await until(
      'the busy old worker let go',
      async () => patchMarked(await handle.fetchHistory(), 'rollout-make-room-when-busy-v1'),
      30_000,
    );
    world.workers.get('recordedold0002')!.status = 'STOPPED';
    const result = await handle.result();
    world.room = undefined;
    if (result.status !== 'COMPLETED') throw new Error(`expected a completed rollout, got ${JSON.stringify(result)}`);
    return workflowId;
  });

  // As above, but the replacements fail: each failed one is tried again (patch
  // rollout-retry-replacement-of-released-v1) until the release halts, not counted done.
  await record('rolloutWorkflow-v5-retry-replacement-of-released', async () => {
    const endpointId = 'recorded0000000b';
    const workflowId = rolloutWorkflowId(endpointId, 2);
    world.room = 1;
    world.failingVersions.add(2);
    world.workers.set('recordedold0003', { endpointId, status: 'RUNNING', releaseVersion: 1 });
    const input: RolloutInput = {
      endpointId,
      version: 2,
      previousVersion: 1,
      rollback: false,
      settings: { ...fastSettings, surgeWaitSec: 1, placementRetryMaxMs: 500, releaseMaxFailures: 2 },
      drainTimeoutMs: 1000,
    };
    const handle = await env.client.workflow.start('rolloutWorkflow', {
      workflowId,
      taskQueue: 'record',
      args: [input],
    });
    await until(
      'the busy old worker let go',
      async () => patchMarked(await handle.fetchHistory(), 'rollout-make-room-when-busy-v1'),
      30_000,
    );
    world.workers.get('recordedold0003')!.status = 'STOPPED';
    const result = await handle.result();
    world.room = undefined;
    world.failingVersions.clear();
    if (result.status !== 'HALTED') throw new Error(`expected a halted rollout, got ${JSON.stringify(result)}`);
    return workflowId;
  });

  // Two full batches and a last short one: the loop's every path.
  await record('purgeExpiredOutputsWorkflow-v1-three-batches', async () => {
    purgeWorld.expired = 2_345;
    const workflowId = 'purge-expired-outputs:recorded-1';
    const result = await env.client.workflow.execute('purgeExpiredOutputsWorkflow', {
      workflowId,
      taskQueue: 'record',
      args: [],
    });
    if (result.deleted !== 2_345) throw new Error(`expected 2345 deleted, got ${JSON.stringify(result)}`);
    return workflowId;
  });
} finally {
  await env.teardown();
}
