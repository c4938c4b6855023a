/**
 * The worker protocol (docs/jobs.md: job-take, job-take-batch, job-done, job-stream, job-stop, ping) as
 * domain operations on the job runtime, for a worker already authenticated by its own credential.
 * Takes and results run on the runtime's worker connections, so that a flood of submissions never
 * queues the work that drains it.
 */
import { DomainError, notFound, validationFailed } from '../errors.ts';
import { isTerminal, type JobRow, type JobStatus, type Outcome, type TakenJob } from './rows.ts';
import type { JobStore } from './queue.ts';
import { OutputProblem, storeModelOutput, type StoredOutput } from '../public-models/outputs.ts';
import { unstorableJson, validate } from '../shared/validation.ts';
import { forgetWorker, type WorkerIdentity } from '../workers/credentials.ts';
import type { JobRuntime } from './runtime.ts';
import { PingQuerySchema } from './schemas.ts';
import { REPOLL_MS, sleep } from './wakeups.ts';

export interface TakeOptions {
  /** Most jobs to hand over (1 for job-take). */
  max: number;
  /** Ends the wait: the worker hung up, or the API is closing. */
  abort?: AbortSignal;
  /**
   * Reads the worker's identity again, past the record cache: called when its state changed while
   * the take waited (a FlashBoot standby, a thaw). Without it such a take answers no job.
   */
  refresh?: () => Promise<WorkerIdentity>;
}

/** The longest a worker that takes no jobs is held before its empty answer (it must not spin). */
const NOT_ACCEPTING_HOLD_MS = 5_000;

/**
 * job-take / job-take-batch: jobs at once when any are queued, else holds the long-poll until one
 * is queued (woken by the commit that queued it) or the hold time passes (then none). A change of
 * the worker's own state (`w` wake-up: it stood by, or was thawed) makes the take look at it again,
 * so that a frozen worker's waiting take stops taking, and a thawed one takes at once.
 */
export async function takeJobs(jobs: JobRuntime, worker: WorkerIdentity, opts: TakeOptions): Promise<TakenJob[]> {
  const deadline = Date.now() + jobs.settings.takeHoldMs;
  // A worker remembered as taking no jobs may have been thawed since (its first call after the
  // unpause can beat the wake-up that clears the cache): read it again rather than hold it.
  let identity = !worker.acceptsJobs && opts.refresh ? await opts.refresh() : worker;
  for (;;) {
    const changed = jobs.wakeups.watch('w', worker.workerId);
    try {
      const changedWait = changed.wait(Math.max(0, deadline - Date.now()), opts.abort);
      let taken: TakenJob[] | 'changed';
      if (!identity.acceptsJobs) {
        // A draining, leaving or frozen worker gets nothing; holding keeps it from spinning.
        const hold = sleep(Math.min(NOT_ACCEPTING_HOLD_MS, jobs.settings.takeHoldMs), opts.abort).then(
          () => 'held' as const,
        );
        const woke = await Promise.race([hold, changedWait.then((r) => (r.woken ? 'changed' : 'held'))]);
        taken = woke === 'changed' ? 'changed' : [];
      } else {
        taken = await takeAccepting(jobs, identity, opts, deadline, changedWait);
      }
      if (taken !== 'changed') return taken;
      if (!opts.refresh || Date.now() >= deadline || opts.abort?.aborted) return [];
      identity = await opts.refresh();
    } finally {
      changed.release();
    }
  }
}

/** The take of a worker that accepts jobs, until it has some, the hold ends, or its state changes. */
async function takeAccepting(
  jobs: JobRuntime,
  worker: WorkerIdentity,
  opts: TakeOptions,
  deadline: number,
  changedWait: Promise<{ woken: boolean }>,
): Promise<TakenJob[] | 'changed'> {
  let stateChanged = false;
  const changedSeen = changedWait.then((r) => {
    stateChanged = r.woken;
  });
  for (;;) {
    if (stateChanged) return 'changed';
    const waiter = jobs.wakeups.watch('q', worker.endpointId);
    try {
      // A worker asks again right after each result; when nothing was queued since the last empty
      // answer, it waits for the next wake-up without a query.
      if (!jobs.wakeups.queueKnownEmpty(worker.endpointId)) {
        const marker = jobs.wakeups.queueMarker(worker.endpointId);
        const { jobs: taken, more } = await jobs.workerStore.take(worker.endpointId, worker.workerId, opts.max);
        if (!more) jobs.wakeups.markQueueEmpty(worker.endpointId, marker);
        if (taken.length > 0) {
          for (const job of taken) jobs.signals.state(job);
          return taken;
        }
      }
      const left = deadline - Date.now();
      if (left <= 0 || jobs.closing || opts.abort?.aborted) return [];
      // While it waits, a runsync submission may hand this worker its job directly (handoff.ts).
      const offer = jobs.offers.offer(worker.endpointId, worker.workerId, opts.abort);
      let woken = false;
      const waited = waiter.wait(Math.min(left, REPOLL_MS), opts.abort).then((r) => {
        woken = r.woken;
      });
      await Promise.race([waited, offer.claimed, changedSeen]);
      const handed = offer.withdraw();
      if (handed) {
        const taken = await handed;
        if (taken.length > 0) {
          // A queue wake-up this take received meanwhile is another taker's to act on.
          if (woken) jobs.wakeups.wake('q', worker.endpointId);
          return taken;
        }
      }
    } finally {
      waiter.release();
    }
  }
}

/** Puts back jobs a take could not deliver (the worker hung up before the answer). */
export async function untakeJobs(jobs: JobRuntime, worker: WorkerIdentity, jobIds: string[]): Promise<void> {
  const rows = await jobs.workerStore.untake(jobIds, worker.workerId);
  if (rows.length > 0) jobs.wakeups.wake('q', worker.endpointId);
  for (const row of rows) jobs.signals.state(row);
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
  if (body === null || typeof body !== 'object' || Array.isArray(body))
    throw new DomainError('bad_request', `${what} body must be a JSON object`);
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
export async function finishJob(
  jobs: JobRuntime,
  worker: WorkerIdentity,
  jobId: string,
  rawBody: unknown,
): Promise<{ status: JobStatus }> {
  const body = parseJsonBody(rawBody, 'job-done');
  if (body.status === 'IN_PROGRESS') {
    if (!(await jobs.workerStore.progress(jobId, worker.workerId, jsonOrNull(body.output))))
      throw await notHeld(jobs, jobId, worker);
    jobs.wakeups.wake('j', jobId);
    return { status: 'IN_PROGRESS' };
  }
  const error =
    body.error === undefined || body.error === null || body.error === ''
      ? null
      : typeof body.error === 'string'
        ? body.error
        : JSON.stringify(body.error);
  const outcome: Outcome = {
    status: error === null ? 'COMPLETED' : 'FAILED',
    outputJson: jsonOrNull(body.output),
    error,
  };
  let row = await jobs.workerStore.finish(jobId, worker.workerId, outcome);
  // Not finished: a public model's job (stored and billed first), a repeat, or a job not held.
  let held: Awaited<ReturnType<JobStore['holder']>> | undefined;
  if (!row) {
    held = await jobs.workerStore.holder(jobId);
    if (held?.modelId && held.workerId === worker.workerId && held.status === 'IN_PROGRESS') {
      row = await finishModelJob(
        jobs,
        jobId,
        worker.workerId,
        held as { modelId: string; accountId: string },
        outcome,
        body.output,
      );
      held = undefined;
    }
  }
  if (body.stopPod === true) {
    await jobs.workerStore.workerLeaving(worker.workerId, 'the worker asked to stop (stopPod)');
    forgetWorker(jobs.records, worker.workerId);
  }
  if (!row) {
    held ??= await jobs.workerStore.holder(jobId);
    // A repeated post of a result already recorded from this worker: nothing to do.
    if (held && held.workerId === worker.workerId && isTerminal(held.status)) return { status: held.status };
    throw await notHeld(jobs, jobId, worker, held);
  }
  jobs.wakeups.wake('j', jobId, row);
  jobs.signals.state(row);
  return { status: row.status };
}

/**
 * A public model's result: its media stored and its price computed (model-outputs.ts), then the
 * job finished with its charge in one statement. Media that are not what their field says fail
 * the job (and are not billed); a failed job is never billed.
 */
async function finishModelJob(
  jobs: JobRuntime,
  jobId: string,
  workerId: string,
  job: { modelId: string; accountId: string },
  outcome: Outcome,
  output: unknown,
): Promise<JobRow | null> {
  if (outcome.status !== 'COMPLETED') return jobs.workerStore.finishModelJob(jobId, workerId, outcome, null);
  // Through the record cache: a model's price is read once per revocation bound, not per result.
  const model = (await jobs.model(job.modelId)) ?? null;
  let stored: StoredOutput;
  try {
    stored = await storeModelOutput(jobs.outputs, { id: jobId, accountId: job.accountId }, model, output);
  } catch (err) {
    if (!(err instanceof OutputProblem)) throw err;
    return jobs.workerStore.finishModelJob(
      jobId,
      workerId,
      { status: 'FAILED', outputJson: null, error: `the model's output was refused: ${err.message}` },
      null,
    );
  }
  return jobs.workerStore.finishModelJob(
    jobId,
    workerId,
    { ...outcome, outputJson: JSON.stringify(stored.output) },
    stored.charge,
  );
}

async function notHeld(
  jobs: JobRuntime,
  jobId: string,
  worker: WorkerIdentity,
  held?: { status: JobStatus; workerId: string | null } | null,
): Promise<DomainError> {
  const h = held === undefined ? await jobs.workerStore.holder(jobId) : held;
  if (!h) return notFound('job');
  if (h.workerId !== worker.workerId) return new DomainError('conflict', 'this job is not held by this worker');
  return new DomainError('conflict', `this job is ${h.status}`);
}

/** job-stream: one chunk of a streaming job's output. */
export async function postStreamChunk(
  jobs: JobRuntime,
  worker: WorkerIdentity,
  jobId: string,
  rawBody: unknown,
): Promise<void> {
  const body = parseJsonBody(rawBody, 'job-stream');
  const output = 'output' in body ? body.output : body;
  if (!(await jobs.workerStore.appendChunk(jobId, worker.workerId, JSON.stringify(output ?? null))))
    throw await notHeld(jobs, jobId, worker);
  jobs.wakeups.wake('j', jobId);
}

/** job-stop: ids of jobs this worker must stop (cancelled, timed out); long-polls while there are none. */
export async function waitForStops(jobs: JobRuntime, worker: WorkerIdentity, abort?: AbortSignal): Promise<string[]> {
  const deadline = Date.now() + jobs.settings.takeHoldMs;
  for (;;) {
    const waiter = jobs.wakeups.watch('s', worker.workerId);
    try {
      const ids = await jobs.workerStore.takeStops(worker.workerId);
      const left = deadline - Date.now();
      if (ids.length > 0 || left <= 0 || jobs.closing || abort?.aborted) return ids;
      await waiter.wait(Math.min(left, REPOLL_MS), abort);
    } finally {
      waiter.release();
    }
  }
}

/** ping: the worker is alive, and so are the jobs it lists (a job no ping lists is lost after a while). */
export async function workerPing(jobs: JobRuntime, worker: WorkerIdentity, query: unknown): Promise<void> {
  const q = validate(PingQuerySchema, query ?? {});
  const jobIds = (q.job_id ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0 && s.length <= 200)
    .slice(0, 1000);
  const unhealthy =
    q.status === 'unhealthy'
      ? `self-check failed${q.check ? ` (${q.check})` : ''}${q.reason ? `: ${q.reason}` : ''}`
      : null;
  await jobs.workerStore.ping(worker.workerId, jobIds, unhealthy);
  if (unhealthy) forgetWorker(jobs.records, worker.workerId);
}
