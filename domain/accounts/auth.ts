import { createHash } from 'node:crypto';
import type { DomainContext } from '../context.ts';
import type { Db } from '../shared/db.ts';
import { DomainError, forbidden } from '../errors.ts';
import { newApiKey, newId } from '../shared/ids.ts';
import { recordCachesOf, type CachedKey } from '../shared/record-cache.ts';
import type { ApiKeyScope } from '../../generated/prisma/enums.ts';
import type { ApiKey, Prisma } from '../../generated/prisma/client.ts';

export type Scope = ApiKeyScope;

/** Who is calling: resolved from a bearer key once per request, then passed to every domain call. */
export interface Principal {
  accountId: string;
  keyId: string;
  scopes: ReadonlySet<Scope>;
  /** Empty: every endpoint of the account. */
  endpointIds: readonly string[];
  isAdmin: boolean;
  /**
   * The presented key's own record, read in the same statement as the rest (GET /v2/keys/self
   * answers from it without another query); absent for principals not made from a key.
   */
  key?: KeyFacts;
}

export interface KeyFacts {
  name: string;
  /** The key's first characters, as GET /v2/keys lists them. */
  prefix: string;
  /** ISO 8601. */
  createdAt: string;
  expiresAt: string | null;
}

/**
 * Registries, templates, volumes, apps and keys belong to the whole account: a key limited to some
 * endpoints does not reach them.
 */
export function requireAccountWide(principal: Principal): void {
  if (principal.endpointIds.length > 0)
    throw forbidden('this key is limited to specific endpoints and does not reach account resources');
}

export const hashKey = (key: string): string => createHash('sha256').update(key).digest('hex');

const KEY_SHAPE = /^[A-Za-z0-9_\-.]{16,200}$/;

/** Where keys are read: the database, and (in API processes) the job runtime's plain connections and record caches. */
export type KeySource = Pick<DomainContext, 'db' | 'jobs' | 'records'>;

/** Resolves a presented key; throws `unauthenticated` for malformed, unknown, revoked or expired keys. */
export async function authenticate(source: KeySource, presented: string | undefined): Promise<Principal> {
  return (await resolveKey(source, presented)).principal;
}

interface KeyRow {
  id: string;
  accountId: string;
  name: string;
  prefix: string;
  createdAt: Date;
  scopes: Scope[];
  endpointIds: string[];
  revokedAt: Date | null;
  expiresAt: Date | null;
  isAdmin: boolean;
}

/**
 * One indexed statement (the key's hash, joined with its account). On the job runtime's
 * node-postgres pool where the process has one: every key not remembered (and every key, while the
 * process hears no key changes) is read here, and through Prisma that read was most of a request's CPU.
 */
async function readKey(source: KeySource, hash: string): Promise<KeyRow | null> {
  const store = source.jobs?.store;
  if (store) {
    const [row] = await store.rows<KeyRow>(
      `SELECT k.id, k."accountId", k.name, k.prefix, k."createdAt", k.scopes::text[] AS scopes, k."endpointIds", k."revokedAt", k."expiresAt", a."isAdmin"
       FROM "ApiKey" k JOIN "Account" a ON a.id = k."accountId" WHERE k.hash = $1`,
      [hash],
    );
    return row ?? null;
  }
  const key = await source.db.apiKey.findUnique({
    where: { hash },
    include: { account: { select: { isAdmin: true } } },
  });
  return (
    key && {
      id: key.id,
      accountId: key.accountId,
      name: key.name,
      prefix: key.prefix,
      createdAt: key.createdAt,
      scopes: key.scopes,
      endpointIds: key.endpointIds,
      revokedAt: key.revokedAt,
      expiresAt: key.expiresAt,
      isAdmin: key.account.isAdmin,
    }
  );
}

/** The key's principal and expiry; throws as `authenticate` does. */
async function resolveKey(source: KeySource, presented: string | undefined): Promise<CachedKey> {
  if (!presented) throw new DomainError('unauthenticated', 'missing bearer token');
  if (!KEY_SHAPE.test(presented)) throw new DomainError('unauthenticated', 'malformed bearer token');
  const key = await readKey(source, hashKey(presented));
  if (!key || key.revokedAt) throw new DomainError('unauthenticated', 'invalid bearer token');
  if (key.expiresAt && key.expiresAt.getTime() <= Date.now())
    throw new DomainError('unauthenticated', 'expired bearer token');
  return {
    principal: {
      accountId: key.accountId,
      keyId: key.id,
      scopes: new Set(key.scopes),
      endpointIds: key.endpointIds,
      // A key limited to some endpoints is never the platform's administrator (hosts, accounts).
      isAdmin: key.isAdmin && key.scopes.includes('ADMIN') && key.endpointIds.length === 0,
      key: {
        name: key.name,
        prefix: key.prefix,
        createdAt: key.createdAt.toISOString(),
        expiresAt: key.expiresAt?.toISOString() ?? null,
      },
    },
    expiresAt: key.expiresAt?.getTime() ?? null,
  };
}

/**
 * `authenticate` through the process's record cache (`ctx.records`), for the surfaces where a key
 * lookup per request would be most of the cost: the job API and the load-balancing proxy. A revoked
 * key, or one whose scopes or endpoints changed, is seen within the revocation bound
 * (domain/shared/record-cache.ts); an expired key stops at its expiry; failures are never remembered.
 */
export async function authenticateCached(
  ctx: Pick<DomainContext, 'db' | 'records' | 'jobs'>,
  presented: string | undefined,
): Promise<Principal> {
  if (!presented) return authenticate(ctx, presented);
  const keys = recordCachesOf(ctx).keys;
  const hash = hashKey(presented);
  const key = await keys.get(hash, () => resolveKey(ctx, presented));
  if (!key) throw new DomainError('unauthenticated', 'invalid bearer token');
  if (key.expiresAt !== null && key.expiresAt <= Date.now()) {
    keys.delete(hash);
    throw new DomainError('unauthenticated', 'expired bearer token');
  }
  return key.principal;
}

/**
 * authenticateCached's principal when this process remembers the key (unexpired); undefined when it
 * must be read, or failed: authenticateCached then gives the answer.
 */
export function authenticateCachedNow(
  ctx: Pick<DomainContext, 'records'>,
  presented: string | undefined,
): Principal | undefined {
  if (!presented) return undefined;
  const key = recordCachesOf(ctx).keys.peek(hashKey(presented));
  if (!key || (key.expiresAt !== null && key.expiresAt <= Date.now())) return undefined;
  return key.principal;
}

/**
 * A key as current as a read of it, for the management REST API and GraphQL: through the record
 * cache while the process hears every key change (a revocation reaches it at commit, see
 * domain/shared/record-cache.ts), else read from PostgreSQL.
 */
export function authenticateCurrent(source: KeySource, presented: string | undefined): Promise<Principal> {
  return source.records?.followsChanges ? authenticateCached(source, presented) : authenticate(source, presented);
}

export function requireScope(principal: Principal, scope: Scope): void {
  if (!principal.scopes.has(scope) && !principal.scopes.has('ADMIN'))
    throw forbidden(`this key lacks the ${scope.toLowerCase()} scope`);
}

/** Any one of `scopes` (ADMIN holds them all). */
export function requireAnyScope(principal: Principal, scopes: readonly Scope[]): void {
  if (!scopes.some((s) => principal.scopes.has(s)) && !principal.scopes.has('ADMIN'))
    throw forbidden(`this key lacks the ${scopes.map((s) => s.toLowerCase()).join(' or ')} scope`);
}

export function requireEndpointAccess(principal: Principal, endpointId: string): void {
  if (principal.endpointIds.length > 0 && !principal.endpointIds.includes(endpointId))
    throw forbidden('this key does not reach that endpoint');
}

export interface IssuedKey {
  id: string;
  key: string;
  /** The stored row (no key in it: its hash and first characters). */
  row: ApiKey;
}

/** Stores a new key (only its hash and first characters); inside a transaction when `db` is one. */
export async function issueApiKey(
  db: Db | Prisma.TransactionClient,
  accountId: string,
  name: string,
  scopes: Scope[],
  key = newApiKey(),
  endpointIds: string[] = [],
  expiresAt: Date | null = null,
): Promise<IssuedKey> {
  const row = await db.apiKey.create({
    data: {
      id: newId(),
      accountId,
      name,
      prefix: key.slice(0, 10),
      hash: hashKey(key),
      scopes,
      endpointIds,
      expiresAt,
    },
  });
  return { id: row.id, key, row };
}

const ADMIN_EMAIL = 'admin@gantry.local';
const ALL_SCOPES: Scope[] = ['READ', 'WRITE', 'RUN', 'ADMIN'];

/** The platform's admin account, made if missing. */
const adminAccount = (db: Db) =>
  db.account.upsert({
    where: { email: ADMIN_EMAIL },
    update: {},
    create: { id: newId(), email: ADMIN_EMAIL, name: 'admin', isAdmin: true },
  });

/**
 * A new key with every scope for the admin account (made if missing), written straight to the
 * database: the way back in for an operator whose admin keys are all revoked or lost (a revoked
 * GANTRY_ADMIN_API_KEY stays revoked at every start). It needs the machine (the database), never
 * the API: `npm run admin-key` (tooling/admin-key.ts). The key is returned once; only its hash is kept.
 */
export async function mintAdminKey(
  db: Db,
  name = 'admin (npm run admin-key)',
): Promise<{ accountId: string; keyId: string; key: string }> {
  const account = await adminAccount(db);
  const issued = await issueApiKey(db, account.id, name, ALL_SCOPES);
  return { accountId: account.id, keyId: issued.id, key: issued.key };
}

/**
 * Makes sure the admin account exists and has a key. Returns the key only when Gantry generated it
 * now (it is stored hashed and cannot be shown again); a configured key is never returned, so it is
 * never printed. GANTRY_ADMIN_API_KEY pins the key: it is added if no key with that hash exists yet.
 */
export async function ensureAdmin(
  db: Db,
  configuredKey: string | undefined,
): Promise<{ accountId: string; newKey: string | undefined }> {
  const account = await adminAccount(db);
  if (configuredKey) {
    if (!KEY_SHAPE.test(configuredKey))
      throw new Error('GANTRY_ADMIN_API_KEY must be 16-200 characters of letters, digits, "_", "-" or "."');
    const existing = await db.apiKey.findUnique({ where: { hash: hashKey(configuredKey) } });
    if (existing) return { accountId: account.id, newKey: undefined };
    await issueApiKey(db, account.id, 'admin (GANTRY_ADMIN_API_KEY)', ALL_SCOPES, configuredKey);
    return { accountId: account.id, newKey: undefined };
  }
  const count = await db.apiKey.count({ where: { accountId: account.id, revokedAt: null } });
  if (count > 0) return { accountId: account.id, newKey: undefined };
  const issued = await issueApiKey(db, account.id, 'first admin key', ALL_SCOPES);
  return { accountId: account.id, newKey: issued.key };
}
