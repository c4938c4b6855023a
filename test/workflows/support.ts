/**
 * What the workflow tests share: Temporal's time-skipping test server (test/support/temporal-test-server.ts,
 * built once per machine), the workflow bundle (built once per test file), a fake world per
 * scenario (fake-world.ts), and a driver of workflow time that works around the test server's
 * known faults.
 */
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { isGrpcServiceError, type Client } from '@temporalio/client';
import { WorkflowNotFoundError } from '@temporalio/common';
import { encodeSearchAttributeIndexedValueType } from '@temporalio/common/lib/search-attributes.js';
import { temporal } from '@temporalio/proto';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { bundleWorkflowCode, DefaultLogger, Runtime, Worker, type LogEntry, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { loadConfig } from '../../infra/config.ts';
import { resolveTemporalTestServer } from '../support/temporal-test-server.ts';
import { GANTRY_SEARCH_ATTRIBUTES } from '../../contracts/search-attributes.ts';
import { FakeWorld } from './fake-world.ts';

const { EventType } = temporal.api.enums.v1;

/** The worker's bundle entry (infra/temporal-worker.ts bundles the same file). */
const workflowsPath = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'workflows', 'index.ts');

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
      env = await TestWorkflowEnvironment.createTimeSkipping({ server: { executable: { type: 'existing-path', path: executable } } });
    } catch (err) {
      if (attempt >= 3 || !/did not start within/.test(String(err))) throw err;
    }
  }
  await env.connection.operatorService.addSearchAttributes({
    namespace: env.namespace ?? 'default',
    searchAttributes: Object.fromEntries(GANTRY_SEARCH_ATTRIBUTES.map((k) => [k.name, encodeSearchAttributeIndexedValueType(k.type)!])),
  });
  return env;
}

/**
 * A fault of the time-skipping test server (sdk-java#3088): when a workflow task cancels a timer
 * that fired, in wall time, while the task ran, the server refuses the completion and never hands
 * the task out again; the history ends in WorkflowTaskStarted for good. A scenario that hit it has
 * proved nothing either way, and runs again (TestBed.scenario).
 */
export class WedgedWorkflowTask extends Error {}

/**
 * Drives a scenario's workflow time, working around two faults of the time-skipping test server:
 *
 * - A child workflow that completes after the parent run that started it has closed (Gantry's
 *   workers and rollouts outlive the endpoint run that started them: it continues as new) takes a
 *   time-skipping lock that only that parent would release (`notify parent` in sdk-java's
 *   TestWorkflowMutableStateImpl), and time would run at wall-clock speed from then on. Each such
 *   child's lock is released here, once.
 * - The wedged workflow task above: detected (time stops skipping and a history ends in a started
 *   task that does not move) and thrown as WedgedWorkflowTask.
 */
export class TimeDriver {
  private readonly settled = new Set<string>();
  /** Set once the scenario's run was given up: its advanceUntil stops at the next step. */
  abandoned = false;

  constructor(
    private readonly env: TestWorkflowEnvironment,
    /** The ids of the workflows the scenario may have started. */
    private readonly workflowIds: () => Iterable<string>,
  ) {}

  /** Moves workflow time on in steps of `stepMs` until `ok` holds; fails after `maxMs` of workflow time. */
  async advanceUntil(what: string, ok: () => boolean | Promise<boolean>, maxMs = 300_000, stepMs = 1000): Promise<void> {
    let slow = 0;
    for (let skipped = 0; ; skipped += stepMs) {
      if (this.abandoned) throw new Error(`given up (the test server wedged a workflow task): ${what}`);
      if (await ok()) return;
      if (skipped > maxMs) throw new Error(`not within ${maxMs / 1000} s of workflow time: ${what}`);
      await this.releaseOrphanedChildLocks();
      const started = Date.now();
      await this.env.sleep(stepMs);
      // A skip takes milliseconds; a step that took its whole length in wall time did not skip.
      slow = Date.now() - started >= stepMs * 0.9 ? slow + 1 : 0;
      if (slow >= 3) {
        await this.throwIfWedged();
        slow = 0;
      }
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
   * Rejects with WedgedWorkflowTask once a workflow task of the scenario is wedged, checked every
   * 5 s after the first `afterMs` of wall time (a scenario takes 2-10 s). A call that waits on the
   * wedged task (a query, an update) would otherwise wait for ever, and advanceUntil's own check
   * would never run. Stops when `stop` aborts.
   */
  async watchForWedge(stop: AbortSignal, afterMs = 20_000): Promise<never> {
    await sleep(afterMs, undefined, { signal: stop });
    for (;;) {
      await this.throwIfWedged();
      await sleep(5_000, undefined, { signal: stop });
    }
  }

  private async throwIfWedged(): Promise<void> {
    const startedTasks = async (): Promise<Map<string, string>> => {
      const out = new Map<string, string>();
      for (const id of this.workflowIds()) {
        const history = await this.env.client.workflow.getHandle(id).fetchHistory().catch(() => undefined);
        const last = history?.events?.at(-1);
        if (last?.eventType === EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED) out.set(id, String(last.eventId));
      }
      return out;
    };
    const before = await startedTasks();
    if (before.size === 0) return;
    await new Promise((r) => setTimeout(r, 500));
    const after = await startedTasks();
    const stuck = [...before].filter(([id, event]) => after.get(id) === event).map(([id]) => id);
    if (stuck.length > 0) throw new WedgedWorkflowTask(`the time-skipping test server wedged the workflow task of ${stuck.join(', ')} (sdk-java#3088)`);
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
  /** Runs of a scenario at most, wedged ones included (scenario). */
  static readonly ATTEMPTS = 5;
  private queues = 0;

  private constructor(
    public env: TestWorkflowEnvironment,
    private readonly bundle: WorkflowBundleWithSourceMap,
  ) {}

  static async start(): Promise<TestBed> {
    // Warnings and errors only: the workers' state changes of every scenario are noise here.
    Runtime.install({ logger: new DefaultLogger('WARN', logQuietly), telemetryOptions: { logging: { filter: { core: 'ERROR', other: 'ERROR' } } } });
    const [env, bundle] = await Promise.all([
      startTimeSkipping(),
      bundleWorkflowCode({ workflowsPath, logger: { trace() {}, debug() {}, info() {}, warn: console.warn, error: console.error, log() {} } }),
    ]);
    return new TestBed(env, bundle);
  }

  async teardown(): Promise<void> {
    await this.env.teardown();
  }

  /**
   * Runs `fn` with a worker on a task queue of its own, then stops every workflow it left running.
   * A run that the test server wedged (WedgedWorkflowTask: found by advanceUntil when time stops
   * skipping, or by a watchdog when the run waits on a call that the wedged task holds) proved
   * nothing and runs again, up to ATTEMPTS runs in all (on a loaded machine the same scenario was
   * wedged three times in a row: the halt scenario drains workers whose 730 ms ready-poll timer
   * often fires while their task runs).
   */
  async scenario(fn: (s: Scenario) => Promise<void>, attempt = 1): Promise<void> {
    const env = this.env;
    const world = new FakeWorld(env);
    const driver = new TimeDriver(env, () => world.ids());
    const taskQueue = `scenario-${++this.queues}`;
    const worker = await Worker.create({ connection: env.nativeConnection, taskQueue, workflowBundle: this.bundle, activities: world.activities() });
    const run = fn({ env, world, taskQueue, advanceUntil: (what, ok, maxMs, stepMs) => driver.advanceUntil(what, ok, maxMs, stepMs) });
    // A run given up for a wedged task fails later (its waiting call ends when cleanUp terminates the
    // workflows): that failure belongs to no attempt.
    run.catch(() => undefined);
    const watchdog = new AbortController();
    try {
      await worker.runUntil(Promise.race([run, driver.watchForWedge(watchdog.signal)]));
    } catch (err) {
      watchdog.abort();
      driver.abandoned = true;
      await this.cleanUp(world);
      if (!(err instanceof WedgedWorkflowTask) || attempt >= TestBed.ATTEMPTS) throw err;
      console.warn(`${err.message}; running the scenario again (attempt ${attempt + 1} of ${TestBed.ATTEMPTS})`);
      return this.scenario(fn, attempt + 1);
    }
    watchdog.abort();
    await this.cleanUp(world);
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
