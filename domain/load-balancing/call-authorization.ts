/** Who may call a load-balancing endpoint: the checks every proxied request passes. */
import { requireEndpointAccess, requireScope, type Principal } from '../accounts/auth.ts';
import type { DomainContext } from '../context.ts';
import { DomainError, notFound } from '../errors.ts';
import { liveEndpoint, liveEndpointNow, type LiveEndpoint } from '../shared/record-cache.ts';

export interface LbEndpoint {
  id: string;
  accountId: string;
  timeoutMs: number;
  workersMax: number;
}

/**
 * May `principal` call load-balancing endpoint `endpointId`? The RUN scope (403), an endpoint of
 * the caller's account (404 otherwise, as for every resource of another account), a key that
 * reaches it (403), and a load-balancing endpoint (400 for a queue-based one). Every proxied request
 * needs the endpoint: it comes from the process's record cache (found ones only), so a deleted
 * endpoint is refused within the revocation bound (domain/shared/record-cache.ts).
 */
export async function authorizeLbCall(
  ctx: Pick<DomainContext, 'db' | 'records'>,
  principal: Principal,
  endpointId: string,
): Promise<LbEndpoint> {
  requireScope(principal, 'RUN');
  return lbEndpointFor(principal, endpointId, await liveEndpoint(ctx, endpointId));
}

/** authorizeLbCall's answer when this process remembers the endpoint; undefined when it must be read. */
export function authorizeLbCallNow(
  ctx: Pick<DomainContext, 'records'>,
  principal: Principal,
  endpointId: string,
): LbEndpoint | undefined {
  requireScope(principal, 'RUN');
  const found = liveEndpointNow(ctx, endpointId);
  return found && lbEndpointFor(principal, endpointId, found);
}

function lbEndpointFor(principal: Principal, endpointId: string, found: LiveEndpoint | undefined): LbEndpoint {
  if (!found || found.accountId !== principal.accountId) throw notFound('endpoint');
  requireEndpointAccess(principal, endpointId);
  if (found.type !== 'LOAD_BALANCING') {
    throw new DomainError(
      'bad_request',
      'this endpoint is queue-based: submit jobs to its requestUrls.run or requestUrls.runSync with an {"input": ...} body',
    );
  }
  return { id: found.id, accountId: found.accountId, timeoutMs: found.timeoutMs, workersMax: found.workersMax };
}
