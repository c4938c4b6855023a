import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import {
  DataCenterQuerySchema,
  getCpuType,
  getDataCenter,
  getGpuType,
  GpuCatalogQuerySchema,
  listCpuTypes,
  listDataCenters,
  listGpuTypes,
} from '../../domain/catalog/index.ts';
import type { DomainContext } from '../../domain/context.ts';
import { principalOf } from '../auth.ts';
import { CpuTypeListSchema, CpuTypeSchema, cpuTypeView } from './shapes/cpu-type.ts';
import { DataCenterListSchema, DataCenterSchema, dataCenterView } from './shapes/data-center.ts';
import { GpuTypeListSchema, GpuTypeSchema, gpuTypeView } from './shapes/gpu-type.ts';

const tags = ['Catalog'];
const FROM_HOSTS =
  'Derived from the registered hosts: only hosts with status READY count, and a GPU is available when its host can pass GPUs to containers and no live worker holds it. Scope: READ.';

/** REST /v2/catalog: GPU types, CPU flavors and data centers the hosts offer. */
export const catalogRoutes: FastifyPluginAsyncTypebox<{ ctx: DomainContext }> = async (app, { ctx }) => {
  app.get(
    '/v2/catalog/gpus',
    {
      config: { requiredScope: 'READ' },
      schema: {
        operationId: 'listGpuTypes',
        summary: 'List GPU types',
        description: `Every GPU type of the serverless pools, and any other type a READY host has, with its serverless pool (the ids endpoints name in gpu.pools), memory, count and list prices. A type no READY host has is listed with no stock: count 0, maxCount.secure 0, secure false (availability NONE, no dataCenters). include=AVAILABILITY (with product) adds availability overall and per data center for \`count\` GPUs on one host. ${FROM_HOSTS}`,
        tags,
        querystring: GpuCatalogQuerySchema,
        response: { 200: GpuTypeListSchema },
      },
    },
    async (request) => ({
      gpus: (await listGpuTypes(ctx, principalOf(request), request.query)).map(gpuTypeView),
    }),
  );

  app.get(
    '/v2/catalog/gpus/:id',
    {
      config: { requiredScope: 'READ' },
      schema: {
        operationId: 'getGpuType',
        summary: 'Get a GPU type',
        description: `One GPU type by id (the name nvidia-smi prints, URL-encoded); a type of the pools no READY host has answers with no stock; 404 for a type neither the pools nor a READY host know. ${FROM_HOSTS}`,
        tags,
        params: Type.Object({
          id: Type.String({ minLength: 1, description: 'GPU type id, e.g. "NVIDIA GeForce RTX 4090"' }),
        }),
        querystring: GpuCatalogQuerySchema,
        response: { 200: GpuTypeSchema },
      },
    },
    async (request) => gpuTypeView(await getGpuType(ctx, principalOf(request), request.params.id, request.query)),
  );

  app.get(
    '/v2/catalog/cpus',
    {
      config: { requiredScope: 'READ' },
      schema: {
        operationId: 'listCpuTypes',
        summary: 'List CPU flavors',
        description: `CPU flavors (by memory per vCPU: cpu3c 2 GB, cpu3g 4 GB, cpu3m 8 GB) that fit at least one host with 2 vCPUs; vcpu.max is the largest power of two a host can give. ${FROM_HOSTS}`,
        tags,
        response: { 200: CpuTypeListSchema },
      },
    },
    async (request) => ({ cpus: (await listCpuTypes(ctx, principalOf(request))).map(cpuTypeView) }),
  );

  app.get(
    '/v2/catalog/cpus/:id',
    {
      config: { requiredScope: 'READ' },
      schema: {
        operationId: 'getCpuType',
        summary: 'Get a CPU flavor',
        description: `One CPU flavor; 404 when unknown or no host fits it. ${FROM_HOSTS}`,
        tags,
        params: Type.Object({ id: Type.String({ minLength: 1, description: 'CPU flavor id, e.g. cpu3c' }) }),
        response: { 200: CpuTypeSchema },
      },
    },
    async (request) => cpuTypeView(await getCpuType(ctx, principalOf(request), request.params.id)),
  );

  app.get(
    '/v2/catalog/datacenters',
    {
      config: { requiredScope: 'READ' },
      schema: {
        operationId: 'listDataCenters',
        summary: 'List data centers',
        description: `Every dataCenterId a registered host carries (whatever its status), with host and GPU counts; the region comes from the id's first segment (US-, EU-, AP-, ...). include=GPU_AVAILABILITY adds per-GPU-type availability. ${FROM_HOSTS}`,
        tags,
        querystring: DataCenterQuerySchema,
        response: { 200: DataCenterListSchema },
      },
    },
    async (request) => ({
      dataCenters: (await listDataCenters(ctx, principalOf(request), request.query)).map(dataCenterView),
    }),
  );

  app.get(
    '/v2/catalog/datacenters/:id',
    {
      config: { requiredScope: 'READ' },
      schema: {
        operationId: 'getDataCenter',
        summary: 'Get a data center',
        description: `One data center; 404 when no host carries that id. ${FROM_HOSTS}`,
        tags,
        params: Type.Object({ id: Type.String({ minLength: 1, description: 'data center id' }) }),
        querystring: DataCenterQuerySchema,
        response: { 200: DataCenterSchema },
      },
    },
    async (request) => dataCenterView(await getDataCenter(ctx, principalOf(request), request.params.id, request.query)),
  );
};
