import { Type } from 'typebox';
import { Prisma, type Build } from '../../generated/prisma/client.ts';
import type { Principal } from '../accounts/auth.ts';
import type { DomainContext } from '../context.ts';
import { DomainError, notFound, validationFailed } from '../errors.ts';
import { newId } from '../shared/ids.ts';
import { validate } from '../shared/validation.ts';
import { findApp, requireAppAccess } from './apps.ts';
import {
  artifactDownloadUrl,
  artifactKey,
  finalizeArtifactUpload,
  prepareArtifactUpload,
  signedUpload,
  type PreparedUpload,
} from './builds.ts';
import type { AppSettings } from '../shared/index.ts';
import { MAX_ARTIFACT_BYTES } from './manifest.ts';
import { flashImage, flashRuntimeImageFor } from './runtime-images.ts';

/**
 * Builds of the hosted service's `flash` tool (docs/graphql.md "flash"). Its upload differs from
 * gantry deploy's: it declares only the size (no digest, no manifest), PUTs the bytes, and sends its
 * manifest when it finalizes; later it replaces the manifest with one that records the endpoints it
 * made. The manifest is flash's own document, kept as sent (bounded in size and depth): Gantry reads
 * only its Python version and source fingerprint. The artifact's integrity is what Gantry can check
 * without a declared digest: the declared size, the gzip signature, and a sha256 Gantry computes at
 * finalize and serves with every download.
 */

/** A manifest is JSON text in a GraphQL body (256 KiB at most); 40 resources of flash's come to about 60 KiB. */
export const MAX_FLASH_MANIFEST_BYTES = 128 * 1024;
/** Deeper nesting than any flash manifest has (about 6): a bound on what a stored document may cost to read. */
export const MAX_FLASH_MANIFEST_DEPTH = 32;

const PrepareFlashSchema = Type.Object(
  { size: Type.Integer({ minimum: 1, maximum: MAX_ARTIFACT_BYTES, description: 'bytes of the gzip file' }) },
  { additionalProperties: false },
);

const BuildRef = Type.String({ minLength: 1, maxLength: 200 });
const FinalizeSchema = Type.Object(
  {
    buildId: Type.Optional(BuildRef),
    objectKey: Type.Optional(BuildRef),
    manifest: Type.Optional(Type.Unknown()),
  },
  { additionalProperties: false },
);

function depthOf(value: unknown): number {
  if (value === null || typeof value !== 'object') return 0;
  let deepest = 0;
  for (const v of Object.values(value as Record<string, unknown>)) deepest = Math.max(deepest, depthOf(v));
  return deepest + 1;
}

/** A flash manifest as it may be stored: a JSON object within the bounds above. */
export function checkFlashManifest(manifest: unknown, at = '$.manifest'): Record<string, unknown> {
  if (manifest === null || typeof manifest !== 'object' || Array.isArray(manifest))
    throw validationFailed([`${at}: a JSON object`]);
  const bytes = Buffer.byteLength(JSON.stringify(manifest));
  if (bytes > MAX_FLASH_MANIFEST_BYTES)
    throw validationFailed([`${at}: ${bytes} bytes of JSON, at most ${MAX_FLASH_MANIFEST_BYTES}`]);
  if (depthOf(manifest) > MAX_FLASH_MANIFEST_DEPTH)
    throw validationFailed([`${at}: nested deeper than ${MAX_FLASH_MANIFEST_DEPTH} levels`]);
  return manifest as Record<string, unknown>;
}

/** The columns Gantry reads out of a flash manifest; anything else about it is flash's business. */
function manifestColumns(m: Record<string, unknown>) {
  const python =
    typeof m.python_version === 'string' && /^3\.\d{1,2}$/.test(m.python_version) ? m.python_version : null;
  const fingerprint =
    typeof m.source_fingerprint === 'string' && /^[0-9a-f]{64}$/.test(m.source_fingerprint)
      ? m.source_fingerprint
      : null;
  return { manifest: m as unknown as Prisma.InputJsonObject, pythonVersion: python, fingerprint };
}

/** `prepareFlashArtifactUpload` with flash's input (the size alone): a FLASH build and where to PUT its bytes. */
export async function prepareFlashArtifactUpload(
  ctx: DomainContext,
  principal: Principal,
  appRef: string,
  body: unknown,
): Promise<PreparedUpload> {
  requireAppAccess(principal, 'WRITE');
  const input = validate(PrepareFlashSchema, body);
  const app = await findApp(ctx, principal, appRef);
  const id = newId();
  const build = await ctx.db.build.create({
    data: { id, appId: app.id, kind: 'FLASH', size: BigInt(input.size), blobKey: artifactKey(app.id, id) },
  });
  return { build, upload: await signedUpload(ctx, build) };
}

/**
 * `prepareFlashArtifactUpload` in either form: gantry deploy's (a digest and its manifest, checked
 * now) or flash's (the size alone). Half of the first is refused: a digest without its manifest.
 */
export async function prepareUpload(
  ctx: DomainContext,
  principal: Principal,
  appRef: string,
  input: { size?: number; sha256?: string; manifest?: unknown },
): Promise<PreparedUpload> {
  if (input.sha256 === undefined && input.manifest === undefined)
    return prepareFlashArtifactUpload(ctx, principal, appRef, { size: input.size });
  if (input.sha256 === undefined || input.manifest === undefined)
    throw validationFailed([
      `$.input.${input.sha256 === undefined ? 'sha256' : 'manifest'}: required with ${input.sha256 === undefined ? 'manifest' : 'sha256'} (or leave both out, as flash does)`,
    ]);
  return prepareArtifactUpload(ctx, principal, appRef, input);
}

/** The first bytes of a stored object (at most `n`). */
async function headOf(ctx: DomainContext, key: string, n: number): Promise<Buffer> {
  const blob = await ctx.blobs.get(key, { start: 0, end: n - 1 });
  if (!blob) return Buffer.alloc(0);
  const chunks: Buffer[] = [];
  for await (const chunk of blob.body) chunks.push(Buffer.from(chunk as Buffer));
  return Buffer.concat(chunks).subarray(0, n);
}

/**
 * `finalizeFlashArtifactUpload`, either shape: gantry deploy's (`buildId`, its manifest given at
 * prepare) or flash's (`objectKey` and the manifest). A FLASH build becomes READY once its bytes
 * are all there (the declared size) and are gzip; the sha256 Gantry computes then is the build's.
 * Bytes that fail are removed, so a new PUT can follow.
 */
export async function finalizeUpload(
  ctx: DomainContext,
  principal: Principal,
  appRef: string,
  body: unknown,
): Promise<Build> {
  requireAppAccess(principal, 'WRITE');
  const input = validate(FinalizeSchema, body);
  const ref = input.objectKey ?? input.buildId;
  if (!ref) throw validationFailed(['$: name the build (objectKey or buildId)']);
  const app = await findApp(ctx, principal, appRef);
  const build = await ctx.db.build.findFirst({ where: { id: ref, appId: app.id } });
  if (!build) throw notFound('build');
  if (build.kind === 'GANTRY') {
    if (input.manifest !== undefined)
      throw validationFailed(['$.manifest: this build took its manifest when it was prepared']);
    await finalizeArtifactUpload(ctx, principal, app.id, build.id);
    return ctx.db.build.findUniqueOrThrow({ where: { id: build.id } });
  }
  if (input.manifest === undefined) throw validationFailed(['$.manifest: required for a flash build']);
  const manifest = checkFlashManifest(input.manifest);
  if (build.status === 'READY') return build;
  const stat = await ctx.blobs.stat(build.blobKey);
  if (!stat) throw validationFailed(['$: nothing was uploaded for this build yet']);
  let problem: string | undefined;
  if (stat.size !== Number(build.size))
    problem = `$: the upload has ${stat.size} bytes, the build declared ${build.size}`;
  else {
    const head = await headOf(ctx, build.blobKey, 2);
    if (head[0] !== 0x1f || head[1] !== 0x8b) problem = '$: the upload is not a gzip file';
  }
  if (problem) {
    await ctx.blobs.delete(build.blobKey);
    throw validationFailed([problem]);
  }
  const sha256 = await ctx.blobs.sha256(build.blobKey);
  if (!sha256) throw validationFailed(['$: nothing was uploaded for this build yet']);
  const updated = await ctx.db.build.updateMany({
    where: { id: build.id, status: 'UPLOADING' },
    data: { status: 'READY', sha256, ...manifestColumns(manifest) },
  });
  if (updated.count === 0) throw new DomainError('conflict', 'this build was finalized meanwhile');
  return ctx.db.build.findUniqueOrThrow({ where: { id: build.id } });
}

/** A build of the caller's account by id (flash names builds without their app). */
async function ownedBuild(ctx: DomainContext, principal: Principal, buildId: string): Promise<Build> {
  const build = await ctx.db.build.findFirst({ where: { id: buildId, app: { accountId: principal.accountId } } });
  if (!build) throw notFound('build');
  return build;
}

/** `flashBuild(flashBuildId)`: the build with its manifest (flash's as last sent; gantry deploy's as prepared). */
export async function getFlashBuild(ctx: DomainContext, principal: Principal, buildId: string): Promise<Build> {
  requireAppAccess(principal, 'READ');
  return ownedBuild(ctx, principal, buildId);
}

/**
 * `updateFlashBuildManifest`: flash records the endpoints it made in the build's manifest. Only a
 * FLASH build that is READY: a gantry deploy build's manifest is what its deploy workflow reads.
 */
export async function updateFlashBuildManifest(
  ctx: DomainContext,
  principal: Principal,
  buildId: string,
  manifest: unknown,
): Promise<Build> {
  requireAppAccess(principal, 'WRITE');
  const checked = checkFlashManifest(manifest);
  const build = await ownedBuild(ctx, principal, buildId);
  if (build.kind !== 'FLASH')
    throw new DomainError('conflict', "a gantry deploy build's manifest is fixed when it is prepared");
  if (build.status !== 'READY') throw new DomainError('conflict', 'the build is not uploaded yet (finalize it first)');
  return ctx.db.build.update({ where: { id: build.id }, data: manifestColumns(checked) });
}

/** The build's artifact for a client to fetch: its object key (the build id) and a signed download URL. */
export async function buildArtifactLink(
  ctx: DomainContext,
  principal: Principal,
  buildId: string,
): Promise<{ objectKey: string; downloadUrl: string; expiresAt: string } | null> {
  requireAppAccess(principal, 'READ');
  const link = await artifactDownloadUrl(ctx, ctx.publicUrl, principal.accountId, buildId);
  return link ? { objectKey: buildId, downloadUrl: link.url, expiresAt: link.expiresAt } : null;
}

/**
 * What a worker of an endpoint runs when the endpoint is a flash environment's and names one of
 * flash's images: Gantry's flash runtime (runtime-images.ts flashRuntimeImageFor) and the
 * environment's active build, when that is a READY flash build of the endpoint's own account (its
 * artifact is then fetched by a signed URL for that account only, artifactDownloadUrl). Undefined
 * for any other endpoint or image: it runs as named.
 */
export async function flashWorker(
  ctx: Pick<DomainContext, 'db'>,
  apps: AppSettings,
  endpoint: { accountId: string; appEnvironmentId: string | null },
  image: string,
): Promise<{ image: string; buildId: string | undefined } | undefined> {
  if (!endpoint.appEnvironmentId || !flashImage(image)) return undefined;
  const env = await ctx.db.appEnvironment.findFirst({
    where: { id: endpoint.appEnvironmentId, app: { accountId: endpoint.accountId } },
    select: { currentBuildId: true },
  });
  const build = env?.currentBuildId
    ? await ctx.db.build.findFirst({
        where: { id: env.currentBuildId, kind: 'FLASH', status: 'READY', app: { accountId: endpoint.accountId } },
        select: { id: true, pythonVersion: true },
      })
    : null;
  return { image: flashRuntimeImageFor(apps, image, build?.pythonVersion)!, buildId: build?.id };
}
