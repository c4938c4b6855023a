/**
 * Called by the rollout workflow (workflows/rollout.ts): a release's outcome. The rollout also calls
 * createWorkerRecords and endpointScalingState, which live with the endpoint workflow's activities
 * (activities/endpoint.ts).
 */
import type { Db } from '../domain/shared/index.ts';
import type { Prisma } from '../generated/prisma/client.ts';

export function createRolloutActivities(db: Db) {
  return {
    /**
     * Records a release's outcome. A halted release rolls the endpoint back: its current version
     * and container configuration return to the previous release's.
     */
    async finishRelease(input: {
      endpointId: string;
      version: number;
      previousVersion: number;
      outcome: 'COMPLETED' | 'HALTED' | 'SUPERSEDED';
      reason?: string;
    }): Promise<void> {
      await db.$transaction(async (tx) => {
        const now = new Date();
        await tx.release.updateMany({
          where: { endpointId: input.endpointId, version: input.version, status: 'ROLLING_OUT' },
          data: { status: input.outcome, statusReason: input.reason ?? null, finishedAt: now },
        });
        if (input.outcome === 'COMPLETED') {
          await tx.release.updateMany({
            where: {
              endpointId: input.endpointId,
              version: { lt: input.version },
              status: { in: ['COMPLETED', 'ROLLING_OUT'] },
            },
            data: { status: 'SUPERSEDED', finishedAt: now },
          });
        }
        if (input.outcome === 'HALTED') {
          const previous = await tx.release.findUnique({
            where: { endpointId_version: { endpointId: input.endpointId, version: input.previousVersion } },
          });
          // Only when no newer release was made meanwhile.
          const rolledBack = await tx.endpoint.updateMany({
            where: { id: input.endpointId, currentReleaseVersion: input.version },
            data: {
              currentReleaseVersion: input.previousVersion,
              ...(previous
                ? {
                    image: previous.image,
                    args: previous.args,
                    disk: previous.disk,
                    ports: previous.ports,
                    env: (previous.env ?? {}) as Prisma.InputJsonValue,
                    registryId: previous.registryId,
                  }
                : {}),
            },
          });
          // The previous release is the live one again.
          if (rolledBack.count > 0 && previous?.status === 'SUPERSEDED')
            await tx.release.update({ where: { id: previous.id }, data: { status: 'COMPLETED' } });
        }
      });
    },
  };
}

export type RolloutActivities = ReturnType<typeof createRolloutActivities>;
