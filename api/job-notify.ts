/**
 * Wake-ups for waiting job requests: one LISTEN session per API process on the jobs channel, fanned
 * out in memory to the requests waiting here. The map of waiters is a hint, never the truth: a woken
 * request re-reads PostgreSQL, and every wait is bounded, so a lost notification costs latency only.
 * The same session carries the key-change channel to the process's record caches
 * (domain/shared/record-cache.ts), and tells them whenever it is up or lost.
 */
import pg from 'pg';
import { JOB_CHANNEL, pgConfig, type JobRow, type NotifyKind } from '../domain/jobs/index.ts';
import type { Log } from '../domain/jobs/index.ts';
import type { JobWakeups, Waiter } from '../domain/jobs/index.ts';
import { RECORD_CHANNEL, type RecordCaches } from '../domain/shared/index.ts';
import { forgetWorker } from '../domain/workers/index.ts';

class PendingWaiter implements Waiter {
  woken = false;
  /** The caller saw the wake-up (wait() returned it), so it acts on it. */
  observed = false;
  released = false;
  row: JobRow | undefined;
  private resolve: ((r: { woken: boolean; row?: JobRow }) => void) | undefined;

  constructor(
    private readonly hub: JobNotifier,
    readonly kind: NotifyKind,
    readonly key: string,
  ) {}

  wakeUp(row?: JobRow): void {
    if (this.woken) return;
    this.woken = true;
    this.row = row;
    if (this.resolve) {
      this.observed = true;
      this.resolve({ woken: true, row });
      this.resolve = undefined;
    }
  }

  wait(timeoutMs: number, abort?: AbortSignal): Promise<{ woken: boolean; row?: JobRow }> {
    if (this.woken) {
      this.observed = true;
      return Promise.resolve({ woken: true, row: this.row });
    }
    if (abort?.aborted || timeoutMs <= 0) return Promise.resolve({ woken: false });
    return new Promise((resolve) => {
      const finish = (r: { woken: boolean; row?: JobRow }): void => {
        clearTimeout(timer);
        abort?.removeEventListener('abort', onAbort);
        this.resolve = undefined;
        resolve(r);
      };
      const onAbort = (): void => finish({ woken: false });
      const timer = setTimeout(onAbort, timeoutMs);
      abort?.addEventListener('abort', onAbort, { once: true });
      this.resolve = finish;
    });
  }

  release(): void {
    if (this.released) return;
    this.released = true;
    this.hub.remove(this);
    // A queue wake-up this request took but will not act on belongs to another taker.
    if (this.kind === 'q' && this.woken && !this.observed) this.hub.wake('q', this.key);
    // A wait still pending (a take handed its job while waiting) ends now, with its timer.
    this.resolve?.({ woken: false });
  }
}

/** Channel payloads are `<kind>:<process tag>:<id>`; ids never contain ':' before the id part. */
function parsePayload(payload: string): { kind: NotifyKind; tag: string; id: string } | undefined {
  const a = payload.indexOf(':');
  const b = payload.indexOf(':', a + 1);
  if (a < 0 || b < 0) return undefined;
  const kind = payload.slice(0, a);
  if (kind !== 'q' && kind !== 'j' && kind !== 's' && kind !== 'w') return undefined;
  return { kind, tag: payload.slice(a + 1, b), id: payload.slice(b + 1) };
}

/** Longest an endpoint's queue is trusted to be empty without asking PostgreSQL again. */
const EMPTY_TRUST_MS = 5_000;

export class JobNotifier implements JobWakeups {
  private readonly waiters = new Map<string, PendingWaiter[]>();
  /** Queue wake-ups seen per endpoint (a counter), and the marker at which each was found empty. */
  private readonly queueGen = new Map<string, number>();
  private readonly emptyAt = new Map<string, { marker: number; at: number }>();
  private client: pg.Client | undefined;
  private stopped = false;
  private reconnectDelay = 100;
  private reconnectTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly databaseUrl: string,
    /** Notifications carrying this tag came from this process, which already woke its waiters. */
    private readonly tag: string,
    private readonly log: Log,
    /** Told of key changes, and of the session's state. */
    private readonly records?: RecordCaches,
  ) {}

  /** Connects the LISTEN session; keeps reconnecting in the background if it cannot. */
  async start(): Promise<void> {
    await this.connect();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.reconnectTimer) clearTimeout(this.reconnectTimer);
    this.wakeAll();
    this.records?.changeFeed(false);
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => undefined);
  }

  private async connect(): Promise<void> {
    if (this.stopped) return;
    const client = new pg.Client(pgConfig(this.databaseUrl));
    const lost = (err?: unknown): void => {
      if (this.client !== client) return;
      this.client = undefined;
      this.emptyAt.clear();
      this.records?.changeFeed(false);
      client.removeAllListeners('notification');
      client.end().catch(() => undefined);
      if (this.stopped) return;
      this.log('warn', 'job notification session lost; reconnecting', err);
      this.scheduleReconnect();
    };
    client.on('error', lost);
    client.on('end', () => lost());
    client.on('notification', (msg) => {
      if (msg.channel === RECORD_CHANNEL && msg.payload) this.records?.recordChanged(msg.payload);
      if (msg.channel !== JOB_CHANNEL || !msg.payload) return;
      const p = parsePayload(msg.payload);
      // A worker's state changed (standby, thaw): its next call reads it past the record cache.
      if (p?.kind === 'w' && this.records) forgetWorker(this.records, p.id);
      if (p && p.tag !== this.tag) this.wake(p.kind, p.id);
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${JOB_CHANNEL}`);
      if (this.records) await client.query(`LISTEN ${RECORD_CHANNEL}`);
      this.client = client;
      this.records?.changeFeed(true);
      this.reconnectDelay = 100;
      // Notifications sent while no session listened are lost: let every waiter look again.
      this.wakeAll();
    } catch (err) {
      client.end().catch(() => undefined);
      this.log('warn', 'job notification session could not connect; retrying', err);
      this.scheduleReconnect();
    }
  }

  private scheduleReconnect(): void {
    if (this.stopped || this.reconnectTimer) return;
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = undefined;
      void this.connect();
    }, this.reconnectDelay);
    this.reconnectTimer.unref();
    this.reconnectDelay = Math.min(this.reconnectDelay * 2, 5_000);
  }

  watch(kind: NotifyKind, key: string): Waiter {
    const w = new PendingWaiter(this, kind, key);
    const k = `${kind}:${key}`;
    const list = this.waiters.get(k);
    if (list) list.push(w);
    else this.waiters.set(k, [w]);
    return w;
  }

  remove(w: PendingWaiter): void {
    const k = `${w.kind}:${w.key}`;
    const list = this.waiters.get(k);
    if (!list) return;
    const i = list.indexOf(w);
    if (i >= 0) list.splice(i, 1);
    if (list.length === 0) this.waiters.delete(k);
  }

  queueMarker(endpointId: string): number {
    return this.queueGen.get(endpointId) ?? 0;
  }

  markQueueEmpty(endpointId: string, marker: number): void {
    if (this.queueMarker(endpointId) !== marker) return; // something was queued meanwhile
    if (this.emptyAt.size > 10_000) this.emptyAt.clear();
    this.emptyAt.set(endpointId, { marker, at: Date.now() });
  }

  queueKnownEmpty(endpointId: string): boolean {
    // Without a LISTEN session, other processes' commits go unseen: nothing is known.
    if (!this.client) return false;
    const e = this.emptyAt.get(endpointId);
    return e !== undefined && e.marker === this.queueMarker(endpointId) && Date.now() - e.at < EMPTY_TRUST_MS;
  }

  wake(kind: NotifyKind, key: string, row?: JobRow): void {
    if (kind === 'q') {
      this.queueGen.set(key, this.queueMarker(key) + 1);
      if (this.queueGen.size > 10_000) {
        this.queueGen.clear();
        this.emptyAt.clear();
      }
    }
    const list = this.waiters.get(`${kind}:${key}`);
    if (!list) return;
    if (kind === 'q') {
      // One queued job needs one taker: wake the longest-waiting one not yet woken.
      list.find((w) => !w.woken)?.wakeUp();
      return;
    }
    for (const w of list) w.wakeUp(row);
  }

  wakeAll(): void {
    this.emptyAt.clear();
    for (const list of this.waiters.values()) for (const w of list) w.wakeUp();
  }

  /** Waiting requests, for tests and metrics. */
  get waiting(): number {
    let n = 0;
    for (const list of this.waiters.values()) n += list.length;
    return n;
  }
}
