/**
 * The endpoint every job API call needs, from the process's record cache (domain/shared/record-cache.ts):
 * a deleted endpoint is refused within the revocation bound, a new one works at once.
 */
import type { Db } from '../shared/db.ts';
import { liveEndpoint, type LiveEndpoint, type RecordCaches } from '../shared/record-cache.ts';

export type QueueEndpoint = LiveEndpoint;

export class QueueEndpoints {
  constructor(
    private readonly db: Db,
    private readonly records: RecordCaches,
  ) {}

  /** The endpoint unless it does not exist or is being deleted (not remembered: a new one shows at once). */
  async find(endpointId: string): Promise<QueueEndpoint | null> {
    return (await liveEndpoint({ db: this.db, records: this.records }, endpointId)) ?? null;
  }
}
