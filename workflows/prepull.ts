import { ActivityFailure, ApplicationFailure, log, proxyActivities } from '@temporalio/workflow';
import type { ImagePrepullActivities } from '../activities/image-prepull.ts';
import type { ImagePrepullInput, ImagePrepullResult } from '../contracts/workflows.ts';

const { planImagePrepull } = proxyActivities<ImagePrepullActivities>({
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '1 second', maximumInterval: '10 seconds', maximumAttempts: 5 },
});

function failureReason(err: unknown): string {
  if (err instanceof ActivityFailure && err.cause instanceof ApplicationFailure) return err.cause.message;
  if (err instanceof ActivityFailure && err.cause) return err.cause.message;
  return err instanceof Error ? err.message : String(err);
}

/**
 * One per release (id `prepull:<endpointId>:<version>`), started by the domain when an endpoint is
 * created or gets a new release: pulls the release's image onto the hosts placement would put its
 * workers on first (GANTRY_PREPULL_HOSTS of them), so that the first cold start there pays no pull.
 * The hosts pull side by side; a host that fails after a few tries is logged and left to its
 * workers' own pull, and never stops the others. It ends with what each host did.
 */
export async function imagePrepullWorkflow(input: ImagePrepullInput): Promise<ImagePrepullResult> {
  const plan = await planImagePrepull(input);
  if (!plan.image || plan.hostIds.length === 0) return { image: plan.image, hosts: [] };
  // The same window as a worker's pull (workflows/worker.ts), heartbeats included.
  const { prepullImage } = proxyActivities<ImagePrepullActivities>({
    startToCloseTimeout: `${plan.pullTimeoutSec + 60} seconds`,
    heartbeatTimeout: '1 minute',
    retry: { initialInterval: '5 seconds', maximumInterval: '1 minute', maximumAttempts: 3 },
  });
  const hosts = await Promise.all(
    plan.hostIds.map(async (hostId) => {
      try {
        const { outcome } = await prepullImage({ ...input, hostId });
        return { hostId, ok: true, outcome };
      } catch (err) {
        const reason = failureReason(err);
        log.warn('could not pull the image ahead', { ...input, hostId, image: plan.image, reason });
        return { hostId, ok: false, outcome: reason };
      }
    }),
  );
  return { image: plan.image, hosts };
}
