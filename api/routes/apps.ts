import { Readable } from 'node:stream';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import {
  checkArtifactUpload,
  createApp,
  CreateAppSchema,
  createEnvironment,
  CreateEnvironmentSchema,
  deleteApp,
  deleteEnvironment,
  deployBuild,
  DeployBuildSchema,
  finalizeArtifactUpload,
  getApp,
  getDeployment,
  getEnvironment,
  listApps,
  listEnvironments,
  MAX_SOURCE_BYTES,
  openArtifactDownload,
  openSourceDownload,
  prepareArtifactUpload,
  PrepareUploadSchema,
  provisionResource,
  ProvisionResourceSchema,
  readAtMost,
  receiveArtifactUpload,
  uploadSource,
} from '../../domain/apps/index.ts';
import type { DomainContext } from '../../domain/context.ts';
import { DomainError } from '../../domain/errors.ts';
import { throttledAuth, principalOf } from '../auth.ts';
import { problem, sendProblem } from '../problem.ts';
import { enforceRateLimit } from '../rate-limit.ts';
import {
  AppEndpointSchema,
  appEndpointView,
  AppListSchema,
  AppSchema,
  appView,
  BuildSchema,
  buildView,
  DeploymentSchema,
  deploymentView,
  EnvironmentListSchema,
  EnvironmentSchema,
  environmentView,
  PreparedUploadSchema,
  preparedUploadView,
  SourceUploadSchema,
} from './shapes/app.ts';

const tags = ['Apps'];
const ACCESS = 'Needs a key for the whole account (not one limited to endpoints).';
const AppParams = Type.Object({ app: Type.String({ minLength: 1, maxLength: 64, description: 'app id or name' }) });
const EnvParams = Type.Object({
  app: AppParams.properties.app,
  env: Type.String({ minLength: 1, maxLength: 64, description: 'environment id or name' }),
});
const BuildParams = Type.Object({ app: AppParams.properties.app, build: Type.String({ minLength: 1, maxLength: 64 }) });
const ResourceParams = Type.Object({
  app: AppParams.properties.app,
  env: EnvParams.properties.env,
  resource: Type.String({
    pattern: '^[a-z][a-z0-9-]{0,39}$',
    description: "the resource's name in the build's manifest",
  }),
});
const DeploymentParams = Type.Object({
  app: AppParams.properties.app,
  deployment: Type.String({ minLength: 1, maxLength: 64 }),
});

/** REST /v2/apps: what `gantry deploy` drives (docs/apps.md). Inside the management scope. */
export const appRoutes: FastifyPluginAsyncTypebox<{ ctx: DomainContext }> = async (app, { ctx }) => {
  app.get(
    '/v2/apps',
    {
      config: { requiredScope: 'READ' },
      schema: {
        operationId: 'listApps',
        summary: 'List apps',
        description: `The account's apps with their environments and endpoints. ${ACCESS} Scope: READ.`,
        tags,
        response: { 200: AppListSchema },
      },
    },
    async (request) => ({
      apps: (await listApps(ctx, principalOf(request))).map(appView),
    }),
  );

  app.post(
    '/v2/apps',
    {
      config: { requiredScope: 'WRITE' },
      schema: {
        operationId: 'createApp',
        summary: 'Create an app',
        description: `Creates an app, with its first environment when \`environment\` is given (names are unique: 409). ${ACCESS} Scope: WRITE.`,
        tags,
        body: CreateAppSchema,
        response: { 201: AppSchema },
      },
    },
    async (request, reply) => reply.code(201).send(appView(await createApp(ctx, principalOf(request), request.body))),
  );

  app.get(
    '/v2/apps/:app',
    {
      config: { requiredScope: 'READ' },
      schema: { operationId: 'getApp', summary: 'Get an app', tags, params: AppParams, response: { 200: AppSchema } },
    },
    async (request) => appView(await getApp(ctx, principalOf(request), request.params.app)),
  );

  app.delete(
    '/v2/apps/:app',
    {
      config: { requiredScope: 'WRITE' },
      schema: {
        operationId: 'deleteApp',
        summary: 'Delete an app',
        description: `Deletes the app, the endpoints of all its environments (drained as any endpoint deletion) and its artifacts. 409 while a deployment runs. ${ACCESS} Scope: WRITE.`,
        tags,
        params: AppParams,
        response: { 204: Type.Null() },
      },
    },
    async (request, reply) => {
      await deleteApp(ctx, principalOf(request), request.params.app);
      return reply.code(204).send(null);
    },
  );

  app.get(
    '/v2/apps/:app/environments',
    {
      config: { requiredScope: 'READ' },
      schema: {
        operationId: 'listEnvironments',
        summary: "List an app's environments",
        tags,
        params: AppParams,
        response: { 200: EnvironmentListSchema },
      },
    },
    async (request) => ({
      environments: (await listEnvironments(ctx, principalOf(request), request.params.app)).map(environmentView),
    }),
  );

  app.post(
    '/v2/apps/:app/environments',
    {
      config: { requiredScope: 'WRITE' },
      schema: {
        operationId: 'createEnvironment',
        summary: 'Create an environment',
        tags,
        params: AppParams,
        body: CreateEnvironmentSchema,
        response: { 201: EnvironmentSchema },
      },
    },
    async (request, reply) =>
      reply
        .code(201)
        .send(environmentView(await createEnvironment(ctx, principalOf(request), request.params.app, request.body))),
  );

  app.get(
    '/v2/apps/:app/environments/:env',
    {
      config: { requiredScope: 'READ' },
      schema: {
        operationId: 'getEnvironment',
        summary: 'Get an environment',
        tags,
        params: EnvParams,
        response: { 200: EnvironmentSchema },
      },
    },
    async (request) =>
      environmentView(await getEnvironment(ctx, principalOf(request), request.params.app, request.params.env)),
  );

  app.delete(
    '/v2/apps/:app/environments/:env',
    {
      config: { requiredScope: 'WRITE' },
      schema: {
        operationId: 'deleteEnvironment',
        summary: 'Delete an environment',
        description: `Deletes the environment and its endpoints. 409 while a deployment runs. ${ACCESS} Scope: WRITE.`,
        tags,
        params: EnvParams,
        response: { 204: Type.Null() },
      },
    },
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
    async (request, reply) =>
      reply
        .code(201)
        .send(
          preparedUploadView(await prepareArtifactUpload(ctx, principalOf(request), request.params.app, request.body)),
        ),
  );

  app.post(
    '/v2/apps/:app/builds/:build/finalize',
    {
      config: { requiredScope: 'WRITE' },
      schema: {
        operationId: 'finalizeArtifactUpload',
        summary: 'Finalize an artifact upload',
        description: `Checks the uploaded bytes against the declared size and sha256 (422 and the upload is discarded when they differ) and makes the build deployable. ${ACCESS} Scope: WRITE.`,
        tags,
        params: BuildParams,
        response: { 200: BuildSchema },
      },
    },
    async (request) =>
      buildView(await finalizeArtifactUpload(ctx, principalOf(request), request.params.app, request.params.build)),
  );

  app.post(
    '/v2/apps/:app/environments/:env/deployments',
    {
      config: { requiredScope: 'WRITE' },
      schema: {
        operationId: 'deployBuildToEnvironment',
        summary: 'Deploy a build to an environment',
        description: `Starts the deploy workflow (deploy:<app>:<env>:<build>): one endpoint per resource, created or updated, each released by its rolling release. Poll the deployment for the outcome. 409 while another deployment to the environment runs. 400 when no READY host can get the base image of a runtime the build needs (the problem names the base, why and the setting that names another; docs/apps.md, "Runtime images"). ${ACCESS} Scope: WRITE.`,
        tags,
        params: EnvParams,
        body: DeployBuildSchema,
        response: { 202: DeploymentSchema },
      },
    },
    async (request, reply) =>
      reply
        .code(202)
        .send(
          deploymentView(
            await deployBuild(ctx, principalOf(request), request.params.app, request.params.env, request.body),
          ),
        ),
  );

  app.put(
    '/v2/apps/:app/environments/:env/endpoints/:resource',
    {
      config: { requiredScope: 'WRITE' },
      schema: {
        operationId: 'provisionResource',
        summary: "Provision one resource's endpoint",
        description: `Creates (201) or updates (200) the endpoint of one resource of a READY build, made as a deploy makes it but at once, without the deploy workflow and without touching the environment's other endpoints; the environment moves to the build. The endpoint's workers reload new source versions (PUT .../source) without a restart. In the environment \`live\` endpoints are named \`live-<resource>\`. 404 when the build has no such resource; 409 while a deployment to the environment runs. ${ACCESS} Scope: WRITE.`,
        tags,
        params: ResourceParams,
        body: ProvisionResourceSchema,
        response: { 200: AppEndpointSchema, 201: AppEndpointSchema },
      },
    },
    async (request, reply) => {
      const { created, endpoint } = await provisionResource(
        ctx,
        principalOf(request),
        request.params.app,
        request.params.env,
        request.params.resource,
        request.body,
      );
      return reply.code(created ? 201 : 200).send(appEndpointView(endpoint));
    },
  );

  // The body is the raw tar.gz, streamed to the blob store: its own scope takes any content type as bytes.
  await app.register(async (raw) => {
    raw.removeAllContentTypeParsers();
    raw.addContentTypeParser('*', (_request, payload, done) => done(null, payload));
    raw.put<{ Params: { app: string; env: string } }>(
      '/v2/apps/:app/environments/:env/source',
      {
        config: { requiredScope: 'WRITE' },
        schema: {
          operationId: 'uploadSource',
          summary: "Upload an environment's source files",
          description: `The body is a gzip tar of the project's source files (what a build's \`src/\` holds), at most ${MAX_SOURCE_BYTES} bytes (413 when Content-Length says more, 422 when the stream turns out longer). Answers the new version, counted up from 1 per environment: the workers of endpoints provisioned there (provisionResource) load it within about a second, without a restart. ${ACCESS} Scope: WRITE.`,
          tags,
          params: EnvParams,
          consumes: ['application/gzip'],
          response: { 200: SourceUploadSchema },
        },
      },
      async (request, reply) => {
        // A refusal leaves bytes unread: the connection closes, so the client's next request cannot queue behind them.
        const length = Number(request.headers['content-length']);
        if (Number.isFinite(length) && length > MAX_SOURCE_BYTES) {
          reply.header('connection', 'close');
          return sendProblem(
            reply,
            problem(
              413,
              `the source upload is ${length} bytes; at most ${MAX_SOURCE_BYTES} are taken (send source files only; dependencies belong in the build)`,
            ),
          );
        }
        try {
          return await uploadSource(
            ctx,
            principalOf(request),
            request.params.app,
            request.params.env,
            (request.body as Readable | undefined) ?? request.raw,
          );
        } catch (err) {
          if (!request.raw.readableEnded) reply.header('connection', 'close');
          throw err;
        }
      },
    );
  });

  app.get(
    '/v2/apps/:app/deployments/:deployment',
    {
      config: { requiredScope: 'READ' },
      schema: {
        operationId: 'getDeployment',
        summary: 'Get a deployment',
        tags,
        params: DeploymentParams,
        response: { 200: DeploymentSchema },
      },
    },
    async (request) =>
      deploymentView(await getDeployment(ctx, principalOf(request), request.params.app, request.params.deployment)),
  );
};

/** Reads at most `limit` bytes (the size the build declared); more ends the upload with 422. */
function capped(body: Readable, limit: number): Readable {
  return readAtMost(
    body,
    limit,
    () =>
      new DomainError('validation', 'Request validation failed.', [
        `$: the upload is larger than the ${limit} bytes the build declared`,
      ]),
  );
}

/**
 * The signed artifact routes: no API key, the URL is the credential (HMAC over path and expiry,
 * domain/blobs/signed-urls.ts). A bad or stale signature counts as a failed authentication (the
 * per-address throttle); each build has a request quota; an upload reads no more than the size
 * its build declared. Downloads (artifacts, and the source versions of live environments) are also
 * served on the worker-facing listener: they are how a worker of a deployed app fetches its code.
 */
export const artifactRoutes: FastifyPluginAsyncTypebox<{ ctx: DomainContext }> = async (scope, { ctx }) => {
  // The bytes are streamed to the blob store, never buffered.
  scope.addContentTypeParser('*', (_request, payload, done) => done(null, payload));
  const perObject = (id: string, kind: string) => ({
    counter: `artifact-${kind}/${id}`,
    quotas: { minute: 600, hour: 10_000, day: 100_000 },
  });

  scope.put<{ Params: { buildId: string }; Querystring: Record<string, string> }>(
    '/v2/artifacts/:buildId/upload',
    { schema: { hide: true } },
    async (request, reply) => {
      const path = `/v2/artifacts/${request.params.buildId}/upload`;
      const build = await throttledAuth(request, () =>
        checkArtifactUpload(ctx, request.params.buildId, path, request.query),
      );
      await enforceRateLimit(ctx, reply, perObject(build.id, 'upload'));
      const stored = await receiveArtifactUpload(
        ctx,
        build,
        capped((request.body as Readable | undefined) ?? request.raw, Number(build.size)),
      );
      return reply.code(200).send({ size: stored.size, sha256: stored.sha256 });
    },
  );

  scope.get<{ Params: { envId: string; version: string }; Querystring: Record<string, string> }>(
    '/v2/sources/:envId/:version',
    { schema: { hide: true } },
    async (request, reply) => {
      const { envId, version } = request.params;
      const source = await throttledAuth(request, () =>
        openSourceDownload(ctx, envId, version, `/v2/sources/${envId}/${version}`, request.query),
      );
      await enforceRateLimit(ctx, reply, perObject(envId, 'source-download'));
      return reply
        .header('content-type', 'application/gzip')
        .header('content-length', String(source.size))
        .send(source.body);
    },
  );

  scope.get<{ Params: { buildId: string }; Querystring: Record<string, string> }>(
    '/v2/artifacts/:buildId',
    { schema: { hide: true } },
    async (request, reply) => {
      const path = `/v2/artifacts/${request.params.buildId}`;
      const artifact = await throttledAuth(request, () =>
        openArtifactDownload(ctx, request.params.buildId, path, request.query),
      );
      await enforceRateLimit(ctx, reply, perObject(request.params.buildId, 'download'));
      return reply
        .header('content-type', 'application/gzip')
        .header('content-length', String(artifact.size))
        .header('x-gantry-sha256', artifact.sha256)
        .send(artifact.body);
    },
  );
};
