/**
 * The load-balancing proxy's routing state (api/lb-proxy.ts forwards the requests): the routable
 * workers of the endpoints this process serves, the choice of a worker per request, the wait for
 * one when there is none, and the publication of this process's in-flight counts.
 */
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { FastifyBaseLogger } from 'fastify';
import type { DomainContext } from '../domain/context.ts';
import { wakeAutoscaler } from '../domain/endpoints/index.ts';
import { DomainError } from '../domain/errors.ts';
import {
  chooseWorker,
  LbLoadTracker,
  otherProcessesInFlight,
  publishLoad,
  purgeOldLoad,
  retireLoad,
  routableWorkers,
  type LbEndpoint,
  type LbHealthSettings,
  type LbWorkerAddress,
} from '../domain/load-balancing/index.ts';
import { LbHealthMonitor } from './lb-health.ts';

/** How often the proxy re-reads the workers of the endpoints it serves, and the others' load. */
const REFRESH_MS = 250;
/** While a request waits for a worker (a cold start, a FlashBoot thaw), the routes are read this often. */
const WAITING_REFRESH_MS = 50;
/** How often changed in-flight counts are published. */
const PUBLISH_MS = 100;
/** An endpoint without requests for this long is forgotten (its workers no longer probed). */
const EVICT_MS = 60_000;
/** A waiting period that lasts this long wakes the autoscaler again. */
const RESIGNAL_MS = 30_000;
/** Requests without a body are tried on another worker when theirs cannot be reached. */
interface EndpointView {
  id: string;
  workers: LbWorkerAddress[];
  lastUsedMs: number;
  waiters: Set<() => void>;
  /** Start of the current waiting period (a request waits and no worker is in rotation). */
  waitingSince: number | null;
  signalledAt: number | null;
}

/**
 * The per-process state of the proxy: the routable workers of the endpoints it serves, their
 * health, the in-flight counts and their publication, and the requests waiting for a worker.
 */
export class LoadBalancer {
  readonly processId = `${hostname()}-${process.pid}-${randomBytes(4).toString('hex')}`;
  readonly tracker = new LbLoadTracker();
  readonly health: LbHealthMonitor;
  /**
   * Live routing state, not a cache of records: each view's workers are re-read every REFRESH_MS,
   * and every request checks its key and endpoint first (through ctx.records, within the
   * revocation bound of domain/shared/record-cache.ts): a deleted endpoint's view serves no request past
   * that bound, and goes after EVICT_MS unused.
   */
  private readonly views = new Map<string, EndpointView>();
  private readonly loading = new Map<string, Promise<EndpointView>>();
  private remote = new Map<string, number>();
  private cursor = 0;
  private timers: NodeJS.Timeout[] = [];
  private refreshing = false;
  private publishing: Promise<void> = Promise.resolve();
  private publishQueued = false;
  private stopped = false;

  constructor(
    private readonly ctx: DomainContext,
    private readonly log: FastifyBaseLogger,
    healthSettings: LbHealthSettings,
  ) {
    this.health = new LbHealthMonitor(healthSettings, (change) => {
      if (change.inRotation) {
        for (const view of this.views.values()) if (view.workers.some((w) => w.id === change.workerId)) this.wake(view);
      } else {
        this.log.warn(
          { workerId: change.workerId, reason: change.reason },
          'load-balancing worker taken out of rotation',
        );
      }
    });
  }

  start(): void {
    this.health.start();
    this.timers.push(setInterval(() => void this.refresh(), REFRESH_MS));
    this.timers.push(
      setInterval(() => {
        for (const view of this.views.values()) if (view.waiters.size > 0) return void this.refresh();
      }, WAITING_REFRESH_MS),
    );
    this.timers.push(setInterval(() => void this.publish(true), PUBLISH_MS));
    this.timers.push(setInterval(() => void purgeOldLoad(this.ctx.db).catch(() => undefined), 10 * 60_000));
    for (const t of this.timers) t.unref();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    for (const t of this.timers) clearInterval(t);
    this.timers = [];
    this.health.stop();
    for (const view of this.views.values()) this.wake(view);
    await this.publishing;
    await retireLoad(this.ctx.db, this.processId).catch((err: unknown) =>
      this.log.warn({ err }, 'could not retire the proxy load rows'),
    );
  }

  /**
   * A worker for the request: the one with the fewest outstanding requests among those in
   * rotation, waiting for one until `deadline` when there is none. Undefined when none came.
   */
  async acquire(
    endpoint: LbEndpoint,
    deadline: number,
    hangup: AbortSignal,
  ): Promise<{ worker: LbWorkerAddress; release: () => void } | undefined> {
    const view = await this.view(endpoint.id);
    view.lastUsedMs = Date.now();
    const now = this.take(view);
    if (now) return now;
    if (endpoint.workersMax === 0)
      throw new DomainError('unavailable', 'the endpoint has workers.max 0: no worker will start');

    const endWait = this.tracker.wait(endpoint.id);
    try {
      await this.waitingPeriod(view);
      for (;;) {
        const got = this.take(view);
        if (got) return got;
        const left = deadline - Date.now();
        if (left <= 0 || hangup.aborted || this.stopped) return undefined;
        await this.changed(view, left, hangup);
      }
    } finally {
      endWait();
    }
  }

  /** A worker at once when the endpoint's view is loaded and one is in rotation; undefined otherwise (acquire then waits). */
  takeNow(endpointId: string): { worker: LbWorkerAddress; release: () => void } | undefined {
    const view = this.views.get(endpointId);
    if (!view) return undefined;
    view.lastUsedMs = Date.now();
    return this.take(view);
  }

  /** Another worker for a request whose worker could not be reached, without waiting. */
  retake(endpointId: string, except: string): { worker: LbWorkerAddress; release: () => void } | undefined {
    const view = this.views.get(endpointId);
    return view ? this.take(view, except) : undefined;
  }

  private take(view: EndpointView, except?: string): { worker: LbWorkerAddress; release: () => void } | undefined {
    const candidates = view.workers.filter((w) => w.id !== except && this.health.inRotation(w.id));
    const i = chooseWorker(
      candidates.map((w) => ({
        id: w.id,
        outstanding: this.tracker.inFlight(view.id, w.id) + (this.remote.get(w.id) ?? 0),
      })),
      this.cursor++,
    );
    if (this.cursor > 1e9) this.cursor = 0;
    const worker = candidates[i];
    if (!worker) return undefined;
    view.waitingSince = null;
    return { worker, release: this.tracker.start(view.id, worker.id) };
  }

  /** The endpoint's view; the first request of an endpoint loads it (the routes are published first). */
  private async view(endpointId: string): Promise<EndpointView> {
    const known = this.views.get(endpointId);
    if (known) return known;
    let pending = this.loading.get(endpointId);
    if (!pending) {
      pending = (async () => {
        const [workers, remote] = await Promise.all([
          routableWorkers(this.ctx.db, [endpointId]),
          otherProcessesInFlight(this.ctx.db, this.processId, [endpointId]),
        ]);
        for (const [id, n] of remote) this.remote.set(id, n);
        // The database learns that this process routes to these workers before it does: a drain
        // that starts meanwhile waits for this process.
        this.tracker.setRoutable(endpointId, new Set(workers.map((w) => w.id)));
        await this.publish(false);
        const view: EndpointView = {
          id: endpointId,
          workers,
          lastUsedMs: Date.now(),
          waiters: new Set(),
          waitingSince: null,
          signalledAt: null,
        };
        this.views.set(endpointId, view);
        this.watchAll();
        return view;
      })().finally(() => this.loading.delete(endpointId));
      this.loading.set(endpointId, pending);
    }
    return pending;
  }

  /** Publishes the wait and wakes the autoscaler once per waiting period. */
  private async waitingPeriod(view: EndpointView): Promise<void> {
    const now = Date.now();
    if (view.waitingSince !== null && view.signalledAt !== null && now - view.signalledAt < RESIGNAL_MS) return;
    view.waitingSince ??= now;
    view.signalledAt = now;
    // The autoscaler reads the published wait when it wakes: publish first.
    await this.publish(false).catch((err: unknown) => this.log.warn({ err }, 'could not publish the proxy load'));
    await wakeAutoscaler(this.ctx, view.id).catch((err: unknown) =>
      this.log.warn({ err, endpointId: view.id }, 'could not wake the autoscaler'),
    );
  }

  private changed(view: EndpointView, ms: number, hangup: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        view.waiters.delete(done);
        hangup.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      view.waiters.add(done);
      hangup.addEventListener('abort', done, { once: true });
    });
  }

  private wake(view: EndpointView): void {
    for (const w of [...view.waiters]) w();
  }

  private watchAll(): void {
    this.health.watch([...this.views.values()].flatMap((v) => v.workers));
  }

  /** Re-reads the workers of every endpoint served and the other processes' in-flight counts. */
  private async refresh(): Promise<void> {
    if (this.refreshing || this.stopped || this.views.size === 0) return;
    this.refreshing = true;
    try {
      const now = Date.now();
      for (const view of [...this.views.values()]) {
        const busy = view.waiters.size > 0 || view.workers.some((w) => this.tracker.inFlight(view.id, w.id) > 0);
        if (!busy && now - view.lastUsedMs > EVICT_MS) {
          this.views.delete(view.id);
          this.tracker.setRoutable(view.id, new Set());
        }
      }
      // Views added while the query runs were loaded fresher than its answer: they are left alone.
      const views = [...this.views.values()];
      const ids = views.map((v) => v.id);
      const [workers, remote] = await Promise.all([
        routableWorkers(this.ctx.db, ids),
        otherProcessesInFlight(this.ctx.db, this.processId, ids),
      ]);
      this.remote = remote;
      const byEndpoint = new Map<string, LbWorkerAddress[]>();
      for (const w of workers) byEndpoint.set(w.endpointId, [...(byEndpoint.get(w.endpointId) ?? []), w]);

      // New routes are published before they are used; dropped ones stop at once.
      let added = false;
      for (const view of views) {
        const next = byEndpoint.get(view.id) ?? [];
        const current = new Set(view.workers.map((w) => w.id));
        if (next.some((w) => !current.has(w.id))) {
          added = true;
          this.tracker.setRoutable(view.id, new Set([...current, ...next.map((w) => w.id)]));
        }
      }
      if (added) await this.publish(false);
      for (const view of views) {
        if (this.views.get(view.id) !== view) continue; // evicted meanwhile
        const next = byEndpoint.get(view.id) ?? [];
        view.workers = next;
        this.tracker.setRoutable(view.id, new Set(next.map((w) => w.id)));
      }
      this.watchAll();
      for (const view of this.views.values()) if (view.waiters.size > 0 && view.workers.length > 0) this.wake(view);
    } catch (err) {
      this.log.warn({ err }, 'could not refresh the load-balancing workers');
    } finally {
      this.refreshing = false;
    }
  }

  /**
   * Publishes what changed, one statement at a time in order. `background` calls skip when a
   * publication is under way; others wait for one that starts after them.
   */
  publish(background: boolean): Promise<void> {
    if (background && this.publishQueued) return this.publishing;
    this.publishQueued = true;
    const run = async (): Promise<void> => {
      this.publishQueued = false;
      const { rows, commit } = this.tracker.due();
      if (rows.length === 0) return;
      await publishLoad(this.ctx.db, this.processId, rows);
      commit();
    };
    const next = this.publishing.then(run, run);
    this.publishing = next.catch((err: unknown) => this.log.warn({ err }, 'could not publish the proxy load'));
    return next;
  }
}
