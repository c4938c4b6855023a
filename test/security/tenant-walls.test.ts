/**
 * The walls between tenants on a host (docs/security.md, "On the hosts"), on a real SSH host in
 * front of this machine's Podman, with two accounts:
 * - B's container cannot open any port of A's container by any address (A's bridge address, the
 *   gateways, every address of the host), while a container outside Gantry's networks can (so the
 *   probe can see an open port), and A's workers still serve A's jobs and proxied requests;
 * - a load-balancing worker's published port answers on the host address Gantry uses (the proxy
 *   and its health check) and refuses on the host's other address;
 * - a stand-in metadata server at 169.254.169.254, in a network namespace of the test's own, is
 *   reachable from the host and from a container outside Gantry's networks, not from B's worker;
 * - under GANTRY_WORKER_EGRESS=public, a private address beside the host is refused as well;
 * - an image in the host's store that another tenant pulled (with their credential) is never run for
 *   a tenant whose own pull of it fails.
 */
import { spawnSync } from 'node:child_process';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { randomString } from '../../domain/shared/index.ts';
import { ensureNetworkScript, pruneNetworksScript } from '../../hostctl/networks.ts';
import { call, type TestPlatform } from '../support/platform.ts';
import { ensureLbWorkerImage, LB_WORKER_IMAGE } from '../support/lb.ts';
import {
  ensureOrchestrationWorkerImage,
  managedContainers,
  type OneHostPlatform,
  ORCHESTRATION_WORKER_IMAGE,
  startOneHostPlatform,
  until,
} from '../support/orchestration.ts';
import {
  fromInside,
  fromNewContainer,
  hostAddresses,
  standInServer,
  type StandInServer,
} from '../support/container-probe.ts';

let fixture: OneHostPlatform | undefined;
let p: TestPlatform;
let hostId: string;
let metadata: StandInServer | undefined;

beforeAll(async () => {
  ensureOrchestrationWorkerImage();
  ensureLbWorkerImage();
  process.env.GANTRY_LB_HEALTH = JSON.stringify({ intervalMs: 300 });
  fixture = await startOneHostPlatform('walled-box');
  ({ p, hostId } = fixture);
  metadata = await standInServer('169.254.169.254', '169.254.169.253', 30, 'instance-credentials');
}, 600_000);

afterAll(async () => {
  metadata?.stop();
  await fixture?.stop();
}, 120_000);

/** A second account with a read-write key, made through the API. */
async function secondAccount(): Promise<{ accountId: string; key: string }> {
  const account = await call(p.url, 'POST', '/v2/accounts', {
    key: p.adminKey,
    body: { email: 'tenant-b@example.test', name: 'Tenant B' },
  });
  expect(account.status, JSON.stringify(account.body)).toBe(201);
  const key = await call(p.url, 'POST', '/v2/keys', {
    key: p.adminKey,
    body: { name: 'b', scopes: ['READ', 'WRITE', 'RUN'], accountId: account.body.id },
  });
  expect(key.status, JSON.stringify(key.body)).toBe(201);
  return { accountId: account.body.id as string, key: key.body.key as string };
}

const inspectOf = (container: string) =>
  JSON.parse(spawnSync('podman', ['inspect', container], { encoding: 'utf8' }).stdout)[0] as {
    NetworkSettings: { Networks: Record<string, { IPAddress: string; Gateway: string }> };
  };

/** What on this machine could have answered at `address:port`: listeners and NAT rules for the port. */
function whoAnswers(target: string): string {
  const port = target.split(':').pop()!;
  const listeners = spawnSync('ss', ['-Htlnp', `sport = :${port}`], { encoding: 'utf8' }).stdout.trim();
  const nat = spawnSync('iptables', ['-w', '30', '-t', 'nat', '-S'], { encoding: 'utf8' })
    .stdout.split('\n')
    .filter((l) => l.includes(port))
    .join('\n');
  return `listeners: ${listeners || 'none'}; NAT rules: ${nat || 'none'}`;
}

it('keeps accounts apart on the host: networks, published ports and link-local egress', async () => {
  const b = await secondAccount();

  // A: a load-balancing endpoint (its app port is published for the proxy) and a queue endpoint.
  const lb = await call(p.url, 'POST', '/v2/serverless', {
    key: p.adminKey,
    body: { name: 'a-lb', type: 'LOAD_BALANCING', image: LB_WORKER_IMAGE, workers: { min: 1, max: 1 } },
  });
  expect(lb.status, JSON.stringify(lb.body)).toBe(201);
  const aQueue = await call(p.url, 'POST', '/v2/serverless', {
    key: p.adminKey,
    body: { name: 'a-queue', image: ORCHESTRATION_WORKER_IMAGE, workers: { min: 1, max: 1 } },
  });
  // B: a queue endpoint whose worker is where the probes run from.
  const bQueue = await call(p.url, 'POST', '/v2/serverless', {
    key: b.key,
    body: { name: 'b-queue', image: ORCHESTRATION_WORKER_IMAGE, workers: { min: 1, max: 1 } },
  });
  expect([aQueue.status, bQueue.status]).toEqual([201, 201]);

  // Both accounts' workers serve their own jobs through the worker-facing listener on their own networks.
  for (const [key, ep] of [
    [p.adminKey, aQueue.body.id as string],
    [b.key, bQueue.body.id as string],
  ] as const) {
    const run = await call(p.url, 'POST', `/v2/${ep}/runsync`, { key, body: { input: { who: ep } } });
    expect(run.body, JSON.stringify(run.body)).toMatchObject({ status: 'COMPLETED', output: { echo: { who: ep } } });
  }
  const lbWorker = await until(
    'a ready load-balancing worker',
    async () =>
      (await p.ctx.db.worker.findFirst({ where: { endpointId: lb.body.id, status: { in: ['IDLE', 'RUNNING'] } } })) ??
      undefined,
    120_000,
  );
  const base = lb.body.requestUrls.base as string;
  // The proxy reaches A's worker (on the host address Gantry uses) and checks the key.
  expect((await call(base, 'GET', '/health', { key: p.adminKey })).body).toMatchObject({ status: 'ok' });
  expect((await call(base, 'GET', '/health')).status).toBe(401);

  const containers = managedContainers(hostId);
  const aLb = containers.find((c) => c.endpointId === lb.body.id)!;
  const bWorker = containers.find((c) => c.endpointId === bQueue.body.id)!;
  const aNetworks = inspectOf(aLb.id).NetworkSettings.Networks;
  const bNetworks = inspectOf(bWorker.id).NetworkSettings.Networks;
  const aAccountId = (await p.ctx.db.account.findFirstOrThrow({ where: { isAdmin: true } })).id;
  expect(Object.keys(aNetworks)).toEqual([`gantry-${hostId}-${aAccountId}`]);
  expect(Object.keys(bNetworks)).toEqual([`gantry-${hostId}-${b.accountId}`]);
  const aAddress = Object.values(aNetworks)[0]!.IPAddress;
  const aGateway = Object.values(aNetworks)[0]!.Gateway;
  const bGateway = Object.values(bNetworks)[0]!.Gateway;
  expect(aGateway).not.toBe(bGateway);
  const hostPort = String(lbWorker.hostPort);

  // Control: a container outside Gantry's networks opens A's app port, so 'open' is what a hole looks like.
  expect(await fromNewContainer(LB_WORKER_IMAGE, 'podman', `${aAddress}:80`)).toBe('open');

  // Finding 1: from B's worker, no address of A's worker answers: its bridge address, the gateways
  // and every address of the host, on the app port and on the published port.
  for (const target of [
    `${aAddress}:80`,
    `${aAddress}:${hostPort}`,
    ...[aGateway, bGateway, ...hostAddresses()].map((a) => `${a}:${hostPort}`),
  ]) {
    const answer = await fromInside(bWorker.id, target);
    expect(answer, `B's worker to ${target}${answer === 'open' ? `; ${whoAnswers(target)}` : ''}`).not.toBe('open');
  }

  // Finding 2: the published port answers on the address Gantry reaches the host at, and on no other.
  const host = await p.ctx.db.host.findUniqueOrThrow({ where: { id: hostId } });
  expect((await fetch(`http://${host.address}:${hostPort}/health`)).status).toBe(200);
  const others = hostAddresses().filter((a) => a !== host.address);
  expect(others.length).toBeGreaterThan(0);
  for (const other of others) {
    const answer = await fetch(`http://${other}:${hostPort}/health`, { signal: AbortSignal.timeout(3000) }).then(
      (r) => String(r.status),
      (e: { cause?: { code?: string } }) => e.cause?.code ?? 'error',
    );
    expect(answer, `published port at ${other}`).not.toBe('200');
  }

  // Finding 4: the stand-in metadata service answers the host and a container outside Gantry's
  // networks, and never a tenant's worker.
  expect(await (await fetch(metadata!.url)).text()).toBe('instance-credentials');
  expect(await fromNewContainer(LB_WORKER_IMAGE, 'podman', metadata!.url)).toBe('200 instance-credentials');
  expect(await fromInside(bWorker.id, metadata!.url)).not.toMatch(/^200/);
  expect(await fromInside(bWorker.id, '169.254.169.254:80')).not.toBe('open');
}, 400_000);

it('under the public egress policy, refuses private addresses beside the host too, except those allowed', async () => {
  // The same script the activities run, for a network of this test's own.
  const owner = `walls${randomString(6)}`;
  const octet = 200 + Math.floor(Math.random() * 50);
  const neighbour = await standInServer(`192.168.${octet}.2`, `192.168.${octet}.1`, 30, 'private-neighbour');
  try {
    const ensure = (policy: 'private' | 'public', allow: string[] = []) => {
      const r = spawnSync('sh', ['-s'], {
        input: ensureNetworkScript('podman', owner, 'acct', { policy, allow }),
        encoding: 'utf8',
      });
      expect(r.status, r.stderr).toBe(0);
    };
    const network = `gantry-${owner}-acct`;
    ensure('private');
    expect(await fromNewContainer(LB_WORKER_IMAGE, network, neighbour.url)).toBe('200 private-neighbour');
    expect(await fromNewContainer(LB_WORKER_IMAGE, network, metadata!.url)).not.toMatch(/^200/);
    ensure('public');
    expect(await fromNewContainer(LB_WORKER_IMAGE, network, neighbour.url)).not.toMatch(/^200/);
    // The API's own address, when private, is allowed under `public` (activities/tenant-network.ts).
    ensure('public', [`192.168.${octet}.2`]);
    expect(await fromNewContainer(LB_WORKER_IMAGE, network, neighbour.url)).toBe('200 private-neighbour');
    ensure('private');
    expect(await fromNewContainer(LB_WORKER_IMAGE, network, neighbour.url)).toBe('200 private-neighbour');
  } finally {
    neighbour.stop();
    spawnSync('sh', ['-s'], { input: pruneNetworksScript('podman', owner, []) });
    // The allowance above is the one rule a prune leaves (the chain is shared): not for later runs.
    spawnSync('iptables', [
      '-w',
      '30',
      '-t',
      'mangle',
      '-D',
      'GANTRY-PRIVATE',
      '-d',
      `192.168.${octet}.2/32`,
      '-j',
      'RETURN',
    ]);
  }
}, 300_000);

it("never runs another tenant's cached image for a tenant whose own pull fails", async () => {
  // Another tenant's private image as their authorised pull leaves it in the host's store: under its
  // registry's name (one this machine cannot reach, so no pull of it can succeed), a tag and :latest.
  const repo = `registry.invalid/walls-${randomString(6)}/private`;
  for (const tag of ['1', 'latest']) {
    const r = spawnSync('podman', ['tag', ORCHESTRATION_WORKER_IMAGE, `${repo}:${tag}`], { encoding: 'utf8' });
    expect(r.status, r.stderr).toBe(0);
  }
  try {
    for (const tag of ['1', 'latest']) {
      const created = await call(p.url, 'POST', '/v2/serverless', {
        key: p.adminKey,
        body: { name: `cached-${tag}`, image: `${repo}:${tag}`, workers: { min: 1, max: 1 } },
      });
      expect(created.status, JSON.stringify(created.body)).toBe(201);
      const endpointId = created.body.id as string;
      const failed = await until(
        `a worker of ${repo}:${tag} that failed its pull`,
        async () =>
          (await p.ctx.db.worker.findFirst({
            where: { endpointId, statusReason: { contains: 'not used in its place' } },
          })) ?? undefined,
        120_000,
        250,
      );
      expect(failed.statusReason).toMatch(new RegExp(`pulling ${repo}:${tag}`));
      // No container of the endpoint ever ran.
      expect(managedContainers(hostId).filter((c) => c.endpointId === endpointId)).toEqual([]);
      expect((await call(p.url, 'DELETE', `/v2/serverless/${endpointId}`, { key: p.adminKey })).status).toBe(204);
    }
  } finally {
    spawnSync('podman', ['rmi', '--force', `${repo}:1`, `${repo}:latest`]);
  }
}, 300_000);
