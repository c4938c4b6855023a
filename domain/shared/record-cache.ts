/**
 * The records the hot request paths remember for a moment instead of reading them on every request:
 * API keys (the job API, the load-balancing proxy), worker credentials (the worker protocol) and
 * endpoints (the job API, the proxy). One library (lru-cache), one size bound, and one revocation
 * bound for all of them.
 *
 * One `RecordCaches` per API process, built by the composition root (infra/platform.ts; the tests'
 * test/support/app.ts) and handed down in the domain context (`ctx.records`); nothing is kept in a
 * module, so two apps in one process share nothing unless they share a context.
 *
 * Keys are also forgotten the moment a change reaches this process: a trigger on "ApiKey" and
 * "Account" notifies RECORD_CHANNEL at commit (migration 20261124190000_key_change_notify) and the
 * job runtime's LISTEN session hands each notification to `recordChanged`. While that session is
 * up (`followsChanges`) the management REST API and GraphQL use the remembered keys too; while
 * it is down they read every key, and the job API and the proxy fall back to the revocation bound.
 */
import { LRUCache } from 'lru-cache';
import type { Endpoint } from '../../generated/prisma/client.ts';
import type { EndpointType } from '../../generated/prisma/enums.ts';
import type { Principal } from '../accounts/auth.ts';
import type { DomainContext } from '../context.ts';
import type { WorkerIdentity } from '../workers/credentials.ts';
import type { CachedModel } from '../public-models/models.ts';

/**
 * The revocation bound: the longest any change below takes to reach every request path of every
 * API process. For that long after the change is committed, and never longer, a request may still
 * be admitted on the job API, the load-balancing proxy or the worker protocol:
 *
 * - a revoked API key, or one whose scopes or endpoint list changed (the old ones still apply);
 * - a revoked worker credential (a new one registered for the worker, the worker deleted) or a
 *   worker that was drained, stopped or marked unhealthy (it may still be handed jobs);
 * - a deleted endpoint (one being deleted), or one whose type or timeout changed;
 * - an unpublished public model, or one whose input schema or price changed.
 *
 * An expired key stops at its expiry exactly, a new key or endpoint works at once (failures are
 * never remembered), and a key change reaches every path as soon as its notification does (see
 * `followsChanges`), management REST and GraphQL included. Requests admitted
 * before the bound ran out finish as they started (a job-take long-poll for up to its hold time, a
 * runsync wait, a proxied request or WebSocket session).
 *
 * Every entry's age counts from the moment before its record was read, so what a read saw is never
 * trusted past the bound, however long the read took.
 */
export const REVOCATION_BOUND_MS = 1_000;

/** The channel of the change triggers; payloads `key:<sha-256 of the key>`, `account:<id>` and `endpoint:<id>`. */
export const RECORD_CHANNEL = 'gantry_records';

/** Most records each cache holds; past it the least recently used one goes. */
export const RECORD_CACHE_MAX = 10_000;

/** Records of one kind, by key, each kept at most `ttlMs` from the start of its read. */
export class RecordCache<V extends object> {
  private readonly lru: LRUCache<string, V>;
  /** Bumped by delete, forget and clear: a read that began before them is not stored. */
  private generation = 0;

  constructor(
    readonly ttlMs: number,
    max = RECORD_CACHE_MAX,
  ) {
    // ttlResolution 0: every look reads the clock (the library otherwise reuses a reading for a
    // timer tick, which a busy event loop can stretch past the bound).
    this.lru = new LRUCache<string, V>({ max, ttl: ttlMs, ttlResolution: 0, updateAgeOnGet: false, allowStale: false });
  }

  /**
   * The record under `key`: the remembered one while it is younger than the bound, else what `load`
   * reads now, remembered. `undefined` (not found) and thrown errors are never remembered.
   */
  async get(key: string, load: () => Promise<V | undefined>): Promise<V | undefined> {
    const hit = this.lru.get(key);
    if (hit !== undefined) return hit;
    const start = this.lru.perf.now();
    const generation = this.generation;
    const value = await load();
    if (value !== undefined && generation === this.generation) this.lru.set(key, value, { start });
    return value;
  }

  /** The remembered record under `key` while it is younger than the bound; undefined when it must be read. */
  peek(key: string): V | undefined {
    return this.lru.get(key);
  }

  /** Forgets the record under `key`: its next use reads it again. */
  delete(key: string): void {
    this.generation++;
    this.lru.delete(key);
  }

  /** Forgets the records `match` picks: their next use reads them again. */
  forget(match: (value: V, key: string) => boolean): void {
    this.generation++;
    const keys: string[] = [];
    for (const [key, value] of this.lru.entries()) if (match(value, key)) keys.push(key);
    for (const key of keys) this.lru.delete(key);
  }

  clear(): void {
    this.generation++;
    this.lru.clear();
  }

  get size(): number {
    return this.lru.size;
  }
}

/** An API key as the cached paths remember it. */
export interface CachedKey {
  principal: Principal;
  /** Epoch milliseconds; the key stops at this moment even while remembered. */
  expiresAt: number | null;
}

/** An endpoint not being deleted, as the job API and the proxy need it. */
export interface LiveEndpoint {
  id: string;
  accountId: string;
  type: EndpointType;
  timeoutMs: number;
  workersMax: number;
}

/** The record caches of one API process (see the top of this file). */
export class RecordCaches {
  /** API keys by the SHA-256 of the key (domain/accounts/auth.ts authenticateCached). */
  readonly keys: RecordCache<CachedKey>;
  /** Worker identities by the SHA-256 of the worker's credential (domain/workers/credentials.ts). */
  readonly workers: RecordCache<WorkerIdentity>;
  /** Endpoints by id, while not being deleted (liveEndpoint). */
  readonly endpoints: RecordCache<LiveEndpoint>;
  /** Published models by model id (domain/public-models/models.ts publishedModel). */
  readonly models: RecordCache<CachedModel>;
  /**
   * Whole endpoint rows by id, for the management API's reads (domain/endpoints/endpoints.ts
   * findOwned): used only while the process follows changes, each forgotten when its row changes.
   */
  readonly endpointRows: RecordCache<Endpoint>;

  /** `boundMs`: REVOCATION_BOUND_MS; tests may shorten it. */
  constructor(
    readonly boundMs = REVOCATION_BOUND_MS,
    max = RECORD_CACHE_MAX,
  ) {
    this.keys = new RecordCache(boundMs, max);
    this.workers = new RecordCache(boundMs, max);
    this.endpoints = new RecordCache(boundMs, max);
    this.models = new RecordCache(boundMs, max);
    this.endpointRows = new RecordCache(boundMs, max);
  }

  private following = false;

  /**
   * Whether this process hears every committed key and endpoint change now (its LISTEN session is
   * up; triggers notify each at commit): then a remembered key or endpoint row is as good as a read,
   * up to the notification's delivery, and a key never older than the revocation bound (a session
   * that stalls without breaking).
   */
  get followsChanges(): boolean {
    return this.following;
  }

  /** The LISTEN session came up or was lost: changes may have gone unheard meanwhile, so every key is read again. */
  changeFeed(live: boolean): void {
    this.following = live;
    this.keys.clear();
    this.endpointRows.clear();
  }

  /** A notification on RECORD_CHANNEL: the key, every key of the account, or the endpoint, is read again at its next use. */
  recordChanged(payload: string): void {
    if (payload.startsWith('key:')) this.keys.delete(payload.slice('key:'.length));
    else if (payload.startsWith('endpoint:')) {
      const id = payload.slice('endpoint:'.length);
      this.endpointRows.delete(id);
      this.endpoints.delete(id);
    } else if (payload.startsWith('account:')) {
      const accountId = payload.slice('account:'.length);
      this.keys.forget((k) => k.principal.accountId === accountId);
    }
  }
}

/**
 * The record caches the composition root put in `ctx`. Every process that serves the API has them;
 * asking for them elsewhere is a wiring mistake.
 */
export function recordCachesOf(ctx: Pick<DomainContext, 'records'>): RecordCaches {
  if (!ctx.records)
    throw new Error(
      'no record caches in the domain context: the composition root builds them (new RecordCaches()) for processes that serve the API',
    );
  return ctx.records;
}

/** liveEndpoint's answer when this process remembers it; undefined when it must be read. */
export function liveEndpointNow(ctx: Pick<DomainContext, 'records'>, endpointId: string): LiveEndpoint | undefined {
  return recordCachesOf(ctx).endpoints.peek(endpointId);
}

/** The endpoint unless it does not exist or is being deleted, through the record cache. */
export function liveEndpoint(
  ctx: Pick<DomainContext, 'db' | 'records'>,
  endpointId: string,
): Promise<LiveEndpoint | undefined> {
  return recordCachesOf(ctx).endpoints.get(endpointId, async () => {
    const e = await ctx.db.endpoint.findFirst({
      where: { id: endpointId, deletingAt: null },
      select: { id: true, accountId: true, type: true, timeoutMs: true, workersMax: true },
    });
    return e ?? undefined;
  });
}
