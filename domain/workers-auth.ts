import type { Db } from './db.ts';
import { hashKey } from './auth.ts';
import { DomainError, forbidden } from './errors.ts';
import { randomString } from './ids.ts';

/**
 * Worker credentials: each worker container gets its own key (RUNPOD_AI_API_KEY), sent back on every
 * worker-protocol call as `Authorization: <key>` (no `Bearer`). Only its SHA-256 is stored, in
 * Worker.credentialHash.
 */

const BASE62 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

/** The worker as the protocol sees it once its key checked out. */
export interface WorkerIdentity {
  workerId: string;
  endpointId: string;
  /** False once the worker is draining, unhealthy, stopped or asked to exit: it gets no new jobs. */
  acceptsJobs: boolean;
}

/**
 * Gives the worker a fresh credential and returns it (shown once; only its hash is kept). Creates
 * the Worker row when it does not exist yet (status INITIALIZING); an existing row keeps its state.
 * A second call replaces the key: the old one stops working within the cache lifetime below.
 */
export async function registerWorkerCredential(db: Db, input: { workerId: string; endpointId: string }): Promise<string> {
  const key = `gntr_wk_${randomString(40, BASE62)}`;
  const credentialHash = hashKey(key);
  const existing = await db.worker.findUnique({ where: { id: input.workerId }, select: { endpointId: true } });
  if (existing && existing.endpointId !== input.endpointId) {
    throw new DomainError('conflict', `worker ${input.workerId} belongs to another endpoint`);
  }
  await db.worker.upsert({
    where: { id: input.workerId },
    update: { credentialHash },
    create: { id: input.workerId, endpointId: input.endpointId, credentialHash, status: 'INITIALIZING' },
  });
  workerCache.clear();
  return key;
}

/**
 * Positive answers are cached briefly: the worker hot path (take, done, ping) then costs no
 * database round trip for authentication. A revoked or drained worker is noticed within this time.
 */
const CACHE_MS = 5_000;
const workerCache = new Map<string, { identity: WorkerIdentity; until: number }>();

/** `Authorization: <key>` as the worker SDK sends it; `Bearer <key>` is accepted too. */
export function workerKeyOf(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const m = /^(?:Bearer\s+)?(\S+)\s*$/i.exec(header.trim());
  return m?.[1];
}

/** Resolves a worker key; 401 when unknown, 403 when the path names another worker or endpoint. */
export async function authenticateWorker(db: Db, key: string | undefined, workerId: string, endpointId: string): Promise<WorkerIdentity> {
  if (!key) throw new DomainError('unauthenticated', 'missing worker credential');
  const hash = hashKey(key);
  const now = Date.now();
  let cached = workerCache.get(hash);
  if (!cached || cached.until <= now) {
    const w = await db.worker.findUnique({
      where: { credentialHash: hash },
      select: { id: true, endpointId: true, status: true, desiredStatus: true },
    });
    if (!w || !w.endpointId) {
      workerCache.delete(hash);
      throw new DomainError('unauthenticated', 'invalid worker credential');
    }
    const acceptsJobs = w.desiredStatus === 'RUNNING' && !['DRAINING', 'STOPPED', 'FAILED', 'UNHEALTHY'].includes(w.status);
    cached = { identity: { workerId: w.id, endpointId: w.endpointId, acceptsJobs }, until: now + CACHE_MS };
    if (workerCache.size > 10_000) workerCache.clear();
    workerCache.set(hash, cached);
  }
  const identity = cached.identity;
  if (identity.workerId !== workerId) throw forbidden('this credential belongs to another worker');
  if (identity.endpointId !== endpointId) throw forbidden('this worker belongs to another endpoint');
  return identity;
}

/** Forgets cached answers (after a worker's state changed in this process). */
export function forgetWorkerCredentials(): void {
  workerCache.clear();
}
