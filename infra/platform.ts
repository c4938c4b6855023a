import { chmodSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client, Connection } from '@temporalio/client';
import type { FastifyInstance, FastifyListenOptions } from 'fastify';
import { buildApp } from '../api/server.ts';
import { consoleBuildDir } from '../api/console/build.ts';
import { ensureAdmin } from '../domain/accounts/index.ts';
import { createBlobStore } from '../domain/blobs/index.ts';
import type { DomainContext } from '../domain/context.ts';
import { createDb, type Db } from '../domain/shared/index.ts';
import { reconcileEndpointWorkflows } from '../domain/endpoints/index.ts';
import { applyHostConfig } from '../domain/hosts/index.ts';
import type { Log as JobLog } from '../domain/jobs/index.ts';
import { backgroundTasks, startBackgroundTasks } from './background-tasks.ts';
import { createJobRuntime } from './job-runtime.ts';
import { RecordCaches } from '../domain/shared/index.ts';
import { SecretBox } from '../domain/shared/index.ts';
import { SshPool } from '../hostctl/ssh.ts';
import { installTemporalRuntime, startTemporalWorkers } from '../workers/temporal-worker.ts';
import { startWorkerListener } from '../api/worker-listener.ts';
import { isLoopbackUrl, localContainerGateway } from './container-network.ts';
import type { GantryConfig } from './config.ts';
import { applyMigrations } from './migrations.ts';
import { startEmbeddedPostgres, type RunningPostgres } from './postgres.ts';
import { ensureSearchAttributes, ensureTemporal, type RunningTemporal } from './temporal.ts';
import { ensureSchedules } from './schedules.ts';
import { RateLimiter } from '../domain/rate-limits/index.ts';

export const migrationsDir = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'prisma', 'migrations');

export interface Platform {
  apiUrl: string | undefined;
  graphqlUrl: string | undefined;
  temporalAddress: string;
  temporalUiUrl: string | undefined;
  databaseUrl: string;
  /** The first admin key, only when it was created by this start (it is stored hashed). */
  newAdminKey: string | undefined;
  ctx: DomainContext;
  app: FastifyInstance | undefined;
  stop(): Promise<void>;
}

type Log = (msg: string) => void;

/**
 * How startPlatform ends when its signal aborts the start: what was started is stopped again by
 * then (in reverse order), nothing is left running.
 */
export class StartAborted extends Error {
  constructor(options?: ErrorOptions) {
    super('the start was cut short by a stop', options);
    this.name = 'StartAborted';
  }
}

/**
 * Waits for a start step that cannot be cut short (the workflow bundle: webpack, seconds, longer on a
 * busy machine) only until `signal` aborts: the start then goes on to stop what it had started
 * instead of waiting for it. What the step brings up after that is stopped as soon as it is up.
 */
async function unlessAborted<T>(
  signal: AbortSignal | undefined,
  work: Promise<T>,
  stopLate: (started: T) => Promise<void>,
): Promise<T> {
  if (!signal) return work;
  let onAbort = (): void => {};
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => reject(new StartAborted());
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
  });
  try {
    return await Promise.race([work, aborted]);
  } catch (err) {
    if (err instanceof StartAborted) void work.then(stopLate).catch(() => {});
    throw err;
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
}

/**
 * Brings up what this process runs (GANTRY_ROLE): the embedded PostgreSQL and Temporal when no
 * external ones are configured, migrations, the Temporal worker and the API. Several processes may
 * run against one Temporal and PostgreSQL: nothing here keeps state another process needs.
 * When `signal` aborts (a stop during start-up), the start ends at the next step boundary (the
 * embedded servers' own waits and the workflow bundle sooner), stops what it had started, and
 * rejects with StartAborted: a stop need not wait for a start it would undo at once.
 */
export async function startPlatform(
  config: GantryConfig,
  log: Log = (m) => console.error(m),
  signal?: AbortSignal,
): Promise<Platform> {
  // Owner-only: secrets, the PostgreSQL password and Temporal's state live here. As root with the
  // embedded PostgreSQL, others may traverse it (not list or read it): that server runs as the
  // `postgres` user and must reach its own directory inside.
  mkdirSync(config.dataDir, { recursive: true, mode: 0o700 });
  chmodSync(config.dataDir, process.getuid?.() === 0 && !config.databaseUrl ? 0o711 : 0o700);
  installTemporalRuntime(config.logLevel);
  const stops: Array<() => Promise<void>> = [];
  const stopAll = async (): Promise<void> => {
    for (const stop of stops.reverse())
      await stop().catch((err: unknown) => log(`shutdown step failed: ${String(err)}`));
  };
  /** A step boundary: the start ends here once a stop has come (the catch below stops the rest). */
  const checkpoint = (): void => {
    if (signal?.aborted) throw new StartAborted();
  };
  try {
    let postgres: RunningPostgres;
    if (config.databaseUrl) {
      postgres = { url: config.databaseUrl, stop: async () => {} };
    } else {
      postgres = await startEmbeddedPostgres(path.join(config.dataDir, 'pg'), config.embeddedPostgresPort, log, {
        signal,
      });
      stops.push(postgres.stop);
    }
    checkpoint();
    const { applied } = await applyMigrations(postgres.url, migrationsDir);
    if (applied.length > 0) log(`Applied migrations: ${applied.join(', ')}`);

    checkpoint();
    const temporal: RunningTemporal = await ensureTemporal(config, log, signal);
    stops.push(temporal.stop);
    checkpoint();

    const db: Db = createDb(postgres.url);
    stops.push(() => db.$disconnect());
    const connection = await Connection.connect({ address: temporal.address });
    stops.push(() => connection.close());
    checkpoint();
    await ensureSearchAttributes(connection, config.temporalNamespace, log);
    // A loopback public URL is unreachable from containers (they never share the host's network):
    // they get the worker-facing listener on the local container bridge instead.
    const gateway = isLoopbackUrl(config.publicUrl) ? localContainerGateway() : undefined;
    if (isLoopbackUrl(config.publicUrl) && !gateway)
      log(
        'No local container bridge network found: worker containers cannot reach a loopback GANTRY_PUBLIC_URL; set it to an address the hosts reach.',
      );
    const secrets = SecretBox.load(config.secretKey, config.dataDir);
    const ctx: DomainContext = {
      db,
      temporal: new Client({ connection, namespace: config.temporalNamespace }),
      taskQueue: config.taskQueue,
      publicUrl: config.publicUrl,
      workerUrl: gateway ? `http://${gateway}:${config.workerPort}` : config.publicUrl,
      ...(gateway ? { workerListenerPort: config.workerPort } : {}),
      secrets,
      ssh: new SshPool({ readyTimeoutMs: 15_000, idleTimeoutMs: 60_000 }),
      // What the job API, the proxy and the worker protocol remember of keys, worker credentials
      // and endpoints: one per process, for at most the revocation bound (domain/shared/record-cache.ts).
      records: new RecordCaches(),
      settings: config.settings,
      blobs: createBlobStore(config.blobStore),
      signingKey: secrets.derive('signed-urls'),
    };
    stops.push(() => ctx.ssh.close());

    if (config.role !== 'api') {
      checkpoint();
      const workers = await unlessAborted(
        signal,
        startTemporalWorkers({
          address: temporal.address,
          namespace: config.temporalNamespace,
          taskQueue: config.taskQueue,
          db,
          ctx,
        }),
        (late) => late.stop(),
      );
      stops.push(() => workers.stop());
    }

    let app: FastifyInstance | undefined;
    let newAdminKey: string | undefined;
    let ready = false;
    if (config.role !== 'worker') {
      checkpoint();
      newAdminKey = (await ensureAdmin(db, config.adminApiKey)).newKey;
      checkpoint();
      // Mends endpoints whose workflow start was cut off by a crash after their row was committed.
      await reconcileEndpointWorkflows(ctx);
      checkpoint();
      await ensureSchedules(ctx.temporal, ctx.taskQueue, {
        purgeOutputsMs: ctx.settings.outputs.purgeIntervalMs,
        metricsRollupMs: ctx.settings.metrics.rollupIntervalMs,
      });
      checkpoint();
      await applyHostConfig(ctx, { hostsFile: config.hostsFile, localHost: config.localHost });
      checkpoint();
      // The job runtime and the background tasks: built here, handed to the routes in ctx, stopped
      // after the API (stops run in reverse): the API's requests are answered first, then the tasks
      // end, then the runtime sends its last workflow signals and closes its connections.
      const jobLog: JobLog = (level, msg, err) =>
        app ? app.log[level]({ err }, msg) : log(`${msg}${err === undefined ? '' : `: ${String(err)}`}`);
      const jobs = createJobRuntime(ctx, jobLog);
      ctx.jobs = jobs;
      stops.push(() => jobs.stop());
      await jobs.start();
      checkpoint();
      const tasks = startBackgroundTasks(backgroundTasks({ ctx, jobs }), {
        exclusively: (key, fn) => jobs.store.exclusively(key, fn),
        log: jobLog,
      });
      stops.push(() => tasks.stop());
      // Request limits: blocks of requests granted by PostgreSQL, spent here (domain/rate-limits/rate-limits.ts).
      ctx.rateLimiter = new RateLimiter(db);
      const built = buildApp(ctx, {
        logLevel: config.logLevel,
        isReady: () => ready,
        tls: config.tls,
        // Built before the start (infra/start.ts, the suite's preparation); looked for, never built, here.
        consoleDir: consoleBuildDir(config.cacheDir),
        temporalUi: temporal.uiUrl ? { url: temporal.uiUrl, namespace: config.temporalNamespace } : undefined,
      });
      app = built;
      // Fastify hands these options to net.Server.listen as they are; its types do not list reusePort yet.
      const listenOptions = { host: config.host, port: config.port, reusePort: config.reusePort };
      await built.listen(listenOptions as FastifyListenOptions);
      if (gateway) {
        const workerListener = startWorkerListener(built, gateway, config.workerPort, log);
        stops.push(() => workerListener.close());
      }
      ready = true;
      // The API stops first: in-flight requests finish before the database goes away.
      stops.push(async () => {
        ready = false;
        // Closing stops accepting and waits for the requests in flight. Fastify closes the
        // connections idle at that moment; a kept-alive connection whose request was still in
        // flight becomes idle only once it is answered, and would hold the close until its
        // keep-alive timeout (72 s): close such connections as they fall idle.
        const sweep = setInterval(() => built.server.closeIdleConnections(), 100);
        try {
          await built.close();
        } finally {
          clearInterval(sweep);
        }
      });
    }
    return {
      apiUrl: app ? config.publicUrl : undefined,
      graphqlUrl: app ? `${config.publicUrl}/graphql` : undefined,
      temporalAddress: temporal.address,
      temporalUiUrl: temporal.uiUrl,
      databaseUrl: postgres.url,
      newAdminKey,
      ctx,
      app,
      stop: stopAll,
    };
  } catch (err) {
    await stopAll();
    // Whatever a step threw once the stop had come (an abort, or a failure the stop caused) ends the
    // start the same way.
    if (signal?.aborted && !(err instanceof StartAborted)) throw new StartAborted({ cause: err });
    throw err;
  }
}
