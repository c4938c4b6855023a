import { Type } from 'typebox';
import { Prisma } from '../generated/prisma/client.ts';
import { requireScope, type Principal } from './auth.ts';
import type { DomainContext } from './context.ts';
import { DomainError, forbidden, notFound } from './errors.ts';
import { newId } from './ids.ts';
import { validate } from './validation.ts';

/**
 * Container registry credentials: write-only. The username and password are sealed with the
 * server key into `secret` and never leave the domain except through openRegistryCredential,
 * which the image-pull code calls; no read returns them and nothing logs them.
 */

export const CreateRegistrySchema = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 191, description: 'unique within the account' }),
    username: Type.String({ minLength: 1, maxLength: 1024, description: 'registry user name (write-only)' }),
    password: Type.String({ minLength: 1, maxLength: 16384, description: 'registry password or token (write-only)' }),
  },
  { additionalProperties: false },
);

export const RegistrySchema = Type.Object({ id: Type.String(), name: Type.String() }, { description: 'a registry credential; its secret parts are never returned' });
export const RegistryListSchema = Type.Object({ registries: Type.Array(RegistrySchema) });

export interface RegistryView {
  id: string;
  name: string;
}

export interface RegistryLogin {
  username: string;
  password: string;
}

/**
 * Registries, templates, volumes and keys belong to the whole account: a key limited to some
 * endpoints does not reach them.
 */
export function requireAccountWide(principal: Principal): void {
  if (principal.endpointIds.length > 0) throw forbidden('this key is limited to specific endpoints and does not reach account resources');
}

export const isUniqueViolation = (err: unknown): boolean => err instanceof Prisma.PrismaClientKnownRequestError && err.code === 'P2002';

export async function createRegistry(ctx: DomainContext, principal: Principal, body: unknown): Promise<RegistryView> {
  requireScope(principal, 'WRITE');
  requireAccountWide(principal);
  const input = validate(CreateRegistrySchema, body);
  const login: RegistryLogin = { username: input.username, password: input.password };
  try {
    const row = await ctx.db.registryCredential.create({
      data: { id: newId(), accountId: principal.accountId, name: input.name, secret: new Uint8Array(ctx.secrets.seal(JSON.stringify(login))) },
      select: { id: true, name: true },
    });
    return row;
  } catch (err) {
    if (isUniqueViolation(err)) throw new DomainError('conflict', `a registry credential named '${input.name}' already exists`);
    throw err;
  }
}

export async function listRegistries(ctx: DomainContext, principal: Principal): Promise<RegistryView[]> {
  requireScope(principal, 'READ');
  requireAccountWide(principal);
  return ctx.db.registryCredential.findMany({ where: { accountId: principal.accountId }, select: { id: true, name: true }, orderBy: { createdAt: 'asc' } });
}

export async function getRegistry(ctx: DomainContext, principal: Principal, id: string): Promise<RegistryView> {
  requireScope(principal, 'READ');
  requireAccountWide(principal);
  const row = await ctx.db.registryCredential.findFirst({ where: { id, accountId: principal.accountId }, select: { id: true, name: true } });
  if (!row) throw notFound('registry credential');
  return row;
}

/**
 * Deletes a credential. Refused (400) while a pod or a live endpoint pulls with it: their next
 * worker could not start. Templates only lose the reference.
 */
export async function deleteRegistry(ctx: DomainContext, principal: Principal, id: string): Promise<void> {
  requireScope(principal, 'WRITE');
  requireAccountWide(principal);
  await ctx.db.$transaction(async (tx) => {
    const row = await tx.registryCredential.findFirst({ where: { id, accountId: principal.accountId }, select: { id: true } });
    if (!row) throw notFound('registry credential');
    const pods = await tx.pod.findMany({ where: { registryId: id }, select: { id: true }, take: 5 });
    if (pods.length > 0) throw new DomainError('bad_request', `registry credential is in use by pod ${pods.map((p) => p.id).join(', ')}`);
    const endpoints = await tx.endpoint.findMany({ where: { registryId: id, deletingAt: null }, select: { id: true }, take: 5 });
    if (endpoints.length > 0) throw new DomainError('bad_request', `registry credential is in use by endpoint ${endpoints.map((e) => e.id).join(', ')}`);
    await tx.registryCredential.delete({ where: { id } });
  });
}

/**
 * The login of a credential, for pulling images (password over stdin, never on a command line).
 * Takes the owning account so that one account's worker can never pull with another's secret.
 */
export async function openRegistryCredential(ctx: DomainContext, accountId: string, id: string): Promise<RegistryLogin> {
  const row = await ctx.db.registryCredential.findFirst({ where: { id, accountId }, select: { secret: true } });
  if (!row) throw notFound('registry credential');
  const parsed = JSON.parse(ctx.secrets.open(row.secret)) as RegistryLogin;
  return { username: parsed.username, password: parsed.password };
}

export const UpdateRegistrySchema = Type.Object(
  {
    username: Type.String({ minLength: 1, maxLength: 1024 }),
    password: Type.String({ minLength: 1, maxLength: 16384 }),
  },
  { additionalProperties: false },
);

/** Replaces the login of a credential (GraphQL `updateRegistryAuth`); the name stays. */
export async function updateRegistry(ctx: DomainContext, principal: Principal, id: string, body: unknown): Promise<RegistryView> {
  requireScope(principal, 'WRITE');
  requireAccountWide(principal);
  const input = validate(UpdateRegistrySchema, body);
  const login: RegistryLogin = { username: input.username, password: input.password };
  const { count } = await ctx.db.registryCredential.updateMany({
    where: { id, accountId: principal.accountId },
    data: { secret: new Uint8Array(ctx.secrets.seal(JSON.stringify(login))) },
  });
  if (count === 0) throw notFound('registry credential');
  return getRegistry(ctx, principal, id);
}
