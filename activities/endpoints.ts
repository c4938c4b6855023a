import type { Db } from '../domain/db.ts';
import type { EndpointSpec } from '../workflows/types.ts';

/** Database side effects of the endpoint workflow. */
export function createEndpointActivities(db: Db) {
  return {
    async loadEndpointSpec(endpointId: string): Promise<EndpointSpec> {
      const e = await db.endpoint.findUniqueOrThrow({ where: { id: endpointId } });
      return {
        endpointId: e.id,
        workersMin: e.workersMin,
        workersMax: e.workersMax,
        scalerType: e.scalerType,
        scalerValue: e.scalerValue,
        idleTimeout: e.idleTimeout,
        timeoutMs: e.timeoutMs,
        releaseVersion: e.currentReleaseVersion,
      };
    },

    async removeEndpointRecord(endpointId: string): Promise<void> {
      await db.endpoint.deleteMany({ where: { id: endpointId } });
    },
  };
}

export type EndpointActivities = ReturnType<typeof createEndpointActivities>;
