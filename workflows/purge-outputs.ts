import { proxyActivities } from '@temporalio/workflow';
import type { OutputActivities } from '../activities/purge-outputs.ts';
import type { PurgeOutputsResult } from '../contracts/workflows.ts';

const { purgeExpiredOutputs } = proxyActivities<OutputActivities>({
  startToCloseTimeout: '5 minutes',
  retry: { initialInterval: '1 second', maximumInterval: '1 minute', maximumAttempts: 5 },
});

/** Batches a run deletes at most; the next scheduled run takes the rest. */
const MAX_BATCHES = 50;
const BATCH = 1000;

/**
 * Started by the `purge-expired-outputs` schedule (GANTRY_OUTPUT_PURGE_INTERVAL_MS): deletes the
 * output files of public models whose URLs have expired, in batches, each an activity.
 */
export async function purgeExpiredOutputsWorkflow(): Promise<PurgeOutputsResult> {
  let deleted = 0;
  for (let i = 0; i < MAX_BATCHES; i++) {
    const n = await purgeExpiredOutputs(BATCH);
    deleted += n;
    if (n < BATCH) break;
  }
  return { deleted };
}
