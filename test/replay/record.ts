/**
 * Records the workflow histories that test/replay/replay.test.ts replays. Run it after a deliberate,
 * patched workflow change to add a history of the new shape, never to overwrite an old one:
 *   node --import tsx test/replay/record.ts
 * Activities here return fixed data: replay checks workflow determinism, and activity results are
 * read back from the history.
 */
import {
  cancelRollout,
  deleteEndpoint,
  deployWorkflowId,
  endpointChanged,
  endpointWorkflowId,
  getScalingStatus,
  getSpec,
  hostWorkflowId,
  imagePrepullWorkflowId,
  jobChanged,
  jobWorkflowId,
  probeHostNow,
  queueNonEmpty,
  recheckJob,
  removeHost,
  rolloutWorkflowId,
  updateSpec,
  workerWorkflowId,
  type ImagePrepullWorkflow,
  type JobSnapshot,
} from '../../contracts/workflows.ts';
import type { EndpointRunInput } from '../../workflows/endpoint.ts';
import type { JobRunInput } from '../../workflows/job.ts';
import type { RolloutInput } from '../../workflows/rollout.ts';
import { gantryMemo, gantrySearchAttributes } from '../../contracts/search-attributes.ts';
import {
  defaultRow,
  deployWorld,
  env,
  fastSettings,
  jobWorld,
  liveStatuses,
  patchMarked,
  prepullWorld,
  purgeWorld,
  record,
  recordMany,
  until,
  world,
} from './recorder.ts';

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

  // FlashBoot (endpoint-flashboot-v1, worker-flashboot-v1): the idle worker stands by frozen, the
  // next queued job thaws it instead of a start, it stands by again, and the deletion ends it.
  await recordMany(['endpointWorkflow-v6-flashboot-thaw', 'workerWorkflow-v4-flashboot-standby-thaw'], async () => {
    const endpointId = 'recorded00000011';
    const workflowId = endpointWorkflowId(endpointId);
    world.rows.set(endpointId, { ...defaultRow(endpointId), idleTimeout: 0, flashboot: 'FLASHBOOT' });
    const handle = await env.client.workflow.signalWithStart('endpointWorkflow', {
      workflowId,
      taskQueue: 'record',
      args: [{ endpointId } satisfies EndpointRunInput],
      signal: endpointChanged,
      signalArgs: [],
    });
    const mine = () => [...world.workers.entries()].filter(([, w]) => w.endpointId === endpointId);
    world.queued = 1;
    await handle.signal(queueNonEmpty);
    await until('a ready worker', () => mine().some(([, w]) => w.status === 'IDLE'));
    world.queued = 0;
    await until('the worker standing by', () => mine().some(([, w]) => w.status === 'STANDBY'));
    const [workerId] = mine()[0]!;
    world.queued = 1;
    await handle.signal(queueNonEmpty);
    await until('the standby thawed', () => world.workers.get(workerId)!.status === 'IDLE');
    world.queued = 0;
    await until('standing by again', () => world.workers.get(workerId)!.status === 'STANDBY');
    if (mine().length !== 1) throw new Error('a thaw must not start another worker');
    await handle.signal(deleteEndpoint);
    await handle.result();
    await env.client.workflow.getHandle(workerWorkflowId(workerId)).result();
    return [workflowId, workerWorkflowId(workerId)];
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

  // A release's image on the two hosts placement ranks first, started as domain/endpoints/image-prepull.ts
  // starts it: one pulls it, the other fails for good and is reported, never thrown.
  await record('imagePrepullWorkflow-v1-two-hosts-one-fails', async () => {
    const endpointId = 'recorded0000000c';
    const workflowId = imagePrepullWorkflowId(endpointId, 2);
    prepullWorld.hostIds = ['host1', 'host2'];
    prepullWorld.failing.add('host2');
    const result = await env.client.workflow.execute<ImagePrepullWorkflow>('imagePrepullWorkflow', {
      workflowId,
      taskQueue: 'record',
      args: [{ endpointId, version: 2 }],
      typedSearchAttributes: gantrySearchAttributes('prepull', {
        endpointId,
        accountId: 'recordedaccount1',
        releaseVersion: 2,
      }),
      memo: gantryMemo({ endpointName: 'recorded-endpoint-c' }),
    });
    if (result.hosts.map((h) => h.ok).join() !== 'true,false')
      throw new Error(`expected host1 pulled and host2 failed, got ${JSON.stringify(result)}`);
    return workflowId;
  });

  // One run of the metrics rollup, as its schedule starts it: the activity, its result returned.
  await record('rollupEndpointMetricsWorkflow-v1-one-run', async () => {
    const workflowId = 'rollup-endpoint-metrics:recorded-1';
    const result = await env.client.workflow.execute('rollupEndpointMetricsWorkflow', {
      workflowId,
      taskQueue: 'record',
      args: [],
    });
    if (result.jobs !== 42) throw new Error(`expected 42 jobs rolled, got ${JSON.stringify(result)}`);
    return workflowId;
  });
} finally {
  await env.teardown();
}
