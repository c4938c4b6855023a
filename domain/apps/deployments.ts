import type { Deployment } from '../../generated/prisma/client.ts';
import { deployWorkflowId, type DeployWorkflow } from '../../contracts/workflows.ts';
import type { Principal } from '../accounts/auth.ts';
import type { DomainContext } from '../context.ts';
import { DomainError, notFound, validationFailed } from '../errors.ts';
import { newId } from '../shared/ids.ts';
import { validate } from '../shared/validation.ts';
import { findApp, findEnvironment, requireAppAccess } from './apps.ts';
import type { Manifest } from './manifest.ts';
import { DeployBuildSchema, type DeploymentView } from './schemas.ts';
import { appEndpointView, manifestsOf, type EnvironmentRow } from './views.ts';

/** Deployments: a build put on an environment by the deploy workflow (workflows/deploy.ts). */

function deploymentView(
  ctx: DomainContext,
  d: Deployment,
  env: EnvironmentRow,
  manifest: Manifest | undefined,
): DeploymentView {
  const resources = manifest?.resources ?? [];
  return {
    id: d.id,
    workflowId: d.workflowId,
    status: d.status,
    error: d.error,
    buildId: d.buildId,
    environment: env.name,
    createdAt: d.createdAt.toISOString(),
    finishedAt: d.finishedAt?.toISOString() ?? null,
    endpoints: env.endpoints
      .filter((e) => e.deletingAt === null && resources.some((r) => r.name === e.appResource))
      .sort((a, b) => (a.appResource ?? '').localeCompare(b.appResource ?? ''))
      .map((e) =>
        appEndpointView(
          ctx,
          e,
          resources.find((r) => r.name === e.appResource),
        ),
      ),
  };
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
): Promise<DeploymentView> {
  requireAppAccess(principal, 'WRITE');
  const input = validate(DeployBuildSchema, body);
  const app = await findApp(ctx, principal, appRef);
  const env = await findEnvironment(ctx, app, envRef);
  const build = await ctx.db.build.findFirst({ where: { id: input.buildId, appId: app.id } });
  if (!build) throw validationFailed([`$.buildId: no build '${input.buildId}' in the app '${app.name}'`]);
  if (build.status !== 'READY')
    throw validationFailed([`$.buildId: the build is not uploaded yet (finalize it first)`]);
  const workflowId = deployWorkflowId(app.name, env.name, build.id);
  const deployment = await ctx.db.$transaction(async (tx) => {
    // The environment row is the lock: deployments of one environment are made one after another.
    await tx.$queryRaw`SELECT id FROM "AppEnvironment" WHERE id = ${env.id} FOR UPDATE`;
    const running = await tx.deployment.findFirst({ where: { environmentId: env.id, status: 'RUNNING' } });
    if (running)
      throw new DomainError('conflict', `a deployment to '${env.name}' is already running (${running.workflowId})`);
    const current = await tx.appEnvironment.findUniqueOrThrow({ where: { id: env.id } });
    return tx.deployment.create({
      data: {
        id: newId(),
        environmentId: env.id,
        buildId: build.id,
        previousBuildId: current.currentBuildId,
        workflowId,
      },
    });
  });
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
  return deploymentView(ctx, deployment, row, build.manifest as unknown as Manifest);
}

export async function getDeployment(
  ctx: DomainContext,
  principal: Principal,
  appRef: string,
  deploymentId: string,
): Promise<DeploymentView> {
  requireAppAccess(principal, 'READ');
  const app = await findApp(ctx, principal, appRef);
  const d = await ctx.db.deployment.findFirst({
    where: { id: deploymentId, environment: { appId: app.id } },
    include: { environment: { include: { endpoints: true } } },
  });
  if (!d) throw notFound('deployment');
  const manifest = (await manifestsOf(ctx, [d.buildId])).get(d.buildId);
  return deploymentView(ctx, d, d.environment, manifest);
}
