import type { Build } from '../../../generated/prisma/client.ts';
import type { AppEndpointModel, AppModel, DeploymentModel, EnvironmentModel } from '../../../domain/apps/index.ts';
import type { FlashBuild, FlashEndpoint } from '../generated-types.ts';
import type { FlashAppParent, FlashDeploymentParent, FlashEnvironmentParent } from '../parents.ts';

/** flash's types (schema-flash.ts: FlashApp, FlashEnvironment, FlashBuild, FlashDeployment), from the domain's models and rows. */

export function flashEndpointNode({ row: e, url }: AppEndpointModel): FlashEndpoint {
  return { resource: e.appResource ?? e.name, id: e.id, name: e.name, type: e.type, url };
}

export function flashEnvironmentNode({ row: env, state, endpoints }: EnvironmentModel): FlashEnvironmentParent {
  return {
    id: env.id,
    name: env.name,
    createdAt: env.createdAt.toISOString(),
    activeBuildId: env.currentBuildId,
    state,
    endpoints: endpoints.map(flashEndpointNode),
  };
}

export function flashAppNode({ row: app, environments }: AppModel): FlashAppParent {
  return {
    id: app.id,
    name: app.name,
    createdAt: app.createdAt.toISOString(),
    flashEnvironments: environments.map(flashEnvironmentNode),
  };
}

/** A build without its manifest (listings leave it out: it can be large); FlashBuild.manifest reads it when asked. */
export function flashBuildNode(b: Build): FlashBuild {
  return {
    id: b.id,
    objectKey: b.id,
    kind: b.kind,
    sha256: b.sha256,
    size: Number(b.size),
    pythonVersion: b.pythonVersion,
    status: b.status,
    createdAt: b.createdAt.toISOString(),
  };
}

/** A build's manifest: flash's as last sent, gantry deploy's as prepared. */
export const flashManifestOf = (b: Build): Record<string, unknown> | null =>
  (b.manifest as Record<string, unknown> | null) ?? null;

export const flashBuildWithManifest = (b: Build): FlashBuild => ({
  ...flashBuildNode(b),
  manifest: flashManifestOf(b),
});

export function flashDeploymentNode({ row: d }: DeploymentModel): FlashDeploymentParent {
  return { id: d.id, name: d.workflowId, status: d.status, error: d.error, buildId: d.buildId };
}
