/**
 * What the workflow tests share: Temporal's time-skipping test server (test/support/temporal-test-server.ts,
 * built once per machine), the workflow bundle (built once per test file, with the interceptor of
 * uncancelled-timers.ts), a fake world per scenario (fake-world.ts), and a driver of workflow time
 * that works around the test server's known faults.
 */
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { isGrpcServiceError, type Client, type WorkflowHandle } from '@temporalio/client';
import { WorkflowNotFoundError, type QueryDefinition, type SignalDefinition } from '@temporalio/common';
import { encodeSearchAttributeIndexedValueType } from '@temporalio/common/lib/search-attributes.js';
import { temporal } from '@temporalio/proto';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import {
  bundleWorkflowCode,
  DefaultLogger,
  Runtime,
  Worker,
  type LogEntry,
  type WorkflowBundleWithSourceMap,
} from '@temporalio/worker';
import { loadConfig } from '../../infra/config.ts';
import { resolveTemporalTestServer } from '../support/temporal-test-server.ts';
import { GANTRY_SEARCH_ATTRIBUTES } from '../../contracts/search-attributes.ts';
import { FakeWorld } from './fake-world.ts';

const { EventType, WorkflowTaskFailedCause, SignalExternalWorkflowExecutionFailedCause } = temporal.api.enums.v1;

/** The worker's bundle entry (workers/temporal-worker.ts bundles the same file). */
const workflowsPath = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'workflows', 'index.ts');
/** Timers that are left to run out instead of being cancelled: see that file for why. */
const uncancelledTimersPath = path.join(path.dirname(fileURLToPath(import.meta.url)), 'uncancelled-timers.ts');

/** Warnings and errors, less the activity failures that scenarios cause on purpose (fake-world.ts). */
function logQuietly(entry: LogEntry): void {
  const error = entry.meta?.error as { type?: string } | undefined;
  if (entry.message === 'Activity failed' && error?.type === 'ContainerExited') return;
  console.error(`[${entry.level}] ${entry.message}`, entry.meta ?? '');
}

/**
 * A time-skipping environment: `env.sleep` moves the clock on (timers fire as soon as every
 * workflow waits), and so does awaiting a workflow's result. Gantry's search attributes are
 * registered, as on the dev server: the workflows start their children with them.
 */
async function startTimeSkipping(): Promise<TestWorkflowEnvironment> {
  const executable = resolveTemporalTestServer(loadConfig().cacheDir);
  let env: TestWorkflowEnvironment | undefined;
  // The SDK gives the server 5 s to answer; a JVM starting on a busy machine can take longer.
  for (let attempt = 1; !env; attempt++) {
    try {
      env = await TestWorkflowEnvironment.createTimeSkipping({
        server: { executable: { type: 'existing-path', path: executable } },
      });
    } catch (err) {
      if (attempt >= 3 || !/did not start within/.test(String(err))) throw err;
    }
  }
  await env.connection.operatorService.addSearchAttributes({
    namespace: env.namespace ?? 'default',
    searchAttributes: Object.fromEntries(
      GANTRY_SEARCH_ATTRIBUTES.map((k) => [k.name, encodeSearchAttributeIndexedValueType(k.type)!]),
    ),
  });
  return env;
}

/**
 * A workflow task that the test server refused to complete and never hands out again: the history
 * ends in WorkflowTaskStarted for good. sdk-java#3088 did that to a task that cancelled a timer
 * that had fired while it ran; uncancelled-timers.ts leaves the workflows no such command, so a
 * wedge now is a fault not known yet, and the scenario fails with it at once (TestBed.scenario).
 */
export class WedgedWorkflowTask extends Error {
  override name = 'WedgedWorkflowTask';
}

/**
 * How much server time a history may end in a WorkflowTaskStarted before its task counts as wedged:
 * past the workflow task timeout (10 s), which otherwise ends a started task however slow a loaded
 * machine makes the worker. A started task keeps time skipping locked, so that time is wall time.
 */
const WEDGED_AFTER_MS = 15_000;

/** When an event happened, in server time. */
const eventMs = (e: temporal.api.history.v1.IHistoryEvent): number =>
  Number(e.eventTime?.seconds ?? 0) * 1000 + Math.floor((e.eventTime?.nanos ?? 0) / 1e6);

/**
 * Drives a scenario's workflow time around a fault of the time-skipping test server: a child
 * workflow that completes after the parent run that started it has closed (Gantry's workers and
 * rollouts outlive the endpoint run that started them: it continues as new) takes a time-skipping
 * lock that only that parent would release (`notify parent` in sdk-java's
 * TestWorkflowMutableStateImpl), and time would run at wall-clock speed from then on. Each such
 * child's lock is released here, once.
 */
export class TimeDriver {
  private readonly settled = new Set<string>();
  /** Set once the scenario has failed: its advanceUntil stops at the next step. */
  abandoned = false;

  constructor(
    private readonly env: TestWorkflowEnvironment,
    /** The ids of the workflows the scenario may have started. */
    private readonly workflowIds: () => Iterable<string>,
  ) {}

  /** Moves workflow time on in steps of `stepMs` until `ok` holds; fails after `maxMs` of workflow time. */
  async advanceUntil(
    what: string,
    ok: () => boolean | Promise<boolean>,
    maxMs = 300_000,
    stepMs = 1000,
  ): Promise<void> {
    for (let skipped = 0; ; skipped += stepMs) {
      if (this.abandoned) throw new Error(`given up (the scenario failed): ${what}`);
      if (await ok()) return;
      if (skipped > maxMs) {
        await this.throwIfWedged();
        throw new Error(`not within ${maxMs / 1000} s of workflow time: ${what}`);
      }
      await this.releaseOrphanedChildLocks();
      await this.env.sleep(stepMs);
    }
  }

  private async releaseOrphanedChildLocks(): Promise<void> {
    for (const id of this.workflowIds()) {
      if (this.settled.has(id)) continue;
      const child = await this.describe(id);
      if (!child || child.status.name === 'RUNNING') continue;
      this.settled.add(id);
      // Only closings that notify the parent take the lock; continue-as-new and terminate do not.
      if (!['COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT'].includes(child.status.name)) continue;
      const closed = child.closeTime;
      if (!child.parentExecution?.workflowId || !closed) continue;
      const parent = await this.describe(child.parentExecution.workflowId, child.parentExecution.runId ?? undefined);
      if (parent?.closeTime && parent.closeTime.getTime() <= closed.getTime()) {
        await this.env.connection.testService?.unlockTimeSkipping({}).catch(() => undefined);
      }
    }
  }

  /**
   * Rejects with WedgedWorkflowTask once a workflow task of the scenario is wedged, looking every
   * 5 s: a wedged task holds time skipping locked, and every call that waits on it (a query, an
   * update, advanceUntil) would otherwise wait for the test's timeout, which says nothing of why.
   * Stops when `stop` aborts.
   */
  async watchForWedge(stop: AbortSignal): Promise<never> {
    for (;;) {
      await sleep(5_000, undefined, { signal: stop });
      await this.throwIfWedged();
    }
  }

  private async throwIfWedged(): Promise<void> {
    const now = await this.env.currentTimeMs();
    const stuck: string[] = [];
    for (const id of this.workflowIds()) {
      const history = await this.env.client.workflow
        .getHandle(id)
        .fetchHistory()
        .catch(() => undefined);
      const last = history?.events?.at(-1);
      if (last?.eventType === EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED && now - eventMs(last) > WEDGED_AFTER_MS) {
        stuck.push(id);
      }
    }
    if (stuck.length > 0) {
      throw new WedgedWorkflowTask(
        `the time-skipping test server wedged the workflow task of ${stuck.join(', ')}: its history has ended in a WorkflowTaskStarted for more than ${WEDGED_AFTER_MS / 1000} s`,
      );
    }
  }

  private async describe(workflowId: string, runId?: string) {
    try {
      return await this.env.client.workflow.getHandle(workflowId, runId).describe();
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) return undefined;
      throw err;
    }
  }
}

/**
 * Fails if a run of these workflows (every run of a continue-as-new chain) recorded a TimerCanceled:
 * the premise of uncancelled-timers.ts, that no CancelTimer command reaches the server, checked on
 * every scenario.
 */
async function expectNoCancelledTimer(client: Client, workflowIds: Iterable<string>): Promise<void> {
  const cancelled: string[] = [];
  for (const id of workflowIds) {
    const latest = await client.workflow
      .getHandle(id)
      .fetchHistory()
      .catch((err: unknown) => {
        // Never started (the world names every workflow a scenario may start); gRPC NOT_FOUND is 5.
        if (err instanceof WorkflowNotFoundError || (isGrpcServiceError(err) && err.code === 5)) return undefined;
        throw err;
      });
    let runId = latest?.events?.[0]?.workflowExecutionStartedEventAttributes?.firstExecutionRunId || undefined;
    for (let history = runId ? await client.workflow.getHandle(id, runId).fetchHistory() : latest; history;) {
      if (history.events?.some((e) => e.eventType === EventType.EVENT_TYPE_TIMER_CANCELED))
        cancelled.push(`${id} (run ${runId ?? 'latest'})`);
      runId = history.events?.at(-1)?.workflowExecutionContinuedAsNewEventAttributes?.newExecutionRunId || undefined;
      history = runId ? await client.workflow.getHandle(id, runId).fetchHistory() : undefined;
    }
  }
  if (cancelled.length > 0)
    throw new Error(
      `a timer was cancelled despite uncancelled-timers.ts, which the time-skipping test server can wedge on (sdk-java#3088): ${cancelled.join(', ')}`,
    );
}

/**
 * What the newest closed run of a workflow that continues as new answers to `query`: its state at
 * its end, which it handed, whole, to the run that continued it; undefined while the first run is
 * the only one. Such a workflow cannot be asked while it runs: the test server loses a query that
 * arrives while the workflow task that continues as new is in flight (it hands the query to the
 * closed run as a query task, refuses the worker's answer, "workflow execution already completed",
 * and the call waits for ever). A closed run is asked directly and answers from its history.
 */
export async function queryHandedOn<R>(
  client: Client,
  workflowId: string,
  query: QueryDefinition<R>,
): Promise<R | undefined> {
  const history = await client.workflow.getHandle(workflowId).fetchHistory();
  const previous = history.events?.[0]?.workflowExecutionStartedEventAttributes?.continuedExecutionRunId;
  return previous ? client.workflow.getHandle(workflowId, previous).query(query) : undefined;
}

/** Waits, in wall time, until `ok` holds: time skipping stays locked meanwhile, so no timer fires early. */
export async function wallUntil(what: string, ok: () => Promise<boolean>, withinMs = 30_000): Promise<void> {
  for (const deadline = Date.now() + withinMs; !(await ok()); await sleep(50)) {
    if (Date.now() > deadline) throw new Error(`not within ${withinMs / 1000} s of wall time: ${what}`);
  }
}

/** Whether the run behind `handle` has completed a workflow task: what it was started with is taken in. */
export async function tookStartIn(handle: WorkflowHandle): Promise<boolean> {
  const { events } = await handle.fetchHistory();
  return events?.some((e) => e.eventType === EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED) ?? false;
}

/** The id of the run that continued `runId` as new, once there is one (a workflow task away). */
export async function runAfter(client: Client, workflowId: string, runId: string): Promise<string> {
  let current = runId;
  await wallUntil(`${workflowId}: run ${runId} continued as new`, async () => {
    current = (await client.workflow.getHandle(workflowId).describe()).runId;
    return current !== runId;
  });
  return current;
}

/**
 * Signals the running run of a workflow that continues as new (`handle` is bound to no run). The
 * test server looks that run up, then records the signal in it: a run that continued as new in
 * between refuses the signal without recording it ("Completed workflow"), where the real server
 * delivers it to the run that continued. The refused signal goes on to that run, as it would have
 * there.
 */
export async function signalLiveRun<Args extends unknown[]>(
  handle: WorkflowHandle,
  signal: SignalDefinition<Args>,
  ...args: Args
): Promise<void> {
  for (let refused = 0; ; refused++) {
    try {
      return await handle.signal(signal, ...args);
    } catch (err) {
      const continued =
        err instanceof WorkflowNotFoundError &&
        err.message === 'Completed workflow' &&
        (await handle.describe()).status.name === 'RUNNING';
      if (!continued || refused >= 3) throw err;
    }
  }
}

/**
 * Where each workflow of a failed scenario stands, for its report: status, run and last events
 * (signals by name, failed tasks and signals by cause), enough to tell a fault of the test server
 * from one of the workflows.
 */
async function whereWorkflowsStand(client: Client, workflowIds: Iterable<string>): Promise<string> {
  const lines: string[] = [];
  for (const id of workflowIds) {
    const handle = client.workflow.getHandle(id);
    const description = await handle.describe().catch(() => undefined);
    const history = await handle.fetchHistory().catch(() => undefined);
    if (!description || !history) continue;
    const events = (history.events ?? []).slice(-12).map((e) => {
      const name = (EventType[e.eventType ?? 0] ?? String(e.eventType)).replace('EVENT_TYPE_', '');
      const failedTask = e.workflowTaskFailedEventAttributes?.cause;
      const failedSignal = e.signalExternalWorkflowExecutionFailedEventAttributes?.cause;
      const detail =
        e.workflowExecutionSignaledEventAttributes?.signalName ??
        (failedTask != null ? WorkflowTaskFailedCause[failedTask] : undefined) ??
        (failedSignal != null ? SignalExternalWorkflowExecutionFailedCause[failedSignal] : undefined);
      return `${String(e.eventId)} ${name}${detail ? ` (${detail})` : ''}`;
    });
    lines.push(`${id}: ${description.status.name}, run ${description.runId}; last events: ${events.join(', ')}`);
  }
  return lines.join('\n');
}

/** What a scenario gets: its fake world, its task queue, and the driver of workflow time. */
export interface Scenario {
  env: TestWorkflowEnvironment;
  world: FakeWorld;
  taskQueue: string;
  advanceUntil: TimeDriver['advanceUntil'];
}

/**
 * One time-skipping server and one workflow bundle per test file; a worker, a task queue and a
 * fake world per scenario.
 */
export class TestBed {
  private queues = 0;

  private constructor(
    public env: TestWorkflowEnvironment,
    private readonly bundle: WorkflowBundleWithSourceMap,
  ) {}

  static async start(): Promise<TestBed> {
    // Warnings and errors only: the workers' state changes of every scenario are noise here.
    Runtime.install({
      logger: new DefaultLogger('WARN', logQuietly),
      telemetryOptions: { logging: { filter: { core: 'ERROR', other: 'ERROR' } } },
    });
    const [env, bundle] = await Promise.all([
      startTimeSkipping(),
      bundleWorkflowCode({
        workflowsPath,
        workflowInterceptorModules: [uncancelledTimersPath],
        logger: { trace() {}, debug() {}, info() {}, warn: console.warn, error: console.error, log() {} },
      }),
    ]);
    return new TestBed(env, bundle);
  }

  async teardown(): Promise<void> {
    await this.env.teardown();
  }

  /**
   * Runs `fn` with a worker on a task queue of its own, then checks that no workflow of the scenario
   * cancelled a timer (uncancelled-timers.ts), then stops every workflow it left running. A wedged
   * workflow task (TimeDriver.watchForWedge) fails the scenario; nothing runs again. A failed
   * scenario reports where each of its workflows stands.
   */
  async scenario(fn: (s: Scenario) => Promise<void>): Promise<void> {
    const env = this.env;
    const world = new FakeWorld(env);
    const driver = new TimeDriver(env, () => world.ids());
    const taskQueue = `scenario-${++this.queues}`;
    const worker = await Worker.create({
      connection: env.nativeConnection,
      taskQueue,
      workflowBundle: this.bundle,
      activities: world.activities(),
    });
    const run = fn({
      env,
      world,
      taskQueue,
      advanceUntil: (what, ok, maxMs, stepMs) => driver.advanceUntil(what, ok, maxMs, stepMs),
    });
    // A run that the watchdog cut short fails later (its waiting call ends when cleanUp terminates
    // the workflows): the watchdog's error is the one reported.
    run.catch(() => undefined);
    const watchdog = new AbortController();
    try {
      await worker.runUntil(Promise.race([run, driver.watchForWedge(watchdog.signal)]));
      await expectNoCancelledTimer(env.client, world.ids());
    } catch (err) {
      console.error(
        `The scenario failed (${String(err)}); its workflows:\n${await whereWorkflowsStand(env.client, world.ids())}`,
      );
      throw err;
    } finally {
      watchdog.abort();
      driver.abandoned = true;
      await this.cleanUp(world);
    }
  }

  /**
   * Stops what the scenario left running. Terminating a workflow whose activity is in flight
   * leaves a time-skipping lock behind (sdk-java#1138): the next scenario then gets a fresh server.
   */
  private async cleanUp(world: FakeWorld): Promise<void> {
    await world.stopAll(this.env.client);
    // With nothing running, skipping a few hundred milliseconds takes a few; locked, it takes them all.
    const started = Date.now();
    const skipping = await this.env.sleep(400).then(
      () => Date.now() - started < 300,
      () => false,
    );
    if (!skipping) {
      const stale = this.env;
      this.env = await startTimeSkipping();
      await stale.teardown().catch(() => undefined);
    }
  }
}
