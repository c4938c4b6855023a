/**
 * `gantry deploy --preview`: the project's endpoints in local containers, one per resource, on one
 * network of their own, each published on a local port, until Ctrl+C. It checks the wiring (routes,
 * service discovery, the artifact's dependencies on the runtime), not the speed: no platform, no
 * scaling, no GPUs.
 *
 * Every container and the network carry the label `io.gantry.preview=<app>`, and each run first
 * removes whatever carries its app's label: that is how a run after a `kill -9` of the previous
 * one starts clean.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer, type Server } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { runBuild, type BuildFlags } from '../build.ts';
import { CliError, describeError } from '../../errors.ts';
import { note, printJson, progress, say, table } from '../../output.ts';
import { resolveAppName } from '../../project.ts';
import type { Resource } from '../../scan.ts';
import {
  ARTIFACT_LABEL,
  check,
  exec,
  extractArtifact,
  findEngine,
  LABEL,
  lastLines,
  removeLabelled,
  runtimeImage,
  type Engine,
} from './preview-engine.ts';

export interface PreviewFlags extends BuildFlags {
  app?: string;
}

/** The port every runtime listens on inside its container (the same in each: each has its own address). */
const CONTAINER_PORT = 8000;
/** From `run` to `GET /ping` 200: importing an app can take a while, a broken one never answers. */
const READY_TIMEOUT_MS = 120_000;
/** The runtime stops on SIGTERM; this only bounds how long a stuck one holds up Ctrl+C. */
const STOP_TIMEOUT_S = 5;

interface Planned {
  resource: Resource;
  container: string;
  port: number;
  /** Set when names do not resolve on the network (see discoveryMode()). */
  ip?: string;
}

export async function runPreview(flags: PreviewFlags): Promise<void> {
  const projectDir = process.cwd();
  const app = resolveAppName(projectDir, flags.app);
  const engine = findEngine();

  const started = performance.now();
  const built = await runBuild(flags);
  const builtAt = performance.now();

  // From here on, Ctrl+C (or SIGTERM) means: stop, remove everything, exit.
  const abort = new AbortController();
  const onSignal = (): void => {
    // A second Ctrl+C while removing: leave now; the next run removes what is left.
    if (abort.signal.aborted) process.exit(130);
    abort.abort();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  const followers: ChildProcess[] = [];
  let up = false;
  let touched = false;
  try {
    await removeLabelled(engine, app);
    touched = true;
    const imageFrom = performance.now();
    const image = await runtimeImage(engine, built.manifest.pythonVersion);
    const imageAt = performance.now();
    const artifactDir = await extractArtifact(engine, projectDir, built);
    checkAborted(abort.signal);

    const step = progress(
      `Starting ${built.manifest.resources.length} container${built.manifest.resources.length === 1 ? '' : 's'} on the network gantry-preview-${app}`,
    );
    const network = `gantry-preview-${app}`;
    await check(engine, ['network', 'create', '--label', `${LABEL}=${app}`, network]);
    const discovery = await discoveryMode(engine, network);
    const ports = await freePorts(built.manifest.resources.length);
    const ips = discovery.mode === 'hosts' ? addressesIn(discovery.subnet, discovery.gateway, ports.length) : [];
    const planned: Planned[] = built.manifest.resources.map((resource, i) => ({
      resource,
      container: containerName(app, resource.name),
      port: ports[i]!,
      ...(ips[i] ? { ip: ips[i] } : {}),
    }));
    const endpoints = Object.fromEntries(
      planned.map((p) => [p.resource.name, `http://${p.container}:${CONTAINER_PORT}`]),
    );

    for (const p of planned) {
      checkAborted(abort.signal);
      await check(
        engine,
        runArgs({
          app,
          network,
          image: image.name,
          artifactDir,
          sha256: built.sha256,
          planned: p,
          all: planned,
          endpoints,
        }),
      );
      followers.push(followLogs(engine, p));
    }
    // One container failing ends the others' waits too (else they would poll on after the cleanup).
    const waits = new AbortController();
    const stopWaits = (): void => waits.abort();
    abort.signal.addEventListener('abort', stopWaits, { once: true });
    try {
      await Promise.all(
        planned.map((p) =>
          waitReady(engine, p, waits.signal).catch((err: unknown) => {
            waits.abort();
            throw err;
          }),
        ),
      );
    } finally {
      abort.signal.removeEventListener('abort', stopWaits);
    }
    step.succeed(`Started ${planned.length} container${planned.length === 1 ? '' : 's'}`);
    up = true;
    const readyAt = performance.now();

    const timings = {
      buildMs: Math.round(builtAt - started),
      imageMs: Math.round(imageAt - imageFrom),
      imageBuilt: image.built,
      startMs: Math.round(readyAt - imageAt),
      totalMs: Math.round(readyAt - started),
    };
    const rows = planned.map((p) => describe(p, endpoints));
    if (flags.json) {
      printJson({
        app,
        runtime: engine.kind,
        network,
        discovery: discovery.mode,
        image: image.name,
        artifact: { sha256: built.sha256, dir: artifactDir },
        endpoints: rows,
        timings,
      });
    } else {
      printTable(rows, discovery.mode);
    }
    note('Press Ctrl+C to stop and remove the containers.');
    await aborted(abort.signal);
    note('Stopping the preview...');
  } catch (err) {
    if (!abort.signal.aborted) throw err;
    // Interrupted while starting: a command killed by the same Ctrl+C is no error of its own.
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    for (const f of followers) f.kill();
    if (touched)
      await removeLabelled(engine, app).catch((err: unknown) =>
        note(`Could not remove everything (${describeError(err)}); the next preview of ${app} removes the rest.`),
      );
  }
  if (!up) throw new CliError('Interrupted before the preview was up; removed what had started.', 130);
  note(`Stopped and removed the preview of ${app}.`);
}

// ---------------------------------------------------------------------------------------------
// The network and service discovery

type Discovery = { mode: 'dns' } | { mode: 'hosts'; subnet: string; gateway?: string };

/**
 * How containers find each other by name. Docker's user-defined networks and Podman's netavark
 * (aardvark-dns) resolve container names. Podman with CNI and no dnsname plugin (this machine's
 * Podman 4.3: `dns_enabled: false`) does not: there each container gets a fixed address in the
 * network's subnet and every other container's name in its /etc/hosts (`--add-host`), so the
 * `http://<container>:8000` URLs work either way.
 */
async function discoveryMode(engine: Engine, network: string): Promise<Discovery> {
  if (engine.kind === 'docker') return { mode: 'dns' };
  const [info] = JSON.parse(await check(engine, ['network', 'inspect', network])) as Array<{
    dns_enabled?: boolean;
    subnets?: Array<{ subnet?: string; gateway?: string }>;
  }>;
  if (info?.dns_enabled) return { mode: 'dns' };
  const v4 = (info?.subnets ?? []).find((s) => s.subnet && /^\d+\.\d+\.\d+\.\d+\/\d+$/.test(s.subnet));
  if (!v4?.subnet)
    throw new CliError(
      `The network ${network} resolves no container names and has no IPv4 subnet to give fixed addresses from.`,
    );
  return { mode: 'hosts', subnet: v4.subnet, ...(v4.gateway ? { gateway: v4.gateway } : {}) };
}

const ipToInt = (ip: string): number => ip.split('.').reduce((n, part) => n * 256 + Number(part), 0);
const intToIp = (n: number): string => [24, 16, 8, 0].map((shift) => Math.floor(n / 2 ** shift) % 256).join('.');

/** `count` host addresses of the subnet, skipping the network address, .1 (the usual gateway), the gateway and the broadcast address. */
export function addressesIn(subnet: string, gateway: string | undefined, count: number): string[] {
  const [address = '', bits = ''] = subnet.split('/');
  const size = 2 ** (32 - Number(bits));
  const base = ipToInt(address) - (ipToInt(address) % size);
  const out: string[] = [];
  for (let i = 2; i < size - 1 && out.length < count; i++) {
    const ip = intToIp(base + i);
    if (ip !== gateway) out.push(ip);
  }
  if (out.length < count)
    throw new CliError(`The subnet ${subnet} has room for ${out.length} containers, not ${count}.`);
  return out;
}

const containerName = (app: string, resource: string): string => `gantry-preview-${app}-${resource}`;
const discoveryVariable = (resource: string): string => `GANTRY_ENDPOINT_${resource.toUpperCase().replace(/-/g, '_')}`;

/** Ports the kernel just handed out, all held at once so they differ; released for the containers to take. */
async function freePorts(count: number): Promise<number[]> {
  const servers: Server[] = [];
  try {
    const ports: number[] = [];
    for (let i = 0; i < count; i++) {
      const server = createServer();
      servers.push(server);
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(0, '127.0.0.1', resolve);
      });
      const addr = server.address();
      if (addr === null || typeof addr === 'string') throw new CliError('Could not find a free local port.');
      ports.push(addr.port);
    }
    return ports;
  } finally {
    await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))));
  }
}

// ---------------------------------------------------------------------------------------------
// The containers

interface RunInput {
  app: string;
  network: string;
  image: string;
  artifactDir: string;
  sha256: string;
  planned: Planned;
  all: Planned[];
  endpoints: Record<string, string>;
}

function runArgs(input: RunInput): string[] {
  const { resource, container, port, ip } = input.planned;
  const env: Record<string, string> = {
    // The resource's own variables first: the wiring below must win over a same-named one.
    ...resource.env,
    GANTRY_ARTIFACT_DIR: '/artifact',
    GANTRY_RESOURCE: resource.name,
    GANTRY_APP: input.app,
    GANTRY_ENVIRONMENT: 'preview',
    GANTRY_BUILD_ID: `preview-${input.sha256.slice(0, 12)}`,
    PORT: String(CONTAINER_PORT),
    ...(resource.kind === 'queue' ? { GANTRY_LOCAL_API: '1' } : {}),
    ...Object.fromEntries(Object.entries(input.endpoints).map(([name, url]) => [discoveryVariable(name), url])),
    GANTRY_ENDPOINTS: JSON.stringify(input.endpoints),
  };
  const hosts = ip ? input.all.filter((o) => o.ip).flatMap((o) => ['--add-host', `${o.container}:${o.ip}`]) : [];
  return [
    'run',
    '--detach',
    '--name',
    container,
    '--label',
    `${LABEL}=${input.app}`,
    '--label',
    `${LABEL}.resource=${resource.name}`,
    '--label',
    `${ARTIFACT_LABEL}=${input.sha256}`,
    '--network',
    input.network,
    ...(ip ? ['--ip', ip] : []),
    ...hosts,
    '--publish',
    `127.0.0.1:${port}:${CONTAINER_PORT}`,
    // ro: workers never write to their artifact. z: SELinux hosts (Fedora, RHEL) otherwise refuse the container access to it.
    '--volume',
    `${input.artifactDir}:/artifact:ro,z`,
    '--stop-timeout',
    String(STOP_TIMEOUT_S),
    ...Object.entries(env).flatMap(([k, v]) => ['--env', `${k}=${v}`]),
    input.image,
  ];
}

/** The containers' output on stderr, one `[resource]` prefix per line, while the preview runs. */
function followLogs(engine: Engine, p: Planned): ChildProcess {
  const child = spawn(engine.bin, [...engine.globalArgs, 'logs', '--follow', p.container], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const prefix = `[${p.resource.name}] `;
  for (const stream of [child.stdout, child.stderr]) {
    let pending = '';
    stream.setEncoding('utf8').on('data', (d: string) => {
      pending += d;
      const lines = pending.split('\n');
      pending = lines.pop() ?? '';
      for (const line of lines) process.stderr.write(`${prefix}${line}\n`);
    });
  }
  child.on('error', () => undefined);
  return child;
}

/** Until the container answers `GET /ping` 200; a container that stops or never answers is an error with its logs. */
async function waitReady(engine: Engine, p: Planned, signal: AbortSignal): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  let lastCheck = Date.now();
  for (;;) {
    checkAborted(signal);
    try {
      const res = await fetch(`http://127.0.0.1:${p.port}/ping`, { signal: AbortSignal.timeout(2000) });
      await res.arrayBuffer();
      if (res.status === 200) return;
    } catch {
      // not listening yet
    }
    if (Date.now() - lastCheck > 1000) {
      lastCheck = Date.now();
      const state = await exec(engine, ['inspect', '--format', '{{.State.Running}}', p.container]);
      if (state.stdout.trim() === 'false')
        throw new CliError(
          `${p.resource.name} stopped before it answered GET /ping; its logs:\n${await logsOf(engine, p.container)}`,
        );
    }
    if (Date.now() > deadline)
      throw new CliError(
        `${p.resource.name} did not answer GET /ping within ${READY_TIMEOUT_MS / 1000} s; its logs:\n${await logsOf(engine, p.container)}`,
      );
    await sleep(250);
  }
}

async function logsOf(engine: Engine, container: string): Promise<string> {
  const r = await exec(engine, ['logs', '--tail', '40', container]);
  return lastLines(`${r.stdout}${r.stderr}`, 40) || '(no output)';
}

function checkAborted(signal: AbortSignal): void {
  if (signal.aborted) throw new CliError('interrupted');
}

const aborted = (signal: AbortSignal): Promise<void> =>
  signal.aborted
    ? Promise.resolve()
    : new Promise((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));

// ---------------------------------------------------------------------------------------------
// The result

export interface PreviewRow {
  resource: string;
  kind: 'queue' | 'lb';
  url: string;
  container: string;
  /** What the other containers use to call it, and the variable that holds it. */
  internalUrl: string;
  variable: string;
  compute: string;
  /** It asks for GPUs, and gets none here: the preview runs it on the CPU. */
  gpuRequested: boolean;
  routes: Array<{ method: string; path: string }>;
}

const QUEUE_ROUTES = [
  { method: 'POST', path: '/runsync' },
  { method: 'POST', path: '/run' },
  { method: 'GET', path: '/status/{id}' },
];

function describe(p: Planned, endpoints: Record<string, string>): PreviewRow {
  const r = p.resource;
  const compute =
    'gpu' in r.compute
      ? `no GPU here (asks for ${r.compute.gpu.pools.join('|')} x${r.compute.gpu.count})`
      : `cpu (${r.compute.cpu})`;
  return {
    resource: r.name,
    kind: r.kind,
    url: `http://127.0.0.1:${p.port}`,
    container: p.container,
    internalUrl: endpoints[r.name]!,
    variable: discoveryVariable(r.name),
    compute,
    gpuRequested: 'gpu' in r.compute,
    routes: r.kind === 'lb' ? (r.routes ?? []).map((x) => ({ method: x.method, path: x.path })) : QUEUE_ROUTES,
  };
}

function printTable(rows: PreviewRow[], mode: Discovery['mode']): void {
  say(
    table(
      ['RESOURCE', 'KIND', 'LOCAL URL', 'COMPUTE', 'ROUTES'],
      rows.map((r) => [
        r.resource,
        r.kind === 'lb' ? 'load-balanced' : 'queue',
        r.url,
        r.compute,
        r.routes.map((x) => `${x.method} ${x.path}`).join(', '),
      ]),
    ),
  );
  say('');
  say(
    `Inside the containers, each endpoint is at its GANTRY_ENDPOINT_<NAME> (e.g. ${rows[0]!.variable}=${rows[0]!.internalUrl})${mode === 'hosts' ? ', through /etc/hosts entries' : ''}.`,
  );
  if (rows.some((r) => r.gpuRequested))
    say('GPU resources run on the CPU in a preview: it checks the wiring, not the speed.');
}
