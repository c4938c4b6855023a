/**
 * The load every API process publishes in PostgreSQL, for the autoscaler and worker drains to read.
 *
 * Each API process keeps its own in-flight counts in memory (the hot path never waits on the
 * database) and upserts them, a few times a second while they change, into one `LbProxyLoad` row
 * per process, endpoint and worker. Readers add up the rows that are fresh (a process that died
 * stops refreshing its rows, which then count for nothing). A row also says whether its process
 * may still send new requests to the worker (`routable`): a drain is safe once no fresh row routes
 * to the worker and none has a request on it.
 */
import { Prisma } from '../../generated/prisma/client.ts';
import type { Db } from '../shared/db.ts';

/** Rows not refreshed for this long belong to a process that stopped: they count for nothing. */
export const LB_LOAD_STALE_MS = 15_000;
/** A process refreshes its rows this often while they hold a request or a route. */
export const LB_LOAD_HEARTBEAT_MS = 5_000;
/** Rows untouched this long are removed (they only kept a worker's last activity). */
const LB_LOAD_RETENTION_MS = 24 * 3600_000;

const NOW_UTC = Prisma.sql`(now() AT TIME ZONE 'UTC')`;

/** The requests still waiting for a ready worker are kept under this worker id. */
export const WAITING = '';

interface LoadEntry {
  endpointId: string;
  workerId: string;
  inFlight: number;
  routable: boolean;
  /** Start times of waiting requests (WAITING entries only). */
  waitStarts: Set<{ at: number }>;
  lastActiveMs: number | null;
  version: number;
  publishedVersion: number;
  publishedAtMs: number;
}

export interface LoadRow {
  endpointId: string;
  workerId: string;
  inFlight: number;
  routable: boolean;
  /** How long the oldest waiting request has waited (WAITING rows with waiters only). */
  waitingForMs: number | null;
  /** How long ago the last request on the worker started or ended. */
  idleForMs: number | null;
}

/**
 * One API process's load: requests under way per worker, requests waiting per endpoint, and the
 * workers the process routes to. Changes mark an entry for the next `publishLoad`.
 */
export class LbLoadTracker {
  private readonly entries = new Map<string, LoadEntry>();

  private entry(endpointId: string, workerId: string): LoadEntry {
    const key = `${endpointId}\0${workerId}`;
    let e = this.entries.get(key);
    if (!e) {
      e = {
        endpointId,
        workerId,
        inFlight: 0,
        routable: false,
        waitStarts: new Set(),
        lastActiveMs: null,
        version: 1,
        publishedVersion: 0,
        publishedAtMs: 0,
      };
      this.entries.set(key, e);
    }
    return e;
  }

  /** A request now runs on the worker; the returned function (idempotent) ends it. */
  start(endpointId: string, workerId: string, now = Date.now()): () => void {
    const e = this.entry(endpointId, workerId);
    e.inFlight++;
    e.lastActiveMs = now;
    e.version++;
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      e.inFlight--;
      e.lastActiveMs = Date.now();
      e.version++;
    };
  }

  /** A request waits for a ready worker of the endpoint; the returned function ends the wait. */
  wait(endpointId: string, now = Date.now()): () => void {
    const e = this.entry(endpointId, WAITING);
    const token = { at: now };
    e.waitStarts.add(token);
    e.inFlight = e.waitStarts.size;
    e.version++;
    return () => {
      if (!e.waitStarts.delete(token)) return;
      e.inFlight = e.waitStarts.size;
      e.version++;
    };
  }

  /** The workers of the endpoint this process may send new requests to, from now on. */
  setRoutable(endpointId: string, workerIds: ReadonlySet<string>): void {
    for (const e of this.entries.values()) {
      if (e.endpointId !== endpointId || e.workerId === WAITING) continue;
      const routable = workerIds.has(e.workerId);
      if (e.routable !== routable) {
        e.routable = routable;
        e.version++;
      }
    }
    for (const id of workerIds) {
      const e = this.entry(endpointId, id);
      if (!e.routable) {
        e.routable = true;
        e.version++;
      }
    }
  }

  /** Requests this process has under way on the worker. */
  inFlight(endpointId: string, workerId: string): number {
    return this.entries.get(`${endpointId}\0${workerId}`)?.inFlight ?? 0;
  }

  /** Requests this process has under way or waiting, over all endpoints. */
  total(): number {
    let n = 0;
    for (const e of this.entries.values()) n += e.inFlight;
    return n;
  }

  /**
   * What must be published now: changed entries, and entries holding a request or a route whose
   * row is due for its heartbeat. `commit` marks them published (a later change stays pending).
   */
  due(now = Date.now()): { rows: LoadRow[]; commit: () => void } {
    const picked: Array<[LoadEntry, number]> = [];
    const rows: LoadRow[] = [];
    for (const [key, e] of this.entries) {
      const changed = e.version !== e.publishedVersion;
      const heartbeat = (e.inFlight > 0 || e.routable) && now - e.publishedAtMs >= LB_LOAD_HEARTBEAT_MS;
      if (!changed && !heartbeat) {
        // Nothing under way and nothing routed for a while: the row in the database says it all.
        if (e.inFlight === 0 && !e.routable && now - (e.lastActiveMs ?? e.publishedAtMs) > 10 * 60_000)
          this.entries.delete(key);
        continue;
      }
      picked.push([e, e.version]);
      let oldest: number | null = null;
      for (const w of e.waitStarts) oldest = oldest === null ? w.at : Math.min(oldest, w.at);
      rows.push({
        endpointId: e.endpointId,
        workerId: e.workerId,
        inFlight: e.inFlight,
        routable: e.routable,
        waitingForMs: oldest === null ? null : Math.max(0, now - oldest),
        idleForMs: e.lastActiveMs === null ? null : Math.max(0, now - e.lastActiveMs),
      });
    }
    return {
      rows,
      commit: () => {
        for (const [e, version] of picked) {
          e.publishedVersion = version;
          e.publishedAtMs = now;
        }
      },
    };
  }
}

/**
 * Upserts this process's rows in one statement. Times travel as ages and become timestamps on the
 * database's clock, so that processes on machines with different clocks agree.
 */
export async function publishLoad(db: Db, processId: string, rows: readonly LoadRow[]): Promise<void> {
  if (rows.length === 0) return;
  const ms = (v: number | null): number | null => (v === null ? null : Math.round(v));
  await db.$executeRaw`
    INSERT INTO "LbProxyLoad" ("processId", "endpointId", "workerId", "inFlight", "routable", "waitingSince", "lastActiveAt", "updatedAt")
    SELECT ${processId}, r.endpoint_id, r.worker_id, r.in_flight, r.routable,
      ${NOW_UTC} - r.waiting_ms * interval '1 millisecond',
      ${NOW_UTC} - r.idle_ms * interval '1 millisecond',
      ${NOW_UTC}
    FROM unnest(${rows.map((r) => r.endpointId)}::text[], ${rows.map((r) => r.workerId)}::text[], ${rows.map((r) => r.inFlight)}::int[],
      ${rows.map((r) => r.routable)}::boolean[], ${rows.map((r) => ms(r.waitingForMs))}::int[], ${rows.map((r) => ms(r.idleForMs))}::int[])
      AS r(endpoint_id, worker_id, in_flight, routable, waiting_ms, idle_ms)
    ON CONFLICT ("processId", "endpointId", "workerId") DO UPDATE SET
      "inFlight" = EXCLUDED."inFlight", "routable" = EXCLUDED."routable", "waitingSince" = EXCLUDED."waitingSince",
      "lastActiveAt" = COALESCE(EXCLUDED."lastActiveAt", "LbProxyLoad"."lastActiveAt"), "updatedAt" = EXCLUDED."updatedAt"`;
}

/** At shutdown: this process routes nothing and has nothing under way any more. */
export async function retireLoad(db: Db, processId: string): Promise<void> {
  await db.$executeRaw`UPDATE "LbProxyLoad" SET "inFlight" = 0, "routable" = false, "waitingSince" = NULL, "updatedAt" = ${NOW_UTC} WHERE "processId" = ${processId}`;
}

/** Removes rows nobody has refreshed for a day. */
export async function purgeOldLoad(db: Db): Promise<number> {
  return db.$executeRaw`DELETE FROM "LbProxyLoad" WHERE "updatedAt" < ${NOW_UTC} - ${LB_LOAD_RETENTION_MS} * interval '1 millisecond'`;
}

const fresh = Prisma.sql`"updatedAt" > ${NOW_UTC} - ${LB_LOAD_STALE_MS} * interval '1 millisecond'`;

/** Requests other processes have under way, per worker of the given endpoints. */
export async function otherProcessesInFlight(
  db: Db,
  processId: string,
  endpointIds: readonly string[],
): Promise<Map<string, number>> {
  if (endpointIds.length === 0) return new Map();
  const rows = await db.$queryRaw<Array<{ workerId: string; n: number }>>`
    SELECT "workerId", sum("inFlight")::int AS n FROM "LbProxyLoad"
    WHERE "endpointId" = ANY(${[...endpointIds]}::text[]) AND "processId" <> ${processId} AND "workerId" <> '' AND "inFlight" > 0 AND ${fresh}
    GROUP BY "workerId"`;
  return new Map(rows.map((r) => [r.workerId, r.n]));
}

export interface LbWorkerLoad {
  /** Requests under way on the worker, over all API processes. */
  inFlight: number;
  /** API processes that may still send it new requests. */
  routedBy: number;
  /** Since the last request on it started or ended; null when it never had one. */
  idleForMs: number | null;
}

export interface LbEndpointLoad {
  /** Requests under way on the endpoint's workers, over all API processes (REQUEST_COUNT). */
  inFlight: number;
  /** Requests waiting for a ready worker (none is routable, for example at zero workers). */
  waiting: number;
  /** How long the oldest of them has waited; null when none waits. */
  oldestWaitMs: number | null;
  workers: Record<string, LbWorkerLoad>;
}

/**
 * The load of a load-balancing endpoint, for its autoscaler: in flight and waiting requests over
 * all API processes, and per worker what it has under way and how long it has been idle.
 */
export async function lbEndpointLoad(db: Db, endpointId: string): Promise<LbEndpointLoad> {
  const rows = await db.$queryRaw<
    Array<{ workerId: string; in_flight: number; routed_by: number; wait_ms: number | null; idle_ms: number | null }>
  >`
    SELECT "workerId",
      (sum("inFlight") FILTER (WHERE ${fresh}))::int AS in_flight,
      (count(*) FILTER (WHERE ${fresh} AND "routable"))::int AS routed_by,
      (extract(epoch FROM ${NOW_UTC} - min("waitingSince") FILTER (WHERE ${fresh} AND "inFlight" > 0)) * 1000)::float8 AS wait_ms,
      (extract(epoch FROM ${NOW_UTC} - max("lastActiveAt")) * 1000)::float8 AS idle_ms
    FROM "LbProxyLoad" WHERE "endpointId" = ${endpointId}
    GROUP BY "workerId"`;
  const load: LbEndpointLoad = { inFlight: 0, waiting: 0, oldestWaitMs: null, workers: {} };
  for (const r of rows) {
    const inFlight = r.in_flight ?? 0;
    if (r.workerId === WAITING) {
      load.waiting = inFlight;
      load.oldestWaitMs = inFlight > 0 && r.wait_ms !== null ? Math.max(0, r.wait_ms) : null;
      continue;
    }
    load.inFlight += inFlight;
    load.workers[r.workerId] = {
      inFlight,
      routedBy: r.routed_by,
      idleForMs: r.idle_ms === null ? null : Math.max(0, r.idle_ms),
    };
  }
  return load;
}

/**
 * What still keeps a draining load-balancing worker: requests under way on it plus API processes
 * that may still send it new ones (each process drops a worker that is no longer IDLE or RUNNING
 * at its next look, within a second). Zero means the container may stop without failing a request.
 */
export async function lbWorkerInFlight(db: Db, workerId: string): Promise<number> {
  const [r] = await db.$queryRaw<Array<{ n: number }>>`
    SELECT coalesce(sum("inFlight" + CASE WHEN "routable" THEN 1 ELSE 0 END), 0)::int AS n
    FROM "LbProxyLoad" WHERE "workerId" = ${workerId} AND ${fresh}`;
  return r?.n ?? 0;
}
