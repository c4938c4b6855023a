/**
 * Webhook targets are named by tenants, so Gantry must not become their way into the operator's
 * network: a webhook may reach only public unicast addresses, checked on the parsed URL when a job
 * is submitted and again on every address DNS gives when the POST connects (so a name that
 * resolves to a public address at submission and to 127.0.0.1 later is refused as well). An
 * operator's allow-list (GANTRY_WEBHOOK_ALLOW) names the private targets that are fine.
 */
import { isIP, type LookupFunction } from 'node:net';
import ipaddr from 'ipaddr.js';

export const MAX_WEBHOOK_URL_LENGTH = 2048;

const IPV4_COMPATIBLE = ipaddr.parseCIDR('::/96');

export interface WebhookAllowList {
  cidrs: Array<[ipaddr.IPv4 | ipaddr.IPv6, number]>;
  hosts: Set<string>;
}

/** `GANTRY_WEBHOOK_ALLOW`: comma-separated CIDRs (`10.0.0.0/8`, `127.0.0.1/32`, `::1/128`) and host names (`hooks.internal`). */
export function parseWebhookAllowList(value: string | undefined): WebhookAllowList {
  const allow: WebhookAllowList = { cidrs: [], hosts: new Set() };
  for (const raw of (value ?? '').split(',')) {
    const entry = raw.trim().toLowerCase();
    if (!entry) continue;
    if (entry.includes('/')) {
      try {
        allow.cidrs.push(ipaddr.parseCIDR(entry));
      } catch {
        throw new Error(`GANTRY_WEBHOOK_ALLOW: "${entry}" is not a CIDR such as 10.0.0.0/8`);
      }
    } else if (isIP(entry)) {
      const addr = ipaddr.process(entry);
      allow.cidrs.push([addr, addr.kind() === 'ipv4' ? 32 : 128]);
    } else {
      allow.hosts.add(entry.replace(/\.$/, ''));
    }
  }
  return allow;
}

/**
 * Why an address may not be a webhook target, or undefined when it may: anything but public
 * unicast (loopback, private, link-local and metadata, CGNAT, unspecified, multicast, reserved,
 * and IPv6 forms that embed IPv4: mapped, compatible, NAT64, 6to4, Teredo) unless the allow-list covers it.
 */
export function refusedAddress(address: string, allow: WebhookAllowList): string | undefined {
  let addr: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    addr = ipaddr.process(address); // IPv4-mapped IPv6 becomes the IPv4 it carries
  } catch {
    return `'${address}' is not an IP address`;
  }
  if (allow.cidrs.some(([net, bits]) => net.kind() === addr.kind() && addr.match(net, bits))) return undefined;
  const range = addr.range();
  if (range !== 'unicast') return `${addr.toString()}, a ${range} address`;
  // `::a.b.c.d`, IPv4-compatible IPv6 (deprecated by RFC 4291): ipaddr.js counts it as unicast, but a
  // stack that still maps it reaches the IPv4 address it carries (`::7f00:1` is 127.0.0.1).
  if (addr.kind() === 'ipv6' && addr.match(IPV4_COMPATIBLE)) return `${addr.toString()}, an IPv4-compatible address`;
  return undefined;
}

/** The URL's host as a bare name or address (IPv6 brackets removed, lower case, no trailing dot). */
function hostOf(url: URL): string {
  return url.hostname
    .replace(/^\[|\]$/g, '')
    .toLowerCase()
    .replace(/\.$/, '');
}

/**
 * What is wrong with a webhook URL before any DNS look-up, or undefined. WHATWG URL parsing has
 * already turned `2130706433`, `0x7f000001` and `0177.0.0.1` into 127.0.0.1.
 */
export function webhookUrlProblem(raw: string, allow: WebhookAllowList): string | undefined {
  if (raw.length > MAX_WEBHOOK_URL_LENGTH) return `must be at most ${MAX_WEBHOOK_URL_LENGTH} characters`;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return 'must be an absolute http or https URL';
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return 'must be an http or https URL';
  if (url.username || url.password) return 'must not carry credentials';
  const host = hostOf(url);
  if (allow.hosts.has(host)) return undefined;
  if (isIP(host)) {
    const refused = refusedAddress(host, allow);
    return refused ? `may not target ${refused} (operators allow such targets with GANTRY_WEBHOOK_ALLOW)` : undefined;
  }
  if (host === 'localhost' || host.endsWith('.localhost'))
    return `may not target ${host} (operators allow such targets with GANTRY_WEBHOOK_ALLOW)`;
  return undefined;
}

type LookupAddress = { address: string; family: number };
type Resolver = (
  hostname: string,
  options: { all: true },
  callback: (err: NodeJS.ErrnoException | null, addresses: LookupAddress[]) => void,
) => void;

/**
 * A `lookup` for net/tls connect that resolves with `resolve` and refuses the connection when any
 * address is refused: the socket then connects only to addresses that were checked, so a rebinding
 * DNS answer cannot swap in a private one between the check and the connect.
 */
export function guardedLookup(resolve: Resolver, allow: () => WebhookAllowList): LookupFunction {
  const guarded = (
    hostname: string,
    options: { all?: boolean; family?: number | string } | number,
    callback: (...args: unknown[]) => void,
  ): void => {
    const all = typeof options === 'object' && options.all === true;
    const list = allow();
    if (list.hosts.has(hostname.toLowerCase().replace(/\.$/, ''))) {
      resolve(hostname, { all: true }, (err, addresses) =>
        err
          ? callback(err)
          : all
            ? callback(null, addresses)
            : callback(null, addresses[0]?.address, addresses[0]?.family),
      );
      return;
    }
    resolve(hostname, { all: true }, (err, addresses) => {
      if (err) return callback(err);
      const refused = addresses.map((a) => refusedAddress(a.address, list)).find((r) => r !== undefined);
      if (refused || addresses.length === 0) {
        const e = Object.assign(
          new Error(`webhook host ${hostname} resolves to a refused address: ${refused ?? 'none'}`),
          { code: 'EWEBHOOKREFUSED' },
        );
        return callback(e);
      }
      if (all) callback(null, addresses);
      else callback(null, addresses[0]!.address, addresses[0]!.family);
    });
  };
  return guarded as unknown as LookupFunction; // net's overloads (all or one address) in one function
}
