/**
 * The scale-out path for real: Temporal's own server (not the dev server) on several history shards
 * over PostgreSQL, one Gantry database, two API processes and two Temporal-worker processes as
 * separate OS processes, a round-robin load balancer in front of the APIs. Under load (a stream of
 * queued jobs served by worker-protocol workers, requests to a load-balancing endpoint on real
 * containers of an SSH test host, and a release rolling out on that endpoint), one API process and
 * one worker process are killed with SIGKILL. Nothing acknowledged may be lost, the rollout must
 * finish, the proxy must keep answering through the surviving API, and the survivors must stop
 * cleanly.
 */
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client, Connection } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createDb, type Db } from '../../domain/shared/index.ts';
import { randomString } from '../../domain/shared/index.ts';
import { endpointWorkflowId, jobTaskQueueOf, rolloutWorkflowId } from '../../contracts/workflows.ts';
import { registerWorkerCredential } from '../../domain/workers/index.ts';
import { startSshTestHost, type SshTestHost } from '../support/ssh-test-host.ts';
import {
  ensureTemporalServerBinaries,
  startTemporalCluster,
  type TemporalCluster,
} from '../support/temporal-server.ts';
import { freshDatabase } from '../support/databases.ts';
import { call } from '../support/platform.ts';
import { freePort } from '../support/ports.ts';
import { startCompatWorker, workerEnv, type WorkerProcess } from '../support/jobs.ts';
import { ensureLbWorkerImage, LB_WORKER_IMAGE } from '../support/lb.ts';
import { FAST_ORCHESTRATION, removeManagedContainers, TEST_HOST_LABELS, until } from '../support/orchestration.ts';
import { startGantryProcess, startLoadBalancer, type GantryProcess, type LoadBalancer } from './support.ts';

const HISTORY_SHARDS = 8;
const log = (msg: string): void => console.error(`[scale] ${msg}`);

let cluster: TemporalCluster | undefined;
let lb: LoadBalancer | undefined;
let sshHost: SshTestHost | undefined;
let hostId: string | undefined;
let db: Db | undefined;
const gantry: GantryProcess[] = [];
const workers: WorkerProcess[] = [];
const figures: Record<string, unknown> = {};

const adminKey = `gntr_scale_${randomString(32)}`;
const taskQueue = `scale-${randomString(8)}`;

beforeAll(async () => {
  let t = Date.now();
  const binaries = await ensureTemporalServerBinaries({ log });
  figures.binariesReadyS = (Date.now() - t) / 1000;
  ensureLbWorkerImage();

  t = Date.now();
  cluster = await startTemporalCluster({
    postgresAdminUrl: inject('postgresAdminUrl'),
    historyShards: HISTORY_SHARDS,
    binaries,
    log,
  });
  figures.clusterStartS = (Date.now() - t) / 1000;

  const databaseUrl = await freshDatabase();
  db = createDb(databaseUrl, 4);
  const apiPorts = [await freePort(), await freePort()];
  lb = await startLoadBalancer(apiPorts.map((port) => ({ host: '127.0.0.1', port })));
  // What every process shares: one database, one cluster, one task queue, one secret key (sealed
  // SSH keys and signed URLs must read the same everywhere), one worker-facing port (the container
  // bridge listener: one API process holds it, the other retries the bind and takes it over when
  // the holder dies), and the load balancer as the public address.
  const shared: Record<string, string> = {
    DATABASE_URL: databaseUrl,
    TEMPORAL_ADDRESS: cluster.address,
    TEMPORAL_NAMESPACE: cluster.namespace,
    GANTRY_TASK_QUEUE: taskQueue,
    GANTRY_ADMIN_API_KEY: adminKey,
    GANTRY_SECRET_KEY: randomBytes(32).toString('hex'),
    GANTRY_PUBLIC_URL: lb.url,
    GANTRY_WORKER_PORT: String(await freePort()),
    LOG_LEVEL: 'warn',
    // A kill -9 strands the activities in flight on the killed worker until their heartbeat
    // timeout (30 s) or, for the quick ones, their start-to-close timeout (1 min): a worker must not
    // be failed for being "not ready" meanwhile. Everything else is the orchestration tests' quick loops.
    GANTRY_ORCHESTRATION: JSON.stringify({ ...FAST_ORCHESTRATION, readyTimeoutSec: 300, releaseReadyDeadlineSec: 300 }),
    GANTRY_LB_HEALTH: JSON.stringify({ intervalMs: 300 }),
    GANTRY_WORKER_PING_INTERVAL_MS: '1000',
    GANTRY_JOB_TAKE_HOLD_MS: '5000',
    // A job whose workflow signal died with the killed API is told again after this.
    GANTRY_JOB_UNSIGNALLED_GRACE_MS: '5000',
    // The test's own load must not meet the per-account quotas.
    GANTRY_JOB_RATE_LIMITS: 'minute=1000000',
    GANTRY_PROXY_RATE_LIMITS: 'minute=1000000',
    GANTRY_RATE_LIMITS: 'minute=100000',
  };
  t = Date.now();
  // The first API process migrates (already done: the database is a clone of the migrated template)
  // and creates the admin key; the rest start side by side.
  gantry.push(await startGantryProcess('api-1', 'api', shared, apiPorts[0]));
  gantry.push(
    ...(await Promise.all([
      startGantryProcess('api-2', 'api', shared, apiPorts[1]),
      startGantryProcess('worker-1', 'worker', shared),
      startGantryProcess('worker-2', 'worker', shared),
    ])),
  );
  figures.gantryStartS = (Date.now() - t) / 1000;

  sshHost = await startSshTestHost();
  const h = await call(lb.url, 'POST', '/v2/hosts', {
    key: adminKey,
    body: {
      name: 'scale-box',
      address: sshHost.host,
      port: sshHost.port,
      privateKey: sshHost.privateKey,
      dataCenterId: 'dc-1',
      labels: TEST_HOST_LABELS,
    },
  });
  expect(h.body.status, JSON.stringify(h.body)).toBe('READY');
  hostId = h.body.id as string;
}, 900_000);

afterAll(async () => {
  for (const w of workers) await w.kill();
  for (const g of gantry) await g.kill9();
  if (hostId) removeManagedContainers([hostId]);
  await sshHost?.stop();
  await lb?.close();
  await db?.$disconnect();
  await cluster?.stop();
  log(`figures: ${JSON.stringify(figures)}`);
}, 120_000);

function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

/** fetch's own message ("fetch failed") with its cause (ECONNRESET, "other side closed", ...). */
const describeError = (err: unknown): string => {
  const cause = (err as { cause?: { code?: string; message?: string } })?.cause;
  return `${String(err)}${cause ? ` (${cause.code ?? ''} ${cause.message ?? ''})` : ''}`;
};

/**
 * The job load: a steady rate that this machine's Temporal completes with room to spare. Unpaced,
 * how many jobs a run submits depends on how fast the machine happens to be that minute; a run that
 * outpaces Temporal leaves a backlog of job workflows behind which every workflow task waits,
 * the rollout's included (seen: a first rollout task 21 s after its start, 30,000+ jobs accepted).
 */
const SUBMITTERS = 6;
const JOBS_PER_SECOND = 30;

/** Per-second counts of `times` in [from, to). */
const rate = (times: number[], from: number, to: number): number =>
  times.filter((x) => x >= from && x < to).length / ((to - from) / 1000);

/**
 * For a failed wait on Temporal: the first workflows `query` matches with the tail of their
 * histories (event type and seconds after `since`), who polls the task queues and what waits in
 * them, and the last output of the surviving worker process.
 */
async function temporalState(query: string, since: number): Promise<unknown> {
  const connection = await Connection.connect({ address: cluster!.address });
  try {
    const client = new Client({ connection, namespace: cluster!.namespace });
    const matching: unknown[] = [];
    for await (const wf of client.workflow.list({ query })) {
      if (matching.length >= 3) break;
      const history = await client.workflow.getHandle(wf.workflowId, wf.runId).fetchHistory();
      const events = (history.events ?? []).map(
        (e) =>
          `${temporal.api.enums.v1.EventType[e.eventType ?? 0] ?? String(e.eventType)}@${Number(e.eventTime?.seconds ?? 0) - Math.floor(since / 1000)}`,
      );
      const jobId = wf.workflowId.startsWith('job:') ? wf.workflowId.slice('job:'.length) : undefined;
      matching.push({
        workflowId: wf.workflowId,
        status: wf.status.name,
        events: events.slice(-20),
        ...(jobId ? { job: await db!.job.findUnique({ where: { id: jobId } }) } : {}),
      });
    }
    // Who polls a queue, and the tasks waiting in matching (tasks history has not handed over yet are not counted).
    const { TASK_QUEUE_TYPE_WORKFLOW: WORKFLOW, TASK_QUEUE_TYPE_ACTIVITY: ACTIVITY } =
      temporal.api.enums.v1.TaskQueueType;
    const describeQueue = async (name: string, taskQueueType: number): Promise<unknown> =>
      connection.workflowService
        .describeTaskQueue({ namespace: cluster!.namespace, taskQueue: { name }, taskQueueType, reportStats: true })
        .then(({ pollers, stats }) => ({
          pollers: pollers.map((p) => ({
            identity: p.identity,
            lastAccessS: Number(p.lastAccessTime?.seconds ?? 0) - Math.floor(since / 1000),
          })),
          backlog: {
            tasks: Number(stats?.approximateBacklogCount ?? 0),
            oldestS: Number(stats?.approximateBacklogAge?.seconds ?? 0),
            addedPerS: stats?.tasksAddRate,
            dispatchedPerS: stats?.tasksDispatchRate,
          },
        }))
        .catch((err: unknown) => String(err));
    return {
      matching,
      controlWorkflows: await describeQueue(taskQueue, WORKFLOW),
      controlActivities: await describeQueue(taskQueue, ACTIVITY),
      jobWorkflows: await describeQueue(jobTaskQueueOf(taskQueue), WORKFLOW),
      survivingWorker: gantry
        .find((g) => g.name === 'worker-2')
        ?.output()
        .slice(-3000),
    };
  } finally {
    await connection.close();
  }
}

describe('Gantry on a Temporal cluster, scaled out', () => {
  it('loses no acknowledged job, finishes a rollout and keeps proxying when an API and a worker process are killed', async () => {
    const base = lb!.url;
    const byName = (name: string): GantryProcess => gantry.find((g) => g.name === name)!;

    // A queue endpoint served by three worker-protocol workers (plain processes) through the load balancer.
    const q = await call(base, 'POST', '/v2/serverless', {
      key: adminKey,
      body: {
        name: 'scale-jobs',
        image: 'localhost/none:1',
        gpu: { pools: ['AMPERE_24'] },
        workers: { min: 0, max: 0 },
      },
    });
    expect(q.status, JSON.stringify(q.body)).toBe(201);
    const queueId = q.body.id as string;
    for (let i = 0; i < 3; i++) {
      const id = `wk${randomString(10)}`;
      await db!.worker.create({ data: { id, endpointId: queueId, status: 'IDLE' } });
      const key = await registerWorkerCredential(db!, { workerId: id, endpointId: queueId });
      workers.push(
        startCompatWorker(
          workerEnv(base, queueId, { id, key }, { RUNPOD_PING_INTERVAL: '1000', WORKER_CONCURRENCY: '8' }),
        ),
      );
    }

    // A load-balancing endpoint with two real containers on the SSH test host.
    const e = await call(base, 'POST', '/v2/serverless', {
      key: adminKey,
      body: {
        name: 'scale-lb',
        type: 'LOAD_BALANCING',
        image: LB_WORKER_IMAGE,
        workers: { min: 2, max: 2 },
        env: { GANTRY_TEST_RELEASE: 'one' },
      },
    });
    expect(e.status, JSON.stringify(e.body)).toBe(201);
    const lbId = e.body.id as string;
    const lbBase = e.body.requestUrls.base as string;
    expect(lbBase.startsWith(base)).toBe(true);
    await until(
      'two ready workers on release 1',
      async () => (await db!.worker.count({ where: { endpointId: lbId, status: 'IDLE', releaseVersion: 1 } })) === 2,
      180_000,
      250,
    );

    // Load: job submissions and proxied requests, each loop recording when and how each call ended.
    let stop = false;
    const accepted: string[] = [];
    const acceptedAt: number[] = [];
    const submitFailures: Array<{ t: number; what: string }> = [];
    const submit = async (): Promise<void> => {
      const began = Date.now();
      for (let i = 0; !stop; i++) {
        // Paced: never ahead of its share of JOBS_PER_SECOND (a slower machine simply runs behind it).
        const ahead = began + (i * 1000 * SUBMITTERS) / JOBS_PER_SECOND - Date.now();
        if (ahead > 0) await sleep(ahead);
        try {
          const r = await call(base, 'POST', `/v2/${queueId}/run`, {
            key: adminKey,
            body: { input: { op: 'sleep', ms: 20, i } },
          });
          if (r.status === 200 && typeof r.body?.id === 'string') {
            accepted.push(r.body.id as string);
            acceptedAt.push(Date.now());
          } else submitFailures.push({ t: Date.now(), what: `${r.status} ${JSON.stringify(r.body)}` });
        } catch (err) {
          submitFailures.push({ t: Date.now(), what: describeError(err) });
          await sleep(50);
        }
      }
    };
    const proxied: Array<{ t: number; ok: boolean; worker?: string; what?: string }> = [];
    const proxy = async (): Promise<void> => {
      for (let i = 0; !stop; i++) {
        try {
          const r = await call(lbBase, 'POST', '/process', { key: adminKey, body: { i, sleepMs: 20 } });
          proxied.push({
            t: Date.now(),
            ok: r.status === 200,
            worker: r.body?.worker,
            what: r.status === 200 ? undefined : `${r.status} ${JSON.stringify(r.body)}`,
          });
        } catch (err) {
          proxied.push({ t: Date.now(), ok: false, what: describeError(err) });
          await sleep(50);
        }
      }
    };
    const loadStarted = Date.now();
    const load = Promise.all([...Array.from({ length: SUBMITTERS }, submit), ...Array.from({ length: 3 }, proxy)]);
    await sleep(10_000);

    // A release: the rollout replaces both containers, one at a time.
    const patched = await call(base, 'PATCH', `/v2/serverless/${lbId}`, {
      key: adminKey,
      body: { env: { GANTRY_TEST_RELEASE: 'two' } },
    });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    const releaseStarted = Date.now();
    // Normally 1-3 s. Once in about fifteen runs the first worker of release 2 came after more than
    // 60 s (cause not found yet): a slow start is reported with the state that explains it, and only
    // a start that never comes fails here (the rollout's own deadline is checked below).
    const rolloutStartState = async (): Promise<unknown> => ({
      releases: await db!.release.findMany({ where: { endpointId: lbId } }),
      workers: await db!.worker.findMany({
        where: { endpointId: lbId },
        select: { id: true, status: true, releaseVersion: true },
      }),
      temporal: await temporalState(
        `WorkflowId IN ('${endpointWorkflowId(lbId)}', '${rolloutWorkflowId(lbId, 2)}')`,
        releaseStarted,
      ),
      otherWorker: byName('worker-1').output().slice(-3000),
    });
    await until(
      'the rollout under way (a worker of release 2 placed)',
      async () => (await db!.worker.count({ where: { endpointId: lbId, releaseVersion: 2 } })) > 0,
      180_000,
      100,
      rolloutStartState,
    ).catch((err: unknown) => {
      stop = true;
      throw err;
    });
    const rolloutStartS = (Date.now() - releaseStarted) / 1000;
    figures.rolloutStartS = rolloutStartS;
    if (rolloutStartS > 10) log(`slow rollout start: ${JSON.stringify(await rolloutStartState())}`);
    const release = await db!.release.findFirstOrThrow({ where: { endpointId: lbId, version: 2 } });
    expect(release.status).toBe('ROLLING_OUT');

    // kill -9: one API process (its connections reset, the load balancer skips it from now on) and one worker process.
    const killedAt = Date.now();
    await Promise.all([byName('api-1').kill9(), byName('worker-1').kill9()]);
    log(`killed api-1 and worker-1 ${((killedAt - loadStarted) / 1000).toFixed(1)} s into the load`);

    // The load goes on through the rest of the rollout (on the surviving worker process), and at least 15 s after the kill.
    const minimumEnd = sleep(15_000);
    // A failed wait must not leave the load running behind the test.
    const stopOnFailure = (err: unknown): never => {
      stop = true;
      throw err;
    };
    await until(
      'release 2 COMPLETED',
      async () => (await db!.release.findUniqueOrThrow({ where: { id: release.id } })).status === 'COMPLETED',
      240_000,
      500,
      async () => ({
        release: await db!.release.findUnique({ where: { id: release.id } }),
        workers: await db!.worker.findMany({
          where: { endpointId: lbId },
          select: { id: true, status: true, releaseVersion: true },
        }),
        temporal: await temporalState(`WorkflowId = '${rolloutWorkflowId(lbId, 2)}'`, killedAt),
      }),
    ).catch(stopOnFailure);
    const releaseDoneAt = Date.now();
    expect(await db!.worker.count({ where: { endpointId: lbId, status: 'IDLE', releaseVersion: 2 } })).toBe(2);

    await minimumEnd;
    await sleep(2000);
    stop = true;
    await load;
    const loadEnded = Date.now();

    // Every acknowledged job completes (the queue is PostgreSQL; a job taken by the dead API's
    // long-poll comes back through the worker-loss rule).
    // One array parameter: a long run accepts more jobs than a statement takes parameters (32,767).
    const acceptedByStatus = async (): Promise<Record<string, number>> =>
      Object.fromEntries(
        (
          await db!.$queryRaw<
            Array<{ status: string; n: number }>
          >`SELECT status::text AS status, count(*)::int AS n FROM "Job" WHERE id = ANY(${accepted}::text[]) GROUP BY status`
        ).map((r) => [r.status, r.n]),
      );
    const completedBy = await until(
      'every acknowledged job COMPLETED',
      async () => ((await acceptedByStatus()).COMPLETED === accepted.length ? Date.now() : undefined),
      120_000,
      500,
      acceptedByStatus,
    );
    // Every acknowledged job is there (none lost with the killed API process).
    expect(Object.values(await acceptedByStatus()).reduce((a, b) => a + b, 0)).toBe(accepted.length);
    // The workflows spread over the cluster's history shards.
    const temporalDb = new pg.Client({
      connectionString: withDatabase(inject('postgresAdminUrl'), cluster!.databases.temporal),
    });
    await temporalDb.connect();
    try {
      const shards = await temporalDb.query<{ shard_id: number; n: string }>(
        'select shard_id, count(*) as n from executions group by shard_id order by shard_id',
      );
      figures.workflowsPerShard = Object.fromEntries(shards.rows.map((r) => [r.shard_id, Number(r.n)]));
      expect(shards.rows.length).toBe(HISTORY_SHARDS);
    } finally {
      await temporalDb.end();
    }

    // Temporal's side agrees: every job workflow ends (the SQL visibility store answers on Gantry's
    // custom search attributes), those whose signals died with api-1 included.
    const connection = await Connection.connect({ address: cluster!.address });
    try {
      const client = new Client({ connection, namespace: cluster!.namespace });
      // Bounded by progress, not by a fixed time: the catch-up takes as long as the backlog is, and
      // fails when the running count stops falling for a minute.
      const running = `GantryKind = 'job' AND GantryEndpointId = '${queueId}' AND ExecutionStatus = 'Running'`;
      let fewest = Infinity;
      let fellAt = Date.now();
      await until(
        'no job workflow of the endpoint left running (the count falling at least once a minute)',
        async () => {
          const left = Number((await client.workflow.count(running)).count);
          if (left < fewest) [fewest, fellAt] = [left, Date.now()];
          if (Date.now() - fellAt > 60_000)
            throw new Error(
              `${left} job workflows still running and none finished for 60 s; state: ${JSON.stringify(await temporalState(running, killedAt))}`,
            );
          return left === 0;
        },
        600_000,
        1000,
        () => temporalState(running, killedAt),
      );
      figures.workflowsCaughtUpSAfterLoad = (Date.now() - loadEnded) / 1000;
      // Every acknowledged job's last state reaches Temporal: a state whose signal died with api-1
      // (seen: a job finished 9 ms before the kill) is told by api-2's unsignalled-jobs sweep, which
      // runs every grace period (5 s here) for states older than the grace, so within about 10 s.
      // The running count can reach zero before that sweep starts such a job's workflow.
      const untold = async () =>
        (
          await db!.$queryRaw<
            Array<{ n: number }>
          >`SELECT count(*)::int AS n FROM "Job" WHERE id = ANY(${accepted}::text[]) AND "signalDueAt" IS NOT NULL`
        )[0]!.n;
      await until(
        'every acknowledged job state told to Temporal (no signal-due mark left)',
        async () => (await untold()) === 0,
        60_000,
        500,
        untold,
      );
      // Every acknowledged job has a workflow; one whose GantryJobStatus is not COMPLETED is reported
      // (seen after a kill: a closed job workflow whose attribute kept an earlier status), not failed on.
      // Visibility lags the start a little, so the listing is repeated for a short while.
      const listJobWorkflows = async () => {
        const seen = new Map<string, { status: string; jobStatus: unknown }>();
        for await (const wf of client.workflow.list({
          query: `GantryKind = 'job' AND GantryEndpointId = '${queueId}'`,
        })) {
          seen.set(wf.workflowId, { status: wf.status.name, jobStatus: wf.searchAttributes?.GantryJobStatus });
        }
        return { seen, withoutWorkflow: accepted.filter((id) => !seen.has(`job:${id}`)) };
      };
      let listed = await listJobWorkflows();
      // Not thrown here: a job still missing after that is reported with its row below.
      await until(
        'every job workflow listed',
        async () => (listed = await listJobWorkflows()).withoutWorkflow.length === 0,
        15_000,
        1000,
      ).catch(() => undefined);
      const { seen, withoutWorkflow } = listed;
      const notCompleted = [...seen].filter(([, v]) => JSON.stringify(v.jobStatus) !== '["COMPLETED"]');
      figures.jobWorkflows = {
        count: seen.size,
        withoutWorkflow: withoutWorkflow.length,
        attributeNotCompleted: notCompleted.length,
      };
      if (notCompleted.length || withoutWorkflow.length) {
        const ids = [...withoutWorkflow, ...notCompleted.map(([id]) => id.slice('job:'.length))].slice(0, 5);
        log(
          `job workflows off: ${JSON.stringify({ withoutWorkflow: withoutWorkflow.slice(0, 5), notCompleted: notCompleted.slice(0, 5), killedAt, rows: await db!.job.findMany({ where: { id: { in: ids } } }) })}`,
        );
      }
      expect(withoutWorkflow).toEqual([]);
      // What the kill cost the rollout: tasks that were on worker-1 when it died and waited for their timeouts.
      const timedOut = { activities: 0, workflowTasks: 0 };
      for await (const wf of client.workflow.list({ query: `GantryEndpointId = '${lbId}'` })) {
        const history = await client.workflow.getHandle(wf.workflowId, wf.runId).fetchHistory();
        for (const event of history.events ?? []) {
          if (event.activityTaskTimedOutEventAttributes) timedOut.activities++;
          if (event.workflowTaskTimedOutEventAttributes) timedOut.workflowTasks++;
        }
      }
      figures.rolloutTimeouts = timedOut;
    } finally {
      await connection.close();
    }

    // The proxy: failures only in a short window at the kill, and answers again after it.
    const failedProxied = proxied.filter((r) => !r.ok);
    const recoveredAfterMs = 5_000;
    const lateFailures = failedProxied.filter((r) => r.t > killedAt + recoveredAfterMs || r.t < killedAt);
    const afterKill = proxied.filter((r) => r.t > killedAt + recoveredAfterMs);
    const beforeFrom = loadStarted + 2000;
    Object.assign(figures, {
      historyShards: HISTORY_SHARDS,
      acceptedJobs: accepted.length,
      submitFailures: submitFailures.length,
      submitFailureSample: submitFailures.slice(0, 3).map((f) => ({ atMsAfterKill: f.t - killedAt, what: f.what })),
      jobsPerSecondBeforeKill: +rate(acceptedAt, beforeFrom, killedAt).toFixed(1),
      jobsPerSecondAfterKill: +rate(acceptedAt, killedAt + recoveredAfterMs, loadEnded).toFixed(1),
      allJobsCompletedSAfterLoad: (completedBy - loadEnded) / 1000,
      proxied: proxied.length,
      proxiedPerSecondBeforeKill: +rate(
        proxied.map((r) => r.t),
        beforeFrom,
        killedAt,
      ).toFixed(1),
      proxiedPerSecondAfterKill: +rate(
        proxied.map((r) => r.t),
        killedAt + recoveredAfterMs,
        loadEnded,
      ).toFixed(1),
      proxiedFailed: failedProxied.length,
      proxiedFailedSample: failedProxied.slice(0, 3).map((r) => ({ atMsAfterKill: r.t - killedAt, what: r.what })),
      rolloutS: (releaseDoneAt - releaseStarted) / 1000,
      proxiedFailedAtMsAfterKill: failedProxied.map((r) => r.t - killedAt),
      lbConnections: lb!.connections,
      lbRetried: lb!.retried,
    });
    log(`figures: ${JSON.stringify(figures)}`);
    // Outside the kill's window nothing fails, proxied or submitted. (The "other side closed" seen
    // there in some runs, up to 30 s after the kill, was this test's own balancer closing a new
    // connection unanswered: load-balancer.test.ts.)
    const lateSubmitFailures = submitFailures.filter((f) => f.t > killedAt + recoveredAfterMs || f.t < killedAt);
    figures.proxiedFailedOutsideKillWindow = lateFailures.map((r) => ({ atMsAfterKill: r.t - killedAt, what: r.what }));
    figures.submitFailedOutsideKillWindow = lateSubmitFailures.map((f) => ({
      atMsAfterKill: f.t - killedAt,
      what: f.what,
    }));
    expect(figures.proxiedFailedOutsideKillWindow).toEqual([]);
    expect(figures.submitFailedOutsideKillWindow).toEqual([]);
    expect(afterKill.length).toBeGreaterThan(20);
    // Requests went to release 1's containers before the release, and to release 2's by the end, through the surviving API.
    const v2Workers = new Set(
      (
        await db!.worker.findMany({
          where: { endpointId: lbId, releaseVersion: 2, status: 'IDLE' },
          select: { id: true },
        })
      ).map((w) => w.id),
    );
    expect(proxied.filter((r) => r.t < releaseStarted && r.ok).every((r) => r.worker && !v2Workers.has(r.worker))).toBe(
      true,
    );
    expect(afterKill.some((r) => r.worker && v2Workers.has(r.worker))).toBe(true);

    // The survivors stop cleanly on SIGTERM.
    const stopped = await Promise.all([byName('api-2').stop(), byName('worker-2').stop()]);
    expect(stopped, `${byName('api-2').output().slice(-3000)}\n${byName('worker-2').output().slice(-3000)}`).toEqual([
      { code: 0, signal: null },
      { code: 0, signal: null },
    ]);

    log(`figures: ${JSON.stringify(figures)}`);
  }, 900_000);
});
