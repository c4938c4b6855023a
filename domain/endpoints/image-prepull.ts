/**
 * Images ahead of the first call (docs/endpoints.md): the pre-pull workflow a new release starts
 * (`prepull:<endpointId>:<version>`, workflows/prepull.ts), and what the worker list says of each
 * worker's image on its host (the HostImage rows the pre-pulls and worker starts write).
 */
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import type { Endpoint } from '../../generated/prisma/client.ts';
import { imagePrepullWorkflowId, type ImagePrepullWorkflow } from '../../contracts/workflows.ts';
import { gantryMemo, gantrySearchAttributes } from '../../contracts/search-attributes.ts';
import { flashWorker } from '../apps/flash.ts';
import { currentRuntimeImage } from '../apps/runtime-images.ts';
import type { DomainContext } from '../context.ts';
import { WORKFLOW_CALL_BUDGET_MS } from './workflow-signals.ts';

/**
 * Starts the pre-pull of the endpoint's current release, unless GANTRY_PREPULL_HOSTS is 0; one that
 * has started already (the same release told twice) is left as it is. Best effort, so it never
 * fails the change that asked for it: the release is committed and its workflow told by then, and
 * without a pre-pull the first worker on a host pulls the image itself, as it always could.
 */
export async function startImagePrepull(
  ctx: DomainContext,
  e: Pick<Endpoint, 'id' | 'accountId' | 'name' | 'currentReleaseVersion'>,
): Promise<void> {
  if (ctx.settings.prepullHosts <= 0) return;
  const version = e.currentReleaseVersion;
  try {
    await ctx.temporal.withDeadline(Date.now() + WORKFLOW_CALL_BUDGET_MS, () =>
      ctx.temporal.workflow.start<ImagePrepullWorkflow>('imagePrepullWorkflow', {
        workflowId: imagePrepullWorkflowId(e.id, version),
        taskQueue: ctx.taskQueue,
        args: [{ endpointId: e.id, version }],
        typedSearchAttributes: gantrySearchAttributes('prepull', {
          endpointId: e.id,
          accountId: e.accountId,
          releaseVersion: version,
        }),
        memo: gantryMemo({ endpointName: e.name }),
        // One pre-pull per release, ever: a finished one is not repeated.
        workflowIdReusePolicy: 'REJECT_DUPLICATE',
      }),
    );
  } catch (err) {
    if (err instanceof WorkflowExecutionAlreadyStartedError) return;
    // Temporal did not answer in time: the first worker pulls instead (see above).
  }
}

/** What the worker list says of a worker's image on its host. */
export interface WorkerImageOnHost {
  /** Since when the worker's host has had the worker's image for the endpoint's account; null: not known to. */
  imageOnHostSince: string | null;
  /** Whether a pre-pull put it there first, ahead of any worker. */
  imagePulledAhead: boolean;
}

/**
 * For each placed worker: since when its host has had its image, as the release's workers run it
 * (flash's images as Gantry's flash runtime, runtime images by today's recipe: activities/worker-image.ts),
 * from what this account's pre-pulls and worker starts recorded. Another account's pull of the same
 * image is not counted: it gives this account no right to a private image, and tells it nothing.
 */
export async function workerImagesOnHosts(
  ctx: Pick<DomainContext, 'db' | 'settings'>,
  endpoint: Pick<Endpoint, 'id' | 'accountId' | 'image' | 'appEnvironmentId'>,
  workers: readonly { id: string; hostId: string | null; releaseVersion: number }[],
): Promise<Map<string, WorkerImageOnHost>> {
  const out = new Map<string, WorkerImageOnHost>();
  const placed = workers.filter((w): w is typeof w & { hostId: string } => w.hostId !== null);
  if (placed.length === 0) return out;
  const apps = ctx.settings.apps;
  const releases = await ctx.db.release.findMany({
    where: { endpointId: endpoint.id, version: { in: [...new Set(placed.map((w) => w.releaseVersion))] } },
    select: { version: true, image: true },
  });
  const named = new Map(releases.map((r) => [r.version, r.image]));
  const resolved = new Map<string, string>();
  for (const image of new Set(placed.map((w) => named.get(w.releaseVersion) ?? endpoint.image))) {
    const flash = await flashWorker(ctx, apps, endpoint, image);
    resolved.set(image, currentRuntimeImage(apps, flash?.image ?? image));
  }
  const imageOf = (w: { releaseVersion: number }) =>
    resolved.get(named.get(w.releaseVersion) ?? endpoint.image) ?? endpoint.image;
  const rows = await ctx.db.hostImage.findMany({
    where: {
      accountId: endpoint.accountId,
      hostId: { in: [...new Set(placed.map((w) => w.hostId))] },
      image: { in: [...resolved.values()] },
    },
  });
  const rowOf = new Map(rows.map((r) => [`${r.hostId}\0${r.image}`, r]));
  for (const w of placed) {
    const row = rowOf.get(`${w.hostId}\0${imageOf(w)}`);
    out.set(w.id, {
      imageOnHostSince: row?.pulledAt.toISOString() ?? null,
      imagePulledAhead: row?.source === 'prepull',
    });
  }
  return out;
}
