/**
 * Fake activities for the workflow tests: a small in-memory world of endpoint rows, releases,
 * workers and jobs that the real workflows drive through the same activity interfaces as in
 * production (activities/*). Times come from the test server's clock, so that idle timeouts and
 * back-off follow skipped time. Grown from the fakes in test/replay/record.ts.
 */
import { ApplicationFailure } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import type { EndpointActivities, EndpointScalingState } from '../../activities/endpoint.ts';
import type { HostActivities } from '../../activities/host.ts';
import { DEFAULT_ORCHESTRATION_SETTINGS, type OrchestrationSettings } from '../../domain/shared/index.ts';
import type { JobActivities } from '../../activities/job.ts';
import type { WorkerActivities } from '../../activities/worker.ts';
import {
  endpointWorkflowId,
  jobWorkflowId,
  rolloutWorkflowId,
  workerWorkflowId,
  type EndpointSpec,
  type JobSnapshot,
} from '../../contracts/workflows.ts';

export type FakeWorkerStatus =
  'PENDING' | 'INITIALIZING' | 'IDLE' | 'RUNNING' | 'DRAINING' | 'STANDBY' | 'STOPPED' | 'FAILED';

export interface FakeWorker {
  id: string;
  endpointId: string;
  releaseVersion: number;
  status: FakeWorkerStatus;
  /** Test-server time since when it is idle. */
  idleSince: number;
  statusReason?: string;
}

export interface FakeJob {
  snapshot: JobSnapshot;
  supervised: number[];
  expired: number[];
  webhooks: number[];
  /** What PostgreSQL's supervision statement makes of the job at `now` (default: nothing changes). */
  onSupervise?: (s: JobSnapshot, now: number) => JobSnapshot;
  /** Runs while a webhook is being delivered. */
  onWebhook?: () => Promise<void>;
}

export interface FakeRelease {
  version: number;
  status: 'ROLLING_OUT' | 'COMPLETED' | 'HALTED' | 'SUPERSEDED';
  reason?: string;
}

const LIVE: readonly FakeWorkerStatus[] = ['PENDING', 'INITIALIZING', 'IDLE', 'RUNNING', 'DRAINING', 'STANDBY'];

/**
 * Orchestration timings of the tests: production's, with a shorter deadline for a release's first
 * ready worker. The polling periods are production's too, so timers of different workflows come due
 * together as they do there.
 */
export const testSettings: OrchestrationSettings = {
  ...DEFAULT_ORCHESTRATION_SETTINGS,
  releaseReadyDeadlineSec: 120,
  // A FLASHBOOT standby's hold, short: the time-skipping server walks every autoscaler look of it.
  flashbootStandbySec: 300,
};

export class FakeWorld {
  readonly endpoints = new Map<string, { spec: EndpointSpec; exists: boolean; queued: number }>();
  readonly releases = new Map<string, FakeRelease[]>();
  readonly workers = new Map<string, FakeWorker>();
  /** Release versions whose containers exit at start (a bad image). */
  readonly failingVersions = new Set<number>();
  /** Release versions whose workers start but never become ready. */
  readonly stuckVersions = new Set<number>();
  /** Most workers placed at once (the host's room); unset: room for any number. */
  room: number | undefined;
  /** Workers that stay busy (RUNNING) once ready: steady traffic, never idle. */
  readonly alwaysBusy = new Set<string>();
  /** Every worker start the workflows asked for, with its test-server time. */
  readonly starts: Array<{ at: number; endpointId: string; releaseVersion: number; workerIds: string[] }> = [];
  /** Workers that began to drain, in order, with the test-server time. */
  readonly drained: Array<{ id: string; at: number }> = [];
  /** The jobs of the job tests, by id: the row's state, and when each activity was called (test-server time). */
  readonly jobs = new Map<string, FakeJob>();
  /** Every workflow id the scenario touched, so that a test can stop what it leaves running. */
  readonly workflowIds = new Set<string>();

  constructor(private readonly env: TestWorkflowEnvironment) {}

  now(): Promise<number> {
    return this.env.currentTimeMs();
  }

  addEndpoint(spec: Partial<EndpointSpec> & { endpointId: string }): EndpointSpec {
    const full: EndpointSpec = {
      workersMin: 0,
      workersMax: 3,
      scalerType: 'QUEUE_DELAY',
      scalerValue: 4,
      idleTimeout: 5,
      timeoutMs: 60_000,
      releaseVersion: 1,
      ...spec,
    };
    this.endpoints.set(full.endpointId, { spec: full, exists: true, queued: 0 });
    this.releases.set(full.endpointId, [{ version: full.releaseVersion, status: 'COMPLETED' }]);
    this.workflowIds.add(endpointWorkflowId(full.endpointId));
    return full;
  }

  /** Changes the endpoint's row as the domain would (a container change makes release N+1). */
  changeRow(
    endpointId: string,
    change: Partial<Omit<EndpointSpec, 'endpointId'>> & { newRelease?: boolean },
  ): EndpointSpec {
    const row = this.endpoints.get(endpointId)!;
    const { newRelease, ...fields } = change;
    row.spec = { ...row.spec, ...fields };
    if (newRelease) {
      const releases = this.releases.get(endpointId)!;
      const version = Math.max(...releases.map((r) => r.version), row.spec.releaseVersion) + 1;
      for (const r of releases) if (r.status === 'ROLLING_OUT' || r.status === 'COMPLETED') r.status = 'SUPERSEDED';
      releases.push({ version, status: 'ROLLING_OUT' });
      row.spec = { ...row.spec, releaseVersion: version };
      this.workflowIds.add(rolloutWorkflowId(endpointId, version));
    }
    return row.spec;
  }

  addJob(jobId: string, snapshot: JobSnapshot, hooks: Pick<FakeJob, 'onSupervise' | 'onWebhook'> = {}): FakeJob {
    const job: FakeJob = { snapshot, supervised: [], expired: [], webhooks: [], ...hooks };
    this.jobs.set(jobId, job);
    this.workflowIds.add(jobWorkflowId(jobId));
    return job;
  }

  release(endpointId: string, version: number): FakeRelease | undefined {
    return this.releases.get(endpointId)?.find((r) => r.version === version);
  }

  live(endpointId: string): FakeWorker[] {
    return [...this.workers.values()].filter((w) => w.endpointId === endpointId && LIVE.includes(w.status));
  }

  /** The ids of every workflow the scenario may have started. */
  ids(): string[] {
    const ids = new Set(this.workflowIds);
    for (const w of this.workers.values()) ids.add(workerWorkflowId(w.id));
    // Rollouts, rollbacks included (those converge on a version that already exists).
    for (const [endpointId, releases] of this.releases)
      for (const r of releases) ids.add(rolloutWorkflowId(endpointId, r.version));
    return [...ids];
  }

  /** Terminates every workflow the scenario started that is still running. */
  async stopAll(client: Client): Promise<void> {
    await Promise.all(
      this.ids().map((id) =>
        client.workflow
          .getHandle(id)
          .terminate('test over')
          .catch(() => undefined),
      ),
    );
  }

  private worker(id: string): FakeWorker {
    const w = this.workers.get(id);
    if (!w) throw new Error(`no worker ${id}`);
    return w;
  }

  activities(): EndpointActivities & WorkerActivities & Pick<HostActivities, 'orchestrationSettings'> & JobActivities {
    const activities = {
      orchestrationSettings: async (): Promise<OrchestrationSettings> => {
        return testSettings;
      },

      // ---- endpoint
      loadEndpointSpec: async (endpointId: string): Promise<EndpointSpec> => {
        const row = this.endpoints.get(endpointId);
        if (!row?.exists) throw new Error(`no endpoint ${endpointId}`);
        return { ...row.spec };
      },
      readEndpointSpec: async (endpointId: string): Promise<EndpointSpec | null> => {
        const row = this.endpoints.get(endpointId);
        return row?.exists ? { ...row.spec } : null;
      },
      removeEndpointRecord: async (endpointId: string): Promise<void> => {
        const row = this.endpoints.get(endpointId);
        if (row) row.exists = false;
      },

      // ---- workers
      endpointScalingState: async (endpointId: string): Promise<EndpointScalingState> => {
        const row = this.endpoints.get(endpointId);
        const now = await this.now();
        const queued = row?.queued ?? 0;
        return {
          exists: row?.exists ?? false,
          // Queued jobs have waited long: the queue-delay scaler wants workers for them.
          queue: { queued, queuedLowPriority: 0, inProgress: 0, oldestQueuedAgeMs: queued > 0 ? 600_000 : null },
          workers: this.live(endpointId).map((w) => {
            const ready = w.status === 'IDLE' || w.status === 'RUNNING';
            const state =
              w.status === 'DRAINING'
                ? 'draining'
                : w.status === 'STANDBY'
                  ? 'standby'
                  : w.status === 'IDLE'
                    ? 'idle'
                    : w.status === 'RUNNING'
                      ? 'busy'
                      : 'starting';
            return {
              id: w.id,
              status: w.status,
              hostId: 'host1',
              ready,
              releaseVersion: w.releaseVersion,
              idleForMs: w.status === 'IDLE' ? now - w.idleSince : 0,
              state,
            };
          }),
        };
      },
      createWorkerRecords: async (input: {
        endpointId: string;
        releaseVersion: number;
        workerIds: string[];
      }): Promise<number> => {
        this.starts.push({ at: await this.now(), ...input });
        for (const id of input.workerIds) {
          if (!this.workers.has(id))
            this.workers.set(id, {
              id,
              endpointId: input.endpointId,
              releaseVersion: input.releaseVersion,
              status: 'PENDING',
              idleSince: 0,
            });
        }
        return input.workerIds.length;
      },
      closeOrphanWorkers: async (): Promise<string[]> => {
        return [];
      },
      placeWorker: async (workerId: string) => {
        const placed = [...this.workers.values()].filter(
          (w) => w.id !== workerId && LIVE.includes(w.status) && w.status !== 'PENDING',
        ).length;
        if (this.room !== undefined && placed >= this.room) return { placed: false, reason: 'no room on any host' };
        this.worker(workerId).status = 'INITIALIZING';
        return { placed: true, hostId: 'host1' };
      },
      prepareWorkerImage: async () => {
        return { image: 'localhost/fake:1', outcome: 'present', ms: 1 };
      },
      startWorkerContainer: async (workerId: string) => {
        const w = this.worker(workerId);
        if (this.failingVersions.has(w.releaseVersion))
          throw ApplicationFailure.nonRetryable(
            `container of release v${w.releaseVersion} exited with code 3`,
            'ContainerExited',
          );
        return { containerId: `c-${workerId}`, adopted: false };
      },
      checkWorkerReady: async (workerId: string) => {
        const w = this.worker(workerId);
        if (this.stuckVersions.has(w.releaseVersion)) return { state: 'waiting' as const, reason: 'not answering yet' };
        w.status = this.alwaysBusy.has(workerId) ? 'RUNNING' : 'IDLE';
        w.idleSince = await this.now();
        return { state: 'ready' as const };
      },
      markWorkerReady: async () => {},
      inspectWorker: async () => {
        return { state: 'ok' as const };
      },
      beginDrain: async (workerId: string) => {
        this.drained.push({ id: workerId, at: await this.now() });
        this.worker(workerId).status = 'DRAINING';
      },
      workerJobsInFlight: async () => {
        return 0;
      },
      removeWorkerContainer: async () => {
        return true;
      },
      // FlashBoot, as activities/worker-standby.ts decides it from the row.
      freezeWorker: async (workerId: string) => {
        const w = this.worker(workerId);
        const spec = this.endpoints.get(w.endpointId)!.spec;
        if (!spec.flashboot || spec.flashboot === 'OFF' || w.releaseVersion !== spec.releaseVersion)
          return { frozen: false as const, busy: false, reason: 'FlashBoot is off' };
        w.status = 'STANDBY';
        return {
          frozen: true as const,
          holdMs: spec.flashboot === 'PRIORITY_FLASHBOOT' ? null : testSettings.flashbootStandbySec * 1000,
        };
      },
      thawStandbyWorker: async (workerId: string) => {
        const w = this.worker(workerId);
        if (w.status !== 'STANDBY')
          return { thawed: false as const, evicted: true, reason: w.statusReason ?? `it is ${w.status}` };
        w.status = 'IDLE';
        w.idleSince = await this.now();
        return { thawed: true as const };
      },
      finishWorker: async (workerId: string, outcome: { status: 'STOPPED' | 'FAILED'; reason: string }) => {
        const w = this.worker(workerId);
        w.status = outcome.status;
        w.statusReason = outcome.reason;
        return { requeued: 0 };
      },
      finishRelease: async (input: {
        endpointId: string;
        version: number;
        previousVersion: number;
        outcome: 'COMPLETED' | 'HALTED' | 'SUPERSEDED';
        reason?: string;
      }): Promise<void> => {
        // As activities/worker.ts: the release's outcome; a halt puts the endpoint back on the previous release.
        const r = this.release(input.endpointId, input.version);
        if (r && r.status === 'ROLLING_OUT')
          Object.assign(r, { status: input.outcome, ...(input.reason ? { reason: input.reason } : {}) });
        const row = this.endpoints.get(input.endpointId);
        if (input.outcome === 'HALTED' && row && row.spec.releaseVersion === input.version) {
          row.spec = { ...row.spec, releaseVersion: input.previousVersion };
          const previous = this.release(input.endpointId, input.previousVersion);
          if (previous) previous.status = 'COMPLETED';
        }
      },

      // ---- jobs
      readJob: async (jobId: string): Promise<JobSnapshot> => {
        return this.jobs.get(jobId)!.snapshot;
      },
      expireJob: async (jobId: string): Promise<JobSnapshot> => {
        const job = this.jobs.get(jobId)!;
        const now = await this.now();
        job.expired.push(now);
        if (job.snapshot.status === 'IN_QUEUE' && now >= job.snapshot.ttlDeadline)
          job.snapshot = { ...job.snapshot, seq: job.snapshot.seq + 1, status: 'GONE' };
        return job.snapshot;
      },
      superviseJob: async (jobId: string): Promise<JobSnapshot> => {
        const job = this.jobs.get(jobId)!;
        const now = await this.now();
        job.supervised.push(now);
        if (job.onSupervise) job.snapshot = job.onSupervise(job.snapshot, now);
        return job.snapshot;
      },
      deliverWebhook: async (jobId: string): Promise<void> => {
        const job = this.jobs.get(jobId)!;
        job.webhooks.push(await this.now());
        await job.onWebhook?.();
      },
    };
    // The workflows under test call only these; the rest of the interfaces are never reached.
    return activities as unknown as EndpointActivities &
      WorkerActivities &
      Pick<HostActivities, 'orchestrationSettings'> &
      JobActivities;
  }
}
