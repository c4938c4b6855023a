/**
 * Restarts mid-job, each a real kill: the API process (kill -9), the Temporal worker process
 * (kill -9), the worker container's process (kill -9) and PostgreSQL (stopped and started). After
 * each, every job ends in the state it should, no job is handed out twice unless its worker was lost
 * (then it counts as retried), no result is recorded twice, and every job's workflow finishes.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client, Connection } from '@temporalio/client';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { createDb, type Db } from '../../domain/shared/index.ts';
import { randomString } from '../../domain/shared/index.ts';
import { registerWorkerCredential } from '../../domain/workers/index.ts';
import { startPostgresServer, type RunningPostgres } from '../../infra/postgres.ts';
import { freshDatabase } from '../support/databases.ts';
import { call } from '../support/platform.ts';
import { freePort } from '../support/ports.ts';
import { eventually, startCompatWorker, workerEnv, type TestWorker, type WorkerProcess } from '../support/jobs.ts';
import { jobWorkflowId } from '../../contracts/workflows.ts';

const PING_MS = 400;

interface GantryProcess {
  child: ChildProcess;
  output: () => string;
}

const children: ChildProcess[] = [];
const workers: WorkerProcess[] = [];

/** `npm start`'s own entry point as a child process (so that it can really be killed). */
async function startGantry(env: Record<string, string>): Promise<GantryProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'infra/start.ts'], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let out = '';
  child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (out += d.toString()));
  const deadline = Date.now() + 120_000;
  while (!out.includes('Gantry is up')) {
    if (child.exitCode !== null) throw new Error(`gantry exited ${child.exitCode}:\n${out}`);
    if (Date.now() > deadline) throw new Error(`gantry did not come up:\n${out}`);
    await sleep(100);
  }
  return { child, output: () => out };
}

async function kill9(p: GantryProcess | ChildProcess): Promise<void> {
  const child = 'child' in p ? p.child : p;
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGKILL');
  await exited;
}

interface Setup {
  env: Record<string, string>;
  url: string;
  port: number;
  db: Db;
  temporal: Client;
  connection: Connection;
  adminKey: string;
  endpointId: string;
  worker: TestWorker;
  dataDir: string;
}

async function setup(databaseUrl: string): Promise<Setup> {
  const port = await freePort();
  const adminKey = `gntr_test_${randomString(32)}`;
  const dataDir = mkdtempSync(path.join(tmpdir(), 'gantry-restart-'));
  const env = {
    DATABASE_URL: databaseUrl,
    TEMPORAL_ADDRESS: inject('temporalAddress'),
    GANTRY_TASK_QUEUE: `test-${randomString(8)}`,
    GANTRY_ADMIN_API_KEY: adminKey,
    GANTRY_DATA_DIR: dataDir,
    PORT: String(port),
    LOG_LEVEL: 'warn',
    GANTRY_WORKER_PING_INTERVAL_MS: String(PING_MS),
    GANTRY_JOB_TAKE_HOLD_MS: '2000',
    GANTRY_JOB_UNSIGNALLED_GRACE_MS: '2000',
    // The test's webhook listener is on loopback, which webhooks may reach only when allowed.
    GANTRY_WEBHOOK_ALLOW: '127.0.0.1/32',
  };
  const db = createDb(databaseUrl);
  const connection = await Connection.connect({ address: inject('temporalAddress') });
  return {
    env,
    url: `http://127.0.0.1:${port}`,
    port,
    db,
    temporal: new Client({ connection }),
    connection,
    adminKey,
    endpointId: '',
    worker: { id: '', key: '' },
    dataDir,
  };
}

async function createEndpointAndWorker(s: Setup): Promise<void> {
  const r = await call(s.url, 'POST', '/v2/serverless', {
    key: s.adminKey,
    body: {
      name: `restart-${randomString(5)}`,
      image: 'localhost/none:1',
      gpu: { pools: ['AMPERE_24'] },
      workers: { min: 0, max: 0 },
    },
  });
  expect(r.status).toBe(201);
  s.endpointId = r.body.id;
  const id = `wk${randomString(10)}`;
  await s.db.worker.create({ data: { id, endpointId: s.endpointId, status: 'IDLE' } });
  s.worker = { id, key: await registerWorkerCredential(s.db, { workerId: id, endpointId: s.endpointId }) };
}

const submit = (s: Setup, input: unknown, extra: Record<string, unknown> = {}) =>
  call(s.url, 'POST', `/v2/${s.endpointId}/run`, { key: s.adminKey, body: { input, ...extra } }).then((r) => {
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    return r.body.id as string;
  });

const compat = (s: Setup, extra: Record<string, string> = {}): WorkerProcess => {
  const w = startCompatWorker(
    workerEnv(s.url, s.endpointId, s.worker, { RUNPOD_PING_INTERVAL: String(PING_MS), ...extra }),
  );
  workers.push(w);
  return w;
};

/** Every job ends `status`, was started once per hand-out, and its workflow finished. */
async function expectSettled(s: Setup, ids: string[], status: string, starts: WorkerProcess[]): Promise<void> {
  await eventually(
    async () => {
      const rows = await s.db.job.findMany({ where: { id: { in: ids } } });
      if (rows.every((j) => j.status === status)) return true;
      // What is left, so that a failure says where each job stands.
      throw new Error(rows.map((j) => `${j.id.slice(0, 8)} ${j.status} seq=${j.seq} retries=${j.retries}`).join('; '));
    },
    60_000,
    `${ids.length} jobs ${status}`,
  );
  const rows = await s.db.job.findMany({ where: { id: { in: ids } } });
  for (const row of rows) {
    const started = starts.flatMap((w) => w.events).filter((e) => e.event === 'job-start' && e.job === row.id).length;
    // Handed out once, or once more per worker loss (a take whose answer died with the API counts
    // as one): never twice to live workers.
    expect(started, row.id).toBeGreaterThanOrEqual(1);
    expect(started, row.id).toBeLessThanOrEqual(1 + row.retries);
    // take + result, two more per loss (taken again), and two per take whose answer found its worker
    // gone (taken, put back): an even count of extra changes. A result recorded twice makes it odd.
    const extra = row.seq - (2 + 2 * row.retries);
    expect(extra >= 0 && extra % 2 === 0, `${row.id}: seq ${row.seq}, retries ${row.retries}`).toBe(true);
  }
  for (const id of ids) {
    await eventually(
      async () => (await s.temporal.workflow.getHandle(jobWorkflowId(id)).describe()).status.name === 'COMPLETED',
      60_000,
      `workflow job:${id} done`,
    );
  }
}

/** The ids of `ids` whose job workflow does not exist (yet). */
async function withoutWorkflow(s: Setup, ids: string[]): Promise<string[]> {
  const exists = await Promise.all(
    ids.map((id) =>
      s.temporal.workflow
        .getHandle(jobWorkflowId(id))
        .describe()
        .then(() => true)
        .catch(() => false),
    ),
  );
  return ids.filter((_, i) => !exists[i]);
}

/** Waits, at most `timeoutMs`, until every job of `ids` has its workflow; `since` names the moment counted from. */
async function expectEveryWorkflow(
  s: Setup,
  ids: string[],
  timeoutMs: number,
  since: { at: number; what: string },
): Promise<void> {
  await eventually(
    async () => {
      const missing = await withoutWorkflow(s, ids);
      if (missing.length === 0) return true;
      throw new Error(
        `${missing.length} of ${ids.length} jobs have no workflow ${Date.now() - since.at} ms after ${since.what}`,
      );
    },
    timeoutMs,
    'every acknowledged job has its workflow',
  );
}

// A test that fails leaves no worker behind to take the next test's jobs.
afterEach(async () => {
  for (const w of workers.splice(0)) await w.kill();
});
afterAll(async () => {
  for (const w of workers) await w.kill();
  for (const c of children) await kill9(c);
}, 60_000);

describe('restarts mid-job (shared database and Temporal)', () => {
  let s: Setup;
  let api: GantryProcess;
  let temporalWorker: GantryProcess;

  beforeAll(async () => {
    s = await setup(await freshDatabase());
    [api, temporalWorker] = await Promise.all([
      startGantry({ ...s.env, GANTRY_ROLE: 'api' }),
      startGantry({ ...s.env, GANTRY_ROLE: 'worker', PORT: String(await freePort()) }),
    ]);
    await createEndpointAndWorker(s);
  }, 180_000);
  afterAll(async () => {
    await s?.db.$disconnect();
    await s?.connection.close();
    if (s) rmSync(s.dataDir, { recursive: true, force: true });
  });

  it('the API killed -9 with jobs queued and running: every job completes, none twice, every workflow finishes', async () => {
    const w = compat(s, { WORKER_CONCURRENCY: '4' });
    const ids: string[] = [];
    for (let i = 0; i < 12; i++) ids.push(await submit(s, { op: 'sleep', ms: 1500, i }));
    await eventually(
      async () => (await s.db.job.count({ where: { id: { in: ids }, status: 'IN_PROGRESS' } })) >= 4,
      20_000,
      'jobs running',
    );
    // A runsync in flight when the API dies gets no answer; its job still runs to the end.
    const sync = call(s.url, 'POST', `/v2/${s.endpointId}/runsync`, {
      key: s.adminKey,
      body: { input: { op: 'sleep', ms: 500, sync: true } },
    }).catch((err: unknown) => err);
    await sleep(200);
    await kill9(api);
    expect(await sync).toBeInstanceOf(Error);
    await sleep(500);
    api = await startGantry({ ...s.env, GANTRY_ROLE: 'api' });
    const syncRow = await s.db.job.findFirstOrThrow({ where: { endpointId: s.endpointId, sync: true } });
    await expectSettled(s, [...ids, syncRow.id], 'COMPLETED', [w]);
    for (const row of await s.db.job.findMany({ where: { id: { in: ids } } }))
      expect(row.output).toMatchObject({ slept: 1500 });
    await w.kill();
  }, 120_000);

  it('the Temporal worker killed -9: jobs still flow, and timeouts and webhooks happen once it is back', async () => {
    const hits: Array<{ id: string; status: string }> = [];
    const hook = createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        hits.push(JSON.parse(body));
        res.writeHead(200).end();
      });
    });
    await new Promise<void>((r) => hook.listen(0, '127.0.0.1', () => r()));
    const hookUrl = `http://127.0.0.1:${(hook.address() as { port: number }).port}/`;
    const w = compat(s, { WORKER_CONCURRENCY: '4' });
    try {
      // Sleeps far past every wait below, so only the execution timeout can end it in time.
      const stuck = await submit(s, { op: 'sleep', ms: 180_000 }, { policy: { executionTimeout: 5_000 } });
      await w.waitFor((e) => e.event === 'job-start' && e.job === stuck);
      await kill9(temporalWorker);
      // The job path needs no Temporal worker: these complete while it is down.
      const quick: string[] = [];
      for (let i = 0; i < 5; i++) quick.push(await submit(s, { op: 'echo', i }, { webhook: hookUrl }));
      await eventually(
        async () => (await s.db.job.count({ where: { id: { in: quick }, status: 'COMPLETED' } })) === 5,
        20_000,
        'jobs done without a Temporal worker',
      );
      expect(hits).toHaveLength(0);
      await sleep(5_500); // the stuck job's execution timeout passes while no worker runs workflows
      expect((await s.db.job.findUniqueOrThrow({ where: { id: stuck } })).status).toBe('IN_PROGRESS');
      temporalWorker = await startGantry({ ...s.env, GANTRY_ROLE: 'worker', PORT: String(await freePort()) });
      // The new worker process bundles the workflows before it runs one: over 30 s once under the full suite's load.
      await w.waitFor((e) => e.event === 'job-stopped' && e.job === stuck, 90_000);
      expect((await s.db.job.findUniqueOrThrow({ where: { id: stuck } })).status).toBe('TIMED_OUT');
      await eventually(async () => hits.length === 5, 30_000, 'webhooks delivered after the restart');
      expect(new Set(hits.map((h) => h.id))).toEqual(new Set(quick));
      await expectSettled(s, quick, 'COMPLETED', [w]);
      await sleep(500);
      expect(hits).toHaveLength(5);
    } finally {
      await w.kill();
      hook.close();
    }
  }, 240_000);

  it('the worker container killed -9 mid-job and started again: its job is retried and completes', async () => {
    const first = compat(s);
    const id = await submit(s, { op: 'sleep', ms: 3_000, tag: 'container' });
    await first.waitFor((e) => e.event === 'job-start' && e.job === id);
    await first.kill('SIGKILL');
    // The same worker (same id and credential) comes back, as a restarted container does.
    const again = compat(s);
    await expectSettled(s, [id], 'COMPLETED', [first, again]);
    const row = await s.db.job.findUniqueOrThrow({ where: { id } });
    expect(row.retries).toBe(1);
    expect(row.output).toEqual({ slept: 3000 });
    await again.kill();
  }, 120_000);

  it('jobs acknowledged just before the API is killed -9 have their workflows within seconds of the restart', async () => {
    // A long signal delay holds every new job's workflow start back, as a burst does for a moment:
    // the kill lands between each acknowledgement and its start.
    await kill9(api);
    api = await startGantry({ ...s.env, GANTRY_ROLE: 'api', GANTRY_JOB_SIGNAL_DELAY_MS: '600000' });
    const ids = await Promise.all(
      Array.from({ length: 40 }, (_, i) => submit(s, { op: 'echo', i, tag: 'acked-then-killed' })),
    );
    await kill9(api);
    // Nothing started them: no worker took them and the signals never left the killed process.
    expect(await withoutWorkflow(s, ids)).toHaveLength(ids.length);

    const restartedAt = Date.now();
    api = await startGantry({ ...s.env, GANTRY_ROLE: 'api' });
    await expectEveryWorkflow(s, ids, 15_000, { at: restartedAt, what: 'the restart' });
    // The sweep that started them named their endpoint and account: they show in listings by endpoint.
    for (const id of ids.slice(0, 5)) {
      const attributes = (await s.temporal.workflow.getHandle(jobWorkflowId(id)).describe()).searchAttributes;
      expect(attributes.GantryEndpointId, `job:${id}`).toEqual([s.endpointId]);
      expect(attributes.GantryKind, `job:${id}`).toEqual(['job']);
    }
    // And the jobs themselves run to the end once a worker comes.
    const w = compat(s, { WORKER_CONCURRENCY: '4' });
    await expectSettled(s, ids, 'COMPLETED', [w]);
    await w.kill();
  }, 180_000);

  it('jobs acknowledged just before one API process is killed -9 get their workflows from another that lives on, without a restart', async () => {
    // Both processes' once-after-start sweeps (2 s after each start) are over before the jobs exist:
    // only the survivor's periodic sweep, every grace period (here the 5 s floor), can tell them.
    const survivor = await startGantry({ ...s.env, GANTRY_ROLE: 'api', PORT: String(await freePort()) });
    await kill9(api);
    api = await startGantry({ ...s.env, GANTRY_ROLE: 'api', GANTRY_JOB_SIGNAL_DELAY_MS: '600000' });
    await sleep(3_000);
    const ids = await Promise.all(
      Array.from({ length: 20 }, (_, i) => submit(s, { op: 'echo', i, tag: 'acked-then-killed-survivor' })),
    );
    await kill9(api);
    expect(await withoutWorkflow(s, ids)).toHaveLength(ids.length);
    // Grace (2 s) plus one sweep period (5 s), with room for a loaded machine; a sweep every minute fails this.
    await expectEveryWorkflow(s, ids, 20_000, { at: Date.now(), what: 'the kill' });
    await kill9(survivor);
    api = await startGantry({ ...s.env, GANTRY_ROLE: 'api' });
    const w = compat(s, { WORKER_CONCURRENCY: '4' });
    await expectSettled(s, ids, 'COMPLETED', [w]);
    await w.kill();
  }, 180_000);

  it('submits with an Idempotency-Key across an API kill -9: after the restart every repeat answers its first job, and no key has two', async () => {
    const keys = Array.from({ length: 60 }, (_, i) => `kill-${randomString(10)}-${i}`);
    // Every fifth a runsync (its insert commits relaxed; nothing takes it, so it waits out its second).
    const keyed = (i: number) => {
      const path = i % 5 === 4 ? 'runsync?wait=1000' : 'run';
      return call(s.url, 'POST', `/v2/${s.endpointId}/${path}`, {
        key: s.adminKey,
        body: { input: { op: 'echo', i, tag: 'idempotent' } },
        headers: { 'idempotency-key': keys[i]! },
      });
    };
    // Six clients submitting one after another, the API killed once ten answers are in.
    const firsts: Array<{ status: number; id?: string } | Error> = [];
    let next = 0;
    const client = async (): Promise<void> => {
      for (let i = next++; i < keys.length; i = next++) {
        firsts[i] = await keyed(i).then(
          (r) => ({ status: r.status, id: r.body?.id as string | undefined }),
          (err: unknown) => err as Error,
        );
      }
    };
    const clients = Promise.all(Array.from({ length: 6 }, client));
    await eventually(async () => firsts.filter((r) => r && !(r instanceof Error)).length >= 10, 30_000, 'answers');
    await kill9(api);
    await clients;
    const acked = new Map<number, string>();
    for (const [i, r] of firsts.entries()) {
      if (r instanceof Error) continue;
      expect(r.status, keys[i]).toBe(200);
      acked.set(i, r.id!);
    }
    // The kill landed mid-load: some submits got no answer.
    expect(acked.size).toBeLessThan(keys.length);

    api = await startGantry({ ...s.env, GANTRY_ROLE: 'api' });
    const repeats = await Promise.all(keys.map((_, i) => keyed(i)));
    const rows = await s.db.job.findMany({
      where: { idempotencyKey: { in: keys } },
      select: { id: true, idempotencyKey: true },
    });
    // One job per key, and the repeat's answer is that job.
    expect(rows).toHaveLength(keys.length);
    const jobOf = new Map(rows.map((r) => [r.idempotencyKey, r.id]));
    for (const [i, r] of repeats.entries()) {
      expect(r.status, keys[i]).toBe(200);
      expect(r.body.id, keys[i]).toBe(jobOf.get(keys[i]!));
      if (acked.has(i)) {
        expect(r.body.id, keys[i]).toBe(acked.get(i));
        expect(r.headers.get('idempotent-replayed'), keys[i]).toBe('true');
      }
    }
    // None of these jobs is for the tests that follow.
    const purged = await call(s.url, 'POST', `/v2/${s.endpointId}/purge-queue`, { key: s.adminKey });
    expect(purged.status).toBe(200);
  }, 180_000);
});

describe('PostgreSQL restarted mid-job', () => {
  let pgDir: string;
  let pg: RunningPostgres;
  let pgPort: number;
  let s: Setup;
  const gantry: GantryProcess[] = [];

  beforeAll(async () => {
    pgDir = mkdtempSync(path.join(tmpdir(), 'gantry-restart-pg-'));
    pgPort = await freePort();
    pg = await startPostgresServer(pgDir, pgPort);
    s = await setup(pg.url);
    gantry.push(await startGantry({ ...s.env, GANTRY_ROLE: 'api' }));
    gantry.push(await startGantry({ ...s.env, GANTRY_ROLE: 'worker', PORT: String(await freePort()) }));
    await createEndpointAndWorker(s);
  }, 180_000);
  afterAll(async () => {
    await s?.db.$disconnect();
    await s?.connection.close();
    for (const c of children) await kill9(c);
    await pg?.stop();
    if (pgDir) rmSync(pgDir, { recursive: true, force: true });
  }, 60_000);

  it('jobs running across the restart complete, and wake-ups work again afterwards', async () => {
    const w = compat(s, { WORKER_CONCURRENCY: '3' });
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) ids.push(await submit(s, { op: 'sleep', ms: 2_500, i }));
    await eventually(
      async () => (await s.db.job.count({ where: { id: { in: ids }, status: 'IN_PROGRESS' } })) >= 3,
      20_000,
      'jobs running',
    );
    // A fast shutdown (what a restart does), then the same server on the same data.
    const postmaster = Number(readFileSync(path.join(pgDir, 'pgdata', 'postmaster.pid'), 'utf8').split('\n')[0]);
    process.kill(postmaster, 'SIGINT');
    await eventually(
      async () => {
        try {
          process.kill(postmaster, 0);
          return false;
        } catch {
          return true;
        }
      },
      30_000,
      'PostgreSQL stopped',
    );
    await sleep(500);
    pg = await startPostgresServer(pgDir, pgPort);
    await expectSettled(s, ids, 'COMPLETED', [w]).catch((err: Error) => {
      // What the processes saw, so that a failure here can be read.
      const tail = (t: string): string => t.slice(-6_000);
      err.message += `\n--- api:\n${tail(gantry[0]?.output() ?? '')}\n--- temporal worker:\n${tail(gantry[1]?.output() ?? '')}\n--- worker events:\n${tail(w.events.map((e) => JSON.stringify(e)).join('\n'))}`;
      throw err;
    });
    // The LISTEN session is back: a long-poll is woken by the next commit.
    const t0 = Date.now();
    const r = await call(s.url, 'POST', `/v2/${s.endpointId}/runsync`, {
      key: s.adminKey,
      body: { input: { op: 'echo', after: 'restart' } },
    });
    expect(r.body).toMatchObject({ status: 'COMPLETED', output: { after: 'restart' } });
    expect(Date.now() - t0).toBeLessThan(4_000);
    await w.kill();
  }, 150_000);
});
