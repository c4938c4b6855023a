/**
 * The job API and the worker protocol (compat.md), as domain operations REST calls.
 *
 * PostgreSQL holds the queue and decides every change of state (domain/job-queue.ts). Each job also
 * has a Temporal workflow (`job:<id>`, workflows/job.ts) that owns its timers and its webhook; it is
 * told of each change after the change is committed, never on the way to an answer: the hot path
 * (submit, take, done) costs SQL statements only. States of one job that follow each other quickly
 * are coalesced into one signal-with-start, so a fast job costs its workflow one task.
 */
import { randomUUID } from 'node:crypto';
import { Type, type Static } from 'typebox';
import type { JobWorkflowInput } from '../workflows/job.ts';
import { jobChanged, jobWorkflowId, recheckJob } from '../workflows/job.ts';
import { gantrySearchAttributes } from '../workflows/search-attributes.ts';
import { requireEndpointAccess, requireScope, type Principal } from './auth.ts';
import type { DomainContext } from './context.ts';
import { DomainError, notFound, validationFailed } from './errors.ts';
import { webhookUrlProblem } from './webhook-targets.ts';
import {
  DEFAULT_RETENTION,
  isTerminal,
  snapshotOf,
  type HealthCounts,
  type JobRow,
  type JobStatus,
  type JobStore,
  type NotifyKind,
  type Retention,
  type TakenJob,
} from './job-queue.ts';
import { unstorableJson, validate } from './validation.ts';
import { forgetWorkerCredentials, type WorkerIdentity } from './workers-auth.ts';

// ------------------------------------------------------------------ settings

export interface JobSettings {
  /** Interval the platform gives workers (RUNPOD_PING_INTERVAL). */
  pingIntervalMs: number;
  /** A worker is lost when no ping listed its job for this long (three intervals). */
  lostAfterMs: number;
  /** Longest a job-take or job-stop long-poll is held open. */
  takeHoldMs: number;
  /** Longest a /stream call waits for a chunk. */
  streamHoldMs: number;
  /** How long a non-final state waits for a successor before its workflow is signalled. */
  signalDelayMs: number;
  /** How long finished jobs stay readable (compat.md: 30 min after /run, 1 min after /runsync). */
  retention: Retention;
  /** A final state not confirmed signalled after this long was left by a crash: its workflow re-reads it. */
  unsignalledGraceMs: number;
  /** Jobs one endpoint may hold IN_QUEUE; a submit beyond it is 429 (GANTRY_MAX_QUEUED_JOBS). */
  maxQueuedPerEndpoint: number;
}

function envInt(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const v = env[name];
  if (v === undefined || v === '') return fallback;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) throw new Error(`${name} must be a non-negative integer, got "${v}"`);
  return n;
}

/**
 * GANTRY_WORKER_PING_INTERVAL_MS (default 10000, the SDK's own default) sets the interval and with
 * it worker-loss detection; GANTRY_JOB_SIGNAL_DELAY_MS (default 100) the coalescing window;
 * GANTRY_JOB_TAKE_HOLD_MS (default 30000) the long-poll hold; GANTRY_JOB_RETENTION_MS and
 * GANTRY_JOB_SYNC_RETENTION_MS the retention of results (tests shorten them).
 */
export function jobSettings(env: NodeJS.ProcessEnv = process.env): JobSettings {
  const pingIntervalMs = envInt(env, 'GANTRY_WORKER_PING_INTERVAL_MS', 10_000);
  return {
    pingIntervalMs,
    lostAfterMs: 3 * pingIntervalMs,
    takeHoldMs: envInt(env, 'GANTRY_JOB_TAKE_HOLD_MS', 30_000),
    streamHoldMs: 10_000,
    signalDelayMs: envInt(env, 'GANTRY_JOB_SIGNAL_DELAY_MS', 100),
    unsignalledGraceMs: envInt(env, 'GANTRY_JOB_UNSIGNALLED_GRACE_MS', 30_000),
    maxQueuedPerEndpoint: envInt(env, 'GANTRY_MAX_QUEUED_JOBS', 10_000),
    retention: {
      runMs: envInt(env, 'GANTRY_JOB_RETENTION_MS', DEFAULT_RETENTION.runMs),
      syncMs: envInt(env, 'GANTRY_JOB_SYNC_RETENTION_MS', DEFAULT_RETENTION.syncMs),
    },
  };
}

// ------------------------------------------------------------------ the per-process runtime

/** A registered interest in a wake-up; created before looking in the database so none is missed. */
export interface Waiter {
  /** Resolves when woken (with the job row when the waker had it), or with woken=false on timeout or abort. */
  wait(timeoutMs: number, abort?: AbortSignal): Promise<{ woken: boolean; row?: JobRow }>;
  /** Stops watching. A queue wake-up received but never waited for is handed to the next waiter. */
  release(): void;
}

/**
 * Wake-ups of waiting requests (long-polls, runsync): fed by this process directly after its own
 * commits and by LISTEN/NOTIFY for other processes' commits. A hint only: every waiter re-reads
 * PostgreSQL, and waits are bounded so that a lost hint costs latency, never a job.
 */
export interface JobWakeups {
  /** 'q': one waiter per wake-up (a queued job needs one taker); 'j' and 's': every waiter. */
  watch(kind: NotifyKind, key: string): Waiter;
  wake(kind: NotifyKind, key: string, row?: JobRow): void;
  /** Wakes every waiter (shutdown). */
  wakeAll(): void;
  /**
   * A marker of the queue wake-ups seen for an endpoint so far. Taken before a take that found
   * nothing, it lets `queueKnownEmpty` answer: true while no job can have been queued since
   * (every commit that queues a job notifies), so the next take need not ask PostgreSQL.
   */
  queueMarker(endpointId: string): number;
  markQueueEmpty(endpointId: string, marker: number): void;
  queueKnownEmpty(endpointId: string): boolean;
}

export type Log = (level: 'warn' | 'error', msg: string, err?: unknown) => void;

/** Longest a waiter sleeps before re-reading PostgreSQL even without a wake-up. */
const REPOLL_MS = 5_000;

export class JobRuntime {
  readonly signals: WorkflowSignals;
  closing = false;
  private sweepTimers: NodeJS.Timeout[] = [];
  /** Final states signalled since the last flush: their marks are cleared in one statement. */
  private sent: { ids: string[]; seqs: number[] } = { ids: [], seqs: [] };
  private flushing: Promise<void> | undefined;

  constructor(
    readonly ctx: DomainContext,
    /** Client calls and sweeps. */
    readonly store: JobStore,
    readonly wakeups: JobWakeups,
    readonly settings: JobSettings,
    readonly log: Log,
    /**
     * The worker protocol's statements on connections of their own: a flood of submissions must not
     * queue the takes and results that drain it.
     */
    readonly workerStore: JobStore = store,
  ) {
    this.signals = new WorkflowSignals(ctx, settings, log, (id, seq) => {
      this.sent.ids.push(id);
      this.sent.seqs.push(seq);
    });
  }

  /** Clears the marks of final states whose workflows were told (batched: one statement per tick). */
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

  /** Starts the sweeps that mend what a crash between a commit and a signal may have left. */
  startSweeps(): void {
    const every = (ms: number, lock: number, fn: () => Promise<void>): void => {
      const t = setInterval(() => {
        this.store.exclusively(lock, fn).catch((err: unknown) => this.log('warn', 'job sweep failed', err));
      }, ms);
      t.unref();
      this.sweepTimers.push(t);
    };
    every(5_000, SWEEP_LOCK_EXPIRED, async () => {
      for (let i = 0; i < 20 && (await this.store.deleteExpired(1000)) === 1000; i++);
    });
    const grace = Math.max(30_000, this.settings.lostAfterMs);
    every(10_000, SWEEP_LOCK_RUNNING, async () => {
      for (const row of await this.store.overdueRunning(this.settings.lostAfterMs, grace, 500)) this.signals.recheck(row.id);
    });
    every(60_000, SWEEP_LOCK_WEBHOOKS, async () => {
      for (const row of await this.store.undeliveredWebhooks(120_000, 30 * 60_000, 500)) this.signals.recheck(row.id);
    });
    // New jobs and final states a crashed process recorded but never signalled: soon after start
    // with a short grace (a job acknowledged just before a kill -9 gets its workflow within seconds;
    // a recheck of one another live process is about to signal is only a duplicate), then every minute.
    const unsignalled = (graceMs: number) => (): void => {
      this.store
        .exclusively(SWEEP_LOCK_UNSIGNALLED, async () => {
          for (let batch = 0; batch < 20; batch++) {
            const rows = await this.store.unsignalled(graceMs, 1000);
            for (const r of rows) this.signals.recheck(r.id, r.seq);
            if (rows.length < 1000) break;
            // The marks of this batch clear before the next is read.
            await this.signals.drained(30_000);
            await this.flushSent();
          }
        })
        .catch((err: unknown) => this.log('warn', 'job sweep failed', err));
    };
    const first = setTimeout(unsignalled(Math.min(2_000, this.settings.unsignalledGraceMs)), Math.min(3_000, this.settings.unsignalledGraceMs));
    first.unref();
    this.sweepTimers.push(first);
    const t = setInterval(unsignalled(this.settings.unsignalledGraceMs), 60_000);
    t.unref();
    this.sweepTimers.push(t);
    const flush = setInterval(() => void this.flushSent(), 250);
    flush.unref();
    this.sweepTimers.push(flush);
  }

  /** Stops sweeps and sends every pending workflow signal (bounded by `timeoutMs`). */
  async stop(timeoutMs = 10_000): Promise<void> {
    this.closing = true;
    for (const t of this.sweepTimers) clearInterval(t);
    this.wakeups.wakeAll();
    await this.signals.close(timeoutMs);
    await this.flushSent();
    await this.flushSent();
  }
}

const SWEEP_LOCK_EXPIRED = 0x6a6f6201;
const SWEEP_LOCK_RUNNING = 0x6a6f6202;
const SWEEP_LOCK_WEBHOOKS = 0x6a6f6203;
const SWEEP_LOCK_UNSIGNALLED = 0x6a6f6204;

const runtimes = new WeakMap<DomainContext, JobRuntime>();

export function attachJobRuntime(runtime: JobRuntime): void {
  runtimes.set(runtime.ctx, runtime);
}

/** Workflow signals this process has yet to send (coalescing, or Temporal behind): for benchmarks and metrics. */
export function pendingWorkflowSignals(ctx: DomainContext): number {
  return runtimes.get(ctx)?.signals.size ?? 0;
}

function runtimeOf(ctx: DomainContext): JobRuntime {
  const rt = runtimes.get(ctx);
  if (!rt) throw new DomainError('unavailable', 'the job service is not running in this process');
  return rt;
}

// ------------------------------------------------------------------ workflow signals (coalesced)

interface PendingSignal {
  kind: 'state' | 'recheck';
  snapshot?: ReturnType<typeof snapshotOf>;
  /** For a recheck of a final state left unsignalled: the seq whose mark it clears once sent. */
  seq?: number;
  /** The job's endpoint and account, for the search attributes of a workflow this send starts. */
  endpointId?: string;
  accountId?: string;
  due: number;
  attempts: number;
}

/**
 * Sends job workflows their signals after the fact. A state waits `signalDelayMs` for a successor
 * (queued → taken → done within that window is one signal); a final state goes at once. Every send
 * is a signal-with-start, so a workflow whose start was lost (a crash) is created by the next one.
 */
export class WorkflowSignals {
  private pending = new Map<string, PendingSignal>();
  private timer: NodeJS.Timeout | undefined;
  private timerAt = Infinity;
  private inFlight = 0;
  private closed = false;
  /**
   * Cancels sends still in flight when closing gives up on them (the connection closes next). One
   * controller per send, dropped with it: a call's abort listener stays on its signal, so one shared
   * signal would keep every send ever made alive.
   */
  private readonly sends = new Set<AbortController>();
  private aborted = false;
  private idle: Array<() => void> = [];
  /** Most signals in flight at once; the rest wait (and coalesce further). */
  static readonly MAX_IN_FLIGHT = 64;
  /** Most signals held; beyond it only final states are kept (they are also marked in the row). */
  static readonly MAX_PENDING = 100_000;
  private warnedFull = false;

  constructor(
    private readonly ctx: DomainContext,
    private readonly settings: JobSettings,
    private readonly log: Log,
    /** Told of each state (job, seq) its workflow has been sent: the mark at that seq goes. */
    private readonly stateSent: (jobId: string, seq: number) => void = () => {},
  ) {}

  get size(): number {
    return this.pending.size;
  }

  /** Queues `row`'s state for its workflow, replacing an older pending state of the same job. */
  state(row: JobRow): void {
    const snapshot = snapshotOf(row, this.settings.lostAfterMs);
    const prev = this.pending.get(row.id);
    if (prev?.snapshot && prev.snapshot.seq > snapshot.seq) return;
    if (!prev && this.pending.size >= WorkflowSignals.MAX_PENDING && !isTerminal(row.status)) {
      // Temporal is far behind (or down): memory stays bounded. A state dropped here reaches the
      // workflow with the job's next change (each is a signal-with-start) or through the sweeps.
      if (!this.warnedFull) this.log('warn', `${this.pending.size} job workflow signals waiting; dropping intermediate states until Temporal catches up`);
      this.warnedFull = true;
      return;
    }
    this.warnedFull = false;
    const now = Date.now();
    const due = isTerminal(row.status) || this.closed ? now : Math.min(prev?.due ?? Infinity, now + this.settings.signalDelayMs);
    this.pending.set(row.id, { kind: 'state', snapshot, endpointId: row.endpointId, accountId: row.accountId, due: prev?.kind === 'recheck' ? now : due, attempts: 0 });
    this.schedule(due);
  }

  /** Asks the job's workflow (started if missing) to re-read the job from PostgreSQL. */
  recheck(jobId: string, seq?: number): void {
    const prev = this.pending.get(jobId);
    if (prev) {
      prev.due = Math.min(prev.due, Date.now());
      if (prev.kind === 'state') prev.kind = 'recheck';
      prev.seq ??= seq;
    } else this.pending.set(jobId, { kind: 'recheck', seq, due: Date.now(), attempts: 0 });
    this.schedule(Date.now());
  }

  private schedule(at: number): void {
    if (at >= this.timerAt || this.aborted) return;
    if (this.timer) clearTimeout(this.timer);
    this.timerAt = at;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.timerAt = Infinity;
      this.pump();
    }, Math.max(0, at - Date.now()));
    this.timer.unref();
  }

  private pump(): void {
    const now = Date.now();
    let next = Infinity;
    for (const [jobId, p] of this.pending) {
      if (this.inFlight >= WorkflowSignals.MAX_IN_FLIGHT) return; // resumed when a send finishes
      if (p.due > now) {
        next = Math.min(next, p.due);
        continue;
      }
      this.pending.delete(jobId);
      this.inFlight++;
      this.send(jobId, p)
        .then(() => {
          // Any state sent clears a mark at its seq: the new job's (its workflow now exists) or a final one's.
          if (p.kind === 'state' && p.snapshot) this.stateSent(jobId, p.snapshot.seq);
          else if (p.kind === 'recheck' && p.seq !== undefined) this.stateSent(jobId, p.seq);
        })
        .catch((err: unknown) => {
          if (this.aborted) return;
          p.attempts++;
          if (p.attempts === 3) this.log('warn', `signal to workflow job:${jobId} failed ${p.attempts} times; still trying`, err);
          // Put it back unless a newer state took its place meanwhile.
          if (!this.pending.has(jobId)) this.pending.set(jobId, { ...p, due: Date.now() + Math.min(30_000, 200 * 2 ** p.attempts) });
        })
        .finally(() => {
          this.inFlight--;
          if (this.pending.size > 0) this.schedule(Date.now());
          else if (this.inFlight === 0) for (const resolve of this.idle.splice(0)) resolve();
        });
    }
    if (next !== Infinity) this.schedule(next);
  }

  private async send(jobId: string, p: PendingSignal): Promise<void> {
    const common = {
      workflowId: jobWorkflowId(jobId),
      taskQueue: this.ctx.taskQueue,
      args: [{ jobId, lostAfterMs: this.settings.lostAfterMs }] as [JobWorkflowInput],
      // Used only when this starts the workflow; it upserts GantryJobStatus as the job changes.
      typedSearchAttributes: gantrySearchAttributes('job', {
        endpointId: p.endpointId,
        accountId: p.accountId,
        jobStatus: p.snapshot && p.snapshot.status !== 'GONE' ? p.snapshot.status : undefined,
      }),
    };
    const snapshot = p.snapshot;
    const abort = new AbortController();
    this.sends.add(abort);
    try {
      await this.ctx.temporal.withAbortSignal(abort.signal, () =>
        p.kind === 'recheck' || !snapshot
          ? this.ctx.temporal.workflow.signalWithStart('jobWorkflow', { ...common, signal: recheckJob, signalArgs: [] })
          : this.ctx.temporal.workflow.signalWithStart('jobWorkflow', { ...common, signal: jobChanged, signalArgs: [snapshot] }),
      );
    } finally {
      this.sends.delete(abort);
    }
  }

  /** Resolves once nothing is pending or in flight, or after `timeoutMs`. */
  async drained(timeoutMs: number): Promise<void> {
    if (this.pending.size === 0 && this.inFlight === 0) return;
    await Promise.race([new Promise<void>((resolve) => this.idle.push(resolve)), new Promise<void>((resolve) => setTimeout(resolve, timeoutMs).unref())]);
  }

  /** Sends everything pending now and waits for it, at most `timeoutMs`. */
  async close(timeoutMs: number): Promise<void> {
    this.closed = true;
    const now = Date.now();
    for (const p of this.pending.values()) p.due = Math.min(p.due, now);
    if (this.pending.size === 0 && this.inFlight === 0) return;
    this.schedule(now);
    await Promise.race([
      new Promise<void>((resolve) => this.idle.push(resolve)),
      new Promise<void>((resolve) => setTimeout(resolve, timeoutMs).unref()),
    ]);
    const left = this.pending.size + this.inFlight;
    if (left > 0) this.log('warn', `${left} job workflow signals not sent at shutdown; the sweeps mend them`);
    if (this.timer) clearTimeout(this.timer);
    this.aborted = true;
    for (const abort of this.sends) abort.abort();
  }
}

// ------------------------------------------------------------------ shapes

export const JobPolicySchema = Type.Object(
  {
    executionTimeout: Type.Optional(Type.Integer({ minimum: 5_000, maximum: 7 * 86_400_000, description: 'milliseconds a worker may run the job' })),
    ttl: Type.Optional(Type.Integer({ minimum: 10_000, maximum: 7 * 86_400_000, description: 'milliseconds the job lives from submission' })),
    lowPriority: Type.Optional(Type.Boolean({ description: 'never causes a scale-up' })),
  },
  { additionalProperties: false },
);

export const RunJobBodySchema = Type.Object(
  {
    input: Type.Optional(Type.Unknown({ description: 'passed to the worker handler as job.input (required)' })),
    webhook: Type.Optional(Type.String({ format: 'uri', pattern: '^https?://', description: 'POSTed the final job' })),
    policy: Type.Optional(JobPolicySchema),
    s3Config: Type.Optional(Type.Object({}, { additionalProperties: true })),
  },
  { additionalProperties: true },
);
export type RunJobBody = Static<typeof RunJobBodySchema>;

export const WaitQuerySchema = Type.Object({ wait: Type.Optional(Type.String({ pattern: '^[0-9]+$', description: 'milliseconds, 1000..300000' })) });

export const JobStatusSchema = Type.Union([
  Type.Literal('IN_QUEUE'),
  Type.Literal('IN_PROGRESS'),
  Type.Literal('COMPLETED'),
  Type.Literal('FAILED'),
  Type.Literal('CANCELLED'),
  Type.Literal('TIMED_OUT'),
]);

export const JobViewSchema = Type.Object({
  id: Type.String(),
  status: JobStatusSchema,
  delayTime: Type.Optional(Type.Integer({ description: 'ms from submission to start' })),
  executionTime: Type.Optional(Type.Integer({ description: 'ms from start to finish' })),
  workerId: Type.Optional(Type.String()),
  output: Type.Optional(Type.Unknown()),
  error: Type.Optional(Type.String()),
  retries: Type.Optional(Type.Integer()),
});
export type JobView = Static<typeof JobViewSchema>;

export const JobStreamSchema = Type.Object({ status: JobStatusSchema, stream: Type.Array(Type.Object({ output: Type.Unknown() })) });

export const HealthSchema = Type.Object({
  jobs: Type.Object({ completed: Type.Integer(), failed: Type.Integer(), inProgress: Type.Integer(), inQueue: Type.Integer(), retried: Type.Integer() }),
  workers: Type.Object({
    idle: Type.Integer(),
    initializing: Type.Integer(),
    ready: Type.Integer(),
    running: Type.Integer(),
    throttled: Type.Integer(),
    unhealthy: Type.Integer(),
  }),
});

/** The job object clients (and webhooks) see. Times in milliseconds. */
export function jobView(row: JobRow): JobView {
  const view: JobView = { id: row.id, status: row.status };
  if (row.startedAt) view.delayTime = Math.max(0, row.startedAt.getTime() - row.createdAt.getTime());
  if (row.startedAt && row.completedAt) view.executionTime = Math.max(0, row.completedAt.getTime() - row.startedAt.getTime());
  if (row.workerId) view.workerId = row.workerId;
  if (row.output !== null && row.output !== undefined) view.output = row.output;
  if (row.error !== null) view.error = row.error;
  if (row.retries > 0) view.retries = row.retries;
  return view;
}

// ------------------------------------------------------------------ hooks

export interface JobQueuedEvent {
  endpointId: string;
  jobId: string;
  lowPriority: boolean;
}

const queuedListeners = new Set<(e: JobQueuedEvent) => void>();

/**
 * Calls `listener` after a job is committed to an endpoint's queue in this process (submission or
 * retry), for autoscaling. It runs synchronously on the request path: keep it cheap and let it do its
 * own batching (one Temporal signal per job on an entity workflow would exceed its limits).
 * lowPriority jobs must never cause a scale-up. Returns a function that removes the listener.
 */
export function onJobQueued(listener: (e: JobQueuedEvent) => void): () => void {
  queuedListeners.add(listener);
  return () => queuedListeners.delete(listener);
}

function jobQueued(e: JobQueuedEvent, log: Log): void {
  for (const listener of queuedListeners) {
    try {
      listener(e);
    } catch (err) {
      log('warn', 'job-queued listener failed', err);
    }
  }
}

/**
 * What an autoscaler reads: queued and running counts (REQUEST_COUNT) and the age of the oldest
 * queued normal-priority job (QUEUE_DELAY).
 */
export async function queueStats(ctx: DomainContext, endpointId: string): Promise<{ inQueue: number; inProgress: number; oldestQueuedMs: number }> {
  const rows = await ctx.db.$queryRaw<Array<{ inQueue: number; inProgress: number; oldestQueuedMs: number | null }>>`
    SELECT count(*) FILTER (WHERE status = 'IN_QUEUE')::int AS "inQueue",
           count(*) FILTER (WHERE status = 'IN_PROGRESS')::int AS "inProgress",
           (extract(epoch FROM (now() AT TIME ZONE 'UTC') - min("createdAt") FILTER (WHERE status = 'IN_QUEUE' AND NOT "lowPriority")) * 1000)::float8 AS "oldestQueuedMs"
    FROM "Job" WHERE "endpointId" = ${endpointId} AND status IN ('IN_QUEUE', 'IN_PROGRESS') AND "expiresAt" > (now() AT TIME ZONE 'UTC')`;
  const r = rows[0];
  return { inQueue: r?.inQueue ?? 0, inProgress: r?.inProgress ?? 0, oldestQueuedMs: Math.max(0, r?.oldestQueuedMs ?? 0) };
}

// ------------------------------------------------------------------ client side

interface QueueEndpoint {
  id: string;
  accountId: string;
  type: 'QUEUE_BASED' | 'LOAD_BALANCING';
  timeoutMs: number;
}

/** Endpoints change rarely and every job call needs one: cached briefly (found ones only). */
const ENDPOINT_CACHE_MS = 5_000;
const endpointCache = new Map<string, { endpoint: QueueEndpoint; until: number }>();

async function queueEndpoint(ctx: DomainContext, principal: Principal, endpointId: string): Promise<QueueEndpoint> {
  requireScope(principal, 'RUN');
  const now = Date.now();
  let endpoint = endpointCache.get(endpointId);
  if (!endpoint || endpoint.until <= now) {
    const e = await ctx.db.endpoint.findFirst({
      where: { id: endpointId, deletingAt: null },
      select: { id: true, accountId: true, type: true, timeoutMs: true },
    });
    if (!e) {
      endpointCache.delete(endpointId);
      throw notFound('endpoint');
    }
    if (endpointCache.size > 10_000) endpointCache.clear();
    endpoint = { endpoint: e, until: now + ENDPOINT_CACHE_MS };
    endpointCache.set(endpointId, endpoint);
  }
  const e = endpoint.endpoint;
  if (e.accountId !== principal.accountId) throw notFound('endpoint');
  requireEndpointAccess(principal, endpointId);
  if (e.type !== 'QUEUE_BASED') {
    throw new DomainError('bad_request', 'this endpoint is load-balancing: send requests to its requestUrls.base, without an input wrapper');
  }
  return e;
}

function parseWait(query: unknown, fallback: number): number {
  const q = validate(WaitQuerySchema, query ?? {});
  if (q.wait === undefined) return fallback;
  const wait = Number(q.wait);
  if (wait < 1_000 || wait > 300_000) throw validationFailed(['$.wait: must be between 1000 and 300000 milliseconds']);
  return wait;
}

function newJobId(sync: boolean): string {
  return `${sync ? 'sync-' : ''}${randomUUID()}-g1`;
}

async function submit(ctx: DomainContext, principal: Principal, endpointId: string, body: unknown, sync: boolean, id = newJobId(sync)): Promise<JobRow> {
  const rt = runtimeOf(ctx);
  const endpoint = await queueEndpoint(ctx, principal, endpointId);
  if (body === null || typeof body !== 'object' || Array.isArray(body) || !('input' in body) || (body as { input: unknown }).input == null) {
    throw new DomainError('bad_request', 'the request body must be a JSON object with an "input" property: {"input": {...}}');
  }
  const req = validate(RunJobBodySchema, body);
  const webhookProblem = req.webhook !== undefined ? webhookUrlProblem(req.webhook) : undefined;
  if (webhookProblem) throw validationFailed([`$.webhook: ${webhookProblem}`]);
  let row: JobRow | undefined;
  try {
    row = await rt.store.insert({
      id,
      endpointId,
      accountId: principal.accountId,
      inputJson: JSON.stringify(req.input),
      webhook: req.webhook ?? null,
      executionTimeoutMs: req.policy?.executionTimeout ?? endpoint.timeoutMs,
      ttlMs: req.policy?.ttl ?? 86_400_000,
      lowPriority: req.policy?.lowPriority ?? false,
      sync,
    }, rt.settings.maxQueuedPerEndpoint);
  } catch (err) {
    // The endpoint was deleted since it was cached.
    if ((err as { code?: string }).code === '23503') throw notFound('endpoint');
    throw err;
  }
  if (!row) throw new DomainError('rate_limited', `endpoint ${endpointId} already holds ${rt.settings.maxQueuedPerEndpoint} queued jobs, the most it may hold (GANTRY_MAX_QUEUED_JOBS); retry when workers have taken some`);
  rt.wakeups.wake('q', endpointId);
  rt.signals.state(row);
  jobQueued({ endpointId, jobId: row.id, lowPriority: row.lowPriority }, rt.log);
  return row;
}

/** POST /run: queued and committed; answers at once. */
export async function runJob(ctx: DomainContext, principal: Principal, endpointId: string, body: unknown): Promise<{ id: string; status: JobStatus }> {
  const row = await submit(ctx, principal, endpointId, body, false);
  return { id: row.id, status: row.status };
}

/**
 * Waits until the job is final or `deadline`; returns the last row read (null: the job is gone).
 * The watcher is registered before every read, so a completion between the two is not missed.
 */
async function awaitFinal(rt: JobRuntime, jobId: string, endpointId: string, deadline: number, first: Waiter, abort?: AbortSignal): Promise<JobRow | null> {
  let waiter = first;
  let row: JobRow | null = null;
  for (;;) {
    const left = deadline - Date.now();
    const woke = left > 0 && !rt.closing && !abort?.aborted ? await waiter.wait(Math.min(left, REPOLL_MS), abort) : { woken: false };
    waiter.release();
    if (woke.row && isTerminal(woke.row.status)) return woke.row;
    waiter = rt.wakeups.watch('j', jobId);
    try {
      row = await rt.store.get(jobId, endpointId);
    } catch (err) {
      waiter.release();
      throw err;
    }
    if (!row || isTerminal(row.status) || Date.now() >= deadline || rt.closing || abort?.aborted) {
      waiter.release();
      return row;
    }
  }
}

/** POST /runsync?wait=: the final job when it finishes in time, else `{id, status}` to poll. */
export async function runJobSync(ctx: DomainContext, principal: Principal, endpointId: string, body: unknown, query: unknown, abort?: AbortSignal): Promise<JobView> {
  const rt = runtimeOf(ctx);
  const wait = parseWait(query, 90_000);
  const deadline = Date.now() + wait;
  const id = newJobId(true);
  const waiter = rt.wakeups.watch('j', id);
  let row: JobRow | null;
  try {
    row = await submit(ctx, principal, endpointId, body, true, id);
  } catch (err) {
    waiter.release();
    throw err;
  }
  row = (await awaitFinal(rt, id, endpointId, deadline, waiter, abort)) ?? row;
  return isTerminal(row.status) ? jobView(row) : { id: row.id, status: row.status };
}

/** GET /status/{id}: 404 once the job expired (TTL, retention) or never existed. */
export async function getJobStatus(ctx: DomainContext, principal: Principal, endpointId: string, jobId: string): Promise<JobView> {
  const rt = runtimeOf(ctx);
  await queueEndpoint(ctx, principal, endpointId);
  const row = await rt.store.get(jobId, endpointId);
  if (!row) throw notFound('job');
  return jobView(row);
}

/** GET /status-sync/{id}?wait=: like /status, after waiting up to `wait` ms for the job to finish. */
export async function waitJobStatus(ctx: DomainContext, principal: Principal, endpointId: string, jobId: string, query: unknown, abort?: AbortSignal): Promise<JobView> {
  const rt = runtimeOf(ctx);
  await queueEndpoint(ctx, principal, endpointId);
  const deadline = Date.now() + parseWait(query, 90_000);
  const waiter = rt.wakeups.watch('j', jobId);
  let row: JobRow | null;
  try {
    row = await rt.store.get(jobId, endpointId);
  } catch (err) {
    waiter.release();
    throw err;
  }
  if (!row) {
    waiter.release();
    throw notFound('job');
  }
  if (isTerminal(row.status)) {
    waiter.release();
    return jobView(row);
  }
  row = await awaitFinal(rt, jobId, endpointId, deadline, waiter, abort);
  if (!row) throw notFound('job');
  return jobView(row);
}

/** GET /stream/{id}: the chunks not yet handed to a caller; waits briefly for one while the job runs. */
export async function streamJob(
  ctx: DomainContext,
  principal: Principal,
  endpointId: string,
  jobId: string,
  abort?: AbortSignal,
): Promise<{ status: JobStatus; stream: Array<{ output: unknown }> }> {
  const rt = runtimeOf(ctx);
  await queueEndpoint(ctx, principal, endpointId);
  const deadline = Date.now() + rt.settings.streamHoldMs;
  for (;;) {
    const waiter = rt.wakeups.watch('j', jobId);
    try {
      const got = await rt.store.takeStream(jobId, endpointId);
      if (!got) throw notFound('job');
      const left = deadline - Date.now();
      if (got.outputs.length > 0 || isTerminal(got.status) || left <= 0 || rt.closing || abort?.aborted) {
        return { status: got.status, stream: got.outputs.map((output) => ({ output })) };
      }
      await waiter.wait(Math.min(left, REPOLL_MS), abort);
    } finally {
      waiter.release();
    }
  }
}

/** POST /cancel/{id}: a queued job never runs; a running one is stopped on its worker. */
export async function cancelJob(ctx: DomainContext, principal: Principal, endpointId: string, jobId: string): Promise<{ id: string; status: JobStatus }> {
  const rt = runtimeOf(ctx);
  await queueEndpoint(ctx, principal, endpointId);
  const r = await rt.store.cancel(jobId, endpointId);
  if (!r) throw notFound('job');
  if (r.changed) {
    rt.wakeups.wake('j', jobId, r.row);
    const worker = (r.row as JobRow & { prevWorker?: string | null }).prevWorker;
    if (worker) rt.wakeups.wake('s', worker);
    rt.signals.state(r.row);
  }
  return { id: r.row.id, status: r.row.status };
}

/** POST /retry/{id}: a FAILED or TIMED_OUT job goes back to the queue under the same id. */
export async function retryJob(ctx: DomainContext, principal: Principal, endpointId: string, jobId: string): Promise<{ id: string; status: JobStatus }> {
  const rt = runtimeOf(ctx);
  await queueEndpoint(ctx, principal, endpointId);
  const r = await rt.store.retry(jobId, endpointId);
  if (!r) throw notFound('job');
  if (!r.changed) throw new DomainError('bad_request', `only FAILED or TIMED_OUT jobs can be retried; this one is ${r.row.status}`);
  rt.wakeups.wake('q', endpointId);
  rt.signals.state(r.row);
  jobQueued({ endpointId, jobId, lowPriority: r.row.lowPriority }, rt.log);
  return { id: r.row.id, status: r.row.status };
}

/**
 * POST /purge-queue: removes queued jobs (running ones finish). Their workflows, if started, end at
 * their next timer when they find the job gone; signalling each one here would flood Temporal.
 */
export async function purgeQueue(ctx: DomainContext, principal: Principal, endpointId: string): Promise<{ removed: number; status: 'completed' }> {
  const rt = runtimeOf(ctx);
  await queueEndpoint(ctx, principal, endpointId);
  const ids = await rt.store.purge(endpointId);
  return { removed: ids.length, status: 'completed' };
}

export async function endpointHealth(ctx: DomainContext, principal: Principal, endpointId: string): Promise<HealthCounts> {
  const rt = runtimeOf(ctx);
  await queueEndpoint(ctx, principal, endpointId);
  return rt.store.health(endpointId);
}

// ------------------------------------------------------------------ worker side

export interface TakeOptions {
  /** Most jobs to hand over (1 for job-take). */
  max: number;
  /** The worker hung up. */
  abort?: AbortSignal;
}

/**
 * job-take / job-take-batch: jobs at once when any are queued, else holds the long-poll until one
 * is queued (woken by the commit that queued it) or the hold time passes (then none).
 */
export async function takeJobs(ctx: DomainContext, worker: WorkerIdentity, opts: TakeOptions): Promise<TakenJob[]> {
  const rt = runtimeOf(ctx);
  const deadline = Date.now() + rt.settings.takeHoldMs;
  if (!worker.acceptsJobs) {
    // A draining or leaving worker gets nothing; holding keeps it from spinning.
    await sleep(Math.min(rt.settings.takeHoldMs, 5_000), opts.abort);
    return [];
  }
  for (;;) {
    const waiter = rt.wakeups.watch('q', worker.endpointId);
    try {
      // A worker asks again right after each result; when nothing was queued since the last empty
      // answer, it waits for the next wake-up without a query.
      if (!rt.wakeups.queueKnownEmpty(worker.endpointId)) {
        const marker = rt.wakeups.queueMarker(worker.endpointId);
        const { jobs, more } = await rt.workerStore.take(worker.endpointId, worker.workerId, opts.max);
        if (!more) rt.wakeups.markQueueEmpty(worker.endpointId, marker);
        if (jobs.length > 0) {
          for (const job of jobs) rt.signals.state(job);
          return jobs;
        }
      }
      const left = deadline - Date.now();
      if (left <= 0 || rt.closing || opts.abort?.aborted) return [];
      await waiter.wait(Math.min(left, REPOLL_MS), opts.abort);
    } finally {
      waiter.release();
    }
  }
}

/** Puts back jobs a take could not deliver (the worker hung up before the answer). */
export async function untakeJobs(ctx: DomainContext, worker: WorkerIdentity, jobIds: string[]): Promise<void> {
  const rt = runtimeOf(ctx);
  const rows = await rt.workerStore.untake(jobIds, worker.workerId);
  if (rows.length > 0) rt.wakeups.wake('q', worker.endpointId);
  for (const row of rows) rt.signals.state(row);
}

function parseJsonBody(raw: unknown, what: string): Record<string, unknown> {
  let body: unknown = raw;
  if (typeof raw === 'string' || Buffer.isBuffer(raw)) {
    try {
      body = JSON.parse(raw.toString());
    } catch {
      throw new DomainError('bad_request', `${what} body must be JSON`);
    }
  }
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw new DomainError('bad_request', `${what} body must be a JSON object`);
  // A worker's output with NUL (jsonb refuses it) or nested past stringify's stack: its error, not a 500.
  const problem = unstorableJson(body);
  if (problem) throw validationFailed([problem]);
  return body as Record<string, unknown>;
}

const jsonOrNull = (v: unknown): string | null => (v === undefined ? null : JSON.stringify(v));

/**
 * job-done: a result (output, error), a progress update (`status: "IN_PROGRESS"`), and maybe
 * `stopPod`. Idempotent: the worker SDK posts up to three times and ignores the answer.
 */
export async function finishJob(ctx: DomainContext, worker: WorkerIdentity, jobId: string, rawBody: unknown): Promise<{ status: JobStatus }> {
  const rt = runtimeOf(ctx);
  const body = parseJsonBody(rawBody, 'job-done');
  if (body.status === 'IN_PROGRESS') {
    if (!(await rt.workerStore.progress(jobId, worker.workerId, jsonOrNull(body.output)))) throw await notHeld(rt, jobId, worker);
    rt.wakeups.wake('j', jobId);
    return { status: 'IN_PROGRESS' };
  }
  const error = body.error === undefined || body.error === null || body.error === '' ? null : typeof body.error === 'string' ? body.error : JSON.stringify(body.error);
  const row = await rt.workerStore.finish(jobId, worker.workerId, {
    status: error === null ? 'COMPLETED' : 'FAILED',
    outputJson: jsonOrNull(body.output),
    error,
  });
  if (body.stopPod === true) {
    await rt.workerStore.workerLeaving(worker.workerId, 'the worker asked to stop (stopPod)');
    forgetWorkerCredentials();
  }
  if (!row) {
    const held = await rt.workerStore.holder(jobId);
    // A repeated post of a result already recorded from this worker: nothing to do.
    if (held && held.workerId === worker.workerId && isTerminal(held.status)) return { status: held.status };
    throw await notHeld(rt, jobId, worker, held);
  }
  rt.wakeups.wake('j', jobId, row);
  rt.signals.state(row);
  return { status: row.status };
}

async function notHeld(rt: JobRuntime, jobId: string, worker: WorkerIdentity, held?: { status: JobStatus; workerId: string | null } | null): Promise<DomainError> {
  const h = held === undefined ? await rt.workerStore.holder(jobId) : held;
  if (!h) return notFound('job');
  if (h.workerId !== worker.workerId) return new DomainError('conflict', 'this job is not held by this worker');
  return new DomainError('conflict', `this job is ${h.status}`);
}

/** job-stream: one chunk of a streaming job's output. */
export async function postStreamChunk(ctx: DomainContext, worker: WorkerIdentity, jobId: string, rawBody: unknown): Promise<void> {
  const rt = runtimeOf(ctx);
  const body = parseJsonBody(rawBody, 'job-stream');
  const output = 'output' in body ? body.output : body;
  if (!(await rt.workerStore.appendChunk(jobId, worker.workerId, JSON.stringify(output ?? null)))) throw await notHeld(rt, jobId, worker);
  rt.wakeups.wake('j', jobId);
}

/** job-stop: ids of jobs this worker must stop (cancelled, timed out); long-polls while there are none. */
export async function waitForStops(ctx: DomainContext, worker: WorkerIdentity, abort?: AbortSignal): Promise<string[]> {
  const rt = runtimeOf(ctx);
  const deadline = Date.now() + rt.settings.takeHoldMs;
  for (;;) {
    const waiter = rt.wakeups.watch('s', worker.workerId);
    try {
      const ids = await rt.workerStore.takeStops(worker.workerId);
      const left = deadline - Date.now();
      if (ids.length > 0 || left <= 0 || rt.closing || abort?.aborted) return ids;
      await waiter.wait(Math.min(left, REPOLL_MS), abort);
    } finally {
      waiter.release();
    }
  }
}

export const PingQuerySchema = Type.Object(
  {
    job_id: Type.Optional(Type.String({ description: 'comma-separated ids of the jobs in progress' })),
    runpod_version: Type.Optional(Type.String()),
    status: Type.Optional(Type.String({ description: '"unhealthy" when the worker failed its self-check' })),
    check: Type.Optional(Type.String()),
    reason: Type.Optional(Type.String()),
  },
  { additionalProperties: true },
);

/** ping: the worker is alive, and so are the jobs it lists (a job no ping lists is lost after a while). */
export async function workerPing(ctx: DomainContext, worker: WorkerIdentity, query: unknown): Promise<void> {
  const rt = runtimeOf(ctx);
  const q = validate(PingQuerySchema, query ?? {});
  const jobIds = (q.job_id ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0 && s.length <= 200)
    .slice(0, 1000);
  const unhealthy = q.status === 'unhealthy' ? `self-check failed${q.check ? ` (${q.check})` : ''}${q.reason ? `: ${q.reason}` : ''}` : null;
  await rt.workerStore.ping(worker.workerId, jobIds, unhealthy);
  if (unhealthy) forgetWorkerCredentials();
}

function sleep(ms: number, abort?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(done, ms);
    function done(): void {
      clearTimeout(t);
      abort?.removeEventListener('abort', done);
      resolve();
    }
    abort?.addEventListener('abort', done, { once: true });
  });
}
