/**
 * The job service of one API process: the queue's connections, the wake-ups of waiting requests,
 * the workflow signal coalescer, the endpoint look-up and the hooks on queued jobs. Built by the
 * composition root (infra/job-runtime.ts, for the roles that serve the API) and handed to the job
 * routes through the domain context; its periodic work is listed and run by
 * infra/background-tasks.ts. Nothing of it lives in a module: two runtimes in one process (tests,
 * two apps) share nothing.
 *
 * PostgreSQL holds the queue and decides every change of state (domain/jobs/queue.ts). Each job also
 * has a Temporal workflow (`job:<id>`, workflows/job.ts) that owns its timers and its webhook; it is
 * told of each change after the change is committed, never on the way to an answer
 * (workflow-signals.ts).
 */
import type { DomainContext } from '../context.ts';
import type { Db } from '../shared/db.ts';
import type { JobStore } from './queue.ts';
import { TakeOffers } from './handoff.ts';
import type { OutputStoreDeps } from '../public-models/outputs.ts';
import { publishedModel, type CachedModel } from '../public-models/models.ts';
import { recordCachesOf, type RecordCaches } from '../shared/record-cache.ts';
import { QueueEndpoints } from './queue-endpoints.ts';
import type { JobSettings } from './settings.ts';
import type { PlatformSettings } from '../shared/settings.ts';
import type { JobWakeups } from './wakeups.ts';
import { WorkflowSignals } from './workflow-signals.ts';

export type Log = (level: 'warn' | 'error', msg: string, err?: unknown) => void;

/**
 * The job runtime the composition root put in `ctx` (infra/job-runtime.ts). Only processes that serve
 * the job API have one; asking for it elsewhere is a wiring mistake, reported at start-up.
 */
export function jobRuntimeOf(ctx: Pick<DomainContext, 'jobs'>): JobRuntime {
  if (!ctx.jobs)
    throw new Error(
      'no job runtime in the domain context: the composition root builds one (infra/job-runtime.ts createJobRuntime) for processes that serve the job API',
    );
  return ctx.jobs;
}

export interface JobQueuedEvent {
  endpointId: string;
  jobId: string;
  lowPriority: boolean;
}

export interface JobRuntimeParts {
  /** Client calls and sweeps. */
  store: JobStore;
  /**
   * The worker protocol's statements on connections of their own: a flood of submissions must not
   * queue the takes and results that drain it. Default: `store`.
   */
  workerStore?: JobStore;
  wakeups: JobWakeups;
  settings: JobSettings;
  log: Log;
}

export class JobRuntime {
  readonly store: JobStore;
  readonly workerStore: JobStore;
  readonly wakeups: JobWakeups;
  readonly settings: JobSettings;
  readonly log: Log;
  readonly signals: WorkflowSignals;
  /** The endpoints job calls name, through the process's record cache (`ctx.records`). */
  readonly endpoints: QueueEndpoints;
  /** The process's record cache: the worker protocol forgets a worker there when it changes it. */
  readonly records: RecordCaches;
  /** The platform's settings (the webhook allow-list is read from here when a job is submitted). */
  readonly platform: PlatformSettings;
  /** Where public models' outputs are stored and how their URLs are signed. */
  readonly outputs: OutputStoreDeps;
  private readonly db: Db;
  /** Takes waiting in this process that a runsync submission can hand its job to (handoff.ts). */
  readonly offers = new TakeOffers();
  /** Set by `stop`: waits return at once and take no new work. */
  closing = false;
  /** Final states signalled since the last flush: their marks are cleared in one statement. */
  private sent: { ids: string[]; seqs: number[] } = { ids: [], seqs: [] };
  private flushing: Promise<void> | undefined;
  private readonly queuedListeners = new Set<(e: JobQueuedEvent) => void>();

  /** `ctx.records` must be built first (the composition root does). */
  constructor(
    ctx: Pick<
      DomainContext,
      'db' | 'temporal' | 'taskQueue' | 'records' | 'settings' | 'blobs' | 'signingKey' | 'publicUrl'
    >,
    parts: JobRuntimeParts,
  ) {
    this.store = parts.store;
    this.workerStore = parts.workerStore ?? parts.store;
    this.wakeups = parts.wakeups;
    this.settings = parts.settings;
    this.log = parts.log;
    this.records = recordCachesOf(ctx);
    this.platform = ctx.settings;
    this.endpoints = new QueueEndpoints(ctx.db, this.records);
    this.db = ctx.db;
    this.outputs = {
      db: ctx.db,
      blobs: ctx.blobs,
      signingKey: ctx.signingKey,
      publicUrl: ctx.publicUrl,
      outputs: ctx.settings.outputs,
    };
    this.signals = new WorkflowSignals(ctx, parts.settings, parts.log, (id, seq) => {
      this.sent.ids.push(id);
      this.sent.seqs.push(seq);
    });
  }

  /** A published model by id, through the record cache (the job API's calls by model id). */
  model(id: string): Promise<CachedModel | undefined> {
    return publishedModel({ db: this.db, records: this.records }, id);
  }

  /** Connects what delivers other processes' wake-ups (the LISTEN session). */
  async start(): Promise<void> {
    await this.wakeups.start();
  }

  /**
   * Stops taking work, sends every pending workflow signal (bounded by `timeoutMs`), clears their
   * marks, then closes the LISTEN session and the queue's connections. The API stops first (its
   * requests are answered), the background tasks next, this after them.
   */
  async stop(timeoutMs = 10_000): Promise<void> {
    this.closing = true;
    this.wakeups.wakeAll();
    await this.signals.close(timeoutMs);
    await this.flushSent();
    await this.flushSent();
    await this.wakeups.stop();
    await this.store.pool.end();
    if (this.workerStore !== this.store) await this.workerStore.pool.end();
  }

  // ------------------------------------------------------------------ hooks

  /**
   * Calls `listener` after a job is committed to an endpoint's queue through this runtime
   * (submission or retry), for autoscaling. It runs synchronously on the request path: keep it
   * cheap and let it do its own batching (one Temporal signal per job on an entity workflow would
   * exceed its limits). lowPriority jobs must never cause a scale-up. Returns a function that
   * removes the listener.
   */
  onQueued(listener: (e: JobQueuedEvent) => void): () => void {
    this.queuedListeners.add(listener);
    return () => this.queuedListeners.delete(listener);
  }

  /** Tells the listeners of a job just queued. */
  queued(e: JobQueuedEvent): void {
    for (const listener of this.queuedListeners) {
      try {
        listener(e);
      } catch (err) {
        this.log('warn', 'job-queued listener failed', err);
      }
    }
  }

  // ------------------------------------------------------------------ periodic work (run by infra/background-tasks.ts)

  /** Clears the marks of states whose workflows were told (batched: one statement per tick). Never rejects. */
  flushSent(): Promise<void> {
    if (this.flushing || this.sent.ids.length === 0) return this.flushing ?? Promise.resolve();
    const batch = this.sent;
    this.sent = { ids: [], seqs: [] };
    this.flushing = this.store
      .clearSignalDue(batch.ids, batch.seqs)
      .catch((err: unknown) => {
        // Left set, the marks only cause a harmless recheck later.
        this.log('warn', 'clearing signalled marks failed', err);
      })
      .finally(() => (this.flushing = undefined));
    return this.flushing;
  }

  /** Deletes jobs past their expiry (retention, and TTL where no workflow acted), up to 20 batches of 1,000. */
  async deleteExpiredJobs(stop?: AbortSignal): Promise<void> {
    for (let i = 0; i < 20 && !stop?.aborted && (await this.store.deleteExpired(1000)) === 1000; i++);
  }

  /**
   * Running jobs whose limits (liveness, execution timeout, TTL) passed well ago: their workflow
   * would have acted by now, so it missed a signal. Each gets a recheck.
   */
  async recheckOverdueRunning(): Promise<void> {
    const grace = Math.max(30_000, this.settings.lostAfterMs);
    for (const row of await this.store.overdueRunning(this.settings.lostAfterMs, grace, 500)) this.signals.recheck(row);
  }

  /** Finished jobs whose webhook no workflow has tried two minutes after completion: each gets a recheck. */
  async recheckUndeliveredWebhooks(): Promise<void> {
    for (const row of await this.store.undeliveredWebhooks(120_000, 30 * 60_000, 500)) this.signals.recheck(row);
  }

  /**
   * New jobs and final states a crashed process recorded but never signalled (`graceMs` after they
   * were recorded): their workflows are told. A recheck of one another live process is about to
   * signal is only a duplicate.
   */
  async recheckUnsignalled(graceMs: number, stop?: AbortSignal): Promise<void> {
    for (let batch = 0; batch < 20 && !stop?.aborted; batch++) {
      const rows = await this.store.unsignalled(graceMs, 1000);
      for (const r of rows) this.signals.recheck(r, r.seq);
      if (rows.length < 1000) break;
      // The marks of this batch clear before the next is read.
      await this.signals.drained(30_000);
      await this.flushSent();
    }
  }
}
