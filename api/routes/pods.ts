import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import type { DomainContext } from '../../domain/context.ts';
import {
  createPod,
  CreatePodBodySchema,
  getPodView,
  listPodViews,
  podAction,
  PodActionBodySchema,
  PodListViewSchema,
  PodViewSchema,
  terminatePod,
  updatePod,
  UpdatePodBodySchema,
} from '../../domain/pods.ts';
import { principalOf, scopeGuard } from '../auth.ts';
import { acceptEmptyJsonBodies } from '../empty-json-body.ts';

const IdParams = Type.Object({ id: Type.String({ minLength: 1, description: 'pod id' }) });
const ListQuery = Type.Object(
  { includeClusterPods: Type.Optional(Type.String({ pattern: '^(true|false)$', description: 'accepted, no effect: there are no clusters' })) },
  { additionalProperties: false },
);
const tags = ['Pods'];
const ACCESS = "Needs a key for the whole account (not one limited to endpoints); another account's pod is 404.";
const STATES =
  'RUNNING allows stop, restart and terminate; PROVISIONING and STARTING allow stop and terminate; EXITED allows start and terminate; any other is 409.';

/**
 * REST /v2/pods: long-running containers on a host, the same pods and operations as GraphQL's
 * (domain/pods.ts). In a scope that reads an empty JSON body as none, for bodiless actions sent
 * with `Content-Type: application/json`.
 */
export function podRoutes(app: FastifyInstance, ctx: DomainContext): void {
  void app.register(async (scope) => {
    acceptEmptyJsonBodies(scope);

    scope.get(
      '/v2/pods',
      {
        onRequest: scopeGuard(ctx.db, 'READ'),
        schema: {
          'x-required-scope': 'READ',
          operationId: 'listPods',
          summary: 'List pods',
          description: `The account's pods, oldest first; terminated ones are gone. ${ACCESS} Scope: READ.`,
          tags,
          querystring: ListQuery,
          response: { 200: PodListViewSchema },
        },
      },
      async (request) => ({ pods: await listPodViews(ctx, await principalOf(ctx.db, request)) }),
    );

    scope.post(
      '/v2/pods',
      {
        onRequest: scopeGuard(ctx.db, 'WRITE'),
        schema: {
          'x-required-scope': 'WRITE',
          operationId: 'createPod',
          summary: 'Create a pod',
          description:
            'Creates a pod that should run: `201` once it is recorded and its workflow has it; it is `PROVISIONING` until a host takes it, `STARTING` while its image is pulled and its container starts, then `RUNNING` (poll `getPod`). ' +
            'Give exactly one of `gpu` (a GPU type with `count` cards on one host; a count no registered host has is refused at once, one that is only busy waits) and `cpu` (a CPU pod). ' +
            "`templateId` fills the container settings the body leaves out (`env` merged per key, the body's values winning). `image` is required unless the template names one. " +
            'A `persistent` mount is a volume on the pod\'s host, kept across stop and start (the pod then stays on that host); `network` names a network volume. ' +
            'Accepted with no effect: `cpu.id`, `cpu.vcpuCount`, `gpu.allowedCudaVersions`, `gpu.minCudaVersion`, `dataCenterIds`, `cloud`, `globalNetworking`, `startSsh`, `startJupyter`. ' +
            `Names are unique within the account (409). ${ACCESS} Scope: WRITE.`,
          tags,
          body: CreatePodBodySchema,
          response: { 201: PodViewSchema },
        },
      },
      async (request, reply) => reply.code(201).send(await createPod(ctx, await principalOf(ctx.db, request), request.body)),
    );

    scope.get<{ Params: { id: string } }>(
      '/v2/pods/:id',
      {
        onRequest: scopeGuard(ctx.db, 'READ'),
        schema: {
          'x-required-scope': 'READ',
          operationId: 'getPod',
          summary: 'Get a pod',
          description: `One pod, with its status, the actions that status allows and, while it runs, its published ports. ${ACCESS} Scope: READ.`,
          tags,
          params: IdParams,
          response: { 200: PodViewSchema },
        },
      },
      async (request) => getPodView(ctx, await principalOf(ctx.db, request), request.params.id),
    );

    scope.patch<{ Params: { id: string } }>(
      '/v2/pods/:id',
      {
        onRequest: scopeGuard(ctx.db, 'WRITE'),
        schema: {
          'x-required-scope': 'WRITE',
          operationId: 'updatePod',
          summary: 'Update a pod',
          description:
            'Changes the fields present in the body; the others keep their values. A change of the container settings (`image`, `args`, `disk`, `ports`, `env`, `registry`, `mounts`, or a `templateId` whose settings apply as if given here) restarts a running pod\'s container with them; a stopped pod gets them at its next start. ' +
            'The kind of mount is fixed when the pod is made: a persistent mount may change its size and path, a network mount its path. `locked` and `globalNetworking` are accepted with no effect. ' +
            `${ACCESS} Scope: WRITE.`,
          tags,
          params: IdParams,
          body: UpdatePodBodySchema,
          response: { 200: PodViewSchema },
        },
      },
      async (request) => updatePod(ctx, await principalOf(ctx.db, request), request.params.id, request.body),
    );

    scope.delete<{ Params: { id: string } }>(
      '/v2/pods/:id',
      {
        onRequest: scopeGuard(ctx.db, 'WRITE'),
        schema: {
          'x-required-scope': 'WRITE',
          operationId: 'deletePod',
          summary: 'Terminate a pod',
          description: `Terminates the pod: it is not found from now on and its name is free again; its container, then its persistent volume and its record go (a network volume stays). ${ACCESS} Scope: WRITE.`,
          tags,
          params: IdParams,
          response: { 204: Type.Null({ description: 'terminated; no body' }) },
        },
      },
      async (request, reply) => {
        await terminatePod(ctx, await principalOf(ctx.db, request), { podId: request.params.id });
        return reply.code(204).send();
      },
    );

    scope.post<{ Params: { id: string } }>(
      '/v2/pods/:id/action',
      {
        onRequest: scopeGuard(ctx.db, 'WRITE'),
        schema: {
          'x-required-scope': 'WRITE',
          operationId: 'podAction',
          summary: 'Change the state of a pod',
          description:
            '`{"action": ...}`: `start` runs a stopped pod again (a new container), `stop` removes its container and keeps the pod (`EXITED`), `restart` replaces its container, `terminate` is `deletePod`. ' +
            `Answers the pod, or 204 for terminate. ${STATES} ${ACCESS} Scope: WRITE.`,
          tags,
          params: IdParams,
          body: PodActionBodySchema,
          response: { 200: PodViewSchema, 204: Type.Null({ description: 'terminated; no body' }) },
        },
      },
      async (request, reply) => {
        const pod = await podAction(ctx, await principalOf(ctx.db, request), request.params.id, request.body);
        return pod ? pod : reply.code(204).send();
      },
    );

    for (const action of ['stop', 'start'] as const) {
      scope.post<{ Params: { id: string } }>(
        `/v2/pods/:id/${action}`,
        {
          onRequest: scopeGuard(ctx.db, 'WRITE'),
          schema: {
            'x-required-scope': 'WRITE',
            operationId: `${action}Pod`,
            summary: action === 'stop' ? 'Stop a pod' : 'Start a pod',
            description: `The same as \`podAction\` with \`{"action": "${action}"}\`; no body. ${STATES} ${ACCESS} Scope: WRITE.`,
            tags,
            params: IdParams,
            response: { 200: PodViewSchema },
          },
        },
        async (request) => podAction(ctx, await principalOf(ctx.db, request), request.params.id, { action }),
      );
    }
  });
}
