/**
 * Rolling an endpoint back to an earlier release (POST /v2/serverless/{id}/releases/{version}/rollback):
 * a NEW release whose container fields are the earlier one's. Release history is never rewritten:
 * the rollback is the PATCH that restores those fields, with its rules, its diff and its rollout.
 */
import type { Principal } from '../accounts/auth.ts';
import { requireScope } from '../accounts/auth.ts';
import type { DomainContext } from '../context.ts';
import { DomainError } from '../errors.ts';
import { findOwned, updateEndpoint } from './endpoints.ts';
import { listEndpointReleases, type ReleaseModel } from './workers-releases.ts';

/** A version as the path carries it: digits only (anything else names no release). */
const VERSION = /^[1-9][0-9]{0,8}$/;

const noRelease = (version: string | number): DomainError =>
  new DomainError('not_found', `the endpoint has no release ${JSON.stringify(String(version).slice(0, 40))}`);

/** JSON with object keys sorted, so that equal env maps compare equal whatever their key order. */
const canonical = (value: unknown): string =>
  JSON.stringify(value, (_k, v: unknown) =>
    v && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : 1)))
      : v,
  );

/**
 * Makes release N+1 of endpoint `id` with the container fields (image, args, disk, ports, env,
 * registry) of its release `version`, through updateEndpoint. Network volumes and the type are not
 * part of a release's frozen fields (a halted release does not return them either): they stay.
 * Answers the new release. 404: no such endpoint or release; 409: `version` is the current release,
 * or its fields are already the endpoint's; 422: what a PATCH of those fields would be refused for
 * (a registry credential deleted since, say).
 */
export async function rollbackEndpoint(
  ctx: DomainContext,
  principal: Principal,
  id: string,
  version: string | number,
): Promise<ReleaseModel> {
  requireScope(principal, 'WRITE');
  const endpoint = await findOwned(ctx, principal, id);
  const v = typeof version === 'number' ? version : VERSION.test(version) ? Number(version) : NaN;
  if (!Number.isSafeInteger(v)) throw noRelease(version);
  const target = await ctx.db.release.findUnique({ where: { endpointId_version: { endpointId: id, version: v } } });
  if (!target) throw noRelease(version);
  if (v === endpoint.currentReleaseVersion)
    throw new DomainError('conflict', `release ${v} is the endpoint's current release: there is nothing to roll back`);
  const fields = {
    image: target.image,
    args: target.args,
    disk: target.disk,
    ports: target.ports,
    env: (target.env ?? {}) as Record<string, string>,
    registry: target.registryId,
  };
  const now = {
    image: endpoint.image,
    args: endpoint.args,
    disk: endpoint.disk,
    ports: endpoint.ports,
    env: endpoint.env,
    registry: endpoint.registryId,
  };
  // A release made only of a volume or type change has its predecessor's container fields.
  if (canonical(fields) === canonical(now))
    throw new DomainError(
      'conflict',
      `release ${v} has the container fields the endpoint runs now (release ${endpoint.currentReleaseVersion}): a rollback would change nothing`,
    );
  await updateEndpoint(ctx, principal, id, fields);
  const after = await listEndpointReleases(ctx, principal, id);
  const made = after.releases.find((r) => r.row.version === after.endpointVersion);
  // Another change between the check and the update left these fields in place: say so, not a stale release.
  if (!made || after.endpointVersion === endpoint.currentReleaseVersion)
    throw new DomainError('conflict', 'the endpoint changed meanwhile and the rollback made no release; look again');
  return made;
}
