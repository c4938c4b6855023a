import { allHandlersFinished, ApplicationFailure, condition, continueAsNew, defineQuery, defineSignal, defineUpdate, proxyActivities, setHandler, workflowInfo } from '@temporalio/workflow';
import type { EndpointActivities } from '../activities/endpoints.ts';
import { specProblems, type EndpointSpec, type EndpointSpecPatch, type EndpointWorkflowInput } from './types.ts';

const { loadEndpointSpec, removeEndpointRecord } = proxyActivities<EndpointActivities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '200 milliseconds', maximumInterval: '10 seconds' },
});

/** Changes `workers`, `scaling` and `timeout` of the running endpoint; answers the new spec. */
export const updateSpec = defineUpdate<EndpointSpec, [EndpointSpecPatch]>('updateSpec');
/** The desired state the workflow holds; null until it has been loaded on first start. */
export const getSpec = defineQuery<EndpointSpec | null>('getSpec');
/** Asks the endpoint to drain and remove itself; the workflow completes once it has. */
export const deleteEndpoint = defineSignal('deleteEndpoint');

/**
 * One entity workflow per endpoint (id `endpoint:<endpointId>`): it holds the desired configuration,
 * takes changes as validated Updates, and continues as new before its history grows large.
 */
export async function endpointWorkflow(input: EndpointWorkflowInput): Promise<void> {
  let spec: EndpointSpec | undefined = input.spec;
  let deleting = false;

  // Handlers come first: an Update may arrive in the very first workflow task.
  setHandler(getSpec, () => spec ?? null);
  setHandler(
    updateSpec,
    async (patch) => {
      await condition(() => spec !== undefined);
      const next = { ...(spec as EndpointSpec), ...patch };
      const problems = specProblems(next);
      if (problems.length > 0) throw ApplicationFailure.nonRetryable(problems.join('; '), 'InvalidEndpointSpec');
      spec = next;
      return spec;
    },
    {
      validator: (patch) => {
        if (!spec) return; // checked again by the handler once the spec is loaded
        const problems = specProblems({ ...spec, ...patch });
        if (problems.length > 0) throw new Error(problems.join('; '));
      },
    },
  );
  setHandler(deleteEndpoint, () => {
    deleting = true;
  });

  spec ??= await loadEndpointSpec(input.endpointId);

  await condition(() => deleting || workflowInfo().continueAsNewSuggested);
  if (!deleting) {
    await condition(() => allHandlersFinished());
    await continueAsNew<typeof endpointWorkflow>({ endpointId: input.endpointId, spec });
    return;
  }
  await removeEndpointRecord(input.endpointId);
}
