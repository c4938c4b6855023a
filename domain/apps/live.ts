import { Readable } from 'node:stream';
import type { Principal } from '../accounts/auth.ts';
import type { DomainContext } from '../context.ts';
import { DomainError, notFound, validationFailed } from '../errors.ts';
import { newId } from '../shared/ids.ts';
import { signUrl, verifySignedUrl } from '../blobs/signed-urls.ts';
import { validate } from '../shared/validation.ts';
import type { WorkerIdentity } from '../workers/credentials.ts';
import { findApp, findEnvironment, requireAppAccess } from './apps.ts';
import { DOWNLOAD_URL_TTL_SEC, MAX_SOURCE_BYTES, type Manifest } from './manifest.ts';
import { writeResourceEndpoints } from './resource-endpoints.ts';
import { appEndpointModel, type AppEndpointModel } from './models.ts';
import { ProvisionResourceSchema } from './schemas.ts';

/** Live endpoints (docs/dev-loop.md): a resource provisioned from a build without the deploy workflow, and source uploads that workers reload. */

/** A source version of an environment: counted up from 1, and the sha256 (hex) of its bytes. */
export interface SourceVersion {
  version: number;
  sha256: string;
}

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
): Promise<{ created: boolean; endpoint: AppEndpointModel }> {
  requireAppAccess(principal, 'WRITE');
  const input = validate(ProvisionResourceSchema, body);
  const app = await findApp(ctx, principal, appRef);
  const env = await findEnvironment(ctx, app, envRef);
  const build = await ctx.db.build.findFirst({ where: { id: input.buildId, appId: app.id } });
  if (!build) throw validationFailed([`$.buildId: no build '${input.buildId}' in the app '${app.name}'`]);
  if (build.status !== 'READY')
    throw validationFailed([`$.buildId: the build is not uploaded yet (finalize it first)`]);
  if (build.kind !== 'GANTRY') throw validationFailed([`$.buildId: a flash build has no resources Gantry provisions`]);
  const resources = (build.manifest as unknown as Manifest).resources;
  const resource = resources.find((r) => r.name === resourceName);
  if (!resource)
    throw new DomainError(
      'not_found',
      `the build ${build.id} has no resource '${resourceName}' (its resources: ${resources.map((r) => r.name).join(', ')})`,
    );
  // A deploy writes every endpoint of the environment: the two would overwrite each other.
  const running = await ctx.db.deployment.findFirst({ where: { environmentId: env.id, status: 'RUNNING' } });
  if (running)
    throw new DomainError(
      'conflict',
      `a deployment to '${env.name}' is running (${running.workflowId}); provision once it has finished`,
    );
  // Read now, not with `env` above: an upload may have landed since; the build's src/ stands for this version.
  const { sourceVersion } = await ctx.db.appEnvironment.findUniqueOrThrow({
    where: { id: env.id },
    select: { sourceVersion: true },
  });
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
  return { created: written!.created, endpoint: appEndpointModel(ctx, row, resource) };
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
export async function uploadSource(
  ctx: DomainContext,
  principal: Principal,
  appRef: string,
  envRef: string,
  body: Readable,
): Promise<SourceVersion> {
  requireAppAccess(principal, 'WRITE');
  const app = await findApp(ctx, principal, appRef);
  const env = await findEnvironment(ctx, app, envRef);
  const incoming = `sources/${env.id}/incoming-${newId()}.tar.gz`;
  const tooLarge = () =>
    new DomainError('validation', 'Request validation failed.', [
      `$: the source upload is larger than ${MAX_SOURCE_BYTES} bytes (send source files only; dependencies belong in the build)`,
    ]);
  let stored: { size: number; sha256: string };
  try {
    stored = await ctx.blobs.put(incoming, readAtMost(body, MAX_SOURCE_BYTES, tooLarge), {
      contentType: 'application/gzip',
    });
    if (stored.size === 0) throw validationFailed(['$: the body is empty; send a gzip tar of the source files']);
    const gzip = await ctx.blobs.get(incoming, { start: 0, end: 1 });
    const magic = gzip ? await streamBytes(gzip.body) : Buffer.alloc(0);
    if (magic[0] !== 0x1f || magic[1] !== 0x8b)
      throw validationFailed(['$: the body is not gzip data; send a gzip tar of the source files']);
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
    if (!copy)
      throw new DomainError('unavailable', 'the uploaded source vanished from the blob store; upload it again');
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
export async function sourceForWorker(
  ctx: Pick<DomainContext, 'db' | 'blobs' | 'signingKey' | 'publicUrl' | 'workerUrl'>,
  identity: WorkerIdentity,
  after: number,
): Promise<(SourceVersion & { url: string }) | undefined> {
  const endpoint = await ctx.db.endpoint.findUnique({
    where: { id: identity.endpointId },
    select: { appEnvironment: { select: { id: true, sourceVersion: true, sourceSha256: true, sourceBlobKey: true } } },
  });
  const env = endpoint?.appEnvironment;
  if (!env || env.sourceVersion <= after || !env.sourceSha256 || !env.sourceBlobKey) return undefined;
  // Numbered but not yet moved to its key (uploadSource): the next poll gets it.
  if (!(await ctx.blobs.stat(env.sourceBlobKey))) return undefined;
  const expiresAt = new Date(Date.now() + DOWNLOAD_URL_TTL_SEC * 1000);
  const url = signUrl(
    ctx.workerUrl ?? ctx.publicUrl,
    sourceDownloadPath(env.id, env.sourceVersion),
    ctx.signingKey,
    expiresAt,
    'source-download',
  );
  return { version: env.sourceVersion, sha256: env.sourceSha256, url };
}

/** The signed source download route: the version's bytes, or a clear refusal (404 once a newer version replaced it). */
export async function openSourceDownload(
  ctx: DomainContext,
  envId: string,
  version: string,
  path: string,
  query: Record<string, unknown>,
): Promise<{ body: Readable; size: number }> {
  const verdict = verifySignedUrl(path, query, ctx.signingKey, 'source-download', new Date());
  if (verdict !== 'ok')
    throw new DomainError(
      'unauthenticated',
      verdict === 'expired' ? 'the download URL has expired' : 'the download URL is not valid',
    );
  if (!/^[1-9][0-9]{0,9}$/.test(version)) throw notFound('source');
  const blob = await ctx.blobs.get(sourceKey(envId, Number(version)));
  if (!blob) throw notFound('source');
  return blob;
}
