import { Type, type Static } from 'typebox';
import type { Build } from '../../../generated/prisma/client.ts';
import type {
  AppEndpointModel,
  AppModel,
  DeploymentModel,
  EnvironmentModel,
  PreparedUpload,
} from '../../../domain/apps/index.ts';

/**
 * Apps in REST v2 (`/v2/apps`, docs/apps.md "Platform REST"): apps, environments, their endpoints,
 * builds, deployments and live reload's source versions, from the domain's models and rows.
 */

export const AppEndpointSchema = Type.Object({
  resource: Type.String(),
  id: Type.String(),
  name: Type.String(),
  type: Type.Union([Type.Literal('QUEUE_BASED'), Type.Literal('LOAD_BALANCING')]),
  kind: Type.Union([Type.Literal('queue'), Type.Literal('lb')]),
  url: Type.String({
    description: 'queue-based: {run_url}/v2/{id} (add /run or /runsync); load-balanced: the base URL of its routes',
  }),
  routes: Type.Array(Type.Object({ method: Type.String(), path: Type.String() })),
});
export type AppEndpointView = Static<typeof AppEndpointSchema>;

export const EnvironmentSchema = Type.Object({
  id: Type.String(),
  name: Type.String(),
  createdAt: Type.String({ format: 'date-time' }),
  currentBuildId: Type.Union([Type.String(), Type.Null()]),
  state: Type.Union(
    [Type.Literal('PENDING'), Type.Literal('DEPLOYING'), Type.Literal('DEPLOYED'), Type.Literal('FAILED')],
    {
      description:
        'PENDING: nothing deployed yet; DEPLOYING: a deployment is running; DEPLOYED: the last deployment succeeded; FAILED: the last one failed (currentBuildId still runs, if any)',
    },
  ),
  /** The deployment under way, if one is. */
  deploying: Type.Union([
    Type.Object({
      deploymentId: Type.String(),
      buildId: Type.String(),
      startedAt: Type.String({ format: 'date-time' }),
    }),
    Type.Null(),
  ]),
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

const NullableString = Type.Union([Type.String(), Type.Null()]);
export const BuildSchema = Type.Object({
  id: Type.String(),
  kind: Type.Union([Type.Literal('GANTRY'), Type.Literal('FLASH')], {
    description: "GANTRY: made by gantry deploy; FLASH: by the hosted service's flash tool (GraphQL)",
  }),
  sha256: Type.Union([Type.String(), Type.Null()], {
    description: 'null only while a FLASH build is uploading (Gantry computes it at finalize)',
  }),
  size: Type.Integer(),
  fingerprint: NullableString,
  pythonVersion: NullableString,
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

/** Where one resource of a deployment stands (what `gantry deploy` prints while it waits). */
export const DeploymentResourceSchema = Type.Object({
  resource: Type.String(),
  endpointId: Type.String(),
  state: Type.Union(
    [
      Type.Literal('pending'),
      Type.Literal('waiting'),
      Type.Literal('starting'),
      Type.Literal('releasing'),
      Type.Literal('ready'),
      Type.Literal('failed'),
      Type.Literal('unchanged'),
    ],
    {
      description:
        "pending: its release is not made yet; waiting: a new worker has no host yet (detail says why); starting: a new worker's image or container is on its way; releasing: new workers are ready, old ones go; ready; failed (detail says why); unchanged: the build changed nothing of it",
    },
  ),
  release: Type.Union([Type.Integer(), Type.Null()], { description: 'the release this deployment made, if any' }),
  workers: Type.Object({ ready: Type.Integer(), starting: Type.Integer(), waiting: Type.Integer() }),
  detail: Type.Union([Type.String(), Type.Null()]),
});

export const DeploymentSchema = Type.Object({
  id: Type.String(),
  workflowId: Type.Union([Type.String(), Type.Null()], {
    description: 'the deploy workflow; null for a FLASH build, made active without one',
  }),
  status: Type.Union([Type.Literal('RUNNING'), Type.Literal('SUCCEEDED'), Type.Literal('FAILED')]),
  error: Type.Union([Type.String(), Type.Null()]),
  buildId: Type.String(),
  environment: Type.String(),
  createdAt: Type.String({ format: 'date-time' }),
  finishedAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  endpoints: Type.Array(AppEndpointSchema),
  resources: Type.Array(DeploymentResourceSchema),
});
export type DeploymentView = Static<typeof DeploymentSchema>;

/** A source upload's answer (PUT .../source), and the worker protocol's source poll (worker-protocol.ts). */
export const SourceUploadSchema = Type.Object({
  version: Type.Integer({ minimum: 1, description: 'counts up from 1 per environment' }),
  sha256: Type.String({ description: 'sha256 (hex) of the uploaded bytes' }),
});
export const WorkerSourceSchema = Type.Object({
  version: Type.Integer({ minimum: 1 }),
  sha256: Type.String(),
  url: Type.String({ description: 'signed, valid one hour; served on the worker-facing listener too' }),
});

/** The REST shape of an app endpoint: where to call it, and the routes of its resource (load-balanced ones). */
export function appEndpointView({ row: e, resource, url }: AppEndpointModel): AppEndpointView {
  return {
    resource: e.appResource ?? e.name,
    id: e.id,
    name: e.name,
    type: e.type,
    kind: e.type === 'LOAD_BALANCING' ? 'lb' : 'queue',
    url,
    routes: (resource?.routes ?? []).map((r) => ({ method: r.method, path: r.path })),
  };
}

export function environmentView({ row: env, state, deploying, endpoints }: EnvironmentModel): EnvironmentView {
  return {
    id: env.id,
    name: env.name,
    createdAt: env.createdAt.toISOString(),
    currentBuildId: env.currentBuildId,
    state,
    deploying: deploying
      ? { deploymentId: deploying.id, buildId: deploying.buildId, startedAt: deploying.createdAt.toISOString() }
      : null,
    endpoints: endpoints.map(appEndpointView),
  };
}

export function appView({ row: app, environments }: AppModel): AppView {
  return {
    id: app.id,
    name: app.name,
    createdAt: app.createdAt.toISOString(),
    environments: environments.map(environmentView),
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

export const preparedUploadView = ({ build, upload }: PreparedUpload): PreparedUploadView => ({
  build: buildView(build),
  upload,
});

export function deploymentView({ row: d, environment, endpoints, resources }: DeploymentModel): DeploymentView {
  return {
    id: d.id,
    workflowId: d.workflowId,
    status: d.status,
    error: d.error,
    buildId: d.buildId,
    environment,
    createdAt: d.createdAt.toISOString(),
    finishedAt: d.finishedAt?.toISOString() ?? null,
    endpoints: endpoints.map(appEndpointView),
    resources,
  };
}
