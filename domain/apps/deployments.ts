import type { Deployment } from '../../generated/prisma/client.ts';
import { deployWorkflowId, type DeployWorkflow } from '../../contracts/workflows.ts';
import type { Principal } from '../accounts/auth.ts';
import type { DomainContext } from '../context.ts';
import { rollEndpoints } from '../endpoints/endpoints.ts';
import { DomainError, notFound, validationFailed } from '../errors.ts';
import { newId } from '../shared/ids.ts';
import { validate } from '../shared/validation.ts';
import { findApp, findEnvironment, requireAppAccess } from './apps.ts';
import type { Manifest } from './manifest.ts';
import { checkRuntimeBase } from './runtime-check.ts';
import { runtimeImageOf } from './runtime-images.ts';
import { DeployBuildSchema } from './schemas.ts';
import { liveWorker } from '../workers/status.ts';
import { appEndpointModel, manifestsOf, type AppEndpointModel, type EnvironmentRow } from './models.ts';

/** Deployments: a build put on an environment by the deploy workflow (workflows/deploy.ts). */

/** Where one resource of a deployment stands (what `gantry deploy` prints while it waits). */
export interface ResourceProgress {
  resource: string;
  endpointId: string;
  state: 'pending' | 'waiting' | 'starting' | 'releasing' | 'ready' | 'failed' | 'unchanged';
  /** The release this deployment made, if any. */
  release: number | null;
  workers: { ready: number; starting: number; waiting: number };
  detail: string | null;
}

/** A deployment, its environment's name, the endpoints of its build's resources and where each stands. */
export interface DeploymentModel {
  row: Deployment;
  environment: string;
  endpoints: AppEndpointModel[];
  resources: ResourceProgress[];
}

/**
 * Where each resource of the deployment stands: the release the deployment made on its endpoint
 * (one newer than the deployment's start), and that release's workers.
 */
async function resourceProgress(
  ctx: DomainContext,
  d: Deployment,
  endpoints: Array<{ id: string; appResource: string | null }>,
): Promise<ResourceProgress[]> {
  if (endpoints.length === 0) return [];
  const ids = endpoints.map((e) => e.id);
  const [releases, workers, failures] = await Promise.all([
    ctx.db.release.findMany({
      where: { endpointId: { in: ids }, createdAt: { gte: d.createdAt } },
      orderBy: { version: 'desc' },
      select: { endpointId: true, version: true, status: true, statusReason: true },
    }),
    ctx.db.worker.findMany({
      where: { endpointId: { in: ids }, ...liveWorker },
      select: { endpointId: true, releaseVersion: true, status: true, statusReason: true },
    }),
    // Why the release's workers do not come up: the newest that failed (its image, its start).
    ctx.db.worker.findMany({
      where: { endpointId: { in: ids }, status: 'FAILED', createdAt: { gte: d.createdAt } },
      orderBy: { stoppedAt: 'desc' },
      take: 20,
      select: { endpointId: true, releaseVersion: true, statusReason: true },
    }),
  ]);
  return endpoints.map((e) => {
    const release = releases.find((r) => r.endpointId === e.id);
    const mine = release ? workers.filter((w) => w.endpointId === e.id && w.releaseVersion === release.version) : [];
    const count = { ready: 0, starting: 0, waiting: 0 };
    for (const w of mine) {
      if (w.status === 'PENDING') count.waiting++;
      else if (w.status === 'INITIALIZING') count.starting++;
      else if (w.status === 'IDLE' || w.status === 'RUNNING') count.ready++;
    }
    const reasonOf = (status: string) => mine.find((w) => w.status === status)?.statusReason ?? null;
    const progress = (state: ResourceProgress['state'], detail: string | null): ResourceProgress => ({
      resource: e.appResource ?? e.id,
      endpointId: e.id,
      state,
      release: release?.version ?? null,
      workers: count,
      detail,
    });
    if (!release) return progress(d.status === 'RUNNING' ? 'pending' : 'unchanged', null);
    // Ready once the deployment is: until then it checks that a host can run each resource, and a
    // failed deployment puts every endpoint back.
    if (release.status === 'COMPLETED' && d.status === 'RUNNING')
      return progress('releasing', 'checking that a host can run it');
    if (release.status === 'COMPLETED' && d.status === 'FAILED')
      return progress('unchanged', 'put back: the deployment failed');
    if (release.status === 'COMPLETED') return progress('ready', null);
    if (release.status === 'HALTED' || release.status === 'ROLLED_BACK')
      return progress('failed', release.statusReason ?? null);
    if (release.status === 'SUPERSEDED') return progress('unchanged', 'superseded by a newer release');
    const failed = failures.find((w) => w.endpointId === e.id && w.releaseVersion === release.version);
    const lastFailure = failed ? `its last worker failed: ${failed.statusReason ?? 'no reason recorded'}` : null;
    if (count.waiting > 0) return progress('waiting', reasonOf('PENDING'));
    if (count.starting > 0) return progress('starting', lastFailure ?? reasonOf('INITIALIZING'));
    if (lastFailure && count.ready === 0) return progress('releasing', lastFailure);
    return progress('releasing', null);
  });
}

async function deploymentModel(
  ctx: DomainContext,
  d: Deployment,
  env: EnvironmentRow,
  manifest: Manifest | undefined,
): Promise<DeploymentModel> {
  // A flash build's manifest is flash's own (no resource list): its endpoints are not the deployment's.
  const resources = Array.isArray(manifest?.resources) ? manifest.resources : [];
  const endpoints = env.endpoints
    .filter((e) => e.deletingAt === null && resources.some((r) => r.name === e.appResource))
    .sort((a, b) => (a.appResource ?? '').localeCompare(b.appResource ?? ''));
  return {
    row: d,
    environment: env.name,
    endpoints: endpoints.map((e) =>
      appEndpointModel(
        ctx,
        e,
        resources.find((r) => r.name === e.appResource),
      ),
    ),
    resources: await resourceProgress(ctx, d, endpoints),
  };
}

/** checkRuntimeBase for each runtime image a build's resources run (one per kind: CPU, GPU). */
async function checkRuntimeBases(ctx: DomainContext, manifest: Manifest): Promise<void> {
  const resources = Array.isArray(manifest?.resources) ? manifest.resources : [];
  const images = new Set(
    resources.map((r) => runtimeImageOf(ctx.settings.apps, manifest.pythonVersion, 'gpu' in r.compute)),
  );
  for (const image of images) await checkRuntimeBase(ctx, image, '$.buildId');
}

/**
 * Starts the deploy workflow that puts a READY build on an environment. One deployment per
 * environment at a time (409 while one runs): two would race for the same endpoints.
 */
export async function deployBuild(
  ctx: DomainContext,
  principal: Principal,
  appRef: string,
  envRef: string,
  body: unknown,
): Promise<DeploymentModel> {
  requireAppAccess(principal, 'WRITE');
  const input = validate(DeployBuildSchema, body);
  const app = await findApp(ctx, principal, appRef);
  const env = await findEnvironment(ctx, app, envRef);
  const build = await ctx.db.build.findFirst({ where: { id: input.buildId, appId: app.id } });
  if (!build) throw validationFailed([`$.buildId: no build '${input.buildId}' in the app '${app.name}'`]);
  if (build.status !== 'READY')
    throw validationFailed([`$.buildId: the build is not uploaded yet (finalize it first)`]);
  // A FLASH build is made active at once: flash writes its endpoints itself afterwards (saveEndpoint).
  const flash = build.kind === 'FLASH';
  // A runtime whose base no host can get is said now: with workers at zero the deploy would succeed
  // over endpoints whose jobs wait for workers that never start.
  if (!flash) await checkRuntimeBases(ctx, build.manifest as unknown as Manifest);
  const workflowId = flash ? null : deployWorkflowId(app.name, env.name, build.id);
  const deployment = await ctx.db.$transaction(async (tx) => {
    // The environment row is the lock: deployments of one environment are made one after another.
    await tx.$queryRaw`SELECT id FROM "AppEnvironment" WHERE id = ${env.id} FOR UPDATE`;
    const running = await tx.deployment.findFirst({ where: { environmentId: env.id, status: 'RUNNING' } });
    if (running)
      throw new DomainError('conflict', `a deployment to '${env.name}' is already running (${running.workflowId})`);
    const current = await tx.appEnvironment.findUniqueOrThrow({ where: { id: env.id } });
    // One kind per environment: a gantry deploy removes the endpoints its manifest does not name, and
    // flash's manifest names none in Gantry's form, so the two would undo each other's endpoints.
    const previous = current.currentBuildId
      ? await tx.build.findUnique({ where: { id: current.currentBuildId }, select: { kind: true } })
      : null;
    if (previous && previous.kind !== build.kind)
      throw new DomainError(
        'conflict',
        `the environment '${env.name}' runs a build of ${previous.kind === 'FLASH' ? 'flash' : 'gantry deploy'}; deploy this one to another environment`,
      );
    const data = { id: newId(), environmentId: env.id, buildId: build.id, previousBuildId: current.currentBuildId };
    if (!flash) return tx.deployment.create({ data: { ...data, workflowId } });
    await tx.appEnvironment.update({ where: { id: env.id }, data: { currentBuildId: build.id } });
    return tx.deployment.create({ data: { ...data, workflowId: null, status: 'SUCCEEDED', finishedAt: new Date() } });
  });
  if (!workflowId) {
    const row = await ctx.db.appEnvironment.findUniqueOrThrow({ where: { id: env.id }, include: { endpoints: true } });
    await rollForNewCode(ctx, deployment.previousBuildId, build, row.endpoints);
    return await deploymentModel(ctx, deployment, row, undefined);
  }
  try {
    await ctx.temporal.workflow.start<DeployWorkflow>('deployWorkflow', {
      workflowId,
      taskQueue: ctx.taskQueue,
      args: [{ deploymentId: deployment.id }],
      // The same build deployed again to the same environment is a new run under the same id.
      workflowIdReusePolicy: 'ALLOW_DUPLICATE',
    });
  } catch (err) {
    await ctx.db.deployment.update({
      where: { id: deployment.id },
      data: { status: 'FAILED', error: 'the deploy workflow could not be started', finishedAt: new Date() },
    });
    throw new DomainError(
      'unavailable',
      `the deploy workflow could not be started: ${err instanceof Error ? err.message : String(err)}`,
    );
  }
  const row = await ctx.db.appEnvironment.findUniqueOrThrow({ where: { id: env.id }, include: { endpoints: true } });
  return await deploymentModel(ctx, deployment, row, build.manifest as unknown as Manifest);
}

/**
 * A flash build made active: flash changes the endpoints whose configuration changed itself, and
 * expects every endpoint of the environment to roll when the code did (a new source fingerprint starts a
 * rolling release even if the configuration is unchanged: docs/apps.md "Releases"), since its
 * workers run the environment's active build and only new ones fetch it. A build without a
 * fingerprint is taken as new code.
 */
async function rollForNewCode(
  ctx: DomainContext,
  previousBuildId: string | null,
  build: { id: string; fingerprint: string | null },
  endpoints: Array<{ id: string; deletingAt: Date | null }>,
): Promise<void> {
  if (!previousBuildId || previousBuildId === build.id) return;
  const previous = await ctx.db.build.findUnique({ where: { id: previousBuildId }, select: { fingerprint: true } });
  if (previous?.fingerprint && previous.fingerprint === build.fingerprint) return;
  const live = endpoints.filter((e) => !e.deletingAt).map((e) => e.id);
  await rollEndpoints(ctx, live, { field: 'build', old: previousBuildId, new: build.id });
}

export async function getDeployment(
  ctx: DomainContext,
  principal: Principal,
  appRef: string,
  deploymentId: string,
): Promise<DeploymentModel> {
  requireAppAccess(principal, 'READ');
  const app = await findApp(ctx, principal, appRef);
  const d = await ctx.db.deployment.findFirst({
    where: { id: deploymentId, environment: { appId: app.id } },
    include: { environment: { include: { endpoints: true } } },
  });
  if (!d) throw notFound('deployment');
  const manifest = (await manifestsOf(ctx, [d.buildId])).get(d.buildId);
  const { environment, ...row } = d;
  return await deploymentModel(ctx, row, environment, manifest);
}
