import {
  allHandlersFinished,
  condition,
  continueAsNew,
  getExternalWorkflowHandle,
  patched,
  proxyActivities,
  proxyLocalActivities,
  setHandler,
  sleep,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { HostActivities, OrchestrationSettings } from '../activities/host.ts';
import { continueAsNewDue, type RunTestOptions } from './continue-as-new.ts';
import {
  drainWorker,
  getHostStatus,
  probeHostNow,
  removeHost,
  workerWorkflowId,
  type HostProbeResult,
  type HostWorkflowInput,
} from '../contracts/workflows.ts';
import { GantryKind, gantrySearchAttributes, LABEL_OLD_RUNS_PATCH } from '../contracts/search-attributes.ts';

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

/** The host's whole run state: the handlers write it, continue-as-new hands it to the next run. */
interface HostRunState {
  settings?: OrchestrationSettings;
  /** Probes asked for through `probeHostNow`, and the last of them a finished probe covered. */
  requested: number;
  completed: number;
  /** A host key to pin at the next probe (from `probeHostNow`). */
  acceptHostKey?: string;
  last: HostProbeResult | null;
  removing: boolean;
}

export type HostRunInput = HostWorkflowInput & {
  /** Carried across continue-as-new. */
  state?: HostRunState;
  /** What runs continued by earlier code carry instead of `state`. */
  settings?: OrchestrationSettings;
  test?: RunTestOptions;
};

/**
 * One workflow per host (id `host:<hostId>`): probes it periodically (more often while it is
 * unreachable) and on demand, keeps its status, rebuilds worker state from container labels while
 * it is READY, and drains it before it is removed.
 */
export async function hostWorkflow(input: HostRunInput): Promise<void> {
  const { hostId } = input;
  const state: HostRunState = input.state ?? {
    settings: input.settings,
    requested: 0,
    completed: 0,
    last: null,
    removing: false,
  };

  setHandler(probeHostNow, async (options) => {
    if (options?.acceptHostKey) state.acceptHostKey = options.acceptHostKey;
    const mine = ++state.requested;
    await condition(() => state.completed >= mine || state.removing);
    return state.last ?? { status: 'PENDING', statusReason: 'not probed yet', becameReady: false };
  });
  setHandler(removeHost, () => {
    state.removing = true;
  });
  setHandler(getHostStatus, () => state.last);

  state.settings ??= await orchestrationSettings();
  const settings = state.settings;
  // A run started before the search attributes existed labels itself once (continue-as-new keeps it).
  if (workflowInfo().typedSearchAttributes.get(GantryKind) === undefined && patched(LABEL_OLD_RUNS_PATCH)) {
    upsertSearchAttributes(gantrySearchAttributes('host', { hostId }));
  }

  while (!state.removing) {
    const round = state.requested;
    const accept = state.acceptHostKey;
    state.acceptHostKey = undefined;
    const last = await probeAndRecordHost(hostId, accept ? { acceptHostKey: accept } : {});
    state.last = last;
    if (last.status === 'GONE') return;
    if (last.status === 'READY') {
      // Cheap (one SSH command) and the only way to notice containers left by a crash.
      try {
        await reconcileHostContainers(hostId);
      } catch {
        // Tried again next round; the probe result stands.
      }
    }
    state.completed = Math.max(state.completed, round);
    const interval =
      last.status === 'READY' || last.status === 'DISABLED'
        ? settings.hostProbeIntervalSec
        : settings.hostRetryIntervalSec;
    await condition(() => state.removing || state.requested > state.completed, interval * 1000);
    if (!state.removing && state.requested === state.completed && continueAsNewDue(input.test)) {
      await condition(allHandlersFinished);
      await continueAsNew<typeof hostWorkflow>({ hostId, state, test: input.test });
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
      await getExternalWorkflowHandle(workerWorkflowId(id))
        .signal(drainWorker, { reason: 'the host is being removed', replace: true })
        .catch(() => undefined);
    }
    await sleep(2000);
  }
  await deleteHostRecord(hostId);
}
