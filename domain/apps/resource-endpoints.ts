import { createHash } from 'node:crypto';
import { type AppEnvironment, type Build, type Endpoint } from '../../generated/prisma/client.ts';
import type { Principal } from '../accounts/auth.ts';
import type { DomainContext } from '../context.ts';
import { parseCpuInstanceId } from '../catalog/cpu-instances.ts';
import { createEndpoint, loadBalancerBaseUrl, updateEndpoint } from '../endpoints/endpoints.ts';
import { DomainError } from '../errors.ts';
import { LIVE_ENVIRONMENT, type Manifest, type ManifestResource } from './manifest.ts';
import { runtimeImageOf, runtimePackageProblems } from './runtime-images.ts';

/** What a deploy does to endpoints: one endpoint per manifest resource, its name, URL, body, discovery variables and runtime image. */

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

/** Environment variable names of service discovery: `GANTRY_ENDPOINT_<RESOURCE>` (upper case, `-` -> `_`). */
export const discoveryVariable = (resource: string): string =>
  `GANTRY_ENDPOINT_${resource.toUpperCase().replace(/-/g, '_')}`;

/** The port a load-balanced resource's runtime serves its routes and /ping on. */
export const LB_RUNTIME_PORT = 8000;

/**
 * The REST body of one resource's endpoint: the runtime image of the build's Python version, the
 * resource's own settings, and the variables the runtime reads (docs/apps.md). The build digest is
 * among them, so a new artifact is a new release even when nothing else changed (deploy rule 4).
 */
export function resourceEndpointBody(input: {
  app: string;
  environment: string;
  build: { id: string; sha256: string };
  resource: ManifestResource;
  image: string;
  urls: Record<string, string>;
  create: boolean;
  /** Provisioned for live reload (docs/dev-loop.md): the source version the build's `src/` stands for. */
  live?: { sourceVersion: number };
}): Record<string, unknown> {
  const r = input.resource;
  const env: Record<string, string> = {
    ...r.env,
    GANTRY_APP: input.app,
    GANTRY_ENVIRONMENT: input.environment,
    GANTRY_RESOURCE: r.name,
    GANTRY_BUILD_ID: input.build.id,
    GANTRY_ARTIFACT_SHA256: input.build.sha256,
    GANTRY_ENDPOINTS: JSON.stringify(input.urls),
    ...(input.live ? { GANTRY_LIVE_RELOAD: '1', GANTRY_SOURCE_VERSION: String(input.live.sourceVersion) } : {}),
  };
  for (const [name, url] of Object.entries(input.urls)) env[discoveryVariable(name)] = url;
  return {
    ...(input.create
      ? {
          name: appEndpointName(input.app, input.environment, r.name),
          type: r.kind === 'lb' ? 'LOAD_BALANCING' : 'QUEUE_BASED',
        }
      : {}),
    image: input.image,
    env,
    ports: r.kind === 'lb' ? [`${LB_RUNTIME_PORT}/http`] : [],
    ...('gpu' in r.compute ? { gpu: { pools: r.compute.gpu.pools, count: r.compute.gpu.count } } : {}),
    workers: { min: r.workers.min, max: r.workers.max },
    scaling: { type: r.scaler.type, value: r.scaler.value, idleTimeout: r.idleTimeout },
    timeout: r.timeout * 1000,
  };
}

/** One endpoint written for a resource of a build. */
export interface WrittenEndpoint {
  endpointId: string;
  resource: string;
  /** The endpoint's release after the write (a new one when its container configuration changed). */
  version: number;
  /** Made by this write (it did not exist before). */
  created: boolean;
}

/**
 * Creates or updates the endpoints of some resources of a build (what a deploy and a provision
 * share). Ids of new endpoints are chosen (`newEndpointId`) before anything is written, so every
 * discovery URL is known first. `discovery`: `build` lists every resource of the build (a deploy
 * makes them all); `environment` lists the endpoints the environment has plus the written ones (a
 * provision leaves the others as they are). A resource whose endpoint changed kind is refused (409).
 */
export async function writeResourceEndpoints(
  ctx: DomainContext,
  principal: Principal,
  input: {
    app: string;
    environment: Pick<AppEnvironment, 'id' | 'name'>;
    build: Build;
    only?: ReadonlySet<string>;
    discovery: 'build' | 'environment';
    newEndpointId: (resource: string) => string;
    live?: { sourceVersion: number };
  },
): Promise<WrittenEndpoint[]> {
  const { sha256, pythonVersion } = input.build;
  if (input.build.kind !== 'GANTRY' || input.build.status !== 'READY' || !sha256 || !pythonVersion)
    throw new DomainError('conflict', `the build ${input.build.id} is not an uploaded build of gantry deploy`);
  const resources = (input.build.manifest as unknown as Manifest).resources;
  const targets = resources.filter((r) => !input.only || input.only.has(r.name));
  const existing = await ctx.db.endpoint.findMany({
    where: { appEnvironmentId: input.environment.id, deletingAt: null },
  });
  const plan = (input.discovery === 'build' ? resources : targets).map((r) => {
    const current = existing.find((e) => e.appResource === r.name);
    const type = r.kind === 'lb' ? ('LOAD_BALANCING' as const) : ('QUEUE_BASED' as const);
    if (current && current.type !== type) {
      const kind = (t: string) => (t === 'LOAD_BALANCING' ? 'load-balanced' : 'queue-based');
      throw new DomainError(
        'conflict',
        `the resource '${r.name}' changed from ${kind(current.type)} to ${kind(type)}; undeploy it first (gantry undeploy ${current.name})`,
      );
    }
    return { resource: r, id: current?.id ?? input.newEndpointId(r.name), type, exists: current !== undefined };
  });
  const urls: Record<string, string> = {};
  if (input.discovery === 'environment')
    for (const e of existing) if (e.appResource) urls[e.appResource] = appEndpointUrl(ctx, e);
  for (const p of plan) urls[p.resource.name] = appEndpointUrl(ctx, p);
  // Every resource's runtime image must have what the artifact left out as preinstalled.
  const missing = runtimePackageProblems(input.build.manifest as unknown as Manifest, ctx.settings.apps);
  if (missing.length > 0) throw new DomainError('validation', missing.join('; '));
  const written: WrittenEndpoint[] = [];
  for (const p of plan.filter((x) => targets.includes(x.resource))) {
    const r = p.resource;
    const body = (create: boolean) =>
      resourceEndpointBody({
        app: input.app,
        environment: input.environment.name,
        build: { id: input.build.id, sha256 },
        resource: r,
        image: runtimeImageOf(ctx.settings.apps, pythonVersion, 'gpu' in r.compute),
        urls,
        create,
        live: input.live,
      });
    const cpuInstance = 'cpu' in r.compute ? parseCpuInstanceId(r.compute.cpu) : undefined;
    let id = p.id;
    let created = !p.exists;
    if (p.exists) await updateEndpoint(ctx, principal, id, body(false), { cpuInstance });
    else {
      try {
        await createEndpoint(ctx, principal, body(true), {
          cpuInstance,
          id,
          app: { environmentId: input.environment.id, resource: r.name },
        });
      } catch (err) {
        // Another writer made this resource's endpoint in the meantime (two provisions of one resource): update that one.
        const raced =
          err instanceof DomainError && err.kind === 'conflict'
            ? await ctx.db.endpoint.findFirst({
                where: { appEnvironmentId: input.environment.id, appResource: r.name, deletingAt: null },
              })
            : null;
        if (!raced || raced.id === id || raced.type !== p.type) throw err;
        id = raced.id;
        created = false;
        await updateEndpoint(ctx, principal, id, body(false), { cpuInstance });
      }
    }
    const row = await ctx.db.endpoint.findUniqueOrThrow({ where: { id } });
    written.push({ endpointId: id, resource: r.name, version: row.currentReleaseVersion, created });
  }
  return written;
}

/** A digest of the runtime's build context (the Containerfile and the Python package), so a change makes a new image name. */
export function runtimeContextDigest(files: Array<{ path: string; content: Buffer }>, baseImage: string): string {
  const h = createHash('sha256').update(baseImage).update('\0');
  for (const f of [...files].sort((a, b) => a.path.localeCompare(b.path)))
    h.update(f.path).update('\0').update(f.content).update('\0');
  return h.digest('hex').slice(0, 12);
}
