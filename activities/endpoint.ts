import type { Db } from '../domain/shared/db.ts';
import type { Endpoint } from '../generated/prisma/client.ts';
import type { EndpointSpec } from '../contracts/workflows.ts';

/** The part of an endpoint's row its workflow executes. */
export function endpointSpecOf(e: Endpoint): EndpointSpec {
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
}

/** Database side effects of the endpoint workflow. */
export function createEndpointActivities(db: Db) {
  return {
    /** The first read of a new run (retried until the row can be read). */
    async loadEndpointSpec(endpointId: string): Promise<EndpointSpec> {
      return endpointSpecOf(await db.endpoint.findUniqueOrThrow({ where: { id: endpointId } }));
    },

    /** The read after `endpointChanged`: the row is the truth. Null once the row is gone. */
    async readEndpointSpec(endpointId: string): Promise<EndpointSpec | null> {
      const e = await db.endpoint.findUnique({ where: { id: endpointId } });
      return e ? endpointSpecOf(e) : null;
    },

    async removeEndpointRecord(endpointId: string): Promise<void> {
      await db.endpoint.deleteMany({ where: { id: endpointId } });
    },
  };
}

export type EndpointActivities = ReturnType<typeof createEndpointActivities>;
