import type { Db } from '../domain/db.ts';
import { createEndpointActivities } from './endpoints.ts';

/** Every activity the Temporal worker registers, bound to its dependencies. */
export function createActivities(deps: { db: Db }) {
  return { ...createEndpointActivities(deps.db) };
}
