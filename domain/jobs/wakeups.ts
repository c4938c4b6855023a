/**
 * Wake-ups of waiting job requests (long-polls, runsync, /stream): the contract between the domain's
 * waits and what delivers wake-ups (api/job-notify.ts: this process's own commits, and
 * LISTEN/NOTIFY for other processes'). A hint only: every waiter re-reads PostgreSQL, and waits are
 * bounded so that a lost hint costs latency, never a job.
 */
import type { JobRow, NotifyKind } from './rows.ts';

/** A registered interest in a wake-up; created before looking in the database so none is missed. */
export interface Waiter {
  /** Resolves when woken (with the job row when the waker had it), or with woken=false on timeout or abort. */
  wait(timeoutMs: number, abort?: AbortSignal): Promise<{ woken: boolean; row?: JobRow }>;
  /** Stops watching; a wait still pending returns, not woken. A queue wake-up received but never waited for is handed to the next waiter. */
  release(): void;
}

/** Wake-ups of waiting requests: fed by this process directly after its own commits and by LISTEN/NOTIFY for other processes' commits. */
export interface JobWakeups {
  /** Starts delivering other processes' wake-ups (the LISTEN session). */
  start(): Promise<void>;
  /** Stops delivering them and wakes every waiter. */
  stop(): Promise<void>;
  /** 'q': one waiter per wake-up (a queued job needs one taker); 'j', 's' and 'w': every waiter. */
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

/** Longest a waiter sleeps before re-reading PostgreSQL even without a wake-up. */
export const REPOLL_MS = 5_000;

/** Resolves after `ms`, or at once when `abort` fires. */
export function sleep(ms: number, abort?: AbortSignal): Promise<void> {
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
