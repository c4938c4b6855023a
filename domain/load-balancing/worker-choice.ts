/** Which worker takes a request: the workers that may take one, and the least loaded of them. */
import type { Db } from '../shared/db.ts';
import { originOf } from './shared.ts';

export interface LbCandidate {
  id: string;
  /** Requests under way on the worker: this process's plus the other processes' last published. */
  outstanding: number;
}

/**
 * The index of the worker with the fewest outstanding requests; ties go round-robin from `cursor`,
 * so that equal workers share the load instead of the first one taking it all. -1 when empty.
 */
export function chooseWorker(candidates: readonly LbCandidate[], cursor: number): number {
  const n = candidates.length;
  if (n === 0) return -1;
  let best = -1;
  let bestLoad = Infinity;
  for (let k = 0; k < n; k++) {
    const i = (((cursor + k) % n) + n) % n;
    const load = candidates[i]!.outstanding;
    if (load < bestLoad) {
      best = i;
      bestLoad = load;
    }
  }
  return best;
}

export interface LbWorkerAddress {
  id: string;
  endpointId: string;
  /** `http://host:port` of the worker's PORT. */
  origin: string;
  /** Host and port, for health checks (PORT_HEALTH is the same port). */
  host: string;
  port: number;
}

/**
 * The workers of the given endpoints that may take requests: ready (IDLE or RUNNING: their health
 * check passed), with a host and the host port mapped to their PORT. Draining workers are not
 * among them: they finish what they have and take nothing new.
 */
export async function routableWorkers(db: Db, endpointIds: readonly string[]): Promise<LbWorkerAddress[]> {
  if (endpointIds.length === 0) return [];
  const rows = await db.$queryRaw<Array<{ id: string; endpointId: string; address: string; hostPort: number }>>`
    SELECT w.id, w."endpointId", h.address, w."hostPort"
    FROM "Worker" w JOIN "Host" h ON h.id = w."hostId"
    WHERE w."endpointId" = ANY(${[...endpointIds]}::text[]) AND w.status IN ('IDLE', 'RUNNING') AND w."hostPort" IS NOT NULL
    ORDER BY w."readyAt" NULLS LAST, w.id`;
  return rows.map((r) => ({
    id: r.id,
    endpointId: r.endpointId,
    origin: originOf(r.address, r.hostPort),
    host: r.address,
    port: r.hostPort,
  }));
}
