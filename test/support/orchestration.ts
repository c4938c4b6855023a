/** Helpers shared by the orchestration tests (not a test file itself). */
import { spawnSync } from 'node:child_process';
import { expect } from 'vitest';
import type { OrchestrationSettings } from '../../domain/shared/index.ts';
import { podVolumePrefix } from '../../hostctl/containers.ts';
import { pruneNetworksScript } from '../../hostctl/networks.ts';
import { startSshTestHost, type SshTestHost } from './ssh-test-host.ts';
import { ensurePythonBaseImage } from './python-base-image.ts';
import { call, startTestPlatform, type TestPlatform } from './platform.ts';

/** Loops short enough for tests; production uses the defaults. */
export const FAST_ORCHESTRATION: Partial<OrchestrationSettings> = {
  autoscaleActiveMs: 300,
  autoscaleRestMs: 3000,
  placementRetryMaxMs: 1000,
  readyTimeoutSec: 60,
  readyPollMs: 200,
  watchIntervalSec: 1,
  diskCheckIntervalSec: 1,
  silentAfterSec: 10,
  lbUnhealthySec: 3,
  pingIntervalMs: 1000,
  stopGraceSec: 1,
  releaseMaxFailures: 2,
  releaseReadyDeadlineSec: 60,
  rolloutPollMs: 300,
  surgeWaitSec: 5,
  hostProbeIntervalSec: 3,
  hostRetryIntervalSec: 1,
};

/**
 * Polls `fn` until it returns a value. `describe`, when given, tells on a timeout what the state was
 * (a flaky wait is then diagnosable from the CI log alone).
 */
/**
 * Test hosts are this small machine's Podman: CPU workers (2 vCPUs and 4 GB each by default) may
 * reserve many times its CPUs and memory, as tests run several workers per host at once.
 */
export const TEST_HOST_LABELS = { 'gantry.io/cpu-overcommit': '32' } as const;

/** Registers an SSH test host through the API (data center dc-1 unless told) and answers its id; it must come up READY. */
export async function registerTestHost(
  p: TestPlatform,
  host: SshTestHost,
  name: string,
  extra: { dataCenterId?: string; labels?: Record<string, string> } = {},
): Promise<string> {
  const h = await call(p.url, 'POST', '/v2/hosts', {
    key: p.adminKey,
    body: {
      name,
      address: host.host,
      port: host.port,
      privateKey: host.privateKey,
      dataCenterId: extra.dataCenterId ?? 'dc-1',
      labels: extra.labels ?? TEST_HOST_LABELS,
    },
  });
  expect(h.body.status, JSON.stringify(h.body)).toBe('READY');
  return h.body.id as string;
}

export { ensureOrchestrationWorkerImage, ORCHESTRATION_WORKER_IMAGE } from './test-image.ts';

/** A platform with fast orchestration loops and one registered SSH test host in front of this machine's Podman. */
export interface OneHostPlatform {
  p: TestPlatform;
  sshHost: SshTestHost;
  hostId: string;
  /** Stops the platform, removes the host's containers, stops the SSH server. */
  stop(): Promise<void>;
}

/**
 * Starts a OneHostPlatform on FAST_ORCHESTRATION with `orchestration` over it: set any other GANTRY_*
 * variables the platform should read before calling. `startHost` makes its SSH host (a GPU test host,
 * test/support/gpu-test-host.ts, for GPU scenarios).
 */
export async function startOneHostPlatform(
  hostName: string,
  orchestration: Partial<OrchestrationSettings> = {},
  startHost: () => Promise<SshTestHost> = () => startSshTestHost(),
): Promise<OneHostPlatform> {
  const sshHost = await startHost();
  let p: TestPlatform | undefined;
  let hostId: string | undefined;
  const stop = async (): Promise<void> => {
    await p?.stop();
    if (hostId) removeManagedContainers([hostId]);
    await sshHost.stop();
  };
  try {
    process.env.GANTRY_ORCHESTRATION = JSON.stringify({ ...FAST_ORCHESTRATION, ...orchestration });
    p = await startTestPlatform();
    hostId = await registerTestHost(p, sshHost, hostName);
    return { p, sshHost, hostId, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

export async function until<T>(
  what: string,
  fn: () => Promise<T | undefined | null | false>,
  timeoutMs = 60_000,
  everyMs = 200,
  describe?: () => Promise<unknown>,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) {
      const state = describe ? `; state: ${JSON.stringify(await describe().catch((e: unknown) => String(e)))}` : '';
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${state}`);
    }
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

export interface ManagedContainerInfo {
  id: string;
  name: string;
  workerId: string;
  endpointId: string;
  running: boolean;
}

/** Containers on this machine's Podman that Gantry started for a Host row. */
export function managedContainers(hostId: string): ManagedContainerInfo[] {
  const r = spawnSync(
    'podman',
    [
      'ps',
      '--all',
      '--filter',
      `label=gantry.host=${hostId}`,
      '--format',
      '{{.ID}}\t{{.Names}}\t{{index .Labels "gantry.worker"}}\t{{index .Labels "gantry.endpoint"}}\t{{.State}}',
    ],
    {
      encoding: 'utf8',
    },
  );
  if (r.status !== 0) throw new Error(`podman ps failed: ${r.stderr}`);
  return r.stdout
    .split('\n')
    .filter(Boolean)
    .map((l) => {
      const [id = '', name = '', workerId = '', endpointId = '', state = ''] = l.split('\t');
      return { id, name, workerId, endpointId, running: /^(running|up)/i.test(state) };
    });
}

/** A worker container's state on this machine's Podman (the test hosts' runtime): running, paused, exited, or gone. */
export function containerState(workerId: string): string {
  const r = spawnSync(
    'podman',
    ['inspect', '--type', 'container', '--format', '{{.State.Status}}', `gantry-${workerId}`],
    { encoding: 'utf8' },
  );
  return r.status === 0 ? r.stdout.trim() : 'gone';
}

/** The host's pod volumes on this machine's Podman. */
export function podVolumes(hostId: string): string[] {
  const r = spawnSync('podman', ['volume', 'ls', '--quiet'], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`podman volume ls failed: ${r.stderr}`);
  return r.stdout.split('\n').filter((v) => v.startsWith(podVolumePrefix(hostId)));
}

/** Removes the hosts' containers and pod volumes. */
export function removeManagedContainers(hostIds: string[]): void {
  for (const hostId of hostIds) {
    const ids = managedContainers(hostId).map((c) => c.id);
    if (ids.length) spawnSync('podman', ['rm', '--force', '--time', '0', ...ids]);
    const volumes = podVolumes(hostId);
    if (volumes.length) spawnSync('podman', ['volume', 'rm', '--force', ...volumes]);
    // The accounts' networks and their egress rules, as the host's reconcile removes them.
    spawnSync('sh', ['-s'], { input: pruneNetworksScript('podman', hostId, []), encoding: 'utf8' });
  }
}

export interface SseEvent {
  id?: string;
  event: string;
  data: { time?: string; stream?: string; line?: string; [k: string]: unknown };
}

/** Reads an SSE stream until `enough(events)` holds, then hangs up. */
export async function readSse(
  url: string,
  key: string,
  enough: (events: SseEvent[]) => boolean,
  headers: Record<string, string> = {},
  timeoutMs = 30_000,
): Promise<{ contentType: string; events: SseEvent[] }> {
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), timeoutMs);
  const res = await fetch(url, {
    headers: { authorization: `Bearer ${key}`, accept: 'text/event-stream', ...headers },
    signal: abort.signal,
  });
  if (res.status !== 200) throw new Error(`SSE answered ${res.status}: ${await res.text()}`);
  const events: SseEvent[] = [];
  const decoder = new TextDecoder();
  let buffer = '';
  try {
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      buffer += decoder.decode(chunk, { stream: true });
      let i: number;
      while ((i = buffer.indexOf('\n\n')) >= 0) {
        const block = buffer.slice(0, i);
        buffer = buffer.slice(i + 2);
        const e: Partial<SseEvent> & { dataText?: string } = {};
        for (const line of block.split('\n')) {
          if (line.startsWith('id: ')) e.id = line.slice(4);
          else if (line.startsWith('event: ')) e.event = line.slice(7);
          else if (line.startsWith('data: ')) e.dataText = (e.dataText ?? '') + line.slice(6);
        }
        if (e.event && e.dataText !== undefined)
          events.push({ ...(e.id ? { id: e.id } : {}), event: e.event, data: JSON.parse(e.dataText) });
      }
      if (enough(events)) break;
    }
  } finally {
    clearTimeout(timer);
    abort.abort();
  }
  if (!enough(events))
    throw new Error(`the SSE stream ended without the expected events: ${JSON.stringify(events).slice(0, 2000)}`);
  return { contentType: res.headers.get('content-type') ?? '', events };
}

/**
 * A OneHostPlatform whose host runs deployed Python apps: the runtime image is built on the host
 * from the Debian-made base (test/support/python-base-image.ts; no registry here), artifacts are cached in
 * `cacheDir`, and the proxy's health checks are quick. `versions`: the Python bases to make first.
 */
export async function startAppsPlatform(
  hostName: string,
  cacheDir: string,
  versions: Array<'3.11' | '3.13'> = ['3.11'],
): Promise<OneHostPlatform> {
  for (const v of versions) await ensurePythonBaseImage(v);
  const settings = {
    GANTRY_RUNTIME_BASE_IMAGE: 'localhost/gantry-python:{python}',
    GANTRY_ARTIFACT_CACHE_DIR: cacheDir,
    GANTRY_LB_HEALTH: JSON.stringify({ intervalMs: 300 }),
  };
  Object.assign(process.env, settings);
  const fixture = await startOneHostPlatform(hostName);
  return {
    ...fixture,
    async stop() {
      await fixture.stop();
      for (const name of Object.keys(settings)) delete process.env[name];
    },
  };
}
