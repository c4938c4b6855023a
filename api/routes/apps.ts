import { Readable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import {
  AppListSchema,
  AppSchema,
  BuildSchema,
  checkArtifactUpload,
  createApp,
  CreateAppSchema,
  createEnvironment,
  CreateEnvironmentSchema,
  deleteApp,
  deleteEnvironment,
  deployBuild,
  DeployBuildSchema,
  DeploymentSchema,
  EnvironmentListSchema,
  EnvironmentSchema,
  finalizeArtifactUpload,
  getApp,
  getDeployment,
  getEnvironment,
  listApps,
  listEnvironments,
  openArtifactDownload,
  PreparedUploadSchema,
  prepareArtifactUpload,
  PrepareUploadSchema,
  receiveArtifactUpload,
} from '../../domain/apps.ts';
import type { DomainContext } from '../../domain/context.ts';
import { DomainError } from '../../domain/errors.ts';
import { throttledAuth, principalOf } from '../auth.ts';
import { enforceRateLimit } from '../rate-limit.ts';

const tags = ['Apps'];
const ACCESS = 'Needs a key for the whole account (not one limited to endpoints).';
const AppParams = Type.Object({ app: Type.String({ minLength: 1, maxLength: 64, description: 'app id or name' }) });
const EnvParams = Type.Object({ app: AppParams.properties.app, env: Type.String({ minLength: 1, maxLength: 64, description: 'environment id or name' }) });
const BuildParams = Type.Object({ app: AppParams.properties.app, build: Type.String({ minLength: 1, maxLength: 64 }) });
const DeploymentParams = Type.Object({ app: AppParams.properties.app, deployment: Type.String({ minLength: 1, maxLength: 64 }) });

/** REST /v2/apps: what `gantry deploy` drives (docs/apps.md). Inside the management scope. */
export const appRoutes: FastifyPluginAsyncTypebox<{ ctx: DomainContext }> = async (app, { ctx }) => {
  app.get('/v2/apps', { config: { requiredScope: 'READ' }, schema: { operationId: 'listApps', summary: 'List apps', description: `The account's apps with their environments and endpoints. ${ACCESS} Scope: READ.`, tags, response: { 200: AppListSchema } } }, async (request) => ({
    apps: await listApps(ctx, principalOf(request)),
  }));

  app.post(
    '/v2/apps',
    { config: { requiredScope: 'WRITE' }, schema: { operationId: 'createApp', summary: 'Create an app', description: `Creates an app, with its first environment when \`environment\` is given (names are unique: 409). ${ACCESS} Scope: WRITE.`, tags, body: CreateAppSchema, response: { 201: AppSchema } } },
    async (request, reply) => reply.code(201).send(await createApp(ctx, principalOf(request), request.body)),
  );

  app.get('/v2/apps/:app', { config: { requiredScope: 'READ' }, schema: { operationId: 'getApp', summary: 'Get an app', tags, params: AppParams, response: { 200: AppSchema } } }, async (request) =>
    getApp(ctx, principalOf(request), request.params.app),
  );

  app.delete(
    '/v2/apps/:app',
    { config: { requiredScope: 'WRITE' }, schema: { operationId: 'deleteApp', summary: 'Delete an app', description: `Deletes the app, the endpoints of all its environments (drained as any endpoint deletion) and its artifacts. 409 while a deployment runs. ${ACCESS} Scope: WRITE.`, tags, params: AppParams, response: { 204: Type.Null() } } },
    async (request, reply) => {
      await deleteApp(ctx, principalOf(request), request.params.app);
      return reply.code(204).send(null);
    },
  );

  app.get(
    '/v2/apps/:app/environments',
    { config: { requiredScope: 'READ' }, schema: { operationId: 'listEnvironments', summary: "List an app's environments", tags, params: AppParams, response: { 200: EnvironmentListSchema } } },
    async (request) => ({ environments: await listEnvironments(ctx, principalOf(request), request.params.app) }),
  );

  app.post(
    '/v2/apps/:app/environments',
    { config: { requiredScope: 'WRITE' }, schema: { operationId: 'createEnvironment', summary: 'Create an environment', tags, params: AppParams, body: CreateEnvironmentSchema, response: { 201: EnvironmentSchema } } },
    async (request, reply) => reply.code(201).send(await createEnvironment(ctx, principalOf(request), request.params.app, request.body)),
  );

  app.get('/v2/apps/:app/environments/:env', { config: { requiredScope: 'READ' }, schema: { operationId: 'getEnvironment', summary: 'Get an environment', tags, params: EnvParams, response: { 200: EnvironmentSchema } } }, async (request) =>
    getEnvironment(ctx, principalOf(request), request.params.app, request.params.env),
  );

  app.delete(
    '/v2/apps/:app/environments/:env',
    { config: { requiredScope: 'WRITE' }, schema: { operationId: 'deleteEnvironment', summary: 'Delete an environment', description: `Deletes the environment and its endpoints. 409 while a deployment runs. ${ACCESS} Scope: WRITE.`, tags, params: EnvParams, response: { 204: Type.Null() } } },
    async (request, reply) => {
      await deleteEnvironment(ctx, principalOf(request), request.params.app, request.params.env);
      return reply.code(204).send(null);
    },
  );

  app.post(
    '/v2/apps/:app/builds',
    {
      config: { requiredScope: 'WRITE' },
      bodyLimit: 2 * 1024 * 1024,
      schema: {
        operationId: 'prepareArtifactUpload',
        summary: 'Prepare an artifact upload',
        description: `Records a build (its manifest, sha256 and size; at most 1.5 GB) and answers where to PUT the artifact: a signed URL, valid one hour. Then finalize it. ${ACCESS} Scope: WRITE.`,
        tags,
        params: AppParams,
        body: PrepareUploadSchema,
        response: { 201: PreparedUploadSchema },
      },
    },
    async (request, reply) => reply.code(201).send(await prepareArtifactUpload(ctx, principalOf(request), request.params.app, request.body)),
  );

  app.post(
    '/v2/apps/:app/builds/:build/finalize',
    {
      config: { requiredScope: 'WRITE' },
      schema: { operationId: 'finalizeArtifactUpload', summary: 'Finalize an artifact upload', description: `Checks the uploaded bytes against the declared size and sha256 (422 and the upload is discarded when they differ) and makes the build deployable. ${ACCESS} Scope: WRITE.`, tags, params: BuildParams, response: { 200: BuildSchema } },
    },
    async (request) => finalizeArtifactUpload(ctx, principalOf(request), request.params.app, request.params.build),
  );

  app.post(
    '/v2/apps/:app/environments/:env/deployments',
    {
      config: { requiredScope: 'WRITE' },
      schema: {
        operationId: 'deployBuildToEnvironment',
        summary: 'Deploy a build to an environment',
        description: `Starts the deploy workflow (deploy:<app>:<env>:<build>): one endpoint per resource, created or updated, each released by its rolling release. Poll the deployment for the outcome. 409 while another deployment to the environment runs. ${ACCESS} Scope: WRITE.`,
        tags,
        params: EnvParams,
        body: DeployBuildSchema,
        response: { 202: DeploymentSchema },
      },
    },
    async (request, reply) => reply.code(202).send(await deployBuild(ctx, principalOf(request), request.params.app, request.params.env, request.body)),
  );

  app.get(
    '/v2/apps/:app/deployments/:deployment',
    { config: { requiredScope: 'READ' }, schema: { operationId: 'getDeployment', summary: 'Get a deployment', tags, params: DeploymentParams, response: { 200: DeploymentSchema } } },
    async (request) => getDeployment(ctx, principalOf(request), request.params.app, request.params.deployment),
  );
};

/**
 * Reads at most `limit` bytes; more is an error that ends the upload. Lazy: nothing is read until
 * the store consumes it, so the error always reaches the store's pipeline.
 */
function capped(body: Readable, limit: number): Readable {
  async function* chunks(): AsyncGenerator<Buffer> {
    let seen = 0;
    for await (const chunk of body) {
      seen += (chunk as Buffer).length;
      if (seen > limit) throw new DomainError('validation', 'Request validation failed.', [`$: the upload is larger than the ${limit} bytes the build declared`]);
      yield chunk as Buffer;
    }
  }
  return Readable.from(chunks(), { objectMode: false });
}

/**
 * The signed artifact routes: no API key, the URL is the credential (HMAC over path and expiry,
 * domain/signed-urls.ts). A bad or stale signature counts as a failed authentication (the
 * per-address throttle); each build has a request quota; an upload reads no more than the size
 * its build declared. Downloads are also served on the worker-facing listener: they are how a
 * worker of a deployed app fetches its code.
 */
export async function artifactRoutes(scope: FastifyInstance, { ctx }: { ctx: DomainContext }): Promise<void> {
  // The bytes are streamed to the blob store, never buffered.
  scope.addContentTypeParser('*', (_request, payload, done) => done(null, payload));
  const perBuild = (buildId: string, kind: string) => ({ counter: `artifact-${kind}/${buildId}`, quotas: { minute: 600, hour: 10_000, day: 100_000 } });

  scope.put<{ Params: { buildId: string }; Querystring: Record<string, string> }>(
    '/v2/artifacts/:buildId/upload',
    { schema: { hide: true } },
    async (request, reply) => {
      const path = `/v2/artifacts/${request.params.buildId}/upload`;
      const build = await throttledAuth(request, () => checkArtifactUpload(ctx, request.params.buildId, path, request.query));
      await enforceRateLimit(ctx, reply, perBuild(build.id, 'upload'));
      const stored = await receiveArtifactUpload(ctx, build, capped((request.body as Readable | undefined) ?? request.raw, Number(build.size)));
      return reply.code(200).send({ size: stored.size, sha256: stored.sha256 });
    },
  );

  scope.get<{ Params: { buildId: string }; Querystring: Record<string, string> }>(
    '/v2/artifacts/:buildId',
    { schema: { hide: true } },
    async (request, reply) => {
      const path = `/v2/artifacts/${request.params.buildId}`;
      const artifact = await throttledAuth(request, () => openArtifactDownload(ctx, request.params.buildId, path, request.query));
      await enforceRateLimit(ctx, reply, perBuild(request.params.buildId, 'download'));
      return reply
        .header('content-type', 'application/gzip')
        .header('content-length', String(artifact.size))
        .header('x-gantry-sha256', artifact.sha256)
        .send(artifact.body);
    },
  );
}
