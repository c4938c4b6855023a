/**
 * Called by no workflow itself: how a worker's image gets onto a host, for the worker start
 * (worker-start.ts prepareWorkerImage) and the pre-pull ahead of the first call (image-prepull.ts).
 * One code path for both, so that the walls between tenants hold the same for each: the image
 * resolved as a worker runs it, pulled with the owning account's own registry credential and only
 * from the registry that credential is bound to, and always pulled (hostctl ensureImage), never
 * taken from what another account left on the host.
 */
import { ApplicationFailure, Context } from '@temporalio/activity';
import type { DomainContext } from '../domain/context.ts';
import { currentRuntimeImage, flashWorker } from '../domain/apps/index.ts';
import { openRegistryCredential } from '../domain/registries/index.ts';
import type { Endpoint, Release } from '../generated/prisma/client.ts';
import { ensureImage, registryOf } from '../hostctl/containers.ts';
import { SshCommandTimeoutError } from '../hostctl/ssh-errors.ts';
import { ACTIVITY_HEARTBEAT_MS, hostHandle, sshTrouble, type OrchestrationRuntime } from './orchestration-runtime.ts';
import { describePullFailure } from './worker-pull-errors.ts';
import { ensureRuntimeImage } from './runtime-image.ts';

/** An image as a worker runs it, and whose credential pulls it. */
export interface WorkerImage {
  image: string;
  /** The account's stored registry credential to pull with; null: none (a public image, or Gantry's runtimes). */
  registryId: string | null;
  accountId: string;
}

/** What put an image on a host first (HostImage.source). */
export type HostImageSource = 'prepull' | 'worker';

/**
 * The image a worker of the endpoint's release runs: the release's (the endpoint's own before it had
 * releases), flash's images replaced by Gantry's flash runtime on a flash environment's endpoint
 * (with no registry login of the tenant's), and a runtime image named before its recipe changed
 * running as today's (currentRuntimeImage).
 */
export async function endpointWorkerImage(
  rt: OrchestrationRuntime,
  endpoint: Endpoint,
  release: Pick<Release, 'image' | 'registryId'> | null,
): Promise<WorkerImage> {
  const named = release?.image ?? endpoint.image;
  const flash = await flashWorker(rt, rt.platform.apps, endpoint, named);
  return {
    image: currentRuntimeImage(rt.platform.apps, flash?.image ?? named),
    registryId: flash ? null : release ? release.registryId : endpoint.registryId,
    accountId: endpoint.accountId,
  };
}

/**
 * Ensures of one image on one host in this process run one after the other: a pre-pull and the first
 * worker on the same host would otherwise fetch the same layers (or build the same runtime) side by
 * side. The second still does its own ensure, with its own account's credential, once the first is
 * done: with the layers there, that is a registry round trip.
 */
const ensuring = new Map<string, Promise<unknown>>();

async function oneAtATime<T>(key: string, fn: () => Promise<T>): Promise<T> {
  const before = ensuring.get(key);
  const mine = (async () => {
    await before?.catch(() => undefined);
    return fn();
  })();
  ensuring.set(key, mine);
  try {
    return await mine;
  } finally {
    if (ensuring.get(key) === mine) ensuring.delete(key);
  }
}

/**
 * Logs in with the account's stored registry credential (when the image has one) and pulls the image
 * onto the host, or builds it there for Gantry's runtimes; records on success that the host has it
 * for the account (HostImage). Heartbeats while it runs (an activity's only).
 *
 * Failures, as the worker start needs them: SSH trouble thrown as it is (the host workflow decides
 * reachability) and a pull that outlived pullTimeoutSec retryable; any other failure, a credential
 * bound to another registry included, non-retryable and in plain words.
 */
export async function ensureWorkerImage(
  rt: OrchestrationRuntime,
  hostId: string,
  want: WorkerImage,
  source: HostImageSource,
): Promise<{ outcome: string }> {
  const { image } = want;
  // The registry lookup takes a domain context; it reads only the database and the secrets.
  const registryCtx = { db: rt.db, secrets: rt.secrets } satisfies Pick<DomainContext, 'db' | 'secrets'>;
  const login = want.registryId
    ? await openRegistryCredential(registryCtx, want.accountId, want.registryId)
    : undefined;
  // Checked when written too; here because this is where the password would leave.
  if (login && (login.registry === null || registryOf(image) !== login.registry)) {
    const why =
      login.registry === null
        ? 'is not bound to a registry yet (its owner gives the registry with the login)'
        : `is bound to ${login.registry}`;
    throw ApplicationFailure.nonRetryable(
      `the registry credential ${why}; the image '${image}' is on ${registryOf(image)}`,
      'RegistryMismatch',
    );
  }
  const h = await hostHandle(rt, hostId);
  const context = Context.current();
  const heartbeat = setInterval(() => context.heartbeat(), ACTIVITY_HEARTBEAT_MS);
  let pulling = false;
  try {
    const outcome = await oneAtATime(`${hostId}\0${image}`, async () => {
      const built = await ensureRuntimeImage(rt.pool, h, image, rt.platform.apps, rt.settings.pullTimeoutSec * 1000);
      if (built !== 'not-runtime') return built;
      pulling = true;
      return ensureImage(rt.pool, h, image, login, {
        timeoutMs: rt.settings.pullTimeoutSec * 1000,
        signal: context.cancellationSignal,
      });
    });
    // What the worker list shows; the image is there whether or not this row could be written.
    await recordHostImage(rt, hostId, want.accountId, image, source).catch((err: unknown) =>
      context.log.warn('could not record the image on the host', { hostId, image, error: String(err) }),
    );
    return { outcome };
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    const ssh = await sshTrouble(rt.db, hostId, err);
    // A pull that outlived pullTimeoutSec is retried as SSH trouble is, saying so in plain words.
    if (ssh && pulling && err instanceof SshCommandTimeoutError)
      throw ApplicationFailure.retryable(describePullFailure(image, message), 'PullTimedOut');
    if (ssh) throw err;
    // The runtime's own words follow the plain ones (the image does not exist, needs credentials, the network).
    throw ApplicationFailure.nonRetryable(pulling ? describePullFailure(image, message) : message, 'PullFailed');
  } finally {
    clearInterval(heartbeat);
  }
}

/** The host has the image for the account: since the first time (kept), ensured now. */
async function recordHostImage(
  rt: OrchestrationRuntime,
  hostId: string,
  accountId: string,
  image: string,
  source: HostImageSource,
): Promise<void> {
  const now = new Date();
  await rt.db.hostImage.upsert({
    where: { hostId_accountId_image: { hostId, accountId, image } },
    create: { hostId, accountId, image, source, pulledAt: now, ensuredAt: now },
    update: { ensuredAt: now },
  });
}
