import { Type, type Static } from 'typebox';
import type { CpuTypeModel } from '../../../domain/catalog/index.ts';

/** A CPU flavor in REST v2 (`/v2/catalog/cpus`): its sizes on the READY hosts and its list prices. */
export const CpuTypeSchema = Type.Object({
  id: Type.String({ description: 'CPU flavor id (cpu.id of an endpoint)' }),
  name: Type.String(),
  group: Type.String({ description: 'flavor family' }),
  vcpu: Type.Object({
    min: Type.Integer(),
    max: Type.Integer({ description: 'largest power of two a READY host can give at this memory per vCPU' }),
  }),
  ramGbPerVcpu: Type.Number({ description: 'GB of memory per vCPU' }),
  price: Type.Object({
    securePerVcpu: Type.Number({ description: 'pod price per vCPU per hour, USD' }),
    serverlessPerVcpu: Type.Number({ description: 'serverless price per vCPU per hour, USD' }),
  }),
  hosts: Type.Integer({ description: 'READY hosts that can run this flavor at its minimum size' }),
});
export type CpuTypeView = Static<typeof CpuTypeSchema>;
export const CpuTypeListSchema = Type.Object({ cpus: Type.Array(CpuTypeSchema) });

/** The REST shape of a CPU flavor, from the domain's model. */
export function cpuTypeView({ flavor, vcpus, hosts, rate }: CpuTypeModel): CpuTypeView {
  return {
    id: flavor.id,
    name: flavor.name,
    group: flavor.group,
    vcpu: { min: vcpus.min, max: vcpus.max },
    ramGbPerVcpu: flavor.ramGbPerVcpu,
    price: { securePerVcpu: rate.podPerVcpuHour, serverlessPerVcpu: rate.serverlessPerVcpuHour },
    hosts,
  };
}
