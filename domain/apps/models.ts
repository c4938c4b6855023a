import type { App, AppEnvironment, Deployment, Endpoint } from '../../generated/prisma/client.ts';
import type { DomainContext } from '../context.ts';
import type { Manifest, ManifestResource } from './manifest.ts';
import { appEndpointUrl } from './resource-endpoints.ts';

/**
 * Apps, environments and their endpoints as the domain answers them: the rows and what is read or
 * derived from others (the manifest resource of each endpoint, its URL, the environment's state).
 * REST (api/routes/shapes/app.ts) and GraphQL (api/graphql/shapes/app.ts) each map them.
 */

/** An endpoint of an environment, with the resource of the environment's build it runs (none for a flash build's). */
export interface AppEndpointModel {
  row: Endpoint;
  resource: ManifestResource | undefined;
  /** Where a client calls it (appEndpointUrl). */
  url: string;
}

/** PENDING: nothing deployed yet; DEPLOYING: a deployment runs; DEPLOYED: the last one succeeded; FAILED: it failed. */
export type EnvironmentState = 'PENDING' | 'DEPLOYING' | 'DEPLOYED' | 'FAILED';

export interface EnvironmentModel {
  row: AppEnvironment;
  state: EnvironmentState;
  /** The deployment under way, if one is. */
  deploying: Pick<Deployment, 'id' | 'buildId' | 'createdAt'> | null;
  /** Those not being deleted, by resource name. */
  endpoints: AppEndpointModel[];
}

export interface AppModel {
  row: App;
  environments: EnvironmentModel[];
}

export type EnvironmentRow = AppEnvironment & { endpoints: Endpoint[] };

export function appEndpointModel(
  ctx: Pick<DomainContext, 'publicUrl' | 'settings'>,
  row: Endpoint,
  resource: ManifestResource | undefined,
): AppEndpointModel {
  return { row, resource, url: appEndpointUrl(ctx, row) };
}

export async function manifestsOf(ctx: DomainContext, buildIds: Array<string | null>): Promise<Map<string, Manifest>> {
  const ids = [...new Set(buildIds.filter((b): b is string => b !== null))];
  const builds =
    ids.length > 0
      ? await ctx.db.build.findMany({ where: { id: { in: ids } }, select: { id: true, manifest: true } })
      : [];
  return new Map(builds.map((b) => [b.id, b.manifest as unknown as Manifest]));
}

export async function environmentModels(ctx: DomainContext, envs: EnvironmentRow[]): Promise<EnvironmentModel[]> {
  const manifests = await manifestsOf(
    ctx,
    envs.map((e) => e.currentBuildId),
  );
  // Each environment's newest deployment: the one under way, if any, else the one that decided its state.
  const latest =
    envs.length > 0
      ? await ctx.db.deployment.findMany({
          where: { environmentId: { in: envs.map((e) => e.id) } },
          orderBy: { createdAt: 'desc' },
          distinct: ['environmentId'],
          select: { id: true, environmentId: true, buildId: true, createdAt: true, status: true },
        })
      : [];
  return envs.map(({ endpoints, ...row }) => {
    // Flash's manifests are its own (an object of resources): only a gantry deploy manifest has a list.
    const listed = manifests.get(row.currentBuildId ?? '')?.resources;
    const resources = Array.isArray(listed) ? listed : [];
    const last = latest.find((r) => r.environmentId === row.id);
    const d = last?.status === 'RUNNING' ? last : undefined;
    return {
      row,
      state: d ? 'DEPLOYING' : last?.status === 'FAILED' ? 'FAILED' : row.currentBuildId ? 'DEPLOYED' : 'PENDING',
      deploying: d ? { id: d.id, buildId: d.buildId, createdAt: d.createdAt } : null,
      endpoints: endpoints
        .filter((e) => e.deletingAt === null)
        .sort((a, b) => (a.appResource ?? '').localeCompare(b.appResource ?? ''))
        .map((e) =>
          appEndpointModel(
            ctx,
            e,
            resources.find((r) => r.name === e.appResource),
          ),
        ),
    };
  });
}

export const ENVIRONMENTS = { environments: { include: { endpoints: true }, orderBy: { createdAt: 'asc' } } } as const;

export async function appModel(
  ctx: DomainContext,
  { environments, ...row }: App & { environments: EnvironmentRow[] },
): Promise<AppModel> {
  return { row, environments: await environmentModels(ctx, environments) };
}
