/**
 * Where a tenant's container lives on a host (its account's network, hostctl/networks.ts), where it
 * reaches the API from there, and the one host address its published ports answer on.
 */
import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import type { HostHandle } from '../hostctl/containers.ts';
import { ensureAccountNetwork, type AccountNetwork, type EgressSettings } from '../hostctl/networks.ts';
import type { OrchestrationRuntime } from './orchestration-runtime.ts';

/** The IPv4 address of a URL's host (a name is resolved as the API process resolves it), if it has one. */
async function ipv4Of(host: string): Promise<string | undefined> {
  const bare = host.replace(/^\[|\]$/g, '');
  if (isIP(bare) === 4) return bare;
  if (isIP(bare) === 6) return undefined;
  return (await lookup(bare, { family: 4 }).catch(() => undefined))?.address;
}

/** The egress rules for the platform's policy: under `public`, the API's own address stays reachable. */
async function egressOf(rt: OrchestrationRuntime): Promise<EgressSettings> {
  const policy = rt.platform.workerEgress;
  if (policy === 'private') return { policy, allow: [] };
  const api = await ipv4Of(new URL(rt.workerUrl).hostname);
  return { policy, allow: api ? [api] : [] };
}

export interface TenantNetwork {
  network: AccountNetwork;
  /** Base URL of the API as containers on this network reach it. */
  workerBase: string;
}

/**
 * The account's network on the host (made on first use), and the API's address from it: with a
 * loopback public URL, the worker-facing listener on the network's own gateway (api/worker-listener.ts).
 */
export async function tenantNetwork(
  rt: OrchestrationRuntime,
  h: HostHandle,
  accountId: string,
): Promise<TenantNetwork> {
  const network = await ensureAccountNetwork(rt.pool, h, accountId, await egressOf(rt));
  const workerBase =
    rt.workerListenerPort !== undefined ? `http://${network.gateway}:${rt.workerListenerPort}` : rt.workerUrl;
  return { network, workerBase };
}

/**
 * The address published ports are bound to: the host's address as Gantry reaches it (the proxy and
 * its health checks connect there). A name is resolved as the proxy would; IPv4 first.
 */
export async function publishAddressOf(address: string): Promise<string> {
  const bare = address.replace(/^\[|\]$/g, '');
  if (isIP(bare)) return bare;
  const found = await lookup(bare, { family: 4 }).catch(() => lookup(bare));
  return found.address;
}
