import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { DomainContext } from '../../domain/context.ts';
import {
  createPod,
  CreatePodBodySchema,
  getPod,
  listPods,
  podAction,
  PodActionBodySchema,
  terminatePod,
  updatePod,
  UpdatePodBodySchema,
} from '../../domain/pods/index.ts';
import { principalOf } from '../auth.ts';
import { acceptEmptyJsonBodies } from '../empty-json-body.ts';
import { PodListViewSchema, PodViewSchema, podView } from './shapes/pod.ts';

const IdParams = Type.Object({ id: Type.String({ minLength: 1, description: 'pod id' }) });
const ListQuery = Type.Object(
  {
    includeClusterPods: Type.Optional(
      Type.String({ pattern: '^(true|false)$', description: 'accepted, no effect: there are no clusters' }),
    ),
  },
  { additionalProperties: false },
);
const tags = ['Pods'];
const ACCESS = "Needs a key for the whole account (not one limited to endpoints); another account's pod is 404.";
const STATES =
  'RUNNING allows stop, restart and terminate; PROVISIONING and STARTING allow stop and terminate; EXITED allows start and terminate; any other is 409.';

/**
 * REST /v2/pods: long-running containers on a host, the same pods and operations as GraphQL's
 * (domain/pods/pods.ts). An empty JSON body reads as none here, for bodiless actions sent with
 * `Content-Type: application/json`.
 */
export const podRoutes: FastifyPluginAsyncTypebox<{ ctx: DomainContext }> = async (app, { ctx }) => {
  acceptEmptyJsonBodies(app);

  app.get(
    '/v2/pods',
    {
      config: { requiredScope: 'READ' },
      schema: {
        operationId: 'listPods',
        summary: 'List pods',
        description: `The account's pods, oldest first; terminated ones are gone. ${ACCESS} Scope: READ.`,
        tags,
        querystring: ListQuery,
        response: { 200: PodListViewSchema },
      },
    },
    async (request) => ({ pods: (await listPods(ctx, principalOf(request))).map(podView) }),
  );

  app.post(
    '/v2/pods',
    {
      config: { requiredScope: 'WRITE' },
      schema: {
        operationId: 'createPod',
        summary: 'Create a pod',
        description:
          'Creates a pod that should run: `201` once it is recorded and its workflow has it; it is `PROVISIONING` until a host takes it, `STARTING` while its image is pulled and its container starts, then `RUNNING` (poll `getPod`). ' +
          'Give exactly one of `gpu` (a GPU type with `count` cards on one host; a count no registered host has is refused at once, one that is only busy waits) and `cpu` (a CPU pod). ' +
          "`templateId` fills the container settings the body leaves out (`env` merged per key, the body's values winning). `image` is required unless the template names one. " +
          "A `persistent` mount is a volume on the pod's host, kept across stop and start (the pod then stays on that host); `network` names a network volume. " +
          "`gpu.allowedCudaVersions` (major.minor, matched exactly) and `gpu.minCudaVersion` keep the pod to hosts whose CUDA version (nvidia-smi's) meets them; a pod no host meets waits with the reason. " +
          'Accepted with no effect: `cpu.id`, `cpu.vcpuCount`, `dataCenterIds`, `cloud`, `globalNetworking`, `startSsh`, `startJupyter`. ' +
          `Names are unique within the account (409). ${ACCESS} Scope: WRITE.`,
        tags,
        body: CreatePodBodySchema,
        response: { 201: PodViewSchema },
      },
    },
    async (request, reply) => reply.code(201).send(podView(await createPod(ctx, principalOf(request), request.body))),
  );

  app.get(
    '/v2/pods/:id',
    {
      config: { requiredScope: 'READ' },
      schema: {
        operationId: 'getPod',
        summary: 'Get a pod',
        description: `One pod, with its status, the actions that status allows and, while it runs, its published ports. ${ACCESS} Scope: READ.`,
        tags,
        params: IdParams,
        response: { 200: PodViewSchema },
      },
    },
    async (request) => podView(await getPod(ctx, principalOf(request), { podId: request.params.id })),
  );

  app.patch(
    '/v2/pods/:id',
    {
      config: { requiredScope: 'WRITE' },
      schema: {
        operationId: 'updatePod',
        summary: 'Update a pod',
        description:
          "Changes the fields present in the body; the others keep their values. A change of the container settings (`image`, `args`, `disk`, `ports`, `env`, `registry`, `mounts`, or a `templateId` whose settings apply as if given here) restarts a running pod's container with them; a stopped pod gets them at its next start. " +
          'The kind of mount is fixed when the pod is made: a persistent mount may change its size and path, a network mount its path. `locked` and `globalNetworking` are accepted with no effect. ' +
          `${ACCESS} Scope: WRITE.`,
        tags,
        params: IdParams,
        body: UpdatePodBodySchema,
        response: { 200: PodViewSchema },
      },
    },
    async (request) => podView(await updatePod(ctx, principalOf(request), request.params.id, request.body)),
  );

  app.delete(
    '/v2/pods/:id',
    {
      config: { requiredScope: 'WRITE' },
      schema: {
        operationId: 'deletePod',
        summary: 'Terminate a pod',
        description: `Terminates the pod: it is not found from now on and its name is free again; its container, then its persistent volume and its record go (a network volume stays). ${ACCESS} Scope: WRITE.`,
        tags,
        params: IdParams,
        response: { 204: Type.Null({ description: 'terminated; no body' }) },
      },
    },
    async (request, reply) => {
      await terminatePod(ctx, principalOf(request), { podId: request.params.id });
      return reply.code(204).send(null);
    },
  );

  app.post(
    '/v2/pods/:id/action',
    {
      config: { requiredScope: 'WRITE' },
      schema: {
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
      const pod = await podAction(ctx, principalOf(request), request.params.id, request.body);
      return pod ? podView(pod) : reply.code(204).send(null);
    },
  );

  for (const action of ['stop', 'start'] as const) {
    app.post(
      `/v2/pods/:id/${action}`,
      {
        config: { requiredScope: 'WRITE' },
        schema: {
          operationId: `${action}Pod`,
          summary: action === 'stop' ? 'Stop a pod' : 'Start a pod',
          description: `The same as \`podAction\` with \`{"action": "${action}"}\`; no body. ${STATES} ${ACCESS} Scope: WRITE.`,
          tags,
          params: IdParams,
          response: { 200: PodViewSchema },
        },
      },
      async (request) => {
        const pod = await podAction(ctx, principalOf(request), request.params.id, { action });
        // Only terminate answers no pod.
        if (!pod) throw new Error(`pod ${action} answered no pod`);
        return podView(pod);
      },
    );
  }
};
