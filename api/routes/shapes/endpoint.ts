import { Type, type Static } from 'typebox';
import type { Endpoint } from '../../../generated/prisma/client.ts';
import type { DomainContext } from '../../../domain/context.ts';
import {
  EndpointTypeSchema,
  FlashBootSchema,
  loadBalancerBaseUrl,
  ScalingSchema,
  WorkersSchema,
} from '../../../domain/endpoints/index.ts';

/** An endpoint in REST v2 (`/v2/serverless`), with the URLs its requests go to. */
const QueueBasedUrls = Type.Object(
  { run: Type.String({ format: 'uri' }), runSync: Type.String({ format: 'uri' }) },
  { additionalProperties: false },
);
const LoadBalancingUrls = Type.Object({ base: Type.String({ format: 'uri' }) }, { additionalProperties: false });

export const EndpointSchema = Type.Object({
  id: Type.String(),
  name: Type.String(),
  type: EndpointTypeSchema,
  requestUrls: Type.Union([QueueBasedUrls, LoadBalancingUrls]),
  image: Type.String(),
  args: Type.String(),
  disk: Type.Integer(),
  ports: Type.Array(Type.String()),
  env: Type.Record(Type.String(), Type.String()),
  registry: Type.Union([Type.String(), Type.Null()]),
  gpu: Type.Union([Type.Object({ pools: Type.Array(Type.String()), count: Type.Integer() }), Type.Null()]),
  cpu: Type.Union([Type.Object({ id: Type.String(), vcpuCount: Type.Integer(), memory: Type.Integer() }), Type.Null()]),
  workers: WorkersSchema,
  scaling: ScalingSchema,
  dataCenterIds: Type.Array(Type.String()),
  networkVolumes: Type.Array(Type.String()),
  timeout: Type.Integer(),
  flashboot: FlashBootSchema,
  createdAt: Type.String({ format: 'date-time' }),
});

export const EndpointListSchema = Type.Object({ endpoints: Type.Array(EndpointSchema) });

export function endpointView(
  e: Endpoint,
  ctx: Pick<DomainContext, 'publicUrl' | 'settings'>,
): Static<typeof EndpointSchema> {
  const { publicUrl } = ctx;
  return {
    id: e.id,
    name: e.name,
    type: e.type,
    requestUrls:
      e.type === 'QUEUE_BASED'
        ? { run: `${publicUrl}/v2/${e.id}/run`, runSync: `${publicUrl}/v2/${e.id}/runsync` }
        : { base: loadBalancerBaseUrl(e.id, publicUrl, ctx.settings.lbDomain) },
    image: e.image,
    args: e.args,
    disk: e.disk,
    ports: e.ports,
    env: e.env as Record<string, string>,
    registry: e.registryId,
    gpu: e.gpuPools.length > 0 ? { pools: e.gpuPools, count: e.gpuCount ?? 1 } : null,
    cpu: e.cpuFlavorId ? { id: e.cpuFlavorId, vcpuCount: e.cpuVcpuCount ?? 2, memory: e.cpuMemoryGb ?? 1 } : null,
    workers: { min: e.workersMin, max: e.workersMax },
    scaling: { type: e.scalerType, value: e.scalerValue, idleTimeout: e.idleTimeout },
    dataCenterIds: e.dataCenterIds,
    networkVolumes: e.networkVolumeIds,
    timeout: e.timeoutMs,
    flashboot: e.flashboot,
    createdAt: e.createdAt.toISOString(),
  };
}
