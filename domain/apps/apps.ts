import { type App, type AppEnvironment, type NetworkVolume } from '../../generated/prisma/client.ts';
import { type Principal, requireAccountWide, requireScope } from '../accounts/auth.ts';
import type { DomainContext } from '../context.ts';
import { deleteEndpoint } from '../endpoints/endpoints.ts';
import { DomainError, notFound } from '../errors.ts';
import { newId } from '../shared/ids.ts';
import { isUniqueViolation } from '../shared/db.ts';
import { validate } from '../shared/validation.ts';
import { ENVIRONMENTS, appModel, environmentModels, type AppModel, type EnvironmentModel } from './models.ts';
import { CreateAppSchema, CreateEnvironmentSchema } from './schemas.ts';

/**
 * Apps and their environments (docs/apps.md). An app has environments; each environment runs one
 * build at a time on one endpoint per resource of the build's manifest. A build is an uploaded
 * artifact (builds.ts); its bytes live in the blob store, the row holds what the platform needs of
 * it (the manifest, the digest). A deployment puts a build on an environment through the deploy
 * workflow (deployments.ts, workflows/deploy.ts).
 */

/** An app of the caller's account, by id or name. */
export async function findApp(ctx: DomainContext, principal: Principal, ref: string): Promise<App> {
  const app = await ctx.db.app.findFirst({
    where: { accountId: principal.accountId, OR: [{ id: ref }, { name: ref }] },
  });
  if (!app) throw notFound('app');
  return app;
}

export async function findEnvironment(ctx: DomainContext, app: App, ref: string): Promise<AppEnvironment> {
  const env = await ctx.db.appEnvironment.findFirst({ where: { appId: app.id, OR: [{ id: ref }, { name: ref }] } });
  if (!env) throw notFound('environment');
  return env;
}

/** Apps make and remove endpoints of the whole account: keys limited to some endpoints cannot use them. */
export function requireAppAccess(principal: Principal, scope: 'READ' | 'WRITE'): void {
  requireScope(principal, scope);
  requireAccountWide(principal);
}

export async function listApps(ctx: DomainContext, principal: Principal): Promise<AppModel[]> {
  requireAppAccess(principal, 'READ');
  const apps = await ctx.db.app.findMany({
    where: { accountId: principal.accountId },
    include: ENVIRONMENTS,
    orderBy: { createdAt: 'asc' },
  });
  return Promise.all(apps.map((a) => appModel(ctx, a)));
}

export async function getApp(ctx: DomainContext, principal: Principal, ref: string): Promise<AppModel> {
  requireAppAccess(principal, 'READ');
  const app = await findApp(ctx, principal, ref);
  return appModel(ctx, await ctx.db.app.findUniqueOrThrow({ where: { id: app.id }, include: ENVIRONMENTS }));
}

/** Creates an app, with its first environment when one is named (deploy rules 1 and 2). */
export async function createApp(ctx: DomainContext, principal: Principal, body: unknown): Promise<AppModel> {
  requireAppAccess(principal, 'WRITE');
  const input = validate(CreateAppSchema, body);
  try {
    const app = await ctx.db.app.create({
      data: {
        id: newId(),
        accountId: principal.accountId,
        name: input.name,
        ...(input.environment ? { environments: { create: { id: newId(), name: input.environment } } } : {}),
      },
      include: ENVIRONMENTS,
    });
    return appModel(ctx, app);
  } catch (err) {
    if (isUniqueViolation(err)) throw new DomainError('conflict', `an app named '${input.name}' already exists`);
    throw err;
  }
}

/** The app of an environment given by id alone (GraphQL names environments so); 404 unless the caller's. */
export async function environmentOwner(
  ctx: DomainContext,
  principal: Principal,
  environmentId: string,
): Promise<{ appId: string; environmentId: string }> {
  requireAppAccess(principal, 'READ');
  const env = await ctx.db.appEnvironment.findFirst({
    where: { id: environmentId, app: { accountId: principal.accountId } },
  });
  if (!env) throw notFound('environment');
  return { appId: env.appId, environmentId: env.id };
}

export async function listEnvironments(
  ctx: DomainContext,
  principal: Principal,
  appRef: string,
): Promise<EnvironmentModel[]> {
  return (await getApp(ctx, principal, appRef)).environments;
}

export async function getEnvironment(
  ctx: DomainContext,
  principal: Principal,
  appRef: string,
  envRef: string,
): Promise<EnvironmentModel> {
  requireAppAccess(principal, 'READ');
  const app = await findApp(ctx, principal, appRef);
  const env = await findEnvironment(ctx, app, envRef);
  const row = await ctx.db.appEnvironment.findUniqueOrThrow({ where: { id: env.id }, include: { endpoints: true } });
  return (await environmentModels(ctx, [row]))[0]!;
}

/** An environment of the caller's by id alone (GraphQL `flashEnvironment`). */
export async function getEnvironmentById(
  ctx: DomainContext,
  principal: Principal,
  environmentId: string,
): Promise<EnvironmentModel> {
  const owner = await environmentOwner(ctx, principal, environmentId);
  return getEnvironment(ctx, principal, owner.appId, owner.environmentId);
}

/** The network volumes the environment's endpoints mount (an environment has no volumes of its own). */
export async function environmentNetworkVolumes(
  ctx: DomainContext,
  principal: Principal,
  environmentId: string,
): Promise<NetworkVolume[]> {
  const owner = await environmentOwner(ctx, principal, environmentId);
  const endpoints = await ctx.db.endpoint.findMany({
    where: { appEnvironmentId: owner.environmentId, accountId: principal.accountId, deletingAt: null },
    select: { networkVolumeIds: true },
  });
  const ids = [...new Set(endpoints.flatMap((e) => e.networkVolumeIds))];
  if (ids.length === 0) return [];
  const volumes = await ctx.db.networkVolume.findMany({
    where: { id: { in: ids }, accountId: principal.accountId, deletedAt: null },
    orderBy: { createdAt: 'asc' },
  });
  return volumes;
}

export async function createEnvironment(
  ctx: DomainContext,
  principal: Principal,
  appRef: string,
  body: unknown,
): Promise<EnvironmentModel> {
  requireAppAccess(principal, 'WRITE');
  const input = validate(CreateEnvironmentSchema, body);
  const app = await findApp(ctx, principal, appRef);
  try {
    const env = await ctx.db.appEnvironment.create({
      data: { id: newId(), appId: app.id, name: input.name },
      include: { endpoints: true },
    });
    return (await environmentModels(ctx, [env]))[0]!;
  } catch (err) {
    if (isUniqueViolation(err))
      throw new DomainError('conflict', `the app '${app.name}' already has an environment named '${input.name}'`);
    throw err;
  }
}

/**
 * Removes environments and their endpoints. Endpoints go through the ordinary deletion (drained by
 * their workflows), so a running job finishes; the rows of the environment go at once.
 */
async function removeEnvironments(ctx: DomainContext, principal: Principal, envIds: string[]): Promise<void> {
  const running = await ctx.db.deployment.count({ where: { environmentId: { in: envIds }, status: 'RUNNING' } });
  if (running > 0) throw new DomainError('conflict', 'a deployment is still running there; wait for it to finish');
  const endpoints = await ctx.db.endpoint.findMany({
    where: { appEnvironmentId: { in: envIds }, accountId: principal.accountId, deletingAt: null },
    select: { id: true },
  });
  for (const e of endpoints) await deleteEndpoint(ctx, principal, e.id);
  await ctx.db.appEnvironment.deleteMany({ where: { id: { in: envIds } } });
  // As with artifacts: the rows go first, then the bytes nobody can name any more.
  for (const id of envIds) await ctx.blobs.deletePrefix(`sources/${id}/`);
}

export async function deleteEnvironment(
  ctx: DomainContext,
  principal: Principal,
  appRef: string,
  envRef: string,
): Promise<void> {
  requireAppAccess(principal, 'WRITE');
  const app = await findApp(ctx, principal, appRef);
  const env = await findEnvironment(ctx, app, envRef);
  await removeEnvironments(ctx, principal, [env.id]);
}

/** Deletes the app, its environments' endpoints and its builds' artifacts. */
export async function deleteApp(ctx: DomainContext, principal: Principal, appRef: string): Promise<void> {
  requireAppAccess(principal, 'WRITE');
  const app = await findApp(ctx, principal, appRef);
  const envs = await ctx.db.appEnvironment.findMany({ where: { appId: app.id }, select: { id: true } });
  await removeEnvironments(
    ctx,
    principal,
    envs.map((e) => e.id),
  );
  await ctx.db.app.delete({ where: { id: app.id } });
  // The rows are gone first: an artifact nobody can name is only space; a row without its artifact would fail a deploy.
  await ctx.blobs.deletePrefix(`artifacts/${app.id}/`);
}
