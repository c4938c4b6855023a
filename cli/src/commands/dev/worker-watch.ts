/**
 * What the live endpoints' workers cannot do, said in the dev log as it happens: a worker that no
 * host can place (a GPU the hosts do not have, no room), an image that cannot be had, a container
 * that exits. Without it a call to such a resource waits with nothing on the screen. Each live
 * endpoint's workers route is read every 10 seconds; a line is printed when its problem appears,
 * changes or clears.
 */
import type { PlatformClient } from '../../api.ts';
import { describeError } from '../../errors.ts';
import { note } from '../../output.ts';

// Each round is one read per live endpoint, from the key's management quota (600 a minute by default).
const POLL_MS = 10_000;

/** A live endpoint to watch: its resource and endpoint id, read afresh each round (new ones appear). */
export type LiveEndpointList = () => Array<{ resource: string; endpointId: string }>;

/** The problem of one endpoint's workers, or null: why none of its current release can run, or why one waits. */
export async function workersProblem(client: PlatformClient, endpointId: string): Promise<string | null> {
  const r = await client.listWorkers(endpointId);
  if (r.workerProblem) return r.workerProblem.reason;
  if (r.lastFailure) return `its last worker failed: ${r.lastFailure.reason}`;
  const waiting = r.workers.find((w) => w.status === 'THROTTLED' && w.statusReason);
  return waiting ? `a worker waits: ${waiting.statusReason}` : null;
}

/** Starts the watch; the returned function stops it. */
export function watchWorkerProblems(client: PlatformClient, endpoints: LiveEndpointList): () => void {
  const said = new Map<string, string | null>();
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  const round = async (): Promise<void> => {
    for (const { resource, endpointId } of endpoints()) {
      let problem: string | null;
      try {
        problem = await workersProblem(client, endpointId);
      } catch (err) {
        // The platform unreachable for a moment is said by the calls themselves; a gone endpoint by provisioning.
        if (process.env.GANTRY_DEV_TRACE) note(`live-${resource}: could not read its workers: ${describeError(err)}`);
        continue;
      }
      const before = said.get(endpointId);
      if (problem === (before ?? null)) continue;
      said.set(endpointId, problem);
      if (problem) note(`live-${resource}: ${problem}`);
      else if (before) note(`live-${resource}: its workers are running again`);
    }
  };
  const loop = (): void => {
    if (stopped) return;
    timer = setTimeout(() => void round().finally(loop), POLL_MS);
    timer.unref();
  };
  void round().finally(loop);
  return () => {
    stopped = true;
    if (timer) clearTimeout(timer);
  };
}
