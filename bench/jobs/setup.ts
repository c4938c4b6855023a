/**
 * Starts what the bench measures and takes it down again: the API in this process on an embedded
 * PostgreSQL and a Temporal dev server, the Temporal worker in a process of its own, a benchmark
 * endpoint with its workers, and the load process, which `ask` sends commands to.
 */
import { fork, spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Platform } from '../../infra/platform.ts';
import { BENCH_QUOTAS } from '../support.ts';

export interface Bench {
  platform: Platform;
  temporalWorker: ChildProcess;
  temporalPid: number;
  pgPid: number;
  load: ChildProcess;
  /** Sends the load process a command and resolves with its answer. */
  ask<T>(cmd: string, extra?: Record<string, unknown>): Promise<T>;
  /** Stops the load process, the platform, the Temporal worker, Temporal and PostgreSQL. */
  stop(): Promise<void>;
}

/** `entry` is the bench script, forked again with --load for the load process. */
export async function startBench(workers: number, entry: string): Promise<Bench> {
  const { loadConfig } = await import('../../infra/config.ts');
  const { startPlatform } = await import('../../infra/platform.ts');
  const { startEmbeddedPostgres } = await import('../../infra/postgres.ts');
  const { resolveTemporalBinary, startTemporalDevServer } = await import('../../infra/temporal.ts');
  const { registerWorkerCredential } = await import('../../domain/workers/index.ts');
  const { randomString } = await import('../../domain/shared/index.ts');
  const { freePort } = await import('../../test/support/ports.ts');

  const dir = mkdtempSync(path.join(tmpdir(), 'gantry-bench-jobs-'));
  chmodSync(dir, 0o755);
  const log = (m: string): void => console.error(m);

  const pg = await startEmbeddedPostgres(path.join(dir, 'pg'), await freePort(), log);
  const binary = resolveTemporalBinary(loadConfig());
  if (!binary) throw new Error('no Temporal CLI; run npm start or npm test once');
  // The dev server as `npm start` runs it (an SQLite file in the data dir).
  const temporal = await startTemporalDevServer({
    binary,
    port: await freePort(),
    uiPort: undefined,
    dbFile: path.join(dir, 'temporal.db'),
    namespace: 'default',
  });
  const port = await freePort();
  const adminKey = `gntr_bench_${randomString(32)}`;
  const common = {
    DATABASE_URL: pg.url,
    TEMPORAL_ADDRESS: temporal.address,
    GANTRY_ADMIN_API_KEY: adminKey,
    GANTRY_DATA_DIR: path.join(dir, 'data'),
    GANTRY_TASK_QUEUE: 'bench',
    LOG_LEVEL: 'warn',
    // One client at full speed and a deep queue: limits that never bind here.
    GANTRY_JOB_RATE_LIMITS: BENCH_QUOTAS,
    GANTRY_MAX_QUEUED_JOBS: '1000000',
  };
  // The API here (measured in this process); the Temporal worker in a process of its own, as
  // `GANTRY_ROLE=worker npm start` runs it, so that CPU and memory are told apart.
  const platform = await startPlatform(loadConfig({ ...common, PORT: String(port), GANTRY_ROLE: 'api' }), log);
  const temporalWorker = spawn(process.execPath, ['--import', 'tsx', 'infra/start.ts'], {
    env: { ...process.env, ...common, PORT: String(await freePort()), GANTRY_ROLE: 'worker' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await new Promise<void>((resolve, reject) => {
    let seen = '';
    temporalWorker.stdout?.on('data', (d: Buffer) => {
      seen += d.toString();
      if (seen.includes('Gantry is up')) resolve();
    });
    temporalWorker.once('exit', (code) => reject(new Error(`the Temporal worker process exited (${code})`)));
  });
  const url = `http://127.0.0.1:${port}`;
  const created = await fetch(`${url}/v2/serverless`, {
    method: 'POST',
    headers: { authorization: `Bearer ${adminKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      name: 'bench',
      image: 'localhost/bench:1',
      gpu: { pools: ['AMPERE_24'] },
      workers: { min: 0, max: 0 },
    }),
  });
  const endpointId = ((await created.json()) as { id: string }).id;
  const ws: Array<{ id: string; key: string }> = [];
  for (let i = 0; i < workers; i++) {
    const id = `bench-worker-${i}`;
    await platform.ctx.db.worker.create({ data: { id, endpointId, status: 'IDLE' } });
    ws.push({ id, key: await registerWorkerCredential(platform.ctx.db, { workerId: id, endpointId }) });
  }

  const temporalPid = Number(readFileSync(`${path.join(dir, 'temporal.db')}.pid`, 'utf8'));
  const pgPid = Number(readFileSync(path.join(dir, 'pg', 'postmaster.pid'), 'utf8').split('\n')[0]);
  const load: ChildProcess = fork(entry, ['--load'], {
    // The load process imports node built-ins only: plain tsx runs it whatever runs this one.
    execArgv: ['--import', 'tsx'],
    env: { ...process.env, BENCH_LOAD: JSON.stringify({ url, key: adminKey, endpointId, workers: ws }) },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  let nextId = 1;
  const pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  const ready = new Promise<void>((resolve, reject) => pending.set(0, { resolve: () => resolve(), reject }));
  load.on('message', (m: { id: number; result?: unknown; error?: string }) => {
    const p = pending.get(m.id);
    pending.delete(m.id);
    if (m.error) p?.reject(new Error(m.error));
    else p?.resolve(m.result);
  });
  load.once('exit', (code) => {
    for (const p of pending.values()) p.reject(new Error(`load process exited (${code})`));
    pending.clear();
  });
  await ready;
  const ask = <T>(cmd: string, extra: Record<string, unknown> = {}): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      const id = nextId++;
      pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
      load.send({ id, cmd, ...extra });
    });

  return {
    platform,
    temporalWorker,
    temporalPid,
    pgPid,
    load,
    ask,
    stop: async () => {
      load.kill('SIGKILL');
      await platform.stop();
      temporalWorker.kill('SIGTERM');
      await new Promise((r) => (temporalWorker.exitCode !== null ? r(null) : temporalWorker.once('exit', r)));
      await temporal.stop();
      await pg.stop();
      if (existsSync(dir)) rmSync(dir, { recursive: true, force: true });
    },
  };
}
