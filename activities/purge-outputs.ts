import type { DomainContext } from '../domain/context.ts';
import { purgeExpiredOutputs } from '../domain/public-models/index.ts';

/** The purge-expired-outputs workflow's activity: the blob store and the rows of public models' outputs. */
export function createOutputActivities(ctx: Pick<DomainContext, 'db' | 'blobs'>) {
  return {
    /** Deletes up to `limit` expired output objects; answers how many. */
    async purgeExpiredOutputs(limit: number): Promise<number> {
      return purgeExpiredOutputs(ctx, limit);
    },
  };
}

export type OutputActivities = ReturnType<typeof createOutputActivities>;
