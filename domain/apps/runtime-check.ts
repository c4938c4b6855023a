/**
 * Whether the hosts can get the base of a runtime image they build, asked before an endpoint of
 * the hosted `flash` tool is written (GraphQL saveEndpoint): a base that no READY host has, pulls
 * or can make from Debian fails the save with the sentence that names it and the setting that
 * names another, so `flash deploy` stops there instead of saying "deployed" over workers that
 * never start. Hosts are asked at once, within a time cap: a slow answer (a pull under way) counts
 * as yes, and a platform without a READY host is not judged.
 */
import type { DomainContext } from '../context.ts';
import { validationFailed } from '../errors.ts';
import { sshTargetOf } from '../hosts/access.ts';
import type { RuntimeName } from '../../hostctl/containers.ts';
import { ensureRuntimeBase, PythonBaseUnavailable } from '../../hostctl/python-base.ts';
import { flashWorker } from './flash.ts';
import { builtRuntime, DEFAULT_RUNTIME_BASE_IMAGE, runtimeRecipe } from './runtime-images.ts';

/** How long a save waits for the hosts' answer. */
const CHECK_MS = 20_000;
/** How many READY hosts are asked. */
const HOSTS_ASKED = 4;

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
  const recipe = runtimeRecipe(ctx.settings.apps, runtime.python, runtime.gpu, runtime.flash);
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
        {
          ...recipe,
          python: runtime.python,
          image,
          debianFallback: recipe.base === DEFAULT_RUNTIME_BASE_IMAGE.replaceAll('{python}', runtime.python),
          debianMirror: ctx.settings.apps.debianMirror,
          buildDebian: false,
          timeoutMs: CHECK_MS,
          signal,
        },
      ),
    ),
  );
  // A connection that hangs (an address that drops packets) ends with the cap too.
  let timer: NodeJS.Timeout | undefined;
  const answers = await Promise.race([
    asked,
    new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), CHECK_MS + 1_000))),
  ]).finally(() => clearTimeout(timer));
  if (!answers || answers.some((a) => a.status === 'fulfilled')) return;
  // Only a clear "cannot" from every host refuses: SSH trouble or the time cap is no answer.
  const refusals = answers.map((a) => (a.status === 'rejected' ? a.reason : undefined));
  if (signal.aborted || !refusals.every((r) => r instanceof PythonBaseUnavailable)) return;
  throw validationFailed([`${at}: ${(refusals[0] as Error).message}`]);
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
