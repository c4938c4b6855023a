import type { DomainContext } from '../context.ts';
import { DomainError, notFound } from '../errors.ts';
import { newSecretId } from '../shared/ids.ts';
import { hashKey, issueApiKey, type Principal, requireAccountWide, requireScope, type Scope } from './auth.ts';

/**
 * `flash login`, the hosted service's sign-in for its deploy tool (docs/graphql.md, "flash login"):
 * flash asks for a request without a key (createFlashAuthRequest), prints a console address with
 * its id, and polls (flashAuthRequestStatus) until a signed-in user approves or denies it there
 * (the page /flash/login, or `gantry flash approve`). The first poll after an approval makes an API
 * key for the approver's account and hands it out once; the request is then CONSUMED.
 *
 * The id is a bearer secret until then (whoever polls with it gets the key): 43 base62 characters
 * (newSecretId), kept only as its SHA-256. A request lives ten minutes. Creating one is
 * unauthenticated, so it is bounded per address (the API's rate limits) and in all (at most
 * MAX_PENDING unexpired at once).
 */

export const FLASH_LOGIN_TTL_MS = 10 * 60_000;
/** Unexpired requests the platform holds at once: past it, new ones wait for old ones to expire. */
export const MAX_PENDING = 1_000;
/** What a flash key may do: the approving key's scopes, never key management (ADMIN). */
const FLASH_KEY_SCOPES: readonly Scope[] = ['READ', 'WRITE', 'RUN'];

export type FlashLoginStatus = 'PENDING' | 'APPROVED' | 'DENIED' | 'EXPIRED' | 'CONSUMED';

/** A flash login request as the domain answers it (its id is the caller's: only its hash is stored). */
export interface FlashLoginModel {
  id: string;
  status: FlashLoginStatus;
  expiresAt: Date;
  createdAt: Date;
  /** The address the request came from: for the approver to recognise it. */
  requesterIp: string;
  /** Only on the one poll that hands the key out. */
  apiKey?: string | null;
}

/** Request ids: 43 letters and digits (newSecretId), as flash puts them into the console address. */
const ID_SHAPE = /^[A-Za-z0-9]{43}$/;

function hashOf(id: string): string {
  if (!ID_SHAPE.test(id)) throw notFound('flash login request');
  return hashKey(id);
}

interface Row {
  status: 'PENDING' | 'APPROVED' | 'DENIED' | 'CONSUMED';
  expiresAt: Date;
  createdAt: Date;
  requesterIp: string;
}

function modelOf(id: string, row: Row): FlashLoginModel {
  const expired = row.expiresAt.getTime() <= Date.now() && (row.status === 'PENDING' || row.status === 'APPROVED');
  return {
    id,
    status: expired ? 'EXPIRED' : row.status,
    expiresAt: row.expiresAt,
    createdAt: row.createdAt,
    requesterIp: row.requesterIp,
  };
}

/** A new request, for flash without a key. The caller has counted it against the address's quota. */
export async function createFlashLogin(ctx: DomainContext, requesterIp: string): Promise<FlashLoginModel> {
  const now = new Date();
  // Requests an hour past their end are of no use to anyone: dropped as new ones come.
  await ctx.db.flashLoginRequest.deleteMany({ where: { expiresAt: { lt: new Date(now.getTime() - 3_600_000) } } });
  const open = await ctx.db.flashLoginRequest.count({ where: { status: 'PENDING', expiresAt: { gt: now } } });
  if (open >= MAX_PENDING)
    throw new DomainError('rate_limited', 'too many flash login requests are waiting; try again in a few minutes');
  const id = newSecretId();
  const row = await ctx.db.flashLoginRequest.create({
    data: {
      idHash: hashKey(id),
      requesterIp: requesterIp.slice(0, 100),
      expiresAt: new Date(now.getTime() + FLASH_LOGIN_TTL_MS),
    },
  });
  return modelOf(id, row);
}

/**
 * A request's state, for flash's poll. An approved one makes its key here, once: the request is
 * marked CONSUMED and the key made in one transaction, so two polls never both get a key, and the
 * key is stored before it is answered.
 */
export async function flashLoginStatus(ctx: DomainContext, id: string): Promise<FlashLoginModel> {
  const idHash = hashOf(id);
  const row = await ctx.db.flashLoginRequest.findUnique({ where: { idHash } });
  if (!row) throw notFound('flash login request');
  const current = modelOf(id, row);
  if (current.status !== 'APPROVED') return current;
  const handedOut = await ctx.db.$transaction(async (tx) => {
    const taken = await tx.flashLoginRequest.updateMany({
      where: { idHash, status: 'APPROVED', expiresAt: { gt: new Date() } },
      data: { status: 'CONSUMED' },
    });
    if (taken.count !== 1) return undefined;
    // The approving key must still be good: revoking it before the poll withdraws the approval.
    const approver = await tx.apiKey.findFirst({
      where: {
        id: row.decidedByKeyId ?? '',
        revokedAt: null,
        OR: [{ expiresAt: null }, { expiresAt: { gt: new Date() } }],
      },
      select: { expiresAt: true },
    });
    if (!approver || !row.accountId) return null;
    const when = new Date().toISOString().slice(0, 16).replace('T', ' ');
    const issued = await issueApiKey(
      tx,
      row.accountId,
      `flash login ${when} from ${row.requesterIp}`.slice(0, 191),
      row.scopes,
      undefined,
      [],
      approver.expiresAt,
    );
    await tx.flashLoginRequest.update({ where: { idHash }, data: { apiKeyId: issued.id } });
    return issued.key;
  });
  if (handedOut === undefined) return flashLoginStatus(ctx, id);
  if (handedOut === null) return { ...current, status: 'DENIED', apiKey: null };
  return { ...current, status: 'APPROVED', apiKey: handedOut };
}

/** What the approval page shows of a request: a signed-in user's read. */
export async function describeFlashLogin(
  ctx: DomainContext,
  principal: Principal,
  id: string,
): Promise<FlashLoginModel> {
  requireScope(principal, 'WRITE');
  requireAccountWide(principal);
  const row = await ctx.db.flashLoginRequest.findUnique({ where: { idHash: hashOf(id) } });
  if (!row) throw notFound('flash login request');
  return modelOf(id, row);
}

/**
 * Approves (the key flash gets is for the principal's account, with its scopes of READ, WRITE and
 * RUN, and no longer than the principal's key lives) or denies a waiting request.
 */
export async function decideFlashLogin(
  ctx: DomainContext,
  principal: Principal,
  id: string,
  approve: boolean,
): Promise<FlashLoginModel> {
  requireScope(principal, 'WRITE');
  requireAccountWide(principal);
  const idHash = hashOf(id);
  const scopes = FLASH_KEY_SCOPES.filter((s) => principal.scopes.has(s) || principal.scopes.has('ADMIN'));
  const decided = await ctx.db.flashLoginRequest.updateMany({
    where: { idHash, status: 'PENDING', expiresAt: { gt: new Date() } },
    data: {
      status: approve ? 'APPROVED' : 'DENIED',
      accountId: principal.accountId,
      decidedByKeyId: principal.keyId,
      scopes: approve ? [...scopes] : [],
    },
  });
  const row = await ctx.db.flashLoginRequest.findUnique({ where: { idHash } });
  if (!row) throw notFound('flash login request');
  if (decided.count !== 1)
    throw new DomainError('conflict', `this flash login request is ${modelOf(id, row).status.toLowerCase()} already`);
  return modelOf(id, row);
}
