import { createServer, type Server } from 'node:http';
import { BlockList, isIP, type Socket } from 'node:net';
import { spawnSync } from 'node:child_process';
import { networkInterfaces } from 'node:os';
import type { FastifyInstance } from 'fastify';
import { problem, sendProblem } from './problem.ts';

/** The worker protocol (docs/jobs.md, and the live-reload source poll) and the downloads: all a worker container needs of Gantry. */
const WORKER_ACTIONS = new Set(['job-take', 'job-take-batch', 'job-done', 'job-stream', 'job-stop', 'ping', 'source']);

export function isWorkerProtocolRoute(url: string | undefined): boolean {
  // A deployed app's worker fetches its code here, and a live one its new sources (signed URLs; api/routes/apps.ts).
  if (url === '/v2/artifacts/:buildId' || url === '/v2/sources/:envId/:version') return true;
  if (!url?.startsWith('/v2/:endpointId/')) return false;
  return WORKER_ACTIONS.has(url.slice('/v2/:endpointId/'.length).split('/')[0] ?? '');
}

/** Connections that came in through a worker-facing listener. */
const workerSockets = new WeakSet<Socket>();

/** On a worker-facing listener, everything but the worker protocol is 404: workers reach nothing else. */
export function registerWorkerListenerGuard(app: FastifyInstance): void {
  app.addHook('onRequest', async (request, reply) => {
    if (workerSockets.has(request.raw.socket) && !isWorkerProtocolRoute(request.routeOptions.url)) {
      return sendProblem(reply, problem(404, 'only the worker protocol is served on this address'));
    }
  });
}

export interface WorkerListener {
  /** True once bound. */
  readonly listening: boolean;
  close(): Promise<void>;
}

/** The host's side of container bridges: Podman's (CNI `cni-podmanN`, netavark `podmanN`) and Docker's. */
const BRIDGE_INTERFACE = /^(cni-podman\d+|podman\d+|docker0|br-[0-9a-f]{12})$/;

/** An IPv4 address of a bridge interface and its prefix length. */
export interface BridgeAddress {
  name: string;
  address: string;
  prefix: number;
}

/**
 * The host's bridge addresses, from iproute2: Node's own list (libuv) leaves out an interface that
 * is not running, which a bridge without containers is, yet the host's own processes reach its
 * address all the same.
 */
function bridgeAddresses(): BridgeAddress[] {
  const r = spawnSync('ip', ['-j', '-4', 'addr', 'show', 'type', 'bridge'], { encoding: 'utf8', timeout: 5000 });
  // Without iproute2, Node's own list: it misses only bridges with no running container.
  if (r.status !== 0)
    return Object.entries(networkInterfaces()).flatMap(([name, list]) =>
      (list ?? [])
        .filter((a) => a.family === 'IPv4' && a.cidr)
        .map((a) => ({ name, address: a.address, prefix: Number(a.cidr!.split('/')[1]) })),
    );
  const links = JSON.parse(r.stdout || '[]') as Array<{
    ifname?: string;
    addr_info?: Array<{ family?: string; local?: string; prefixlen?: number }>;
  }>;
  return links.flatMap((l) =>
    (l.addr_info ?? [])
      .filter((a) => a.family === 'inet' && a.local && a.prefixlen !== undefined)
      .map((a) => ({ name: l.ifname ?? '', address: a.local!, prefix: a.prefixlen! })),
  );
}

/**
 * Whether a connection came from a container (or the host itself) to the host's address on that
 * container's bridge: the local address is a bridge's gateway and the peer is on the bridge's
 * subnet. The bridges are re-read at most every 50 ms, and only when an address is not known yet
 * (a network's bridge appears when its first container starts).
 */
export function createBridgeCheck(read: () => BridgeAddress[] = bridgeAddresses) {
  let bridges = new Map<string, BlockList>();
  let readAt = -Infinity;
  const refresh = (): void => {
    readAt = Date.now();
    const next = new Map<string, BlockList>();
    for (const b of read()) {
      if (!BRIDGE_INTERFACE.test(b.name) || isIP(b.address) !== 4) continue;
      const subnet = next.get(b.address) ?? new BlockList();
      subnet.addSubnet(b.address, b.prefix, 'ipv4');
      next.set(b.address, subnet);
    }
    bridges = next;
  };
  return (local: string | undefined, remote: string | undefined): boolean => {
    if (!local || !remote || isIP(local) !== 4 || isIP(remote) !== 4) return false;
    if (!bridges.has(local) && Date.now() - readAt > 50) refresh();
    return bridges.get(local)?.check(remote, 'ipv4') ?? false;
  };
}

/**
 * Serves `app` on `port` for worker containers, on the gateway of every container network of this
 * machine (each account's network has its own: hostctl/networks.ts). It listens on the IPv4
 * wildcard address, because a network's gateway exists only once its first container runs, and
 * drops at once any connection that is not from a container to its own gateway (so the port is no
 * way in from elsewhere). `gateway` is the default network's, for the log. A taken port is retried
 * every second.
 */
export function startWorkerListener(
  app: FastifyInstance,
  gateway: string,
  port: number,
  log: (msg: string) => void,
): WorkerListener {
  let server: Server | undefined;
  let timer: NodeJS.Timeout | undefined;
  let closed = false;
  let warned = false;
  const state = { listening: false };
  const fromContainer = createBridgeCheck();
  const attempt = (): void => {
    if (closed) return;
    const s = createServer((req, res) => app.routing(req, res));
    s.on('connection', (socket: Socket) => {
      if (!fromContainer(socket.localAddress, socket.remoteAddress)) {
        socket.destroy();
        return;
      }
      workerSockets.add(socket);
    });
    s.once('error', (err: NodeJS.ErrnoException) => {
      s.close();
      if (closed) return;
      if (!warned)
        log(`worker listener on port ${port} not up yet (${err.code ?? err.message}); retrying every second`);
      warned = true;
      timer = setTimeout(attempt, 1000);
      timer.unref();
    });
    s.listen(port, '0.0.0.0', () => {
      server = s;
      state.listening = true;
      if (warned) log(`worker listener up on port ${port} of every container network's gateway (${gateway}, ...)`);
    });
  };
  attempt();
  return {
    get listening() {
      return state.listening;
    },
    async close() {
      closed = true;
      if (timer) clearTimeout(timer);
      if (!server) return;
      const closing = new Promise<void>((resolve) => server!.close(() => resolve()));
      server.closeAllConnections(); // long-polls end now; workers reconnect to the next process
      await closing;
    },
  };
}

/** The base URL a worker reached this process at, when the request came through the worker-facing listener. */
export function workerFacingBase(socket: Socket): string | undefined {
  if (!workerSockets.has(socket) || !socket.localAddress) return undefined;
  return `http://${socket.localAddress}:${socket.localPort}`;
}
