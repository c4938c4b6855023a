import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { Type, type Static } from 'typebox';
import { Prisma, type App, type AppEnvironment, type Build, type Deployment, type Endpoint } from '../../generated/prisma/client.ts';
import { deployWorkflowId, type DeployWorkflow } from '../../contracts/workflows.ts';
import { requireScope, type Principal } from '../accounts/auth.ts';
import type { DomainContext } from '../context.ts';
import { CPU_FLAVORS, parseCpuInstanceId, cpuInstanceProblems } from '../catalog/cpu-instances.ts';
import { createEndpoint, deleteEndpoint, loadBalancerBaseUrl, updateEndpoint } from '../endpoints/endpoints.ts';
import { DomainError, notFound, validationFailed } from '../errors.ts';
import { GPU_POOLS } from '../catalog/gpu-pools.ts';
import { newId } from '../shared/ids.ts';
import { isUniqueViolation, requireAccountWide } from '../registries/registries.ts';
import { signUrl, verifySignedUrl } from '../blobs/signed-urls.ts';
import { validate } from '../shared/validation.ts';
import type { WorkerIdentity } from '../workers/credentials.ts';

/**
 * Apps, environments, builds and deployments: what `gantry deploy` makes (docs/apps.md). An app
 * has environments; each environment runs one build at a time on one endpoint per resource of the
 * build's manifest. A build is an uploaded artifact; its bytes live in the blob store, the row
 * holds what the platform needs of it (the manifest, the digest). A deployment puts a build on an
 * environment through the deploy workflow (workflows/deploy.ts).
 */

// ---------------------------------------------------------------- limits and names

/** Uncompressed content of an artifact (spec "Limits": deployment size 1.5GB); the compressed upload is at most this too. */
export const MAX_ARTIFACT_BYTES = 1_500_000_000;
/** Each resource's endpoint carries one discovery variable per resource: the endpoint env limit (100) bounds both. */
export const MAX_RESOURCES = 40;
export const MAX_RESOURCE_ENV = 40;
export const PYTHON_VERSIONS = ['3.10', '3.11', '3.12', '3.13'] as const;
const PythonVersionSchema = Type.Union([Type.Literal('3.10'), Type.Literal('3.11'), Type.Literal('3.12'), Type.Literal('3.13')]);
export const UPLOAD_URL_TTL_SEC = 3600;
export const DOWNLOAD_URL_TTL_SEC = 3600;
/** A live environment's source upload (docs/dev-loop.md "Source reload"): the project's files only, no dependencies. */
export const MAX_SOURCE_BYTES = 50 * 1024 * 1024;
/** The environment whose endpoints `gantry dev` provisions one resource at a time (docs/dev-loop.md). */
export const LIVE_ENVIRONMENT = 'live';

const NAME_PATTERN = '^[a-z0-9][a-z0-9-]{0,39}$';
const NameSchema = Type.String({ pattern: NAME_PATTERN, description: 'lower-case letters, digits and -, at most 40' });
const RESOURCE_PATTERN = '^[a-z][a-z0-9-]{0,39}$';
const Sha256Schema = Type.String({ pattern: '^[0-9a-f]{64}$' });
/** Variables Gantry sets itself (the runtime's and the worker protocol's): a resource may not set them. */
const RESERVED_ENV = /^(GANTRY_|RUNPOD_|PORT$|PORT_HEALTH$)/;

// ---------------------------------------------------------------- the manifest (docs/apps.md)

const ShortText = (maxLength: number) => Type.String({ maxLength });
const Nullable = <T extends ReturnType<typeof Type.String>>(t: T) => Type.Optional(Type.Union([t, Type.Null()]));

const ParamSchema = Type.Object({
  name: ShortText(200),
  annotation: Nullable(ShortText(500)),
  required: Type.Boolean(),
  default: Type.Optional(Type.Unknown()),
});
const RouteSchema = Type.Object({
  method: Type.Union([Type.Literal('GET'), Type.Literal('POST'), Type.Literal('PUT'), Type.Literal('PATCH'), Type.Literal('DELETE')]),
  path: Type.String({ pattern: "^/[A-Za-z0-9._~!$&'()*+,;=:@/{}-]*$", maxLength: 200 }),
  function: ShortText(200),
  summary: Nullable(ShortText(1000)),
});
const ComputeSchema = Type.Union([
  Type.Object({ gpu: Type.Object({ pools: Type.Array(ShortText(64), { minItems: 1, maxItems: 16 }), count: Type.Integer({ minimum: 1, maximum: 8 }) }) }, { additionalProperties: false }),
  Type.Object({ cpu: ShortText(64) }, { additionalProperties: false }),
]);
const ResourceSchema = Type.Object({
  name: Type.String({ pattern: RESOURCE_PATTERN }),
  kind: Type.Union([Type.Literal('queue'), Type.Literal('lb')]),
  file: ShortText(500),
  line: Type.Optional(Type.Integer({ minimum: 0 })),
  function: Type.Optional(ShortText(200)),
  object: Type.Optional(ShortText(200)),
  summary: Nullable(ShortText(1000)),
  params: Type.Optional(Type.Array(ParamSchema, { maxItems: 100 })),
  routes: Type.Optional(Type.Array(RouteSchema, { maxItems: 100 })),
  compute: ComputeSchema,
  workers: Type.Object({ min: Type.Integer({ minimum: 0, maximum: 1000 }), max: Type.Integer({ minimum: 0, maximum: 1000 }) }),
  idleTimeout: Type.Integer({ minimum: 0, maximum: 86_400 }),
  scaler: Type.Object({ type: Type.Union([Type.Literal('QUEUE_DELAY'), Type.Literal('REQUEST_COUNT')]), value: Type.Number({ minimum: 0.5, maximum: 10_000 }) }),
  timeout: Type.Integer({ minimum: 1, maximum: 86_400, description: 'seconds' }),
  env: Type.Record(Type.String({ pattern: '^[A-Za-z_][A-Za-z0-9_]*$', maxLength: 128 }), Type.String({ maxLength: 32 * 1024, pattern: '^[^\\r\\n]*$' }), { maxProperties: MAX_RESOURCE_ENV }),
  dependencies: Type.Array(ShortText(500), { maxItems: 500 }),
  pythonVersion: Type.Optional(Type.Union([PythonVersionSchema, Type.Null()])),
});
export type ManifestResource = Static<typeof ResourceSchema>;

export const ManifestSchema = Type.Object({
  format: Type.Literal(1),
  pythonVersion: PythonVersionSchema,
  fingerprint: Sha256Schema,
  resources: Type.Array(ResourceSchema, { minItems: 1, maxItems: MAX_RESOURCES }),
  excluded: Type.Optional(Type.Array(ShortText(200), { maxItems: 1000 })),
  createdAt: Type.Optional(ShortText(64)),
});
export type Manifest = Static<typeof ManifestSchema>;

/** Rules the schema cannot say: unique names, known pools and CPU sizes, routes where they belong. */
function manifestProblems(m: Manifest): string[] {
  const problems: string[] = [];
  const seen = new Set<string>();
  m.resources.forEach((r, i) => {
    const at = `$.manifest.resources[${i}]`;
    if (seen.has(r.name)) problems.push(`${at}.name: '${r.name}' is declared twice`);
    seen.add(r.name);
    if (r.workers.min > r.workers.max) problems.push(`${at}.workers: min (${r.workers.min}) is above max (${r.workers.max})`);
    if (r.kind === 'lb' && (r.routes ?? []).length === 0) problems.push(`${at}.routes: a load-balanced endpoint needs at least one route`);
    if (r.kind === 'queue' && !r.function) problems.push(`${at}.function: a queue-based endpoint names its function`);
    for (const name of Object.keys(r.env)) if (RESERVED_ENV.test(name)) problems.push(`${at}.env.${name}: names starting with GANTRY_ or RUNPOD_ (and PORT, PORT_HEALTH) are set by Gantry`);
    if ('gpu' in r.compute) {
      for (const pool of r.compute.gpu.pools) if (!GPU_POOLS.some((p) => p.id === pool)) problems.push(`${at}.compute.gpu.pools: unknown GPU pool '${pool}' (known: ${GPU_POOLS.map((p) => p.id).join(', ')})`);
    } else {
      const cpu = parseCpuInstanceId(r.compute.cpu);
      if (!cpu) problems.push(`${at}.compute.cpu: '${r.compute.cpu}' is not a CPU instance id (flavor-vcpus-memoryGb, flavors: ${CPU_FLAVORS.map((f) => f.id).join(', ')})`);
      else for (const p of cpuInstanceProblems(cpu)) problems.push(`${at}.compute.cpu: ${p}`);
    }
  });
  return problems;
}

// ---------------------------------------------------------------- views

export const AppEndpointSchema = Type.Object({
  resource: Type.String(),
  id: Type.String(),
  name: Type.String(),
  type: Type.Union([Type.Literal('QUEUE_BASED'), Type.Literal('LOAD_BALANCING')]),
  kind: Type.Union([Type.Literal('queue'), Type.Literal('lb')]),
  url: Type.String({ description: 'queue-based: {run_url}/v2/{id} (add /run or /runsync); load-balanced: the base URL of its routes' }),
  routes: Type.Array(Type.Object({ method: Type.String(), path: Type.String() })),
});
export type AppEndpointView = Static<typeof AppEndpointSchema>;

export const EnvironmentSchema = Type.Object({
  id: Type.String(),
  name: Type.String(),
  createdAt: Type.String({ format: 'date-time' }),
  currentBuildId: Type.Union([Type.String(), Type.Null()]),
  endpoints: Type.Array(AppEndpointSchema),
});
export type EnvironmentView = Static<typeof EnvironmentSchema>;

export const AppSchema = Type.Object({
  id: Type.String(),
  name: Type.String(),
  createdAt: Type.String({ format: 'date-time' }),
  environments: Type.Array(EnvironmentSchema),
});
export type AppView = Static<typeof AppSchema>;
export const AppListSchema = Type.Object({ apps: Type.Array(AppSchema) });
export const EnvironmentListSchema = Type.Object({ environments: Type.Array(EnvironmentSchema) });

export const BuildSchema = Type.Object({
  id: Type.String(),
  sha256: Type.String(),
  size: Type.Integer(),
  fingerprint: Type.String(),
  pythonVersion: Type.String(),
  status: Type.Union([Type.Literal('UPLOADING'), Type.Literal('READY')]),
  createdAt: Type.String({ format: 'date-time' }),
});
export type BuildView = Static<typeof BuildSchema>;

export const PreparedUploadSchema = Type.Object({
  build: BuildSchema,
  upload: Type.Object({
    url: Type.String({ description: 'PUT the artifact bytes here; the URL itself is the credential' }),
    method: Type.Literal('PUT'),
    headers: Type.Record(Type.String(), Type.String()),
    expiresAt: Type.String({ format: 'date-time' }),
  }),
});
export type PreparedUploadView = Static<typeof PreparedUploadSchema>;

export const DeploymentSchema = Type.Object({
  id: Type.String(),
  workflowId: Type.String(),
  status: Type.Union([Type.Literal('RUNNING'), Type.Literal('SUCCEEDED'), Type.Literal('FAILED')]),
  error: Type.Union([Type.String(), Type.Null()]),
  buildId: Type.String(),
  environment: Type.String(),
  createdAt: Type.String({ format: 'date-time' }),
  finishedAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  endpoints: Type.Array(AppEndpointSchema),
});
export type DeploymentView = Static<typeof DeploymentSchema>;

export const CreateAppSchema = Type.Object({ name: NameSchema, environment: Type.Optional(NameSchema) }, { additionalProperties: false });
export const CreateEnvironmentSchema = Type.Object({ name: NameSchema }, { additionalProperties: false });
export const PrepareUploadSchema = Type.Object(
  {
    sha256: Sha256Schema,
    size: Type.Integer({ minimum: 1, maximum: MAX_ARTIFACT_BYTES, description: 'bytes of the gzip file' }),
    manifest: ManifestSchema,
  },
  { additionalProperties: false },
);
export const DeployBuildSchema = Type.Object({ buildId: Type.String({ minLength: 1, maxLength: 64 }) }, { additionalProperties: false });

/** Endpoint names: `<app>-<resource>` in production, `live-<resource>` in live (the spec's prefix), `<app>-<env>-<resource>` elsewhere. */
export const appEndpointName = (app: string, environment: string, resource: string): string =>
  environment === 'production' ? `${app}-${resource}` : environment === LIVE_ENVIRONMENT ? `live-${resource}` : `${app}-${environment}-${resource}`;

/** Where a client calls an app endpoint: the queue's job API base, or the load balancer's base URL. */
export function appEndpointUrl(ctx: Pick<DomainContext, 'publicUrl' | 'settings'>, e: Pick<Endpoint, 'id' | 'type'>): string {
  return e.type === 'LOAD_BALANCING' ? loadBalancerBaseUrl(e.id, ctx.publicUrl, ctx.settings.lbDomain) : `${ctx.publicUrl}/v2/${e.id}`;
}

function appEndpointView(ctx: DomainContext, e: Endpoint, resource: ManifestResource | undefined): AppEndpointView {
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

type EnvironmentRow = AppEnvironment & { endpoints: Endpoint[] };

async function manifestsOf(ctx: DomainContext, buildIds: Array<string | null>): Promise<Map<string, Manifest>> {
  const ids = [...new Set(buildIds.filter((b): b is string => b !== null))];
  const builds = ids.length > 0 ? await ctx.db.build.findMany({ where: { id: { in: ids } }, select: { id: true, manifest: true } }) : [];
  return new Map(builds.map((b) => [b.id, b.manifest as unknown as Manifest]));
}

async function environmentViews(ctx: DomainContext, envs: EnvironmentRow[]): Promise<EnvironmentView[]> {
  const manifests = await manifestsOf(ctx, envs.map((e) => e.currentBuildId));
  return envs.map((env) => {
    const resources = manifests.get(env.currentBuildId ?? '')?.resources ?? [];
    return {
      id: env.id,
      name: env.name,
      createdAt: env.createdAt.toISOString(),
      currentBuildId: env.currentBuildId,
      endpoints: env.endpoints
        .filter((e) => e.deletingAt === null)
        .sort((a, b) => (a.appResource ?? '').localeCompare(b.appResource ?? ''))
        .map((e) => appEndpointView(ctx, e, resources.find((r) => r.name === e.appResource))),
    };
  });
}

const ENVIRONMENTS = { environments: { include: { endpoints: true }, orderBy: { createdAt: 'asc' } } } as const;

async function appView(ctx: DomainContext, app: App & { environments: EnvironmentRow[] }): Promise<AppView> {
  return { id: app.id, name: app.name, createdAt: app.createdAt.toISOString(), environments: await environmentViews(ctx, app.environments) };
}

export function buildView(b: Build): BuildView {
  return { id: b.id, sha256: b.sha256, size: Number(b.size), fingerprint: b.fingerprint, pythonVersion: b.pythonVersion, status: b.status, createdAt: b.createdAt.toISOString() };
}

// ---------------------------------------------------------------- apps and environments

/** An app of the caller's account, by id or name. */
async function findApp(ctx: DomainContext, principal: Principal, ref: string): Promise<App> {
  const app = await ctx.db.app.findFirst({ where: { accountId: principal.accountId, OR: [{ id: ref }, { name: ref }] } });
  if (!app) throw notFound('app');
  return app;
}

async function findEnvironment(ctx: DomainContext, app: App, ref: string): Promise<AppEnvironment> {
  const env = await ctx.db.appEnvironment.findFirst({ where: { appId: app.id, OR: [{ id: ref }, { name: ref }] } });
  if (!env) throw notFound('environment');
  return env;
}

/** Apps make and remove endpoints of the whole account: keys limited to some endpoints cannot use them. */
function requireAppAccess(principal: Principal, scope: 'READ' | 'WRITE'): void {
  requireScope(principal, scope);
  requireAccountWide(principal);
}

export async function listApps(ctx: DomainContext, principal: Principal): Promise<AppView[]> {
  requireAppAccess(principal, 'READ');
  const apps = await ctx.db.app.findMany({ where: { accountId: principal.accountId }, include: ENVIRONMENTS, orderBy: { createdAt: 'asc' } });
  return Promise.all(apps.map((a) => appView(ctx, a)));
}

export async function getApp(ctx: DomainContext, principal: Principal, ref: string): Promise<AppView> {
  requireAppAccess(principal, 'READ');
  const app = await findApp(ctx, principal, ref);
  return appView(ctx, await ctx.db.app.findUniqueOrThrow({ where: { id: app.id }, include: ENVIRONMENTS }));
}

/** Creates an app, with its first environment when one is named (deploy rules 1 and 2). */
export async function createApp(ctx: DomainContext, principal: Principal, body: unknown): Promise<AppView> {
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
    return appView(ctx, app);
  } catch (err) {
    if (isUniqueViolation(err)) throw new DomainError('conflict', `an app named '${input.name}' already exists`);
    throw err;
  }
}

/** The app of an environment given by id alone (GraphQL names environments so); 404 unless the caller's. */
export async function environmentOwner(ctx: DomainContext, principal: Principal, environmentId: string): Promise<{ appId: string; environmentId: string }> {
  requireAppAccess(principal, 'READ');
  const env = await ctx.db.appEnvironment.findFirst({ where: { id: environmentId, app: { accountId: principal.accountId } } });
  if (!env) throw notFound('environment');
  return { appId: env.appId, environmentId: env.id };
}

export async function listEnvironments(ctx: DomainContext, principal: Principal, appRef: string): Promise<EnvironmentView[]> {
  return (await getApp(ctx, principal, appRef)).environments;
}

export async function getEnvironment(ctx: DomainContext, principal: Principal, appRef: string, envRef: string): Promise<EnvironmentView> {
  requireAppAccess(principal, 'READ');
  const app = await findApp(ctx, principal, appRef);
  const env = await findEnvironment(ctx, app, envRef);
  const row = await ctx.db.appEnvironment.findUniqueOrThrow({ where: { id: env.id }, include: { endpoints: true } });
  return (await environmentViews(ctx, [row]))[0]!;
}

export async function createEnvironment(ctx: DomainContext, principal: Principal, appRef: string, body: unknown): Promise<EnvironmentView> {
  requireAppAccess(principal, 'WRITE');
  const input = validate(CreateEnvironmentSchema, body);
  const app = await findApp(ctx, principal, appRef);
  try {
    const env = await ctx.db.appEnvironment.create({ data: { id: newId(), appId: app.id, name: input.name }, include: { endpoints: true } });
    return (await environmentViews(ctx, [env]))[0]!;
  } catch (err) {
    if (isUniqueViolation(err)) throw new DomainError('conflict', `the app '${app.name}' already has an environment named '${input.name}'`);
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
  const endpoints = await ctx.db.endpoint.findMany({ where: { appEnvironmentId: { in: envIds }, accountId: principal.accountId, deletingAt: null }, select: { id: true } });
  for (const e of endpoints) await deleteEndpoint(ctx, principal, e.id);
  await ctx.db.appEnvironment.deleteMany({ where: { id: { in: envIds } } });
  // As with artifacts: the rows go first, then the bytes nobody can name any more.
  for (const id of envIds) await ctx.blobs.deletePrefix(`sources/${id}/`);
}

export async function deleteEnvironment(ctx: DomainContext, principal: Principal, appRef: string, envRef: string): Promise<void> {
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
  await removeEnvironments(ctx, principal, envs.map((e) => e.id));
  await ctx.db.app.delete({ where: { id: app.id } });
  // The rows are gone first: an artifact nobody can name is only space; a row without its artifact would fail a deploy.
  await ctx.blobs.deletePrefix(`artifacts/${app.id}/`);
}

// ---------------------------------------------------------------- builds (artifact upload)

const artifactKey = (appId: string, buildId: string): string => `artifacts/${appId}/${buildId}.tar.gz`;
const uploadPath = (buildId: string): string => `/v2/artifacts/${buildId}/upload`;
const downloadPath = (buildId: string): string => `/v2/artifacts/${buildId}`;

/**
 * Records a build and answers where to PUT its bytes: a presigned URL of the S3 store when one is
 * configured (the bytes then never pass through the API), else the API's own signed upload route.
 */
export async function prepareArtifactUpload(ctx: DomainContext, principal: Principal, appRef: string, body: unknown): Promise<PreparedUploadView> {
  requireAppAccess(principal, 'WRITE');
  const input = validate(PrepareUploadSchema, body);
  const app = await findApp(ctx, principal, appRef);
  const problems = manifestProblems(input.manifest);
  if (problems.length > 0) throw validationFailed(problems);
  const id = newId();
  const build = await ctx.db.build.create({
    data: {
      id,
      appId: app.id,
      sha256: input.sha256,
      size: BigInt(input.size),
      fingerprint: input.manifest.fingerprint,
      pythonVersion: input.manifest.pythonVersion,
      manifest: input.manifest as unknown as Prisma.InputJsonValue,
      blobKey: artifactKey(app.id, id),
    },
  });
  const expiresAt = new Date(Date.now() + UPLOAD_URL_TTL_SEC * 1000);
  const direct = ctx.blobs.presignedPut ? await ctx.blobs.presignedPut(build.blobKey, { expiresInSec: UPLOAD_URL_TTL_SEC, contentType: 'application/gzip' }) : undefined;
  const upload = direct ?? { url: signUrl(ctx.publicUrl, uploadPath(id), ctx.signingKey, expiresAt, 'artifact-upload'), headers: { 'content-type': 'application/gzip' } };
  return { build: buildView(build), upload: { ...upload, method: 'PUT', expiresAt: expiresAt.toISOString() } };
}

/** The signed upload route's check: the build exists, still takes bytes, and the URL is genuine and fresh. */
export async function checkArtifactUpload(ctx: DomainContext, buildId: string, path: string, query: Record<string, unknown>): Promise<Build> {
  const verdict = verifySignedUrl(path, query, ctx.signingKey, 'artifact-upload', new Date());
  if (verdict !== 'ok') throw new DomainError('unauthenticated', verdict === 'expired' ? 'the upload URL has expired; prepare the upload again' : 'the upload URL is not valid');
  const build = await ctx.db.build.findUnique({ where: { id: buildId } });
  if (!build) throw notFound('build');
  if (build.status !== 'UPLOADING') throw new DomainError('conflict', 'this build is already uploaded');
  return build;
}

/** Stores the bytes of an upload checked with checkArtifactUpload; at most the declared size is read. */
export async function receiveArtifactUpload(ctx: DomainContext, build: Build, body: Readable): Promise<{ size: number; sha256: string }> {
  return ctx.blobs.put(build.blobKey, body, { contentType: 'application/gzip' });
}

/** Checks the stored bytes against what was declared and makes the build deployable. */
export async function finalizeArtifactUpload(ctx: DomainContext, principal: Principal, appRef: string, buildId: string): Promise<BuildView> {
  requireAppAccess(principal, 'WRITE');
  const app = await findApp(ctx, principal, appRef);
  const build = await ctx.db.build.findFirst({ where: { id: buildId, appId: app.id } });
  if (!build) throw notFound('build');
  if (build.status === 'READY') return buildView(build);
  const stat = await ctx.blobs.stat(build.blobKey);
  if (!stat) throw new DomainError('validation', 'Request validation failed.', ['$: nothing was uploaded for this build yet']);
  const problems: string[] = [];
  if (stat.size !== Number(build.size)) problems.push(`$: the upload has ${stat.size} bytes, the build declared ${build.size}`);
  else {
    const digest = await ctx.blobs.sha256(build.blobKey);
    if (digest !== build.sha256) problems.push(`$: the upload's sha256 is ${digest}, the build declared ${build.sha256}`);
  }
  if (problems.length > 0) {
    await ctx.blobs.delete(build.blobKey);
    throw validationFailed(problems);
  }
  return buildView(await ctx.db.build.update({ where: { id: build.id }, data: { status: 'READY' } }));
}

/** A URL a worker container fetches its artifact from, signed for a while; it must be the worker's own account's build. */
export async function artifactDownloadUrl(ctx: Pick<DomainContext, 'db' | 'signingKey'>, base: string, accountId: string, buildId: string): Promise<{ url: string; sha256: string } | undefined> {
  const build = await ctx.db.build.findFirst({ where: { id: buildId, status: 'READY', app: { accountId } } });
  if (!build) return undefined;
  const expiresAt = new Date(Date.now() + DOWNLOAD_URL_TTL_SEC * 1000);
  return { url: signUrl(base, downloadPath(build.id), ctx.signingKey, expiresAt, 'artifact-download'), sha256: build.sha256 };
}

/** The signed download route: the artifact's bytes, or a clear refusal. */
export async function openArtifactDownload(ctx: DomainContext, buildId: string, path: string, query: Record<string, unknown>): Promise<{ body: Readable; size: number; sha256: string }> {
  const verdict = verifySignedUrl(path, query, ctx.signingKey, 'artifact-download', new Date());
  if (verdict !== 'ok') throw new DomainError('unauthenticated', verdict === 'expired' ? 'the download URL has expired' : 'the download URL is not valid');
  const build = await ctx.db.build.findUnique({ where: { id: buildId } });
  const blob = build?.status === 'READY' ? await ctx.blobs.get(build.blobKey) : null;
  if (!build || !blob) throw notFound('artifact');
  return { ...blob, sha256: build.sha256 };
}

// ---------------------------------------------------------------- deployments

function deploymentView(ctx: DomainContext, d: Deployment, env: EnvironmentRow, manifest: Manifest | undefined): DeploymentView {
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
      .map((e) => appEndpointView(ctx, e, resources.find((r) => r.name === e.appResource))),
  };
}

/**
 * Starts the deploy workflow that puts a READY build on an environment. One deployment per
 * environment at a time (409 while one runs): two would race for the same endpoints.
 */
export async function deployBuild(ctx: DomainContext, principal: Principal, appRef: string, envRef: string, body: unknown): Promise<DeploymentView> {
  requireAppAccess(principal, 'WRITE');
  const input = validate(DeployBuildSchema, body);
  const app = await findApp(ctx, principal, appRef);
  const env = await findEnvironment(ctx, app, envRef);
  const build = await ctx.db.build.findFirst({ where: { id: input.buildId, appId: app.id } });
  if (!build) throw validationFailed([`$.buildId: no build '${input.buildId}' in the app '${app.name}'`]);
  if (build.status !== 'READY') throw validationFailed([`$.buildId: the build is not uploaded yet (finalize it first)`]);
  const workflowId = deployWorkflowId(app.name, env.name, build.id);
  const deployment = await ctx.db.$transaction(async (tx) => {
    // The environment row is the lock: deployments of one environment are made one after another.
    await tx.$queryRaw`SELECT id FROM "AppEnvironment" WHERE id = ${env.id} FOR UPDATE`;
    const running = await tx.deployment.findFirst({ where: { environmentId: env.id, status: 'RUNNING' } });
    if (running) throw new DomainError('conflict', `a deployment to '${env.name}' is already running (${running.workflowId})`);
    const current = await tx.appEnvironment.findUniqueOrThrow({ where: { id: env.id } });
    return tx.deployment.create({ data: { id: newId(), environmentId: env.id, buildId: build.id, previousBuildId: current.currentBuildId, workflowId } });
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
    await ctx.db.deployment.update({ where: { id: deployment.id }, data: { status: 'FAILED', error: 'the deploy workflow could not be started', finishedAt: new Date() } });
    throw new DomainError('unavailable', `the deploy workflow could not be started: ${err instanceof Error ? err.message : String(err)}`);
  }
  const row = await ctx.db.appEnvironment.findUniqueOrThrow({ where: { id: env.id }, include: { endpoints: true } });
  return deploymentView(ctx, deployment, row, build.manifest as unknown as Manifest);
}

export async function getDeployment(ctx: DomainContext, principal: Principal, appRef: string, deploymentId: string): Promise<DeploymentView> {
  requireAppAccess(principal, 'READ');
  const app = await findApp(ctx, principal, appRef);
  const d = await ctx.db.deployment.findFirst({ where: { id: deploymentId, environment: { appId: app.id } }, include: { environment: { include: { endpoints: true } } } });
  if (!d) throw notFound('deployment');
  const manifest = (await manifestsOf(ctx, [d.buildId])).get(d.buildId);
  return deploymentView(ctx, d, d.environment, manifest);
}

// ---------------------------------------------------------------- live endpoints (docs/dev-loop.md)

export const ProvisionResourceSchema = DeployBuildSchema;
export const SourceUploadSchema = Type.Object({
  version: Type.Integer({ minimum: 1, description: 'counts up from 1 per environment' }),
  sha256: Type.String({ description: 'sha256 (hex) of the uploaded bytes' }),
});
export type SourceUploadView = Static<typeof SourceUploadSchema>;
export const WorkerSourceSchema = Type.Object({
  version: Type.Integer({ minimum: 1 }),
  sha256: Type.String(),
  url: Type.String({ description: 'signed, valid one hour; served on the worker-facing listener too' }),
});
export type WorkerSourceView = Static<typeof WorkerSourceSchema>;

/**
 * Makes or updates one resource's endpoint from a READY build, as a deploy would make it but without
 * the deploy workflow, and with live reload on (`GANTRY_LIVE_RELOAD`, `GANTRY_SOURCE_VERSION`).
 * Other endpoints stay as they are; the environment moves to the build. Several may run at once for
 * one environment: each lists, for discovery, the endpoints there when it read them and its own.
 */
export async function provisionResource(
  ctx: DomainContext,
  principal: Principal,
  appRef: string,
  envRef: string,
  resourceName: string,
  body: unknown,
): Promise<{ created: boolean; endpoint: AppEndpointView }> {
  requireAppAccess(principal, 'WRITE');
  const input = validate(ProvisionResourceSchema, body);
  const app = await findApp(ctx, principal, appRef);
  const env = await findEnvironment(ctx, app, envRef);
  const build = await ctx.db.build.findFirst({ where: { id: input.buildId, appId: app.id } });
  if (!build) throw validationFailed([`$.buildId: no build '${input.buildId}' in the app '${app.name}'`]);
  if (build.status !== 'READY') throw validationFailed([`$.buildId: the build is not uploaded yet (finalize it first)`]);
  const resources = (build.manifest as unknown as Manifest).resources;
  const resource = resources.find((r) => r.name === resourceName);
  if (!resource) throw new DomainError('not_found', `the build ${build.id} has no resource '${resourceName}' (its resources: ${resources.map((r) => r.name).join(', ')})`);
  // A deploy writes every endpoint of the environment: the two would overwrite each other.
  const running = await ctx.db.deployment.findFirst({ where: { environmentId: env.id, status: 'RUNNING' } });
  if (running) throw new DomainError('conflict', `a deployment to '${env.name}' is running (${running.workflowId}); provision once it has finished`);
  // Read now, not with `env` above: an upload may have landed since; the build's src/ stands for this version.
  const { sourceVersion } = await ctx.db.appEnvironment.findUniqueOrThrow({ where: { id: env.id }, select: { sourceVersion: true } });
  const [written] = await writeResourceEndpoints(ctx, principal, {
    app: app.name,
    environment: env,
    build,
    only: new Set([resource.name]),
    discovery: 'environment',
    newEndpointId: () => newId(),
    live: { sourceVersion },
  });
  await ctx.db.appEnvironment.update({ where: { id: env.id }, data: { currentBuildId: build.id } });
  const row = await ctx.db.endpoint.findUniqueOrThrow({ where: { id: written!.endpointId } });
  return { created: written!.created, endpoint: appEndpointView(ctx, row, resource) };
}

const sourceKey = (envId: string, version: number): string => `sources/${envId}/${version}.tar.gz`;
const sourceDownloadPath = (envId: string, version: number): string => `/v2/sources/${envId}/${version}`;

/**
 * Reads at most `limit` bytes of `body`; one more is `tooLarge()`, which ends the stream's consumer
 * (the blob store's pipeline). Lazy: nothing is read before the consumer asks.
 */
export function readAtMost(body: Readable, limit: number, tooLarge: () => Error): Readable {
  async function* chunks(): AsyncGenerator<Buffer> {
    let seen = 0;
    for await (const chunk of body) {
      seen += (chunk as Buffer).length;
      if (seen > limit) throw tooLarge();
      yield chunk as Buffer;
    }
  }
  return Readable.from(chunks(), { objectMode: false });
}

/**
 * Stores a new source version of an environment (a gzip tar of the project's source files). The
 * bytes go to a key of their own first; then one UPDATE ... RETURNING numbers the version and
 * records its digest, so concurrent uploads get distinct versions and the row never names bytes
 * that are half there. The bytes then move to their version's key; until they have, workers are
 * told of nothing new (sourceForWorker checks that the object exists).
 */
export async function uploadSource(ctx: DomainContext, principal: Principal, appRef: string, envRef: string, body: Readable): Promise<SourceUploadView> {
  requireAppAccess(principal, 'WRITE');
  const app = await findApp(ctx, principal, appRef);
  const env = await findEnvironment(ctx, app, envRef);
  const incoming = `sources/${env.id}/incoming-${newId()}.tar.gz`;
  const tooLarge = () => new DomainError('validation', 'Request validation failed.', [`$: the source upload is larger than ${MAX_SOURCE_BYTES} bytes (send source files only; dependencies belong in the build)`]);
  let stored: { size: number; sha256: string };
  try {
    stored = await ctx.blobs.put(incoming, readAtMost(body, MAX_SOURCE_BYTES, tooLarge), { contentType: 'application/gzip' });
    if (stored.size === 0) throw validationFailed(['$: the body is empty; send a gzip tar of the source files']);
    const gzip = await ctx.blobs.get(incoming, { start: 0, end: 1 });
    const magic = gzip ? await streamBytes(gzip.body) : Buffer.alloc(0);
    if (magic[0] !== 0x1f || magic[1] !== 0x8b) throw validationFailed(['$: the body is not gzip data; send a gzip tar of the source files']);
  } catch (err) {
    await ctx.blobs.delete(incoming).catch(() => {});
    throw err;
  }
  try {
    // The old key comes back from the same statement: the version this one replaces.
    const rows = await ctx.db.$queryRaw<Array<{ version: number; previous: string | null }>>`
      UPDATE "AppEnvironment" e
         SET "sourceVersion" = e."sourceVersion" + 1,
             "sourceSha256" = ${stored.sha256},
             "sourceBlobKey" = 'sources/' || e.id || '/' || (e."sourceVersion" + 1) || '.tar.gz'
        FROM (SELECT id, "sourceBlobKey" FROM "AppEnvironment" WHERE id = ${env.id} FOR UPDATE) old
       WHERE e.id = old.id
   RETURNING e."sourceVersion" AS version, old."sourceBlobKey" AS previous`;
    const row = rows[0];
    if (!row) throw notFound('environment');
    const key = sourceKey(env.id, row.version);
    const copy = await ctx.blobs.get(incoming);
    if (!copy) throw new DomainError('unavailable', 'the uploaded source vanished from the blob store; upload it again');
    await ctx.blobs.put(key, copy.body, { contentType: 'application/gzip' });
    // Only the newest version is ever served: the one replaced goes, and so does this one if a later upload already won.
    if (row.previous) await ctx.blobs.delete(row.previous);
    const now = await ctx.db.appEnvironment.findUnique({ where: { id: env.id }, select: { sourceVersion: true } });
    if (now && now.sourceVersion !== row.version) await ctx.blobs.delete(key);
    return { version: row.version, sha256: stored.sha256 };
  } finally {
    await ctx.blobs.delete(incoming).catch(() => {});
  }
}

async function streamBytes(body: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of body) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/**
 * The worker protocol's source poll: the newest source version of the worker's endpoint's
 * environment when it is above `after` (a signed URL for its bytes, at the worker-facing address),
 * else nothing. An endpoint outside any app environment never has one.
 */
export async function sourceForWorker(ctx: Pick<DomainContext, 'db' | 'blobs' | 'signingKey' | 'publicUrl' | 'workerUrl'>, identity: WorkerIdentity, after: number): Promise<WorkerSourceView | undefined> {
  const endpoint = await ctx.db.endpoint.findUnique({
    where: { id: identity.endpointId },
    select: { appEnvironment: { select: { id: true, sourceVersion: true, sourceSha256: true, sourceBlobKey: true } } },
  });
  const env = endpoint?.appEnvironment;
  if (!env || env.sourceVersion <= after || !env.sourceSha256 || !env.sourceBlobKey) return undefined;
  // Numbered but not yet moved to its key (uploadSource): the next poll gets it.
  if (!(await ctx.blobs.stat(env.sourceBlobKey))) return undefined;
  const expiresAt = new Date(Date.now() + DOWNLOAD_URL_TTL_SEC * 1000);
  const url = signUrl(ctx.workerUrl ?? ctx.publicUrl, sourceDownloadPath(env.id, env.sourceVersion), ctx.signingKey, expiresAt, 'source-download');
  return { version: env.sourceVersion, sha256: env.sourceSha256, url };
}

/** The signed source download route: the version's bytes, or a clear refusal (404 once a newer version replaced it). */
export async function openSourceDownload(ctx: DomainContext, envId: string, version: string, path: string, query: Record<string, unknown>): Promise<{ body: Readable; size: number }> {
  const verdict = verifySignedUrl(path, query, ctx.signingKey, 'source-download', new Date());
  if (verdict !== 'ok') throw new DomainError('unauthenticated', verdict === 'expired' ? 'the download URL has expired' : 'the download URL is not valid');
  if (!/^[1-9][0-9]{0,9}$/.test(version)) throw notFound('source');
  const blob = await ctx.blobs.get(sourceKey(envId, Number(version)));
  if (!blob) throw notFound('source');
  return blob;
}

// ---------------------------------------------------------------- what a deploy does to endpoints

/** Environment variable names of service discovery: `GANTRY_ENDPOINT_<RESOURCE>` (upper case, `-` -> `_`). */
export const discoveryVariable = (resource: string): string => `GANTRY_ENDPOINT_${resource.toUpperCase().replace(/-/g, '_')}`;

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
  build: Pick<Build, 'id' | 'sha256'>;
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
    ...(input.create ? { name: appEndpointName(input.app, input.environment, r.name), type: r.kind === 'lb' ? 'LOAD_BALANCING' : 'QUEUE_BASED' } : {}),
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
  const resources = (input.build.manifest as unknown as Manifest).resources;
  const targets = resources.filter((r) => !input.only || input.only.has(r.name));
  const existing = await ctx.db.endpoint.findMany({ where: { appEnvironmentId: input.environment.id, deletingAt: null } });
  const plan = (input.discovery === 'build' ? resources : targets).map((r) => {
    const current = existing.find((e) => e.appResource === r.name);
    const type = r.kind === 'lb' ? ('LOAD_BALANCING' as const) : ('QUEUE_BASED' as const);
    if (current && current.type !== type) {
      const kind = (t: string) => (t === 'LOAD_BALANCING' ? 'load-balanced' : 'queue-based');
      throw new DomainError('conflict', `the resource '${r.name}' changed from ${kind(current.type)} to ${kind(type)}; undeploy it first (gantry undeploy ${current.name})`);
    }
    return { resource: r, id: current?.id ?? input.newEndpointId(r.name), type, exists: current !== undefined };
  });
  const urls: Record<string, string> = {};
  if (input.discovery === 'environment') for (const e of existing) if (e.appResource) urls[e.appResource] = appEndpointUrl(ctx, e);
  for (const p of plan) urls[p.resource.name] = appEndpointUrl(ctx, p);
  const image = runtimeImageFor(ctx.settings, input.build.pythonVersion);
  const written: WrittenEndpoint[] = [];
  for (const p of plan.filter((x) => targets.includes(x.resource))) {
    const r = p.resource;
    const body = (create: boolean) => resourceEndpointBody({ app: input.app, environment: input.environment.name, build: input.build, resource: r, image, urls, create, live: input.live });
    const cpuInstance = 'cpu' in r.compute ? parseCpuInstanceId(r.compute.cpu) : undefined;
    let id = p.id;
    let created = !p.exists;
    if (p.exists) await updateEndpoint(ctx, principal, id, body(false), { cpuInstance });
    else {
      try {
        await createEndpoint(ctx, principal, body(true), { cpuInstance, id, app: { environmentId: input.environment.id, resource: r.name } });
      } catch (err) {
        // Another writer made this resource's endpoint in the meantime (two provisions of one resource): update that one.
        const raced = err instanceof DomainError && err.kind === 'conflict' ? await ctx.db.endpoint.findFirst({ where: { appEnvironmentId: input.environment.id, appResource: r.name, deletingAt: null } }) : null;
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

/** The runtime image for a Python version: the configured one, else the one hosts build from Gantry's Containerfile. */
export function runtimeImageFor(settings: DomainContext['settings'], pythonVersion: string): string {
  const configured = settings.apps.runtimeImage;
  if (configured) return configured.replaceAll('{python}', pythonVersion);
  return `${RUNTIME_IMAGE_REPOSITORY}:py${pythonVersion}-${settings.apps.runtimeDigest}`;
}

/** Images of this repository are built on the host (hostctl buildImage) when missing, never pulled. */
export const RUNTIME_IMAGE_REPOSITORY = 'localhost/gantry-runtime';

/** `localhost/gantry-runtime:py3.11-<digest>` -> `3.11`; anything else -> undefined. */
export function builtRuntimePython(image: string): string | undefined {
  const m = new RegExp(`^${RUNTIME_IMAGE_REPOSITORY.replace(/[./]/g, '\\$&')}:py(3\\.\\d+)-[0-9a-f]+$`).exec(image);
  return m?.[1];
}

/** A digest of the runtime's build context (the Containerfile and the Python package), so a change makes a new image name. */
export function runtimeContextDigest(files: Array<{ path: string; content: Buffer }>, baseImage: string): string {
  const h = createHash('sha256').update(baseImage).update('\0');
  for (const f of [...files].sort((a, b) => a.path.localeCompare(b.path))) h.update(f.path).update('\0').update(f.content).update('\0');
  return h.digest('hex').slice(0, 12);
}
