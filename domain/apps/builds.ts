import { Readable } from 'node:stream';
import { Prisma, type Build } from '../../generated/prisma/client.ts';
import type { Principal } from '../accounts/auth.ts';
import type { DomainContext } from '../context.ts';
import { DomainError, notFound, validationFailed } from '../errors.ts';
import { newId } from '../shared/ids.ts';
import { signUrl, verifySignedUrl } from '../blobs/signed-urls.ts';
import { validate } from '../shared/validation.ts';
import { findApp, requireAppAccess } from './apps.ts';
import { DOWNLOAD_URL_TTL_SEC, UPLOAD_URL_TTL_SEC, manifestProblems } from './manifest.ts';
import { PrepareUploadSchema } from './schemas.ts';

/** Builds: an artifact's upload (signed URL, size and digest checked) and its download by workers. */

/** Where and how to PUT a build's bytes; the URL itself is the credential. */
export interface SignedUpload {
  url: string;
  method: 'PUT';
  headers: Record<string, string>;
  expiresAt: string;
}

/** A build just recorded, and where its bytes go. */
export interface PreparedUpload {
  build: Build;
  upload: SignedUpload;
}

export const artifactKey = (appId: string, buildId: string): string => `artifacts/${appId}/${buildId}.tar.gz`;
const uploadPath = (buildId: string): string => `/v2/artifacts/${buildId}/upload`;
const downloadPath = (buildId: string): string => `/v2/artifacts/${buildId}`;

/** The app's builds, newest first (GraphQL `FlashApp.flashBuilds`). */
export async function listBuilds(ctx: DomainContext, principal: Principal, appRef: string): Promise<Build[]> {
  requireAppAccess(principal, 'READ');
  const app = await findApp(ctx, principal, appRef);
  return ctx.db.build.findMany({ where: { appId: app.id }, orderBy: { createdAt: 'desc' } });
}

/**
 * Records a build and answers where to PUT its bytes: a presigned URL of the S3 store when one is
 * configured (the bytes then never pass through the API), else the API's own signed upload route.
 */
export async function prepareArtifactUpload(
  ctx: DomainContext,
  principal: Principal,
  appRef: string,
  body: unknown,
): Promise<PreparedUpload> {
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
  return { build, upload: await signedUpload(ctx, build) };
}

/** Where to PUT a build's bytes: the S3 store's presigned URL when there is one, else the API's own signed route. */
export async function signedUpload(ctx: DomainContext, build: Build): Promise<SignedUpload> {
  const expiresAt = new Date(Date.now() + UPLOAD_URL_TTL_SEC * 1000);
  const direct = ctx.blobs.presignedPut
    ? await ctx.blobs.presignedPut(build.blobKey, { expiresInSec: UPLOAD_URL_TTL_SEC, contentType: 'application/gzip' })
    : undefined;
  const upload = direct ?? {
    url: signUrl(ctx.publicUrl, uploadPath(build.id), ctx.signingKey, expiresAt, 'artifact-upload'),
    headers: { 'content-type': 'application/gzip' },
  };
  return { ...upload, method: 'PUT', expiresAt: expiresAt.toISOString() };
}

/** The signed upload route's check: the build exists, still takes bytes, and the URL is genuine and fresh. */
export async function checkArtifactUpload(
  ctx: DomainContext,
  buildId: string,
  path: string,
  query: Record<string, unknown>,
): Promise<Build> {
  const verdict = verifySignedUrl(path, query, ctx.signingKey, 'artifact-upload', new Date());
  if (verdict !== 'ok')
    throw new DomainError(
      'unauthenticated',
      verdict === 'expired' ? 'the upload URL has expired; prepare the upload again' : 'the upload URL is not valid',
    );
  const build = await ctx.db.build.findUnique({ where: { id: buildId } });
  if (!build) throw notFound('build');
  if (build.status !== 'UPLOADING') throw new DomainError('conflict', 'this build is already uploaded');
  return build;
}

/** Stores the bytes of an upload checked with checkArtifactUpload; at most the declared size is read. */
export async function receiveArtifactUpload(
  ctx: DomainContext,
  build: Build,
  body: Readable,
): Promise<{ size: number; sha256: string }> {
  return ctx.blobs.put(build.blobKey, body, { contentType: 'application/gzip' });
}

/** Checks the stored bytes against what was declared and makes the build deployable. */
export async function finalizeArtifactUpload(
  ctx: DomainContext,
  principal: Principal,
  appRef: string,
  buildId: string,
): Promise<Build> {
  requireAppAccess(principal, 'WRITE');
  const app = await findApp(ctx, principal, appRef);
  const build = await ctx.db.build.findFirst({ where: { id: buildId, appId: app.id } });
  if (!build) throw notFound('build');
  if (build.status === 'READY') return build;
  if (build.kind !== 'GANTRY')
    throw validationFailed(['$.manifest: a flash build sends its manifest when it finalizes the upload']);
  const stat = await ctx.blobs.stat(build.blobKey);
  if (!stat)
    throw new DomainError('validation', 'Request validation failed.', ['$: nothing was uploaded for this build yet']);
  const problems: string[] = [];
  if (stat.size !== Number(build.size))
    problems.push(`$: the upload has ${stat.size} bytes, the build declared ${build.size}`);
  else {
    const digest = await ctx.blobs.sha256(build.blobKey);
    if (digest !== build.sha256)
      problems.push(`$: the upload's sha256 is ${digest}, the build declared ${build.sha256}`);
  }
  if (problems.length > 0) {
    await ctx.blobs.delete(build.blobKey);
    throw validationFailed(problems);
  }
  return ctx.db.build.update({ where: { id: build.id }, data: { status: 'READY' } });
}

/** A URL a worker container fetches its artifact from, signed for a while; it must be the worker's own account's build. */
export async function artifactDownloadUrl(
  ctx: Pick<DomainContext, 'db' | 'signingKey'>,
  base: string,
  accountId: string,
  buildId: string,
): Promise<{ url: string; sha256: string; expiresAt: string } | undefined> {
  const build = await ctx.db.build.findFirst({ where: { id: buildId, status: 'READY', app: { accountId } } });
  if (!build?.sha256) return undefined;
  const expiresAt = new Date(Date.now() + DOWNLOAD_URL_TTL_SEC * 1000);
  return {
    url: signUrl(base, downloadPath(build.id), ctx.signingKey, expiresAt, 'artifact-download'),
    sha256: build.sha256,
    expiresAt: expiresAt.toISOString(),
  };
}

/** The signed download route: the artifact's bytes, or a clear refusal. */
export async function openArtifactDownload(
  ctx: DomainContext,
  buildId: string,
  path: string,
  query: Record<string, unknown>,
): Promise<{ body: Readable; size: number; sha256: string }> {
  const verdict = verifySignedUrl(path, query, ctx.signingKey, 'artifact-download', new Date());
  if (verdict !== 'ok')
    throw new DomainError(
      'unauthenticated',
      verdict === 'expired' ? 'the download URL has expired' : 'the download URL is not valid',
    );
  const build = await ctx.db.build.findUnique({ where: { id: buildId } });
  const blob = build?.status === 'READY' && build.sha256 ? await ctx.blobs.get(build.blobKey) : null;
  if (!build?.sha256 || !blob) throw notFound('artifact');
  return { ...blob, sha256: build.sha256 };
}
