/**
 * The walls between tenants on a host: one bridge network per account, isolated from every other
 * account's, and an egress filter on each. Docker and Podman share the surface again.
 *
 * - Podman: `network create --opt isolate=true` (Podman 4.0 and later): its firewall drops traffic
 *   from one isolated bridge to another, also when it was addressed to a published port of the host
 *   (the packet is DNAT'ed and then forwarded between the two bridges). Docker's user-defined
 *   bridges are isolated from each other by default.
 * - Egress: iptables rules Gantry keeps in the mangle table, keyed by each network's subnet:
 *   link-local addresses (169.254.0.0/16, where clouds serve instance metadata and credentials) are
 *   dropped before routing, so neither the host nor the outside answers them; with the `public`
 *   policy, private ranges (RFC 1918, CGNAT) are dropped when forwarded, except the addresses Gantry
 *   names (where workers reach the API). Host-local addresses stay reachable: the worker-facing
 *   listener is on the network's own gateway. The networks carry no IPv6 (no route to fd00:ec2::254).
 *
 * Every change is made under one lock file on the host, so a network's creation, its rules and a
 * prune never interleave.
 */
import { shellJoin, shellQuote, type SshPool } from './ssh.ts';
import type { HostHandle, RuntimeName } from './containers.ts';

/** What worker containers may reach besides the worker-facing API: `private` networks too, or `public` addresses only. */
export type EgressPolicy = 'private' | 'public';

export interface EgressSettings {
  policy: EgressPolicy;
  /** Private IPv4 addresses or CIDRs containers may still reach under the `public` policy (the API's address). */
  allow: string[];
}

export interface AccountNetwork {
  name: string;
  /** IPv4 CIDR the runtime gave the network. */
  subnet: string;
  /** Its gateway: the host's own address on the network. */
  gateway: string;
}

/** Labels on Gantry's networks: the Host row (another installation's are never touched) and the account. */
export const NETWORK_LABELS = { host: 'gantry.host', account: 'gantry.account' } as const;

export const accountNetworkPrefix = (hostId: string): string => `gantry-${hostId}-`;
export const accountNetworkName = (hostId: string, accountId: string): string =>
  `${accountNetworkPrefix(hostId)}${accountId}`;

/** Link-local: cloud instance metadata (169.254.169.254) and the rest of the range. */
export const LINK_LOCAL = '169.254.0.0/16';
/** Refused under the `public` policy: RFC 1918 and the shared address space of carrier-grade NAT. */
export const PRIVATE_RANGES = ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '100.64.0.0/10'] as const;

const IPV4_CIDR = /^(\d{1,3})(\.\d{1,3}){3}(\/\d{1,2})?$/;
const NAME = /^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/;

export class NetworkCommandError extends Error {
  override readonly name = 'NetworkCommandError';
}

/**
 * Shell functions both scripts use: the lock, iptables that waits for its own lock, and rules made
 * once. A worker start runs this, so the common case (all there) costs one `iptables -S`: a rule
 * found in that listing is not asked about again; one not found is checked with -C and made.
 */
const PRELUDE = [
  'command -v iptables >/dev/null 2>&1 || { echo "iptables is not installed on the host" >&2; exit 91; }',
  // flock is util-linux; without it the rules are still made idempotently, only not serialised.
  'if command -v flock >/dev/null 2>&1; then l=/run/lock; [ -d "$l" ] || l=/tmp; exec 9>"$l/gantry-networks.lock"; flock -w 60 9 || exit 92; fi',
  'ipt() { iptables -w 30 "$@"; }',
  "nl='\n'",
  'rules="$nl$(ipt -t mangle -S 2>/dev/null)$nl"',
  // has LINE: the mangle table listed it (as `iptables -S` writes it).
  'has() { case "$rules" in *"$nl$1$nl"*) return 0;; esac; return 1; }',
  // once / first CHAIN RULE...: appends (inserts first) the mangle rule unless it is there.
  'once() { c=$1; shift; has "-A $c $*" || ipt -t mangle -C "$c" "$@" 2>/dev/null || ipt -t mangle -A "$c" "$@"; }',
  'first() { c=$1; shift; has "-A $c $*" || ipt -t mangle -C "$c" "$@" 2>/dev/null || ipt -t mangle -I "$c" 1 "$@"; }',
  'chain() { has "-N $1" || ipt -t mangle -N "$1" 2>/dev/null || true; }',
].join('\n');

function inspectSubnets(runtime: RuntimeName, name: string): string {
  const format =
    runtime === 'podman'
      ? '{{range .Subnets}}{{.Subnet}} {{.Gateway}} {{end}}'
      : '{{range .IPAM.Config}}{{.Subnet}} {{.Gateway}} {{end}}';
  return shellJoin([runtime, 'network', 'inspect', '--format', format, '--', name]);
}

/**
 * The script that makes sure the account's network and its egress rules exist, and prints
 * `<subnet> <gateway>`. Exported for the tests' own clean-up; the activities call ensureAccountNetwork.
 */
export function ensureNetworkScript(
  runtime: RuntimeName,
  hostId: string,
  accountId: string,
  egress: EgressSettings,
): string {
  const name = accountNetworkName(hostId, accountId);
  if (!NAME.test(name)) throw new NetworkCommandError(`'${name}' is not a valid network name`);
  for (const a of egress.allow)
    if (!IPV4_CIDR.test(a)) throw new NetworkCommandError(`egress allowance '${a}' is not an IPv4 address or CIDR`);
  const labels = [`${NETWORK_LABELS.host}=${hostId}`, `${NETWORK_LABELS.account}=${accountId}`].flatMap((l) => [
    '--label',
    l,
  ]);
  // Podman's isolation is an option; Docker isolates user-defined bridges from each other anyway.
  const create = shellJoin([
    runtime,
    'network',
    'create',
    ...(runtime === 'podman' ? ['--opt', 'isolate=true'] : []),
    ...labels,
    '--',
    name,
  ]);
  return [
    PRELUDE,
    // One inspect when the network is there (the common case); made first when it is not.
    `info=$(${inspectSubnets(runtime, name)} 2>/dev/null) || { out=$(${create} 2>&1) || { echo "$out" >&2; exit 93; }; info=$(${inspectSubnets(runtime, name)}) || exit 94; }`,
    'set -- $info',
    'subnet=$1; gw=$2',
    '[ -n "$subnet" ] && [ -n "$gw" ] || { echo "network has no IPv4 subnet" >&2; exit 94; }',
    // Link-local: dropped before routing, so that no address on the host or beyond answers it.
    'chain GANTRY-EGRESS',
    `once GANTRY-EGRESS -d ${LINK_LOCAL} -j DROP || exit 95`,
    'first PREROUTING -s "$subnet" -j GANTRY-EGRESS || exit 95',
    // Private ranges: dropped when forwarded (host-local addresses, the worker listener among them, stay).
    'chain GANTRY-PRIVATE',
    // Allowances go first: a RETURN behind the DROPs would never be reached.
    ...egress.allow.map((a) => `first GANTRY-PRIVATE -d ${a.includes('/') ? a : `${a}/32`} -j RETURN || exit 95`),
    ...PRIVATE_RANGES.map((r) => `once GANTRY-PRIVATE -d ${r} -j DROP || exit 95`),
    egress.policy === 'public'
      ? 'first FORWARD -s "$subnet" -j GANTRY-PRIVATE || exit 95'
      : 'if has "-A FORWARD -s $subnet -j GANTRY-PRIVATE"; then while ipt -t mangle -D FORWARD -s "$subnet" -j GANTRY-PRIVATE 2>/dev/null; do :; done; fi',
    'echo "$subnet $gw"',
  ].join('\n');
}

/**
 * The script that removes this host row's account networks except those of `keepAccountIds` (a
 * network with containers is never removed: the runtime refuses), with their rules; prints each
 * name removed.
 */
export function pruneNetworksScript(runtime: RuntimeName, hostId: string, keepAccountIds: string[]): string {
  const prefix = accountNetworkPrefix(hostId);
  const keep = keepAccountIds.filter((id) => NAME.test(id)).map((id) => `${prefix}${id}`);
  return [
    // What could go is found without the lock (a reconcile runs this often, mostly to find nothing);
    // the lock is taken only to remove.
    `names=$(${shellJoin([runtime, 'network', 'ls', '--format', '{{.Name}}', '--filter', `label=${NETWORK_LABELS.host}=${hostId}`])}) || exit 1`,
    'gone=',
    'for n in $names; do',
    `  case "$n" in ${shellQuote(prefix)}*) ;; *) continue;; esac`,
    ...(keep.length > 0 ? [`  case "$n" in ${keep.map(shellQuote).join('|')}) continue;; esac`] : []),
    '  gone="$gone $n"',
    'done',
    '[ -n "$gone" ] || exit 0',
    PRELUDE,
    'for n in $gone; do',
    `  subnet=$(${runtime} network inspect --format '${runtime === 'podman' ? '{{range .Subnets}}{{.Subnet}} {{end}}' : '{{range .IPAM.Config}}{{.Subnet}} {{end}}'}' -- "$n" 2>/dev/null)`,
    `  ${runtime} network rm -- "$n" >/dev/null 2>&1 || continue`,
    '  for s in $subnet; do',
    '    while ipt -t mangle -D PREROUTING -s "$s" -j GANTRY-EGRESS 2>/dev/null; do :; done',
    '    while ipt -t mangle -D FORWARD -s "$s" -j GANTRY-PRIVATE 2>/dev/null; do :; done',
    '  done',
    '  echo "$n"',
    'done',
    'exit 0',
  ].join('\n');
}

/** Makes sure the account's network exists on the host, with the egress rules; idempotent. */
export async function ensureAccountNetwork(
  pool: SshPool,
  h: HostHandle,
  accountId: string,
  egress: EgressSettings,
): Promise<AccountNetwork> {
  const name = accountNetworkName(h.hostId, accountId);
  const r = await pool.exec(h.target, 'sh -s', {
    stdin: ensureNetworkScript(h.runtime, h.hostId, accountId, egress),
    timeoutMs: 120_000,
  });
  const detail = (r.stderr.trim() || r.stdout.trim()).split('\n').slice(-3).join('\n').slice(-800);
  if (r.code !== 0) {
    const what =
      r.code === 93
        ? `creating network ${name}${h.runtime === 'podman' ? ' (isolated networks need Podman 4.0 or later)' : ''}`
        : r.code === 91 || r.code === 95
          ? `setting the egress rules of network ${name} (needs iptables and root on the host)`
          : `preparing network ${name}`;
    throw new NetworkCommandError(`${what} failed (exit ${r.code ?? r.signal}): ${detail}`);
  }
  const [subnet = '', gateway = ''] = r.stdout.trim().split('\n').pop()!.trim().split(/\s+/);
  if (!IPV4_CIDR.test(subnet) || !IPV4_CIDR.test(gateway))
    throw new NetworkCommandError(`preparing network ${name}: unexpected output ${r.stdout.slice(0, 200)}`);
  return { name, subnet, gateway };
}

/** Removes the host row's account networks that no account in `keepAccountIds` needs; answers their names. */
export async function pruneAccountNetworks(pool: SshPool, h: HostHandle, keepAccountIds: string[]): Promise<string[]> {
  const r = await pool.exec(h.target, 'sh -s', {
    stdin: pruneNetworksScript(h.runtime, h.hostId, keepAccountIds),
    timeoutMs: 120_000,
  });
  if (r.code !== 0)
    throw new NetworkCommandError(
      `pruning networks failed (exit ${r.code ?? r.signal}): ${r.stderr.trim().slice(-800)}`,
    );
  return r.stdout
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean);
}
