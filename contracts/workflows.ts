/**
 * Every contract of Gantry's workflows in one place: their ids, the signals, updates and queries
 * they answer, and the plain data those carry. The API, the domain layer, the activities and the
 * workflows themselves import these from here, never from a workflow file.
 *
 * The quoted names are wire names: running workflows and committed histories
 * (test/replay/histories) hold them. Never rename one; add a new definition instead and keep the
 * old handler registered while runs that may receive it exist.
 *
 * Plain data and definitions only (the workflow bundle imports this file): no I/O, no Node modules.
 */
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';

// ---------------------------------------------------------------- workflow types and ids

/**
 * The workflows the domain starts, as their starters see them (the name is the workflow type the
 * worker registers; workflows/index.ts). For typed `start` and `signalWithStart` without importing
 * workflow code.
 */
export type EndpointWorkflow = (input: EndpointWorkflowInput) => Promise<void>;
export type HostWorkflow = (input: HostWorkflowInput) => Promise<void>;
export type PodWorkflow = (input: PodWorkflowInput) => Promise<void>;
export type JobWorkflow = (input: JobWorkflowInput) => Promise<void>;
export type DeployWorkflow = (input: DeployWorkflowInput) => Promise<DeployWorkflowResult>;
export type PurgeOutputsWorkflow = () => Promise<PurgeOutputsResult>;

export interface PurgeOutputsResult {
  deleted: number;
}

/**
 * The Temporal Schedule that starts purgeExpiredOutputsWorkflow (infra/schedules.ts), one per task
 * queue: platforms that share a namespace (they must not share a task queue) keep their own.
 */
export const purgeOutputsScheduleId = (taskQueue: string): string => `purge-expired-outputs:${taskQueue}`;

export type RollupEndpointMetricsWorkflow = () => Promise<RollupEndpointMetricsResult>;

/** What one run of the metrics rollup did (domain/metrics/rollup.ts): the minutes [from, to) it rolled. */
export interface RollupEndpointMetricsResult {
  /** The minutes rolled, [from, to) as ISO times; from = to when none was due. */
  from: string;
  to: string;
  /** Jobs counted, cold starts and thaws found, rows purged. */
  jobs: number;
  coldStarts: number;
  thaws: number;
  /** Seconds the worker-state sample was worth. */
  sampledSeconds: number;
  purged: number;
}

/**
 * The Temporal Schedule that starts rollupEndpointMetricsWorkflow (infra/schedules.ts), one per task
 * queue like the purge's: platforms that share a database roll it up once between them (the rollup
 * locks its state row).
 */
export const metricsRollupScheduleId = (taskQueue: string): string => `rollup-endpoint-metrics:${taskQueue}`;

export const endpointWorkflowId = (endpointId: string): string => `endpoint:${endpointId}`;
export const workerWorkflowId = (workerId: string): string => `worker:${workerId}`;
export const rolloutWorkflowId = (endpointId: string, version: number): string => `rollout:${endpointId}:${version}`;
export const hostWorkflowId = (hostId: string): string => `host:${hostId}`;
export const podWorkflowId = (podId: string): string => `pod:${podId}`;
export const jobWorkflowId = (jobId: string): string => `job:${jobId}`;
/**
 * The task queue of the job workflows (and their activities): apart from the control plane's
 * (endpoints, releases, workers, hosts), so that a backlog of job workflow tasks after a burst never
 * holds up a rollout or an autoscaling step queued behind it.
 */
export const jobTaskQueueOf = (taskQueue: string): string => `${taskQueue}-jobs`;
/** Names, not ids, so the Temporal UI reads as the CLI said it: `deploy:shop:production:b1x...`. */
export const deployWorkflowId = (app: string, environment: string, buildId: string): string =>
  `deploy:${app}:${environment}:${buildId}`;

// ---------------------------------------------------------------- endpoint (workflows/endpoint.ts)

/** What the endpoint workflow needs to autoscale and release: the desired state of one endpoint, as its row holds it. */
export interface EndpointSpec {
  endpointId: string;
  workersMin: number;
  workersMax: number;
  scalerType: 'QUEUE_DELAY' | 'REQUEST_COUNT';
  scalerValue: number;
  idleTimeout: number;
  timeoutMs: number;
  releaseVersion: number;
  /**
   * FlashBoot (docs/endpoints.md, "FlashBoot"): idle workers stand by frozen instead of going.
   * Absent in specs read by earlier code: OFF.
   */
  flashboot?: FlashBootMode;
}

export type FlashBootMode = 'OFF' | 'FLASHBOOT' | 'PRIORITY_FLASHBOOT';

/** What the legacy `updateSpec` Update carries. */
export type EndpointSpecPatch = Partial<Omit<EndpointSpec, 'endpointId'>>;

/** How the domain starts an endpoint's workflow; the workflow reads everything else from the row. */
export interface EndpointWorkflowInput {
  endpointId: string;
}

/** Rules the domain enforces before it commits a row (and the legacy Update's validator with it). */
export function specProblems(spec: EndpointSpec): string[] {
  const problems: string[] = [];
  if (!Number.isInteger(spec.workersMin) || spec.workersMin < 0) problems.push('workers.min must be an integer >= 0');
  if (!Number.isInteger(spec.workersMax) || spec.workersMax < 0) problems.push('workers.max must be an integer >= 0');
  if (spec.workersMin > spec.workersMax) problems.push('workers.min must not exceed workers.max');
  if (!(spec.scalerValue >= 0.5)) problems.push('scaling.value must be >= 0.5');
  if (!Number.isInteger(spec.idleTimeout) || spec.idleTimeout < 0)
    problems.push('scaling.idleTimeout must be an integer >= 0');
  if (!Number.isInteger(spec.timeoutMs) || spec.timeoutMs < 1) problems.push('timeout must be a positive integer');
  return problems;
}

/**
 * The endpoint's row changed (scaling, timeout, a new release): read it again. Carries nothing:
 * the row is the truth. Sent with signal-with-start after every commit, so it also starts a
 * workflow that is missing.
 */
export const endpointChanged = defineSignal('endpointChanged');
/**
 * Legacy: how API processes before `endpointChanged` handed over the row's state (the whole desired
 * state each time; answers the new spec). Today's API never sends it; the workflow keeps its handler
 * for runs that received it and for API processes of the previous version during an upgrade.
 */
export const updateSpec = defineUpdate<EndpointSpec, [EndpointSpecPatch]>('updateSpec');
/** The desired state the workflow last read; null until its first read. */
export const getSpec = defineQuery<EndpointSpec | null>('getSpec');
/** Asks the endpoint to drain and remove itself; the workflow completes once it has. */
export const deleteEndpoint = defineSignal('deleteEndpoint');
/**
 * Wakes the autoscaler at once. The job API sends it only when a job is queued for an endpoint
 * with no live worker (never once per job); otherwise the autoscaler's own look-ups find the queue.
 */
export const queueNonEmpty = defineSignal('queueNonEmpty');
/** What the autoscaler last decided and saw, for operators and tests. */
export const getScalingStatus = defineQuery<ScalingStatus | null>('getScalingStatus');

export interface ScalingStatus {
  desired: number;
  live: number;
  reason: string;
  queued: number;
  inProgress: number;
  rollout: { version: number; rollback: boolean } | null;
  backoffUntil: number;
}

// ---------------------------------------------------------------- rollout (workflows/rollout.ts)

export interface RolloutResult {
  version: number;
  previousVersion: number;
  rollback: boolean;
  status: 'COMPLETED' | 'HALTED' | 'SUPERSEDED';
  reason?: string;
}

export interface RolloutProgress {
  replaced: number;
  pending: number;
  failures: number;
}

/** Stops a rollout that a newer release (or the endpoint's deletion) made moot; new workers stay. */
export const cancelRollout = defineSignal('cancelRollout');
/** Sent to the endpoint workflow when a rollout ends (signals reach its current run after continue-as-new). */
export const rolloutFinished = defineSignal<[RolloutResult]>('rolloutFinished');
export const getRolloutProgress = defineQuery<RolloutProgress>('getRolloutProgress');

// ---------------------------------------------------------------- worker (workflows/worker.ts)

export interface DrainRequest {
  reason: string;
  replace?: boolean;
  /**
   * Retired for idleness on an endpoint with FlashBoot: the worker may stand by frozen on its host
   * instead of going, when its endpoint's rules allow (activities/worker-standby.ts decides).
   */
  standby?: boolean;
}

export interface WorkerEvent {
  workerId: string;
  event: 'ready' | 'stopped' | 'failed';
  releaseVersion: number;
  /** For failures: whether it had been ready (a crash) or never got there (a start failure). */
  wasReady: boolean;
  reason?: string;
}

export type WorkerPhase = 'placing' | 'starting' | 'waiting-ready' | 'ready' | 'standby' | 'draining' | 'done';

/** Asks the worker to leave: no new jobs, in-flight ones finish (up to the endpoint timeout), then stop. */
export const drainWorker = defineSignal<[DrainRequest]>('drainWorker');
/** What a worker tells its endpoint or pod (one signal per worker life event, never per job). */
export const workerEvent = defineSignal<[WorkerEvent]>('workerEvent');
export const getWorkerPhase = defineQuery<WorkerPhase>('getWorkerPhase');
/**
 * Sent by the endpoint's autoscaler to a standby worker (FlashBoot) instead of starting a new one:
 * it thaws and serves again. A worker that is not standing by ignores it.
 */
export const thawWorker = defineSignal('thawWorker');

// ---------------------------------------------------------------- pod (workflows/pod.ts)

export type PodDesiredStatus = 'RUNNING' | 'EXITED' | 'TERMINATED';

export interface PodWorkflowInput {
  podId: string;
}

export interface PodWorkflowStatus {
  desiredStatus: PodDesiredStatus;
  workerIds: string[];
  failures: number;
  backoffUntil: number;
}

/** The pod's row changed (desired status, GPU count): read it again. Carries nothing: the row is the truth. */
export const podChanged = defineSignal('podChanged');
/** What the workflow last saw, for operators and tests. */
export const getPodStatus = defineQuery<PodWorkflowStatus | null>('getPodStatus');

// ---------------------------------------------------------------- host (workflows/host.ts)

export interface HostWorkflowInput {
  hostId: string;
}

export interface HostProbeResult {
  status: 'READY' | 'PENDING' | 'UNREACHABLE' | 'HOST_KEY_MISMATCH' | 'DISABLED' | 'GONE';
  statusReason: string | null;
  /** True when the host was not READY before this probe and is now. */
  becameReady: boolean;
}

/** Probes the host now (and, with acceptHostKey, pins that key first); answers the result. */
export const probeHostNow = defineUpdate<HostProbeResult, [{ acceptHostKey?: string }]>('probeHostNow');
/** Drains the host's workers, then removes the host record; the workflow completes once it has. */
export const removeHost = defineSignal('removeHost');
export const getHostStatus = defineQuery<HostProbeResult | null>('getHostStatus');

// ---------------------------------------------------------------- job (workflows/job.ts)

export type JobStatus = 'IN_QUEUE' | 'IN_PROGRESS' | 'COMPLETED' | 'FAILED' | 'CANCELLED' | 'TIMED_OUT';

/**
 * The state of one job at one `seq` (PostgreSQL bumps `seq` on every change). Times are epoch ms.
 * `GONE`: the job no longer exists (purged, expired, TTL removed it).
 */
export interface JobSnapshot {
  seq: number;
  status: JobStatus | 'GONE';
  /** Submission + TTL: a job still queued then is removed, a running one stopped. */
  ttlDeadline: number;
  startedAt: number | null;
  /** When its worker counts as lost unless a ping lists the job again. */
  livenessDeadline: number | null;
  executionDeadline: number | null;
  webhookPending: boolean;
}

export interface JobWorkflowInput {
  jobId: string;
  /** A worker is lost when no ping listed its job for this long. */
  lostAfterMs: number;
}

/** A new state of the job, sent after PostgreSQL committed it. Older snapshots are ignored. */
export const jobChanged = defineSignal<[JobSnapshot]>('jobChanged');
/** Re-read the job from the database (sent by the sweeps that mend lost signals). */
export const recheckJob = defineSignal('recheckJob');
/** The snapshot the workflow holds (null until the first one arrives). */
export const jobState = defineQuery<JobSnapshot | null>('jobState');

// ---------------------------------------------------------------- deploy (workflows/deploy.ts)

export interface DeployWorkflowInput {
  deploymentId: string;
}

export interface DeployWorkflowResult {
  status: 'SUCCEEDED' | 'FAILED';
  error?: string;
}

// ---------------------------------------------------------------- image pre-pull (workflows/prepull.ts)

/** Pulls a release's image ahead of its first worker onto the hosts placement ranks first (docs/endpoints.md). */
export type ImagePrepullWorkflow = (input: ImagePrepullInput) => Promise<ImagePrepullResult>;

/** One per release: starting it again for the same release is a no-op (the id is taken). */
export const imagePrepullWorkflowId = (endpointId: string, version: number): string =>
  `prepull:${endpointId}:${version}`;

export interface ImagePrepullInput {
  endpointId: string;
  version: number;
}

export interface ImagePrepullResult {
  /** The image as workers of the release run it; null when there was nothing to pull (a superseded release, pre-pulls off). */
  image: string | null;
  /** Per chosen host, in placement's order: how it went ('pulled', 'present', 'built', 'host-local', or why it failed). */
  hosts: Array<{ hostId: string; ok: boolean; outcome: string }>;
}
