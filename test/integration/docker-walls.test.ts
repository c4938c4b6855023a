/**
 * The walls between tenants on a Docker host (docs/security.md, "On the hosts"), as
 * test/security/tenant-walls.test.ts checks them on Podman: a real dockerd (Debian's docker.io
 * 20.10) that manages iptables, in a network namespace of the test's own with an SSH server beside
 * it (test/support/docker-netns-host.ts), so that its rules and Gantry's egress chains are really
 * there and this machine's tables are left alone. The API listens on this machine's end of the
 * host's veth (GANTRY_PUBLIC_URL), where the host's containers reach it.
 *
 * Checked on a daemon run as Gantry requires (iptables on, `--userland-proxy=false`):
 * - B's worker opens no port of A's worker by any address: A's bridge address, both gateways, the
 *   default bridge's, and both of the host's addresses, on the app port and the published port;
 *   a fresh container on A's own network does open it (what a hole would look like);
 * - the published port answers the proxy on the host's address and nothing on its other address;
 * - a stand-in metadata server at 169.254.169.254 answers the host and a container on Docker's
 *   default bridge, never B's worker.
 * Then why the probe refuses the other configurations (activities/host-probe.ts, DockerWalls):
 * - with the userland proxy on (Docker's default), B's container reaches A's published port through
 *   the host's address (docker-proxy connects from the host, past the isolation of networks);
 * - with `--iptables=false`, B's container reaches A's container directly;
 * and the host turns PENDING for each, saying why, and READY again once the daemon is walled.
 */
import { spawnSync } from 'node:child_process';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { connectSsh } from '../../hostctl/ssh.ts';
import { ensureNetworkScript } from '../../hostctl/networks.ts';
import { probeHost } from '../../activities/host-probe.ts';
import { dockerProbe, startDockerNetnsHost, type DockerNetnsHost } from '../support/docker-netns-host.ts';
import { call, startTestPlatform, type TestPlatform } from '../support/platform.ts';
import { freePort } from '../support/ports.ts';
import { ensureLbWorkerImage, LB_WORKER_IMAGE } from '../support/lb.ts';
import {
  ensureOrchestrationWorkerImage,
  FAST_ORCHESTRATION,
  ORCHESTRATION_WORKER_IMAGE,
  registerTestHost,
  until,
} from '../support/orchestration.ts';

let host: DockerNetnsHost | undefined;
let p: TestPlatform | undefined;
let hostId: string;

beforeAll(async () => {
  ensureOrchestrationWorkerImage();
  ensureLbWorkerImage();
  process.env.GANTRY_LB_HEALTH = JSON.stringify({ intervalMs: 300 });
  process.env.GANTRY_ORCHESTRATION = JSON.stringify(FAST_ORCHESTRATION);
  host = await startDockerNetnsHost({ images: [ORCHESTRATION_WORKER_IMAGE, LB_WORKER_IMAGE] });
  const port = await freePort();
  const url = `http://${host.outside}:${port}`;
  const started = await startTestPlatform({
    PORT: String(port),
    GANTRY_HOST: host.outside,
    GANTRY_PUBLIC_URL: url,
    // The walled daemon is accepted as it is.
    GANTRY_ALLOW_UNWALLED_DOCKER: 'false',
  });
  p = { ...started, url };
  hostId = await registerTestHost(p, host, 'docker-walled');
}, 600_000);

afterAll(async () => {
  await p?.stop();
  await host?.stop();
}, 120_000);

const docker = (args: string[]): string => {
  const r = host!.dockerd.docker(args);
  expect(r.status, `docker ${args.join(' ')}: ${r.stderr}`).toBe(0);
  return r.stdout.trim();
};

type Networks = Record<string, { IPAddress: string; Gateway: string }>;
const networksOf = (container: string): Networks =>
  JSON.parse(docker(['inspect', '--format', '{{json .NetworkSettings.Networks}}', container])) as Networks;

/** A second account with a read-write key, made through the API. */
async function secondAccount(): Promise<{ accountId: string; key: string }> {
  const account = await call(p!.url, 'POST', '/v2/accounts', {
    key: p!.adminKey,
    body: { email: 'tenant-b@example.test', name: 'Tenant B' },
  });
  expect(account.status, JSON.stringify(account.body)).toBe(201);
  const key = await call(p!.url, 'POST', '/v2/keys', {
    key: p!.adminKey,
    body: { name: 'b', scopes: ['READ', 'WRITE', 'RUN'], accountId: account.body.id },
  });
  expect(key.status, JSON.stringify(key.body)).toBe(201);
  return { accountId: account.body.id as string, key: key.body.key as string };
}

/** What answers `http://address:port/health` from this machine: the status, or the error's code. */
const fromOutside = (address: string, port: string): Promise<string> =>
  fetch(`http://${address}:${port}/health`, { signal: AbortSignal.timeout(3000) }).then(
    (r) => String(r.status),
    (e: { cause?: { code?: string } }) => e.cause?.code ?? 'error',
  );

it('keeps accounts apart on a walled Docker host: networks, published ports and link-local egress', async () => {
  // The probe: Docker, with its rules, and nothing to say against it.
  const row = await p!.ctx.db.host.findUniqueOrThrow({ where: { id: hostId } });
  expect(row.containerRuntime).toBe('docker');
  expect(row.probe).toMatchObject({ runtime: { name: 'docker' }, wallsHint: null });
  const conn = await connectSsh({ host: host!.host, port: host!.port, user: 'root', privateKey: host!.privateKey });
  try {
    expect((await probeHost(conn)).containerRuntime?.walls).toEqual({
      iptables: 'on',
      userlandProxy: false,
      problem: undefined,
    });
  } finally {
    conn.close();
  }

  const b = await secondAccount();
  const lb = await call(p!.url, 'POST', '/v2/serverless', {
    key: p!.adminKey,
    body: { name: 'a-lb', type: 'LOAD_BALANCING', image: LB_WORKER_IMAGE, workers: { min: 1, max: 1 } },
  });
  expect(lb.status, JSON.stringify(lb.body)).toBe(201);
  const aQueue = await call(p!.url, 'POST', '/v2/serverless', {
    key: p!.adminKey,
    body: { name: 'a-queue', image: ORCHESTRATION_WORKER_IMAGE, workers: { min: 1, max: 1 } },
  });
  const bQueue = await call(p!.url, 'POST', '/v2/serverless', {
    key: b.key,
    body: { name: 'b-queue', image: ORCHESTRATION_WORKER_IMAGE, workers: { min: 1, max: 1 } },
  });
  expect([aQueue.status, bQueue.status]).toEqual([201, 201]);

  // Both accounts' workers serve their own jobs, reaching the API from their own networks.
  for (const [key, ep] of [
    [p!.adminKey, aQueue.body.id as string],
    [b.key, bQueue.body.id as string],
  ] as const) {
    const run = await call(p!.url, 'POST', `/v2/${ep}/runsync`, { key, body: { input: { who: ep } } });
    expect(run.body, JSON.stringify(run.body)).toMatchObject({ status: 'COMPLETED', output: { echo: { who: ep } } });
  }
  const lbWorker = await until(
    'a ready load-balancing worker',
    async () =>
      (await p!.ctx.db.worker.findFirst({
        where: { endpointId: lb.body.id, status: { in: ['IDLE', 'RUNNING'] } },
      })) ?? undefined,
    120_000,
  );
  const base = lb.body.requestUrls.base as string;
  expect((await call(base, 'GET', '/health', { key: p!.adminKey })).body).toMatchObject({ status: 'ok' });
  expect((await call(base, 'GET', '/health')).status).toBe(401);

  const containerOf = (endpointId: string) =>
    docker([
      'ps',
      '--quiet',
      '--filter',
      `label=gantry.host=${hostId}`,
      '--filter',
      `label=gantry.endpoint=${endpointId}`,
    ]);
  const aLb = containerOf(lb.body.id as string);
  const bWorker = containerOf(bQueue.body.id as string);
  const aNetworks = networksOf(aLb);
  const bNetworks = networksOf(bWorker);
  const aAccountId = (await p!.ctx.db.account.findFirstOrThrow({ where: { isAdmin: true } })).id;
  expect(Object.keys(aNetworks)).toEqual([`gantry-${hostId}-${aAccountId}`]);
  expect(Object.keys(bNetworks)).toEqual([`gantry-${hostId}-${b.accountId}`]);
  const { IPAddress: aAddress, Gateway: aGateway } = Object.values(aNetworks)[0]!;
  const bGateway = Object.values(bNetworks)[0]!.Gateway;
  const defaultGateway = docker([
    'network',
    'inspect',
    'bridge',
    '--format',
    '{{range .IPAM.Config}}{{.Gateway}}{{end}}',
  ]);
  const hostPort = String(lbWorker.hostPort);

  // Control: a container on A's own network opens A's app port, so 'open' is what a hole looks like.
  const aNetwork = Object.keys(aNetworks)[0]!;
  expect(await dockerProbe(host!.dockerd, { image: LB_WORKER_IMAGE, network: aNetwork }, `${aAddress}:80`)).toBe(
    'open',
  );

  // B's worker reaches no port of A's worker, by any address.
  const targets = [
    `${aAddress}:80`,
    `${aAddress}:${hostPort}`,
    ...[aGateway, bGateway, defaultGateway, host!.host, host!.otherAddress].map((a) => `${a}:${hostPort}`),
  ];
  const answers = await Promise.all(targets.map((t) => dockerProbe(host!.dockerd, bWorker, t)));
  expect(
    targets.filter((_, i) => answers[i] === 'open'),
    `B's worker to ${targets.join(', ')}: ${answers.join(', ')}`,
  ).toEqual([]);

  // The published port answers on the host's address as Gantry reaches it, and on no other.
  expect(await fromOutside(host!.host, hostPort)).toBe('200');
  expect(await fromOutside(host!.otherAddress, hostPort)).not.toBe('200');

  // The stand-in metadata service answers the host and a container outside Gantry's networks, never a tenant's worker.
  expect(host!.inside(['curl', '-s', '-m', '3', host!.metadataUrl]).stdout).toBe('instance-credentials');
  expect(await dockerProbe(host!.dockerd, { image: LB_WORKER_IMAGE, network: 'bridge' }, host!.metadataUrl)).toBe(
    '200 instance-credentials',
  );
  expect(await dockerProbe(host!.dockerd, bWorker, host!.metadataUrl)).not.toMatch(/^200/);
  expect(await dockerProbe(host!.dockerd, bWorker, '169.254.169.254:80')).not.toBe('open');

  for (const ep of [lb.body.id, aQueue.body.id]) {
    expect((await call(p!.url, 'DELETE', `/v2/serverless/${ep}`, { key: p!.adminKey })).status).toBe(204);
  }
  expect((await call(p!.url, 'DELETE', `/v2/serverless/${bQueue.body.id}`, { key: b.key })).status).toBe(204);
  await until('no worker containers left', async () => docker(['ps', '--quiet']) === '', 60_000);
}, 300_000);

/** Two tenants' networks made by Gantry's own script, A's app published on the host's address, and B's container. */
async function twoTenants(): Promise<{ aAddress: string; hostPort: string; b: string }> {
  for (const account of ['a', 'b']) {
    const r = spawnSync('nsenter', [`--net=/run/netns/${host!.netns}`, 'sh', '-s'], {
      input: ensureNetworkScript('docker', 'demo', account, { policy: 'private', allow: [] }),
      env: { ...process.env, DOCKER_HOST: host!.dockerd.dockerHost },
      encoding: 'utf8',
    });
    expect(r.status, r.stderr).toBe(0);
  }
  const a = docker([
    'run',
    '--detach',
    '--network',
    'gantry-demo-a',
    '--cap-drop',
    'NET_RAW',
    '--env',
    'PORT=80',
    '--publish',
    `${host!.host}::80`,
    LB_WORKER_IMAGE,
  ]);
  const b = docker([
    'run',
    '--detach',
    '--network',
    'gantry-demo-b',
    '--cap-drop',
    'NET_RAW',
    LB_WORKER_IMAGE,
    'node',
    '-e',
    'setInterval(() => {}, 1e9)',
  ]);
  const aAddress = Object.values(networksOf(a))[0]!.IPAddress;
  const hostPort = docker(['port', a, '80/tcp']).split('\n')[0]!.split(':').pop()!;
  await until('A answering on its published port', async () => (await fromOutside(host!.host, hostPort)) === '200');
  return { aAddress, hostPort, b };
}

/** The host's status once the platform probed it now. */
async function probedStatus(): Promise<{ status: string; statusReason: string | null }> {
  const r = await call(p!.url, 'POST', `/v2/hosts/${hostId}/probe`, { key: p!.adminKey });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return { status: r.body.status as string, statusReason: (r.body.statusReason ?? null) as string | null };
}

it("refuses a daemon that leaves holes: Docker's userland proxy, and no iptables", async () => {
  // Docker's default: docker-proxy answers B's connection to the host's address and connects to A from the host.
  await host!.restartDocker({ userlandProxy: true, images: [LB_WORKER_IMAGE] });
  let t = await twoTenants();
  expect(await dockerProbe(host!.dockerd, t.b, `${t.aAddress}:80`)).not.toBe('open');
  expect(await dockerProbe(host!.dockerd, t.b, `${host!.host}:${t.hostPort}`)).toBe('open');
  let probed = await probedStatus();
  expect(probed.status).toBe('PENDING');
  expect(probed.statusReason).toMatch(/userland proxy is on.*"userland-proxy": false.*GANTRY_ALLOW_UNWALLED_DOCKER/);

  // Without iptables, nothing stands between the networks.
  await host!.restartDocker({ iptables: false, images: [LB_WORKER_IMAGE] });
  t = await twoTenants();
  expect(await dockerProbe(host!.dockerd, t.b, `${t.aAddress}:80`)).toBe('open');
  probed = await probedStatus();
  expect(probed.status).toBe('PENDING');
  expect(probed.statusReason).toMatch(/manages no iptables rules.*--iptables=false/);

  // Walled again: the host is used again.
  await host!.restartDocker({ images: [] });
  expect(await probedStatus()).toEqual({ status: 'READY', statusReason: null });
}, 300_000);
