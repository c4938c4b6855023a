/**
 * The Temporal worker process: the workflow bundle and the workers that poll Gantry's task queues
 * with every workflow and activity registered. `npm start` runs it in the platform's process (role
 * `all`), `GANTRY_ROLE=worker npm start` alone; infra/platform.ts composes it.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  bundleWorkflowCode,
  DefaultLogger,
  NativeConnection,
  Runtime,
  Worker,
  type LogLevel,
  type WorkflowBundleWithSourceMap,
} from '@temporalio/worker';
import { createActivities } from '../activities/index.ts';
import type { DomainContext } from '../domain/context.ts';
import type { Db } from '../domain/shared/index.ts';
import { jobTaskQueueOf } from '../contracts/workflows.ts';

export const workflowsPath = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'workflows', 'index.ts');

let runtimeInstalled = false;

/** Routes the SDK's own logs at the configured level (once per process; the runtime is global). */
export function installTemporalRuntime(logLevel: string): void {
  if (runtimeInstalled) return;
  runtimeInstalled = true;
  const levels: Record<string, LogLevel> = {
    trace: 'TRACE',
    debug: 'DEBUG',
    info: 'INFO',
    warn: 'WARN',
    error: 'ERROR',
    fatal: 'ERROR',
  };
  try {
    // No signal handlers of its own: the platform's shutdown stops the API first, then the worker.
    Runtime.install({ logger: new DefaultLogger(levels[logLevel] ?? 'INFO'), shutdownSignals: [] });
  } catch {
    // Already instantiated by an earlier worker in this process: keep it.
  }
}

let bundle: Promise<WorkflowBundleWithSourceMap> | undefined;

/** Bundles the workflow code once per process; every worker created after reuses the bundle. */
export function workflowBundle(): Promise<WorkflowBundleWithSourceMap> {
  bundle ??= bundleWorkflowCode({ workflowsPath, logger: Runtime.instance().logger });
  return bundle;
}

export interface TemporalWorkerOptions {
  address: string;
  namespace: string;
  taskQueue: string;
  db: Db;
  /** Secrets, public URL and Temporal client for the orchestration activities. */
  ctx: DomainContext;
}

/**
 * Two Temporal workers on one connection, each with every workflow and activity registered: one
 * polls the control plane's task queue, one the job workflows' (jobTaskQueueOf). Each has its own
 * task slots and workflow thread, so job workflow tasks never queue ahead of a rollout's. Job
 * workflows started on the control plane's queue by earlier versions finish there.
 */
async function createTemporalWorkers(
  opts: TemporalWorkerOptions,
): Promise<{ workers: Worker[]; connection: NativeConnection }> {
  const connection = await NativeConnection.connect({ address: opts.address });
  const common = {
    connection,
    namespace: opts.namespace,
    workflowBundle: await workflowBundle(),
    activities: createActivities({ db: opts.db, ctx: opts.ctx }),
  };
  const workers = [
    await Worker.create({ ...common, taskQueue: opts.taskQueue, maxCachedWorkflows: 200 }),
    // Every queued job is a running workflow: the SDK's default cache (sized from the heap limit,
    // thousands) made the process grow with the queue. Evicted workflows are replayed when they
    // next get a task; a job's history is a few events.
    await Worker.create({ ...common, taskQueue: jobTaskQueueOf(opts.taskQueue), maxCachedWorkflows: 500 }),
  ];
  return { workers, connection };
}

/**
 * The Temporal worker process's part of a platform (role `all` or `worker`): its workers polling
 * until stop() drains them and closes their connection.
 */
export async function startTemporalWorkers(opts: TemporalWorkerOptions): Promise<{ stop: () => Promise<void> }> {
  const created = await createTemporalWorkers(opts);
  const running = Promise.all(created.workers.map((w) => w.run()));
  return {
    stop: async () => {
      for (const w of created.workers) w.shutdown();
      await running;
      await created.connection.close();
    },
  };
}
