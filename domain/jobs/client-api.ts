/**
 * The client job API (docs/jobs.md: `/run`, `/runsync`, `/status`, `/status-sync`, `/stream`, `/cancel`,
 * `/retry`, `/purge-queue`, `/health`) as domain operations on the job runtime. Every change is one
 * SQL statement committed before the answer; waiting requests are woken by the commits they wait
 * for (wakeups.ts); workflows are told afterwards (workflow-signals.ts).
 */
import { randomUUID } from 'node:crypto';
import { requireEndpointAccess, requireScope, type Principal } from '../accounts/auth.ts';
import { endpointWorkerProblem, type WorkerProblem } from '../endpoints/worker-problem.ts';
import { DomainError, notFound, RetryLater, validationFailed } from '../errors.ts';
import { idempotencyKeyOf, requestFingerprint } from './idempotency.ts';
import type { TakeOffer } from './handoff.ts';
import { isTerminal, type HealthCounts, type JobRow, type JobStatus, type NewJob, type TakenJob } from './rows.ts';
import { validate } from '../shared/validation.ts';
import { webhookUrlProblem } from './webhook-targets.ts';
import { isModelId, validateModelInput, type CachedModel } from '../public-models/models.ts';
import type { QueueEndpoint } from './queue-endpoints.ts';
import type { JobRuntime } from './runtime.ts';
import { jobView, RunJobBodySchema, WaitQuerySchema, type JobView } from './schemas.ts';
import { REPOLL_MS, type Waiter } from './wakeups.ts';

/**
 * What a job call's path names: a queue-based endpoint of the caller's account, or a public model
 * (any account's RUN key; docs/public-models.md) and the endpoint behind it.
 */
interface JobTarget {
  endpoint: QueueEndpoint;
  model: CachedModel | undefined;
  /** The account whose jobs the call may see: a model's callers share its endpoint, not their jobs; null: the endpoint's own account (all of them). */
  jobsOf: string | null;
}

/** The target a job call names, if the caller may use it (RUN scope, its account or a public model, its key's endpoints). */
async function jobTarget(jobs: JobRuntime, principal: Principal, id: string): Promise<JobTarget> {
  requireScope(principal, 'RUN');
  if (isModelId(id)) {
    const model = await jobs.model(id);
    if (!model) throw notFound('endpoint');
    // A key limited to some endpoints reaches a model only if its list names the model.
    requireEndpointAccess(principal, id);
    const endpoint = await jobs.endpoints.find(model.endpointId);
    if (!endpoint || endpoint.type !== 'QUEUE_BASED') throw notFound('endpoint');
    return { endpoint, model, jobsOf: principal.accountId };
  }
  const e = await jobs.endpoints.find(id);
  if (!e || e.accountId !== principal.accountId) throw notFound('endpoint');
  requireEndpointAccess(principal, id);
  if (e.type !== 'QUEUE_BASED') {
    throw new DomainError(
      'bad_request',
      'this endpoint is load-balancing: send requests to its requestUrls.base, without an input wrapper',
    );
  }
  return { endpoint: e, model: undefined, jobsOf: null };
}

/**
 * Why no worker of the target's endpoint can run (domain/endpoints/worker-problem.ts), on the queue's
 * own connections; null for a public model's callers, whose model's workers are its owner's business.
 */
function workerProblemOf(jobs: JobRuntime, target: JobTarget): Promise<WorkerProblem | null> {
  if (target.model) return Promise.resolve(null);
  return endpointWorkerProblem((text, values) => jobs.store.rows(text, values), target.endpoint.id);
}

/**
 * A job's answer to its client: a queued one says why no worker can run, if something stands in the
 * way (one more statement, only for IN_QUEUE answers: running and finished jobs cost nothing more).
 */
async function answerOf(jobs: JobRuntime, target: JobTarget, row: JobRow): Promise<JobView> {
  const view = jobView(row);
  if (row.status !== 'IN_QUEUE') return view;
  const problem = await workerProblemOf(jobs, target);
  return problem ? { ...view, workerProblem: problem } : view;
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

/**
 * Back-pressure: when this process holds more job workflow signals than it may (Temporal is behind
 * what the queue takes in), new jobs wait. Retry-After is how long the backlog takes to drain at the
 * recent send rate, 1-60 s. The jobs already accepted are kept; nothing is dropped.
 */
function refuseWhenBacklogged(jobs: JobRuntime): void {
  const backlog = jobs.signals.backlog;
  const limit = jobs.settings.maxWorkflowBacklog;
  if (backlog < limit) return;
  const seconds = Math.min(60, Math.max(1, Math.ceil((backlog - limit / 2) / Math.max(1, jobs.signals.sendRate))));
  throw new RetryLater(
    `the platform is behind on job workflows (${backlog} waiting here, the limit is ${limit}: GANTRY_JOB_WORKFLOW_BACKLOG); retry in ${seconds} s`,
    seconds,
  );
}

/** What a submit may carry besides its body: the request's `Idempotency-Key` header, as it came. */
export interface SubmitOptions {
  idempotencyKey?: string | string[];
}

/** A submit's answer, and whether it is an earlier submit's (a repeat under the same idempotency key). */
export interface Submitted<T> {
  answer: T;
  replayed: boolean;
}

async function submit(
  jobs: JobRuntime,
  principal: Principal,
  target: JobTarget,
  body: unknown,
  sync: boolean,
  idempotencyKey: string | undefined,
  id = newJobId(sync),
): Promise<{ row: JobRow; replayed: boolean }> {
  const { endpoint, model } = target;
  refuseWhenBacklogged(jobs);
  const endpointId = endpoint.id;
  if (
    body === null ||
    typeof body !== 'object' ||
    Array.isArray(body) ||
    !('input' in body) ||
    (body as { input: unknown }).input == null
  ) {
    throw new DomainError(
      'bad_request',
      'the request body must be a JSON object with an "input" property: {"input": {...}}',
    );
  }
  // Of the body as it came, before a model's schema fills in its defaults.
  const fingerprint =
    idempotencyKey === undefined
      ? undefined
      : requestFingerprint(sync ? 'runsync' : 'run', model?.id ?? endpointId, body);
  const req = validate(RunJobBodySchema, body);
  const webhookProblem =
    req.webhook !== undefined ? webhookUrlProblem(req.webhook, jobs.platform.webhookAllow) : undefined;
  if (webhookProblem) throw validationFailed([`$.webhook: ${webhookProblem}`]);
  // A model's input is checked against its schema (and gets the schema's defaults) before it is queued.
  if (model) validateModelInput(model, req.input);
  const job: NewJob = {
    id,
    endpointId,
    modelId: model?.id ?? null,
    accountId: principal.accountId,
    inputJson: JSON.stringify(req.input),
    webhook: req.webhook ?? null,
    executionTimeoutMs: req.policy?.executionTimeout ?? endpoint.timeoutMs,
    ttlMs: req.policy?.ttl ?? 86_400_000,
    lowPriority: req.policy?.lowPriority ?? false,
    sync,
  };
  // A runsync job with a worker's take waiting in this process goes straight to that worker.
  const offer = sync && fingerprint === undefined ? jobs.offers.claim(endpointId) : undefined;
  if (offer) {
    const handed = await handOff(jobs, job, offer);
    if (handed) return { row: handed, replayed: false };
  }
  let row: JobRow | undefined;
  try {
    if (idempotencyKey === undefined || fingerprint === undefined) {
      row = await jobs.store.insert(job, jobs.settings.maxQueuedPerEndpoint);
    } else {
      // A runsync repeat may answer with the job's result: read it with its output.
      const r = await jobs.store.insertOnce(
        job,
        { key: idempotencyKey, hash: fingerprint },
        jobs.settings.maxQueuedPerEndpoint,
        sync,
      );
      if (r.kind === 'mismatch') {
        throw new DomainError(
          'validation',
          'the Idempotency-Key header names a job submitted with another request (body, endpoint or call); a new request needs a new key',
        );
      }
      if (r.kind === 'replayed') return { row: r.row, replayed: true };
      row = r.kind === 'created' ? r.row : undefined;
    }
  } catch (err) {
    // The endpoint was deleted since it was cached.
    if ((err as { code?: string }).code === '23503') throw notFound('endpoint');
    throw err;
  }
  if (!row)
    throw new DomainError(
      'rate_limited',
      `endpoint ${model?.id ?? endpointId} already holds ${jobs.settings.maxQueuedPerEndpoint} queued jobs, the most it may hold (GANTRY_MAX_QUEUED_JOBS); retry when workers have taken some`,
    );
  jobs.wakeups.wake('q', endpointId);
  jobs.signals.state(row);
  jobs.queued({ endpointId, jobId: row.id, lowPriority: row.lowPriority });
  return { row, replayed: false };
}

/**
 * Inserts the job already taken by the offer's worker and hands it to that worker's waiting take.
 * Undefined when that worker stands by frozen (its take began before the freeze): nothing was
 * inserted, and the caller queues the job.
 */
async function handOff(jobs: JobRuntime, job: NewJob, offer: TakeOffer): Promise<JobRow | undefined> {
  let taken: TakenJob | undefined;
  try {
    taken = await jobs.store.insertTaken(job, offer.workerId);
  } catch (err) {
    offer.deliver([]);
    if ((err as { code?: string }).code === '23503') throw notFound('endpoint');
    throw err;
  }
  if (!taken) {
    offer.deliver([]);
    return undefined;
  }
  offer.deliver([taken]);
  jobs.signals.state(taken);
  return taken;
}

/**
 * POST /run: queued and committed; answers at once. A repeat under the same idempotency key
 * answers the job the first submit made, as it stands now.
 */
export async function runJob(
  jobs: JobRuntime,
  principal: Principal,
  endpointId: string,
  body: unknown,
  opts: SubmitOptions = {},
): Promise<Submitted<{ id: string; status: JobStatus }>> {
  const target = await jobTarget(jobs, principal, endpointId);
  const { row, replayed } = await submit(jobs, principal, target, body, false, idempotencyKeyOf(opts.idempotencyKey));
  return { answer: { id: row.id, status: row.status }, replayed };
}

/**
 * Waits until the job is final or `deadline`; returns the last row read (null: the job is gone).
 * The watcher is registered before every read, so a completion between the two is not missed.
 */
async function awaitFinal(
  jobs: JobRuntime,
  jobId: string,
  target: JobTarget,
  deadline: number,
  first: Waiter,
  abort?: AbortSignal,
): Promise<JobRow | null> {
  let waiter = first;
  let row: JobRow | null = null;
  for (;;) {
    const left = deadline - Date.now();
    const woke =
      left > 0 && !jobs.closing && !abort?.aborted
        ? await waiter.wait(Math.min(left, REPOLL_MS), abort)
        : { woken: false };
    waiter.release();
    if (woke.row && isTerminal(woke.row.status)) return woke.row;
    waiter = jobs.wakeups.watch('j', jobId);
    try {
      row = await jobs.store.get(jobId, target.endpoint.id, true, target.jobsOf);
    } catch (err) {
      waiter.release();
      throw err;
    }
    if (!row || isTerminal(row.status) || Date.now() >= deadline || jobs.closing || abort?.aborted) {
      waiter.release();
      return row;
    }
  }
}

/**
 * The job as it stands once final or at `deadline`, watched before it is read; null: it is gone
 * (or never was).
 */
async function watchUntilFinal(
  jobs: JobRuntime,
  jobId: string,
  target: JobTarget,
  deadline: number,
  abort?: AbortSignal,
): Promise<JobRow | null> {
  const waiter = jobs.wakeups.watch('j', jobId);
  let row: JobRow | null;
  try {
    row = await jobs.store.get(jobId, target.endpoint.id, true, target.jobsOf);
  } catch (err) {
    waiter.release();
    throw err;
  }
  if (!row || isTerminal(row.status)) {
    waiter.release();
    return row;
  }
  return awaitFinal(jobs, jobId, target, deadline, waiter, abort);
}

/**
 * POST /runsync?wait=: the final job when it finishes in time, else `{id, status}` to poll. A repeat
 * under the same idempotency key waits for the job the first submit made, as that one did.
 */
export async function runJobSync(
  jobs: JobRuntime,
  principal: Principal,
  endpointId: string,
  body: unknown,
  query: unknown,
  abort?: AbortSignal,
  opts: SubmitOptions = {},
): Promise<Submitted<JobView>> {
  const wait = parseWait(query, 90_000);
  const deadline = Date.now() + wait;
  const target = await jobTarget(jobs, principal, endpointId);
  const key = idempotencyKeyOf(opts.idempotencyKey);
  const id = newJobId(true);
  const waiter = jobs.wakeups.watch('j', id);
  let submitted: { row: JobRow; replayed: boolean };
  try {
    submitted = await submit(jobs, principal, target, body, true, key, id);
  } catch (err) {
    waiter.release();
    throw err;
  }
  let row = submitted.row;
  const { replayed } = submitted;
  if (replayed) {
    waiter.release();
    if (!isTerminal(row.status)) row = (await watchUntilFinal(jobs, row.id, target, deadline, abort)) ?? row;
  } else {
    row = (await awaitFinal(jobs, id, target, deadline, waiter, abort)) ?? row;
  }
  if (isTerminal(row.status)) return { answer: jobView(row), replayed };
  // The job was queued with a relaxed commit (JobStore.insert): durable before its id is given out
  // (a repeat's too: the first submit may not have answered).
  await jobs.store.flush();
  const problem = row.status === 'IN_QUEUE' ? await workerProblemOf(jobs, target) : null;
  return { answer: { id: row.id, status: row.status, ...(problem ? { workerProblem: problem } : {}) }, replayed };
}

/** GET /status/{id}: 404 once the job expired (TTL, retention) or never existed. */
export async function getJobStatus(
  jobs: JobRuntime,
  principal: Principal,
  endpointId: string,
  jobId: string,
): Promise<JobView> {
  const t = await jobTarget(jobs, principal, endpointId);
  const row = await jobs.store.get(jobId, t.endpoint.id, true, t.jobsOf);
  if (!row) throw notFound('job');
  return answerOf(jobs, t, row);
}

/** GET /status-sync/{id}?wait=: like /status, after waiting up to `wait` ms for the job to finish. */
export async function waitJobStatus(
  jobs: JobRuntime,
  principal: Principal,
  endpointId: string,
  jobId: string,
  query: unknown,
  abort?: AbortSignal,
): Promise<JobView> {
  const t = await jobTarget(jobs, principal, endpointId);
  const deadline = Date.now() + parseWait(query, 90_000);
  const row = await watchUntilFinal(jobs, jobId, t, deadline, abort);
  if (!row) throw notFound('job');
  return answerOf(jobs, t, row);
}

/** GET /stream/{id}: the chunks not yet handed to a caller; waits briefly for one while the job runs. */
export async function streamJob(
  jobs: JobRuntime,
  principal: Principal,
  endpointId: string,
  jobId: string,
  abort?: AbortSignal,
): Promise<{ status: JobStatus; stream: Array<{ output: unknown }> }> {
  const t = await jobTarget(jobs, principal, endpointId);
  const deadline = Date.now() + jobs.settings.streamHoldMs;
  for (;;) {
    const waiter = jobs.wakeups.watch('j', jobId);
    try {
      const got = await jobs.store.takeStream(jobId, t.endpoint.id, t.jobsOf);
      if (!got) throw notFound('job');
      const left = deadline - Date.now();
      if (got.outputs.length > 0 || isTerminal(got.status) || left <= 0 || jobs.closing || abort?.aborted) {
        return { status: got.status, stream: got.outputs.map((output) => ({ output })) };
      }
      await waiter.wait(Math.min(left, REPOLL_MS), abort);
    } finally {
      waiter.release();
    }
  }
}

/** POST /cancel/{id}: a queued job never runs; a running one is stopped on its worker. */
export async function cancelJob(
  jobs: JobRuntime,
  principal: Principal,
  endpointId: string,
  jobId: string,
): Promise<{ id: string; status: JobStatus }> {
  const t = await jobTarget(jobs, principal, endpointId);
  const r = await jobs.store.cancel(jobId, t.endpoint.id, t.jobsOf);
  if (!r) throw notFound('job');
  if (r.changed) {
    jobs.wakeups.wake('j', jobId, r.row);
    const worker = (r.row as JobRow & { prevWorker?: string | null }).prevWorker;
    if (worker) jobs.wakeups.wake('s', worker);
    jobs.signals.state(r.row);
  }
  return { id: r.row.id, status: r.row.status };
}

/** POST /retry/{id}: a FAILED or TIMED_OUT job goes back to the queue under the same id. */
export async function retryJob(
  jobs: JobRuntime,
  principal: Principal,
  endpointId: string,
  jobId: string,
): Promise<{ id: string; status: JobStatus }> {
  const t = await jobTarget(jobs, principal, endpointId);
  refuseWhenBacklogged(jobs);
  const r = await jobs.store.retry(jobId, t.endpoint.id, t.jobsOf);
  if (!r) throw notFound('job');
  if (!r.changed)
    throw new DomainError('bad_request', `only FAILED or TIMED_OUT jobs can be retried; this one is ${r.row.status}`);
  jobs.wakeups.wake('q', t.endpoint.id);
  jobs.signals.state(r.row);
  jobs.queued({ endpointId: t.endpoint.id, jobId, lowPriority: r.row.lowPriority });
  return { id: r.row.id, status: r.row.status };
}

/**
 * POST /purge-queue: removes queued jobs (running ones finish). Their workflows, if started, end at
 * their next timer when they find the job gone; signalling each one here would flood Temporal.
 */
export async function purgeQueue(
  jobs: JobRuntime,
  principal: Principal,
  endpointId: string,
): Promise<{ removed: number; status: 'completed' }> {
  const t = await jobTarget(jobs, principal, endpointId);
  const ids = await jobs.store.purge(t.endpoint.id, t.jobsOf);
  return { removed: ids.length, status: 'completed' };
}

export async function endpointHealth(
  jobs: JobRuntime,
  principal: Principal,
  endpointId: string,
): Promise<HealthCounts & { workerProblem: WorkerProblem | null }> {
  const t = await jobTarget(jobs, principal, endpointId);
  // A public model's callers share its workers, not their jobs: each counts its own.
  const [health, workerProblem] = await Promise.all([
    jobs.store.health(t.endpoint.id, t.jobsOf),
    workerProblemOf(jobs, t),
  ]);
  return { ...health, workerProblem };
}
