/**
 * Whether the hosts can get the base of a runtime image they build, asked before an endpoint of
 * the hosted `flash` tool is written (GraphQL saveEndpoint): a base that no READY host has, pulls
 * or can make from Debian fails the save with the sentence that names it and the setting that
 * names another, so `flash deploy` stops there instead of saying "deployed" over workers that
 * never start. Hosts are asked at once, within a time cap: a slow answer (a pull under way) counts
 * as yes, and a platform without a READY host is not judged. An answer holds for a minute.
 */
import type { Host } from '../../generated/prisma/client.ts';
import type { DomainContext } from '../context.ts';
import { validationFailed } from '../errors.ts';
import { sshTargetOf } from '../hosts/access.ts';
import type { RuntimeName } from '../../hostctl/containers.ts';
import { ensureRuntimeBase, PythonBaseUnavailable } from '../../hostctl/python-base.ts';
import { flashWorker } from './flash.ts';
import { builtRuntime, runtimeBaseRequest } from './runtime-images.ts';

/** How long a save waits for the hosts' answer. */
const CHECK_MS = 20_000;
/** How many READY hosts are asked. */
const HOSTS_ASKED = 4;
/**
 * How long an answer holds for the same image on the same hosts: flash saves each resource in
 * turn (the same runtime), and a caller repeating a refused save does not send the hosts to the
 * registry again each time. A base loaded on a host counts within this long.
 */
const ANSWER_TTL_MS = 60_000;
const ANSWERS_KEPT = 1_000;

/** Per image and hosts asked: the refusal (a sentence) or null (yes, or no answer), and until when. */
const answers = new Map<string, { refusal: string | null; until: number }>();

/** Refuses (validation failed, the sentence as its error) when no READY host can get `image`'s base. */
export async function checkRuntimeBase(ctx: DomainContext, image: string, at: string): Promise<void> {
  const runtime = builtRuntime(image);
  if (!runtime) return;
  const hosts = await ctx.db.host.findMany({
    where: { status: 'READY' },
    orderBy: { createdAt: 'asc' },
    take: HOSTS_ASKED,
  });
  if (hosts.length === 0) return;
  const key = `${image}\0${hosts.map((h) => h.id).join(',')}`;
  let answer = answers.get(key);
  if (!answer || answer.until < Date.now()) {
    answer = { refusal: await askHosts(ctx, hosts, runtimeBaseRequest(ctx.settings.apps, runtime, image)), until: 0 };
    answer.until = Date.now() + ANSWER_TTL_MS;
    if (answers.size >= ANSWERS_KEPT) answers.clear();
    answers.set(key, answer);
  }
  if (answer.refusal) throw validationFailed([`${at}: ${answer.refusal}`]);
}

/** The sentence when every host clearly cannot get the base; null when one can, or gave no answer in time. */
async function askHosts(
  ctx: DomainContext,
  hosts: Host[],
  request: ReturnType<typeof runtimeBaseRequest>,
): Promise<string | null> {
  const signal = AbortSignal.timeout(CHECK_MS);
  const asked = Promise.allSettled(
    // async: a host that cannot be reached at all (no key stored) is no answer, not an error of the save.
    hosts.map(async (host) =>
      ensureRuntimeBase(
        ctx.ssh,
        {
          hostId: host.id,
          target: sshTargetOf(host, ctx.secrets),
          runtime: (host.containerRuntime ?? 'podman') as RuntimeName,
        },
        { ...request, buildDebian: false, timeoutMs: CHECK_MS, signal },
      ),
    ),
  );
  // A connection that hangs (an address that drops packets) ends with the cap too.
  let timer: NodeJS.Timeout | undefined;
  const settled = await Promise.race([
    asked,
    new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), CHECK_MS + 1_000))),
  ]).finally(() => clearTimeout(timer));
  if (!settled || settled.some((a) => a.status === 'fulfilled')) return null;
  // Only a clear "cannot" from every host refuses: SSH trouble or the time cap is no answer.
  const refusals = settled.map((a) => (a.status === 'rejected' ? a.reason : undefined));
  if (signal.aborted || !refusals.every((r) => r instanceof PythonBaseUnavailable)) return null;
  return (refusals[0] as Error).message;
}

/** checkRuntimeBase for an endpoint of a flash environment whose template names one of flash's images. */
export async function checkFlashEndpointImage(
  ctx: DomainContext,
  endpoint: { accountId: string; appEnvironmentId: string | null },
  image: string,
  at: string,
): Promise<void> {
  const flash = await flashWorker(ctx, ctx.settings.apps, endpoint, image);
  if (flash) await checkRuntimeBase(ctx, flash.image, at);
}
