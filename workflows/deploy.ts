import { ApplicationFailure, proxyActivities } from '@temporalio/workflow';
import type { DeployActivities } from '../activities/deploy.ts';
import type { DeployWorkflowInput, DeployWorkflowResult } from '../contracts/workflows.ts';

const { applyDeployment, revertDeployment, completeDeployment, failDeployment } = proxyActivities<DeployActivities>({
  startToCloseTimeout: '2 minutes',
  retry: {
    initialInterval: '1 second',
    maximumInterval: '15 seconds',
    maximumAttempts: 10,
    nonRetryableErrorTypes: ['DeployRefused'],
  },
});

/** Waits inside one activity (heartbeating) rather than a timer per poll: a release takes minutes, the history stays short. */
const { waitForReleases } = proxyActivities<DeployActivities>({
  startToCloseTimeout: '40 minutes',
  heartbeatTimeout: '30 seconds',
  retry: { initialInterval: '1 second', maximumInterval: '15 seconds', maximumAttempts: 10 },
});

/**
 * `deploy:<app>:<env>:<build>`: puts a build on an environment (docs/apps.md). One endpoint per
 * resource is created or updated (a changed artifact is a new release on every endpoint); the
 * releases are the endpoints' own rollout workflows, this one waits for them. All released: the
 * environment moves to the build and endpoints of resources no longer in the code go. One halted:
 * the endpoints that moved go back to the previous build and the deployment fails; the
 * environment stays where it was.
 */
export async function deployWorkflow(input: DeployWorkflowInput): Promise<DeployWorkflowResult> {
  let applied;
  try {
    applied = await applyDeployment(input.deploymentId);
  } catch (err) {
    const error = failureMessage(err);
    await failDeployment(input.deploymentId, error);
    return { status: 'FAILED', error };
  }
  const outcome = await waitForReleases(applied.releases);
  if (outcome.failed.length > 0) {
    const error = `the release of ${outcome.failed.map((f) => `${f.resource} (${f.reason})`).join(', ')} did not finish; the environment stays on its previous build`;
    await revertDeployment(input.deploymentId, applied.releases);
    await failDeployment(input.deploymentId, error);
    return { status: 'FAILED', error };
  }
  await completeDeployment(input.deploymentId);
  return { status: 'SUCCEEDED' };
}

function failureMessage(err: unknown): string {
  let e: unknown = err;
  // An activity's failure arrives wrapped: the message that matters is its cause's.
  while (e instanceof Error && e.cause instanceof Error) e = e.cause;
  if (e instanceof ApplicationFailure || e instanceof Error) return e.message;
  return String(e);
}
