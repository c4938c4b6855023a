/**
 * The image pre-pull workflow's activities (workflows/prepull.ts): which hosts a release's image goes
 * to ahead of its first worker, ranked as placement ranks hosts for a worker of the endpoint, and the
 * pull on each, done exactly as a worker start does it (worker-image.ts).
 */
import { liveWorker, placeWorker, type PlacedWorker } from '../domain/workers/index.ts';
import type { ImagePrepullInput } from '../contracts/workflows.ts';
import { networkVolumeHosts } from './network-volumes.ts';
import type { OrchestrationRuntime } from './orchestration-runtime.ts';
import { endpointWorkerImage, ensureWorkerImage, type WorkerImage } from './worker-image.ts';
import { endpointRequest, placementHosts, reservationOf } from './worker-placement.ts';

export interface PrepullPlan {
  /** The image as the release's workers run it; null: nothing to pull (pre-pulls off, the release superseded, the endpoint gone). */
  image: string | null;
  /** Where, best first. */
  hostIds: string[];
  /** How long one pull may take (the orchestration's pullTimeoutSec). */
  pullTimeoutSec: number;
}

export function createImagePrepullActivities(rt: OrchestrationRuntime) {
  const { db } = rt;

  /** The release's image as its workers run it, while the release is the endpoint's current one; else undefined. */
  async function currentReleaseImage(input: ImagePrepullInput) {
    const endpoint = await db.endpoint.findUnique({ where: { id: input.endpointId } });
    // A newer release has its own pre-pull; a deleted endpoint needs none.
    if (!endpoint || endpoint.deletingAt || endpoint.currentReleaseVersion !== input.version) return undefined;
    const release = await db.release.findUnique({
      where: { endpointId_version: { endpointId: endpoint.id, version: input.version } },
    });
    return { endpoint, want: await endpointWorkerImage(rt, endpoint, release) };
  }

  return {
    /**
     * The hosts to pull the release's image on, at most GANTRY_PREPULL_HOSTS: first the hosts where
     * a worker of the endpoint would be placed now, in placement's order (each one found by asking
     * placement again with the ones before it avoided), with the live workers counted as placement
     * counts them; then, while there are fewer, the hosts it would be placed on once they had room
     * (a full host frees up, and the first call may come then). Reads only: nothing is reserved.
     */
    async planImagePrepull(input: ImagePrepullInput): Promise<PrepullPlan> {
      const pullTimeoutSec = rt.settings.pullTimeoutSec;
      const wanted = rt.platform.prepullHosts;
      const found = wanted > 0 ? await currentReleaseImage(input) : undefined;
      if (!found) return { image: null, hostIds: [], pullTimeoutSec };
      const { endpoint } = found;
      const volumes = await networkVolumeHosts(db, endpoint.networkVolumeIds);
      const hosts = await db.host.findMany({ where: { status: 'READY' } });
      const candidates = await placementHosts(db, hosts, null);
      const live = await db.worker.findMany({
        where: { hostId: { not: null }, ...liveWorker },
        select: { hostId: true, endpointId: true, gpuUuids: true, cpuFlavorId: true },
      });
      const placed: PlacedWorker[] = live.map((w) => ({
        hostId: w.hostId!,
        endpointId: w.endpointId,
        gpuUuids: w.gpuUuids,
        cpu: reservationOf(w.cpuFlavorId),
      }));
      const hostIds: string[] = [];
      for (const workers of [placed, []]) {
        while (hostIds.length < wanted) {
          const p = placeWorker(endpointRequest(endpoint, volumes.onlyHostIds, hostIds), candidates, workers);
          if (!p.ok) break;
          hostIds.push(p.hostId);
        }
      }
      return { image: found.want.image, hostIds, pullTimeoutSec };
    },

    /**
     * Ensures the release's image on the host as its worker's start would (the account's own
     * credential, the same tenant walls) and records that the host has it. A release superseded in
     * the meantime is skipped.
     */
    async prepullImage(input: ImagePrepullInput & { hostId: string }): Promise<{ image: string; outcome: string }> {
      const found = await currentReleaseImage(input);
      if (!found) return { image: '', outcome: 'skipped: the release is no longer current' };
      const want: WorkerImage = found.want;
      const { outcome } = await ensureWorkerImage(rt, input.hostId, want, 'prepull');
      return { image: want.image, outcome };
    },
  };
}

export type ImagePrepullActivities = ReturnType<typeof createImagePrepullActivities>;
