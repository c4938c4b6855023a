import {
  allHandlersFinished,
  condition,
  continueAsNew,
  defineQuery,
  defineSignal,
  defineUpdate,
  getExternalWorkflowHandle,
  patched,
  proxyActivities,
  proxyLocalActivities,
  setHandler,
  sleep,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { HostActivities, HostProbeResult, OrchestrationSettings } from '../activities/hosts.ts';
import { GantryKind, gantrySearchAttributes, LABEL_OLD_RUNS_PATCH } from './search-attributes.ts';
import { drainWorker } from './worker.ts';

const { probeAndRecordHost, liveWorkersOnHost, deleteHostRecord } = proxyActivities<HostActivities>({
  // A probe waits up to 20 s for the connection and 120 s for the script.
  startToCloseTimeout: '3 minutes',
  retry: { initialInterval: '1 second', maximumInterval: '30 seconds', maximumAttempts: 3 },
});
const { reconcileHostContainers } = proxyActivities<HostActivities>({
  startToCloseTimeout: '5 minutes',
  heartbeatTimeout: '2 minutes',
  retry: { initialInterval: '1 second', maximumInterval: '30 seconds', maximumAttempts: 3 },
});
const { orchestrationSettings } = proxyLocalActivities<HostActivities>({ startToCloseTimeout: '10 seconds' });

/** Probes the host now (and, with acceptHostKey, pins that key first); answers the result. */
export const probeHostNow = defineUpdate<HostProbeResult, [{ acceptHostKey?: string }]>('probeHostNow');
/** Drains the host's workers, then removes the host record; the workflow completes once it has. */
export const removeHost = defineSignal('removeHost');
export const getHostStatus = defineQuery<HostProbeResult | null>('getHostStatus');

export interface HostWorkflowInput {
  hostId: string;
  settings?: OrchestrationSettings;
}

/**
 * One workflow per host (id `host:<hostId>`): probes it periodically (more often while it is
 * unreachable) and on demand, keeps its status, rebuilds worker state from container labels while
 * it is READY, and drains it before it is removed.
 */
export async function hostWorkflow(input: HostWorkflowInput): Promise<void> {
  const { hostId } = input;
  let requested = 0;
  let completed = 0;
  let acceptHostKey: string | undefined;
  let last: HostProbeResult | null = null;
  let removing = false;

  setHandler(probeHostNow, async (options) => {
    if (options?.acceptHostKey) acceptHostKey = options.acceptHostKey;
    const mine = ++requested;
    await condition(() => completed >= mine || removing);
    return last ?? { status: 'PENDING', statusReason: 'not probed yet', becameReady: false };
  });
  setHandler(removeHost, () => {
    removing = true;
  });
  setHandler(getHostStatus, () => last);

  const settings = input.settings ?? (await orchestrationSettings());
  // A run started before the search attributes existed labels itself once (continue-as-new keeps it).
  if (workflowInfo().typedSearchAttributes.get(GantryKind) === undefined && patched(LABEL_OLD_RUNS_PATCH)) {
    upsertSearchAttributes(gantrySearchAttributes('host', { hostId }));
  }

  while (!removing) {
    const round = requested;
    const accept = acceptHostKey;
    acceptHostKey = undefined;
    last = await probeAndRecordHost(hostId, accept ? { acceptHostKey: accept } : {});
    if (last.status === 'GONE') return;
    if (last.status === 'READY') {
      // Cheap (one SSH command) and the only way to notice containers left by a crash.
      try {
        await reconcileHostContainers(hostId);
      } catch {
        // Tried again next round; the probe result stands.
      }
    }
    completed = Math.max(completed, round);
    const interval = last.status === 'READY' || last.status === 'DISABLED' ? settings.hostProbeIntervalSec : settings.hostRetryIntervalSec;
    await condition(() => removing || requested > completed, interval * 1000);
    if (!removing && requested === completed && workflowInfo().continueAsNewSuggested) {
      await condition(allHandlersFinished);
      await continueAsNew<typeof hostWorkflow>({ hostId, settings });
    }
  }

  // Removal: the host's workers drain (the endpoints replace them elsewhere), then the record goes.
  const signalled = new Set<string>();
  // Bounded: a worker stuck on a dead host must not keep the host record forever.
  for (let waited = 0; waited < 15 * 60_000; waited += 2000) {
    const live = await liveWorkersOnHost(hostId);
    if (live.length === 0) break;
    for (const id of live.filter((w) => !signalled.has(w))) {
      signalled.add(id);
      await getExternalWorkflowHandle(`worker:${id}`)
        .signal(drainWorker, { reason: 'the host is being removed', replace: true })
        .catch(() => undefined);
    }
    await sleep(2000);
  }
  await deleteHostRecord(hostId);
}
