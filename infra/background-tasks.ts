/**
 * Every background task of a Gantry process in one list: what runs beside the requests, on a timer
 * or on an event, how often, who runs it, and what it does. The composition root (infra/platform.ts)
 * starts the list for the processes that serve the API (GANTRY_ROLE all or api) and stops it after
 * the API has closed and before the job runtime stops.
 *
 * Who runs a task:
 * - an advisory lock (`lock`: a PostgreSQL advisory lock key): every API process ticks, one at a time
 *   runs, the others skip that tick. These are the safety nets that mend what a crash between a
 *   commit and a Temporal signal can leave; any process may run them, none needs to be special.
 * - `each process`: the task works on that process's own memory (its signal buffer, its listeners).
 * A tick that comes while the task's previous run is still under way is skipped (no overlap).
 *
 * Why not Temporal Schedules: the sweeps mend gaps between PostgreSQL and Temporal (a signal a
 * crashed process never sent), so they run beside the signal coalescer that sends those signals
 * (domain/jobs/workflow-signals.ts) and must keep running while Temporal is behind; and a schedule
 * firing every few seconds would cost a workflow execution, its history and its visibility record per
 * tick for work that is one SQL statement. Long-running processes that belong to one entity (a host's
 * probes, a worker's watch, an endpoint's autoscaler, a job's timers) are Temporal workflows already
 * (workflows/): they are not listed here.
 */
import { autoscalerWakeup } from '../domain/endpoints/index.ts';
import type { DomainContext } from '../domain/context.ts';
import type { JobRuntime } from '../domain/jobs/index.ts';

/** PostgreSQL advisory lock keys of the tasks that one process at a time runs (values kept across versions). */
export const TASK_LOCKS = {
  expiredJobs: 0x6a6f6201,
  overdueRunningJobs: 0x6a6f6202,
  undeliveredWebhooks: 0x6a6f6203,
  unsignalledJobs: 0x6a6f6204,
} as const;

interface Described {
  name: string;
  /** What it does, for the reader (and the log line when it fails). */
  does: string;
}

/** Runs on a timer, started here. */
export interface TimedTask extends Described {
  kind: 'timed';
  schedule: { everyMs: number } | { onceAfterMs: number };
  /** An advisory lock key (one process at a time), or null (each process runs its own). */
  lock: number | null;
  /** `stop` aborts when the tasks stop: a long run ends between its batches. */
  run(stop: AbortSignal): Promise<void>;
}

/** Runs on an event of this process, subscribed here. */
export interface ListenerTask extends Described {
  kind: 'listener';
  on: string;
  /** Subscribes; answers the unsubscribe. */
  subscribe(): () => void;
}

/** Runs elsewhere, with the lifecycle of the module that owns its state: listed so this file names every task. */
export interface ListedTask extends Described {
  kind: 'listed';
  schedule: string;
  lock: string;
  where: string;
}

export type BackgroundTask = TimedTask | ListenerTask | ListedTask;

export interface BackgroundTaskDeps {
  ctx: Pick<DomainContext, 'db' | 'temporal'>;
  jobs: JobRuntime;
}

/** The list. */
export function backgroundTasks({ ctx, jobs }: BackgroundTaskDeps): BackgroundTask[] {
  const { settings } = jobs;
  return [
    {
      kind: 'timed',
      name: 'expired jobs',
      schedule: { everyMs: 5_000 },
      lock: TASK_LOCKS.expiredJobs,
      does: 'deletes jobs a minute past their expiry (result retention; TTL where no workflow acted), up to 20,000 a run',
      run: (stop) => jobs.deleteExpiredJobs(stop),
    },
    {
      kind: 'timed',
      name: 'overdue running jobs',
      schedule: { everyMs: 10_000 },
      lock: TASK_LOCKS.overdueRunningJobs,
      does: 'running jobs whose liveness, execution timeout or TTL passed more than max(30 s, worker-loss time) ago: their workflows missed a signal and get a recheck',
      run: () => jobs.recheckOverdueRunning(),
    },
    {
      kind: 'timed',
      name: 'undelivered webhooks',
      schedule: { everyMs: 60_000 },
      lock: TASK_LOCKS.undeliveredWebhooks,
      does: 'finished jobs (started in the last 30 min) whose webhook nobody tried 2 min after completion: their workflows get a recheck',
      run: () => jobs.recheckUndeliveredWebhooks(),
    },
    {
      kind: 'timed',
      name: 'unsignalled jobs after start',
      schedule: { onceAfterMs: Math.min(3_000, settings.unsignalledGraceMs) },
      lock: TASK_LOCKS.unsignalledJobs,
      does: 'soon after start, with a short grace: new jobs and final states a killed process committed but never signalled get their workflows (a job acknowledged just before a kill -9 is started within seconds)',
      run: (stop) => jobs.recheckUnsignalled(Math.min(2_000, settings.unsignalledGraceMs), stop),
    },
    {
      kind: 'timed',
      name: 'unsignalled jobs',
      // As often as the grace (5 s to 60 s): a state a crash left unsignalled is told within about twice the grace.
      schedule: { everyMs: Math.min(60_000, Math.max(5_000, settings.unsignalledGraceMs)) },
      lock: TASK_LOCKS.unsignalledJobs,
      does: 'the same, every GANTRY_JOB_UNSIGNALLED_GRACE_MS (5 s to 60 s), for states left unsignalled longer than that',
      run: (stop) => jobs.recheckUnsignalled(settings.unsignalledGraceMs, stop),
    },
    {
      kind: 'timed',
      name: 'signal-due marks',
      schedule: { everyMs: 250 },
      lock: null,
      does: "clears, in one statement, the signal-due marks of the states this process's workflow signals have delivered",
      run: () => jobs.flushSent(),
    },
    {
      kind: 'listener',
      name: 'autoscaler wake-up',
      on: 'a job queued (submitted or retried) through this process',
      does: "signals the endpoint's workflow when the endpoint has no live worker (at most one check per endpoint per 500 ms; never for lowPriority jobs), so that the first job at zero workers starts one at once",
      subscribe: () => jobs.onQueued(autoscalerWakeup(ctx, (msg, err) => jobs.log('warn', msg, err))),
    },
    {
      kind: 'listed',
      name: 'load-balancer views',
      schedule: 'every 250 ms (REFRESH_MS)',
      lock: 'each process',
      where: 'api/lb-balancer.ts, LoadBalancer.start',
      does: "re-reads the routable workers of the load-balancing endpoints this process proxies to, and other processes' in-flight counts on them",
    },
    {
      kind: 'listed',
      name: 'load-balancer load rows',
      schedule: 'every 100 ms (PUBLISH_MS), and at once on a change',
      lock: 'each process',
      where: 'api/lb-balancer.ts, LoadBalancer.start',
      does: "writes this process's in-flight requests per worker (LbProxyLoad rows), so that every process chooses workers by the load of all",
    },
    {
      kind: 'listed',
      name: 'stale load rows',
      schedule: 'every 10 min',
      lock: 'every process, no lock (an idempotent DELETE)',
      where: 'api/lb-balancer.ts, LoadBalancer.start (domain/load-balancing/load-publication.ts purgeOldLoad)',
      does: 'deletes LbProxyLoad rows no process has refreshed for a day (processes that ended without retiring theirs)',
    },
    {
      kind: 'listed',
      name: 'load-balancer health probes',
      schedule: 'a tick every min(interval / 4, 500 ms); each worker probed every GANTRY_LB_HEALTH intervalMs',
      lock: 'each process',
      where: 'api/lb-health.ts, LbHealthMonitor.start',
      does: "probes the health path of the load-balancing workers this process routes to; takes failing ones out of this process's rotation",
    },
    {
      kind: 'listed',
      name: 'expired model outputs',
      schedule: 'every GANTRY_OUTPUT_PURGE_INTERVAL_MS (default 1 h)',
      lock: 'a Temporal Schedule (overlapping runs skipped)',
      where: 'infra/schedules.ts, the purge-expired-outputs schedule (workflows/purge-outputs.ts)',
      does: "deletes public models' output files whose URLs have expired (GANTRY_OUTPUT_URL_TTL_MS), bytes then rows",
    },
    {
      kind: 'listed',
      name: 'endpoint metrics rollup',
      schedule: 'every GANTRY_METRICS_ROLLUP_INTERVAL_MS (default 1 min, 15 s into the minute)',
      lock: 'a Temporal Schedule (overlapping runs skipped), and a row lock on MetricRollupState',
      where: 'infra/schedules.ts, the rollup-endpoint-metrics schedule (workflows/metrics-rollup.ts)',
      does: 'rolls the jobs, cold starts and sampled worker states of each endpoint into per-minute rows; deletes rows past 7 days',
    },
    {
      kind: 'listed',
      name: 'rate-limit counters',
      schedule: 'every 5 min',
      lock: 'every API app, no lock (an idempotent DELETE)',
      where:
        'api/rate-limit.ts, registerRateLimitPurge (domain/rate-limits/rate-limits.ts purgeExpiredRateLimitCounters)',
      does: 'deletes the counters of ended rate-limit windows',
    },
  ];
}

export interface RunningTasks {
  /** Stops the timers and listeners and waits (at most `timeoutMs`) for runs under way. */
  stop(timeoutMs?: number): Promise<void>;
}

export interface TaskRunner {
  /** Runs `fn` only if no other process holds the advisory lock `key`; false when it did not run. */
  exclusively(key: number, fn: () => Promise<void>): Promise<boolean>;
  log(level: 'warn', msg: string, err?: unknown): void;
}

/** Starts the timed and listener tasks of `tasks` (listed ones run where they live). */
export function startBackgroundTasks(tasks: readonly BackgroundTask[], runner: TaskRunner): RunningTasks {
  const stopping = new AbortController();
  const timers: NodeJS.Timeout[] = [];
  const unsubscribes: Array<() => void> = [];
  const running = new Map<TimedTask, Promise<void>>();

  const tick = (task: TimedTask): void => {
    if (stopping.signal.aborted || running.has(task)) return;
    const run =
      task.lock === null ? task.run(stopping.signal) : runner.exclusively(task.lock, () => task.run(stopping.signal));
    running.set(
      task,
      run
        .then(() => undefined)
        .catch((err: unknown) => runner.log('warn', `background task "${task.name}" failed`, err))
        .finally(() => running.delete(task)),
    );
  };

  for (const task of tasks) {
    if (task.kind === 'timed') {
      const t =
        'everyMs' in task.schedule
          ? setInterval(() => tick(task), task.schedule.everyMs)
          : setTimeout(() => tick(task), task.schedule.onceAfterMs);
      t.unref();
      timers.push(t);
    } else if (task.kind === 'listener') {
      unsubscribes.push(task.subscribe());
    }
  }

  return {
    async stop(timeoutMs = 5_000) {
      stopping.abort();
      for (const t of timers) clearTimeout(t);
      for (const unsubscribe of unsubscribes) unsubscribe();
      if (running.size === 0) return;
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        Promise.all(running.values()),
        new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs))),
      ]);
      clearTimeout(timer);
    },
  };
}
