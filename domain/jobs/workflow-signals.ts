/**
 * Job workflows learn of their job's changes after the fact, from this coalescer: the hot path
 * (submit, take, done) costs SQL statements only, and states of one job that follow each other
 * quickly become one signal-with-start, so a fast job costs its workflow one task.
 */
import type { DomainContext } from '../context.ts';
import { isTerminal, snapshotOf, type JobRow } from './rows.ts';
import {
  jobChanged,
  jobTaskQueueOf,
  jobWorkflowId,
  recheckJob,
  type JobWorkflowInput,
} from '../../contracts/workflows.ts';
import { gantrySearchAttributes } from '../../contracts/search-attributes.ts';
import type { Log } from './runtime.ts';
import type { JobSettings } from './settings.ts';

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
 * (queued → taken → done within that window is one signal); a final state goes at once. While
 * Temporal is behind (more signals waiting than in flight), a state that is not final waits
 * `BEHIND_HOLD_MS` instead: in a burst most jobs finish meanwhile, and their workflows then cost one
 * signal and one workflow task instead of two. Every send is a signal-with-start, so a workflow
 * whose start was lost (a crash) is created by the next one.
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
  /** How long a state that is not final waits for its successor while Temporal is behind. */
  static readonly BEHIND_HOLD_MS = 5_000;

  constructor(
    /** The Temporal client and the task queue job workflows run on. */
    private readonly ctx: Pick<DomainContext, 'temporal' | 'taskQueue'>,
    private readonly settings: JobSettings,
    private readonly log: Log,
    /** Told of each state (job, seq) its workflow has been sent: the mark at that seq goes. */
    private readonly stateSent: (jobId: string, seq: number) => void = () => {},
  ) {}

  get size(): number {
    return this.pending.size;
  }

  /** Signals held or under way: how far Temporal is behind this process's job changes. */
  get backlog(): number {
    return this.pending.size + this.inFlight;
  }

  /** Signals sent per second, recently (an average over about the last 5 s). */
  get sendRate(): number {
    this.decayRate(Date.now());
    return this.rate;
  }

  private rate = 0;
  private rateAt = Date.now();

  private decayRate(now: number): void {
    const dt = (now - this.rateAt) / 1000;
    if (dt > 0) {
      this.rate *= Math.exp(-dt / 5);
      this.rateAt = now;
    }
  }

  private countSent(): void {
    this.decayRate(Date.now());
    // Each send adds 1/5 s to a 5 s average of sends per second.
    this.rate += 1 / 5;
  }

  /** Queues `row`'s state for its workflow, replacing an older pending state of the same job. */
  state(row: JobRow): void {
    const snapshot = snapshotOf(row, this.settings.lostAfterMs);
    const prev = this.pending.get(row.id);
    if (prev?.snapshot && prev.snapshot.seq > snapshot.seq) return;
    if (!prev && this.pending.size >= WorkflowSignals.MAX_PENDING && !isTerminal(row.status)) {
      // Temporal is far behind (or down): memory stays bounded. A state dropped here reaches the
      // workflow with the job's next change (each is a signal-with-start) or through the sweeps.
      if (!this.warnedFull)
        this.log(
          'warn',
          `${this.pending.size} job workflow signals waiting; dropping intermediate states until Temporal catches up`,
        );
      this.warnedFull = true;
      return;
    }
    this.warnedFull = false;
    const now = Date.now();
    const behind = this.pending.size > WorkflowSignals.MAX_IN_FLIGHT;
    const hold = behind
      ? Math.max(this.settings.signalDelayMs, WorkflowSignals.BEHIND_HOLD_MS)
      : this.settings.signalDelayMs;
    const due = isTerminal(row.status) || this.closed ? now : Math.min(prev?.due ?? Infinity, now + hold);
    this.pending.set(row.id, {
      kind: 'state',
      snapshot,
      endpointId: row.endpointId,
      accountId: row.accountId,
      due: prev?.kind === 'recheck' ? now : due,
      attempts: 0,
    });
    this.schedule(due);
  }

  /**
   * Asks the job's workflow (started if missing) to re-read the job from PostgreSQL. The endpoint
   * and account go into the search attributes of a workflow this starts: without them it would be
   * missing from every listing by endpoint (a job whose first signal died with its API process).
   */
  recheck(job: { id: string; endpointId: string; accountId: string }, seq?: number): void {
    const prev = this.pending.get(job.id);
    if (prev) {
      prev.due = Math.min(prev.due, Date.now());
      if (prev.kind === 'state') prev.kind = 'recheck';
      prev.seq ??= seq;
      prev.endpointId ??= job.endpointId;
      prev.accountId ??= job.accountId;
    } else
      this.pending.set(job.id, {
        kind: 'recheck',
        seq,
        endpointId: job.endpointId,
        accountId: job.accountId,
        due: Date.now(),
        attempts: 0,
      });
    this.schedule(Date.now());
  }

  private schedule(at: number): void {
    if (at >= this.timerAt || this.aborted) return;
    if (this.timer) clearTimeout(this.timer);
    this.timerAt = at;
    this.timer = setTimeout(
      () => {
        this.timer = undefined;
        this.timerAt = Infinity;
        this.pump();
      },
      Math.max(0, at - Date.now()),
    );
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
          this.countSent();
          // Any state sent clears a mark at its seq: the new job's (its workflow now exists) or a final one's.
          if (p.kind === 'state' && p.snapshot) this.stateSent(jobId, p.snapshot.seq);
          else if (p.kind === 'recheck' && p.seq !== undefined) this.stateSent(jobId, p.seq);
        })
        .catch((err: unknown) => {
          if (this.aborted) return;
          p.attempts++;
          if (p.attempts === 3)
            this.log('warn', `signal to workflow job:${jobId} failed ${p.attempts} times; still trying`, err);
          // Put it back unless a newer state took its place meanwhile.
          if (!this.pending.has(jobId))
            this.pending.set(jobId, { ...p, due: Date.now() + Math.min(30_000, 200 * 2 ** p.attempts) });
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
      taskQueue: jobTaskQueueOf(this.ctx.taskQueue),
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
          : this.ctx.temporal.workflow.signalWithStart('jobWorkflow', {
              ...common,
              signal: jobChanged,
              signalArgs: [snapshot],
            }),
      );
    } finally {
      this.sends.delete(abort);
    }
  }

  /** Resolves once nothing is pending or in flight, or after `timeoutMs`. */
  async drained(timeoutMs: number): Promise<void> {
    if (this.pending.size === 0 && this.inFlight === 0) return;
    await Promise.race([
      new Promise<void>((resolve) => this.idle.push(resolve)),
      new Promise<void>((resolve) => setTimeout(resolve, timeoutMs).unref()),
    ]);
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
