import { type App, type AppEnvironment, type Build, type Endpoint } from '../../generated/prisma/client.ts';
import type { DomainContext } from '../context.ts';
import { loadBalancerBaseUrl } from '../endpoints/endpoints.ts';
import { LIVE_ENVIRONMENT, type Manifest, type ManifestResource } from './manifest.ts';
import type { AppEndpointView, AppView, BuildView, EnvironmentView } from './schemas.ts';

/** Apps, environments, builds and their endpoints as the API shows them. */

/** Endpoint names: `<app>-<resource>` in production, `live-<resource>` in live (docs/dev-loop.md), `<app>-<env>-<resource>` elsewhere. */
export const appEndpointName = (app: string, environment: string, resource: string): string =>
  environment === 'production'
    ? `${app}-${resource}`
    : environment === LIVE_ENVIRONMENT
      ? `live-${resource}`
      : `${app}-${environment}-${resource}`;

/** Where a client calls an app endpoint: the queue's job API base, or the load balancer's base URL. */
export function appEndpointUrl(
  ctx: Pick<DomainContext, 'publicUrl' | 'settings'>,
  e: Pick<Endpoint, 'id' | 'type'>,
): string {
  return e.type === 'LOAD_BALANCING'
    ? loadBalancerBaseUrl(e.id, ctx.publicUrl, ctx.settings.lbDomain)
    : `${ctx.publicUrl}/v2/${e.id}`;
}

export function appEndpointView(
  ctx: DomainContext,
  e: Endpoint,
  resource: ManifestResource | undefined,
): AppEndpointView {
  return {
    resource: e.appResource ?? e.name,
    id: e.id,
    name: e.name,
    type: e.type,
    kind: e.type === 'LOAD_BALANCING' ? 'lb' : 'queue',
    url: appEndpointUrl(ctx, e),
    routes: (resource?.routes ?? []).map((r) => ({ method: r.method, path: r.path })),
  };
}

export type EnvironmentRow = AppEnvironment & { endpoints: Endpoint[] };

export async function manifestsOf(ctx: DomainContext, buildIds: Array<string | null>): Promise<Map<string, Manifest>> {
  const ids = [...new Set(buildIds.filter((b): b is string => b !== null))];
  const builds =
    ids.length > 0
      ? await ctx.db.build.findMany({ where: { id: { in: ids } }, select: { id: true, manifest: true } })
      : [];
  return new Map(builds.map((b) => [b.id, b.manifest as unknown as Manifest]));
}

export async function environmentViews(ctx: DomainContext, envs: EnvironmentRow[]): Promise<EnvironmentView[]> {
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
  return envs.map((env) => {
    // Flash's manifests are its own (an object of resources): only a gantry deploy manifest has a list.
    const listed = manifests.get(env.currentBuildId ?? '')?.resources;
    const resources = Array.isArray(listed) ? listed : [];
    const last = latest.find((r) => r.environmentId === env.id);
    const d = last?.status === 'RUNNING' ? last : undefined;
    return {
      id: env.id,
      name: env.name,
      createdAt: env.createdAt.toISOString(),
      currentBuildId: env.currentBuildId,
      state: d ? 'DEPLOYING' : last?.status === 'FAILED' ? 'FAILED' : env.currentBuildId ? 'DEPLOYED' : 'PENDING',
      deploying: d ? { deploymentId: d.id, buildId: d.buildId, startedAt: d.createdAt.toISOString() } : null,
      endpoints: env.endpoints
        .filter((e) => e.deletingAt === null)
        .sort((a, b) => (a.appResource ?? '').localeCompare(b.appResource ?? ''))
        .map((e) =>
          appEndpointView(
            ctx,
            e,
            resources.find((r) => r.name === e.appResource),
          ),
        ),
    };
  });
}

export const ENVIRONMENTS = { environments: { include: { endpoints: true }, orderBy: { createdAt: 'asc' } } } as const;

export async function appView(ctx: DomainContext, app: App & { environments: EnvironmentRow[] }): Promise<AppView> {
  return {
    id: app.id,
    name: app.name,
    createdAt: app.createdAt.toISOString(),
    environments: await environmentViews(ctx, app.environments),
  };
}

export function buildView(b: Build): BuildView {
  return {
    id: b.id,
    kind: b.kind,
    sha256: b.sha256,
    size: Number(b.size),
    fingerprint: b.fingerprint,
    pythonVersion: b.pythonVersion,
    status: b.status,
    createdAt: b.createdAt.toISOString(),
  };
}
