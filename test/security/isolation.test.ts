/**
 * A tenant's container, started by Gantry on a real SSH host with the platform's own loopback
 * public URL (the default and docs/hosts.md's local setup): from inside it PostgreSQL and Temporal
 * cannot be reached, on loopback or on any address of the host, while the worker protocol works
 * through the worker-facing listener, which serves nothing else.
 */
import { spawnSync } from 'node:child_process';
import { afterAll, beforeAll, expect, inject, it } from 'vitest';
import { call, type TestPlatform } from '../support/platform.ts';
import {
  ensureOrchestrationWorkerImage,
  managedContainers,
  type OneHostPlatform,
  ORCHESTRATION_WORKER_IMAGE,
  startOneHostPlatform,
  until,
} from '../support/orchestration.ts';
import { fromInside, hostAddresses } from '../support/container-probe.ts';

const IMAGE = ORCHESTRATION_WORKER_IMAGE;

let fixture: OneHostPlatform | undefined;
let p: TestPlatform;
let hostId: string;

beforeAll(async () => {
  ensureOrchestrationWorkerImage();
  fixture = await startOneHostPlatform('isolated-box');
  ({ p, hostId } = fixture);
}, 600_000);

afterAll(async () => {
  await fixture?.stop();
}, 120_000);

it('a worker container reaches the worker protocol and nothing else of the platform', async () => {
  const created = await call(p.url, 'POST', '/v2/serverless', {
    key: p.adminKey,
    body: { name: 'isolated', image: IMAGE, workers: { min: 1, max: 1 } },
  });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  const ep = created.body.id as string;

  // The worker protocol works from the container: a job is taken and done.
  const run = await call(p.url, 'POST', `/v2/${ep}/runsync`, {
    key: p.adminKey,
    body: { input: { hello: 'isolated' } },
  });
  expect(run.body, JSON.stringify(run.body)).toMatchObject({
    status: 'COMPLETED',
    output: { echo: { hello: 'isolated' } },
  });

  const container = await until('the worker container', async () =>
    managedContainers(hostId).find((c) => c.endpointId === ep),
  );
  const inspect = JSON.parse(spawnSync('podman', ['inspect', container.id], { encoding: 'utf8' }).stdout)[0];
  expect(inspect.HostConfig.NetworkMode).not.toBe('host');
  expect(inspect.HostConfig.CapDrop.map((c: string) => c.toUpperCase())).toEqual(
    expect.arrayContaining(['CAP_NET_RAW']),
  );

  // What the platform runs on, at every address of this machine the container could try.
  const pgPort = new URL(p.databaseUrl).port || '5432';
  const temporalPort = inject('temporalAddress').split(':').pop()!;
  const apiPort = new URL(p.url).port;
  const [own] = Object.values(inspect.NetworkSettings.Networks) as Array<{ Gateway: string }>;
  const addresses = ['127.0.0.1', own!.Gateway, ...hostAddresses()];
  for (const address of new Set(addresses)) {
    for (const [what, port] of [
      ['PostgreSQL', pgPort],
      ['Temporal', temporalPort],
      ['the API', apiPort],
    ] as const) {
      expect(await fromInside(container.id, `${address}:${port}`), `${what} at ${address}:${port}`).not.toBe('open');
    }
  }

  // The worker-facing listener (on the gateway of the container's own network, as its protocol URLs
  // say) answers the worker protocol, and 404 to everything else.
  const ping = (inspect.Config.Env as string[]).find((e) => e.startsWith('RUNPOD_WEBHOOK_PING='))!;
  const workerUrl = new URL(ping.slice(ping.indexOf('=') + 1)).origin;
  const [network] = Object.values(inspect.NetworkSettings.Networks) as Array<{ Gateway: string }>;
  expect(workerUrl).toBe(`http://${network!.Gateway}:${new URL(p.ctx.workerUrl!).port}`);
  const workerId = container.workerId;
  expect(await fromInside(container.id, `${workerUrl}/v2/${ep}/ping/${workerId}`)).toMatch(/^401 /); // reached; no credential sent
  expect(await fromInside(container.id, `${workerUrl}/v2/serverless`)).toMatch(/^404 /);
  expect(await fromInside(container.id, `${workerUrl}/graphql`)).toMatch(/^404 /);
  expect(await fromInside(container.id, `${workerUrl}/v2/${ep}/runsync`)).toMatch(/^404 /);
}, 300_000);
