import { Type } from 'typebox';
import { Prisma } from '../../generated/prisma/client.ts';
import { requireAccountWide, requireScope, type Principal } from '../accounts/auth.ts';
import { isUniqueViolation } from '../shared/db.ts';
import type { DomainContext } from '../context.ts';
import { DomainError, notFound, validationFailed } from '../errors.ts';
import { newId } from '../shared/ids.ts';
import { validate } from '../shared/validation.ts';
import { RegistryHostSchema, registryOf } from '../containers/fields.ts';

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
    registry: Type.Optional(RegistryHostSchema),
  },
  { additionalProperties: false },
);

/** A credential as the domain answers it: everything but its sealed secret. */
export interface RegistryCredentialFacts {
  id: string;
  name: string;
  /** The registry host it is bound to; null: made before binding existed, refused until bound. */
  registry: string | null;
}

const WITHOUT_SECRET = { id: true, name: true, registry: true } as const;

export interface RegistryLogin {
  username: string;
  password: string;
}

/**
 * Where a new credential may be sent: the `registry` given, else its name when the name is a
 * registry host (`ghcr.io`), else docker.io. Fixed when created: a credential is never sent to a
 * registry chosen later by whoever names an image.
 */
function boundRegistry(name: string, given: string | undefined): string {
  if (given) return given.toLowerCase();
  const host = name.trim().toLowerCase();
  return /^[a-z0-9.-]+(:[0-9]+)?$/.test(host) && (host.includes('.') || host.includes(':') || host === 'localhost')
    ? host
    : 'docker.io';
}

/**
 * What is wrong with pulling `image` with credential `registryId` of the account: unknown, or
 * bound to another registry (the password would go to whoever runs the image's registry).
 */
export async function registryBindingProblems(
  db: DomainContext['db'] | Prisma.TransactionClient,
  accountId: string,
  registryId: string,
  image: string | undefined,
  path: string,
): Promise<string[]> {
  const row = await db.registryCredential.findFirst({
    where: { id: registryId, accountId },
    select: { registry: true },
  });
  if (!row) return [`${path}: no registry credential '${registryId}'`];
  if (row.registry === null)
    return [
      `${path}: registry credential '${registryId}' is not bound to a registry yet; give its registry together with its login (updateRegistryAuth)`,
    ];
  if (image !== undefined && registryOf(image) !== row.registry) {
    return [
      `${path}: registry credential '${registryId}' is bound to ${row.registry}, and the image '${image}' is on ${registryOf(image)}`,
    ];
  }
  return [];
}

export async function createRegistry(
  ctx: DomainContext,
  principal: Principal,
  body: unknown,
): Promise<RegistryCredentialFacts> {
  requireScope(principal, 'WRITE');
  requireAccountWide(principal);
  const input = validate(CreateRegistrySchema, body);
  const login: RegistryLogin = { username: input.username, password: input.password };
  try {
    const row = await ctx.db.registryCredential.create({
      data: {
        id: newId(),
        accountId: principal.accountId,
        name: input.name,
        registry: boundRegistry(input.name, input.registry),
        secret: new Uint8Array(ctx.secrets.seal(JSON.stringify(login))),
      },
      select: WITHOUT_SECRET,
    });
    return row;
  } catch (err) {
    if (isUniqueViolation(err))
      throw new DomainError('conflict', `a registry credential named '${input.name}' already exists`);
    throw err;
  }
}

export async function listRegistries(ctx: DomainContext, principal: Principal): Promise<RegistryCredentialFacts[]> {
  requireScope(principal, 'READ');
  requireAccountWide(principal);
  return ctx.db.registryCredential.findMany({
    where: { accountId: principal.accountId },
    select: WITHOUT_SECRET,
    orderBy: { createdAt: 'asc' },
  });
}

export async function getRegistry(
  ctx: DomainContext,
  principal: Principal,
  id: string,
): Promise<RegistryCredentialFacts> {
  requireScope(principal, 'READ');
  requireAccountWide(principal);
  const row = await ctx.db.registryCredential.findFirst({
    where: { id, accountId: principal.accountId },
    select: WITHOUT_SECRET,
  });
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
    const row = await tx.registryCredential.findFirst({
      where: { id, accountId: principal.accountId },
      select: { id: true },
    });
    if (!row) throw notFound('registry credential');
    const pods = await tx.pod.findMany({ where: { registryId: id }, select: { id: true }, take: 5 });
    if (pods.length > 0)
      throw new DomainError('bad_request', `registry credential is in use by pod ${pods.map((p) => p.id).join(', ')}`);
    const endpoints = await tx.endpoint.findMany({
      where: { registryId: id, deletingAt: null },
      select: { id: true },
      take: 5,
    });
    if (endpoints.length > 0)
      throw new DomainError(
        'bad_request',
        `registry credential is in use by endpoint ${endpoints.map((e) => e.id).join(', ')}`,
      );
    await tx.registryCredential.delete({ where: { id } });
  });
}

/**
 * The login of a credential, for pulling images (password over stdin, never on a command line).
 * Takes the owning account so that one account's worker can never pull with another's secret.
 */
export async function openRegistryCredential(
  ctx: Pick<DomainContext, 'db' | 'secrets'>,
  accountId: string,
  id: string,
): Promise<RegistryLogin & { registry: string | null }> {
  const row = await ctx.db.registryCredential.findFirst({
    where: { id, accountId },
    select: { secret: true, registry: true },
  });
  if (!row) throw notFound('registry credential');
  const parsed = JSON.parse(ctx.secrets.open(row.secret)) as RegistryLogin;
  return { username: parsed.username, password: parsed.password, registry: row.registry };
}

export const UpdateRegistrySchema = Type.Object(
  {
    username: Type.String({ minLength: 1, maxLength: 1024 }),
    password: Type.String({ minLength: 1, maxLength: 16384 }),
    registry: Type.Optional(RegistryHostSchema),
  },
  { additionalProperties: false },
);

/**
 * Images that pull with credential `id` from somewhere other than `registry` (live endpoints,
 * templates, pods): binding or moving the credential there would leave them unable to pull.
 */
async function usersElsewhere(tx: Prisma.TransactionClient, id: string, registry: string): Promise<string[]> {
  const [endpoints, templates, pods] = await Promise.all([
    tx.endpoint.findMany({ where: { registryId: id, deletingAt: null }, select: { id: true, image: true } }),
    tx.template.findMany({ where: { registryId: id }, select: { id: true, imageName: true } }),
    tx.pod.findMany({ where: { registryId: id }, select: { id: true, imageName: true } }),
  ]);
  const users = [
    ...endpoints.map((e) => ['endpoint', e.id, e.image]),
    ...templates.map((t) => ['template', t.id, t.imageName]),
    ...pods.map((p) => ['pod', p.id, p.imageName]),
  ];
  return users
    .filter(([, , image]) => registryOf(image!) !== registry)
    .slice(0, 10)
    .map(
      ([kind, userId, image]) =>
        `$.registry: ${kind} ${userId} pulls '${image}' from ${registryOf(image!)} with this credential; change its image or credential first`,
    );
}

/**
 * Replaces the login of a credential (GraphQL `updateRegistryAuth`, REST PATCH); the name stays.
 * Binding it to a registry, or moving it to another, takes the whole login again, so nobody
 * redirects a password they do not know; and it is refused while images elsewhere use it.
 */
export async function updateRegistry(
  ctx: DomainContext,
  principal: Principal,
  id: string,
  body: unknown,
): Promise<RegistryCredentialFacts> {
  requireScope(principal, 'WRITE');
  requireAccountWide(principal);
  const input = validate(UpdateRegistrySchema, body);
  const login: RegistryLogin = { username: input.username, password: input.password };
  const registry = input.registry?.toLowerCase();
  await ctx.db.$transaction(async (tx) => {
    const row = await tx.registryCredential.findFirst({
      where: { id, accountId: principal.accountId },
      select: { registry: true },
    });
    if (!row) throw notFound('registry credential');
    if (registry !== undefined && registry !== row.registry) {
      const problems = await usersElsewhere(tx, id, registry);
      if (problems.length > 0) throw validationFailed(problems);
    }
    await tx.registryCredential.update({
      where: { id },
      data: {
        secret: new Uint8Array(ctx.secrets.seal(JSON.stringify(login))),
        ...(registry !== undefined ? { registry } : {}),
      },
    });
  });
  return getRegistry(ctx, principal, id);
}
