import type { DomainContext } from '../context.ts';
import type { Db } from '../shared/db.ts';
import { hashKey } from '../accounts/auth.ts';
import { DomainError, forbidden } from '../errors.ts';
import { randomString } from '../shared/ids.ts';
import { recordCachesOf, type RecordCaches } from '../shared/record-cache.ts';
import { NO_JOB_WORKER_STATUSES } from './status.ts';

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
  /** False once the worker is draining, unhealthy, stopped, standing by or asked to exit: it gets no new jobs. */
  acceptsJobs: boolean;
}

/**
 * Gives the worker a fresh credential and returns it (shown once; only its hash is kept). Creates
 * the Worker row when it does not exist yet (status INITIALIZING); an existing row keeps its state.
 * A second call replaces the key: the old one stops working within the revocation bound
 * (domain/shared/record-cache.ts).
 */
export async function registerWorkerCredential(
  db: Db,
  input: { workerId: string; endpointId: string },
): Promise<string> {
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
  return key;
}

/** `Authorization: <key>` as the worker SDK sends it; `Bearer <key>` is accepted too. */
export function workerKeyOf(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const m = /^(?:Bearer\s+)?(\S+)\s*$/i.exec(header.trim());
  return m?.[1];
}

/**
 * Resolves a worker key; 401 when unknown, 403 when the path names another worker or endpoint.
 * Found identities are remembered in the process's record cache (`ctx.records`): the worker hot path
 * (take, done, ping) then costs no database round trip for authentication. A revoked credential or
 * a drained, stopped or unhealthy worker is noticed within the revocation bound
 * (domain/shared/record-cache.ts); unknown keys are never remembered.
 */
export async function authenticateWorker(
  ctx: Pick<DomainContext, 'db' | 'records'>,
  key: string | undefined,
  workerId: string,
  endpointId: string,
): Promise<WorkerIdentity> {
  if (!key) throw new DomainError('unauthenticated', 'missing worker credential');
  const hash = hashKey(key);
  const identity = await recordCachesOf(ctx).workers.get(hash, async () => {
    const w = await ctx.db.worker.findUnique({
      where: { credentialHash: hash },
      select: { id: true, endpointId: true, status: true, desiredStatus: true },
    });
    if (!w || !w.endpointId) return undefined;
    const acceptsJobs =
      w.desiredStatus === 'RUNNING' && !(NO_JOB_WORKER_STATUSES as readonly string[]).includes(w.status);
    return { workerId: w.id, endpointId: w.endpointId, acceptsJobs };
  });
  if (!identity) throw new DomainError('unauthenticated', 'invalid worker credential');
  if (identity.workerId !== workerId) throw forbidden('this credential belongs to another worker');
  if (identity.endpointId !== endpointId) throw forbidden('this worker belongs to another endpoint');
  return identity;
}

/** Forgets what `records` remembers of the worker (after its state changed in this process): its next call reads it again. */
export function forgetWorker(records: RecordCaches, workerId: string): void {
  records.workers.forget((identity) => identity.workerId === workerId);
}
