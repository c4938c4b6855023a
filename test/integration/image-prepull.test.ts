/**
 * Images ahead of the first call (docs/endpoints.md): a new endpoint's or release's image pulled onto
 * the host before any worker, with the account's own credential from a real registry that demands a
 * login (test/support/image-registry.ts), the walls between tenants standing, the worker list saying
 * when the host got the image, and GANTRY_PREPULL_HOSTS=0 pulling nothing.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { WorkflowNotFoundError } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GantryKind, GantryReleaseVersion } from '../../contracts/search-attributes.ts';
import { imagePrepullWorkflowId, type ImagePrepullResult } from '../../contracts/workflows.ts';
import {
  startImageRegistry,
  REGISTRY_PASSWORD,
  REGISTRY_USER,
  type RunningImageRegistry,
} from '../support/image-registry.ts';
import { call, type TestPlatform } from '../support/platform.ts';
import { newId } from '../../domain/shared/index.ts';
import { startSshTestHost } from '../support/ssh-test-host.ts';
import {
  ensureOrchestrationWorkerImage,
  ORCHESTRATION_WORKER_IMAGE,
  startOneHostPlatform,
  until,
  type OneHostPlatform,
} from '../support/orchestration.ts';
import { graphql } from '../support/pods.ts';

let registry: RunningImageRegistry;
/** This run's repository in the registry: the machine's Podman is shared with the other test files. */
const repo = `prepull-${randomBytes(4).toString('hex')}/worker`;
const image = (tag: string) => `${registry.host}/${repo}:${tag}`;

const onHost = (ref: string): boolean => spawnSync('podman', ['image', 'exists', ref]).status === 0;
const dropFromHost = (ref: string): void => void spawnSync('podman', ['rmi', '--force', ref]);

/** A platform whose one host's Podman may pull from the test registry over plain HTTP. */
const startPlatform = (name: string): Promise<OneHostPlatform> =>
  startOneHostPlatform(name, {}, () =>
    startSshTestHost({ sessionEnv: { CONTAINERS_REGISTRIES_CONF: registry.registriesConf } }),
  );

beforeAll(async () => {
  ensureOrchestrationWorkerImage();
  registry = await startImageRegistry();
  // Pushed under names this machine's Podman does not hold: only a pull puts them there.
  for (const tag of ['1', '2', '3']) {
    registry.push(ORCHESTRATION_WORKER_IMAGE, `${repo}:${tag}`);
    dropFromHost(image(tag));
  }
}, 600_000);

afterAll(async () => {
  for (const tag of ['1', '2', '3']) dropFromHost(image(tag));
  await registry?.stop();
}, 60_000);

/** The platform's REST API with its admin key (or `key`). */
const api =
  (p: TestPlatform) =>
  (method: string, route: string, body?: unknown, key = p.adminKey) =>
    call(p.url, method, route, { key, ...(body !== undefined ? { body } : {}) });

async function prepullResult(p: TestPlatform, endpointId: string, version: number): Promise<ImagePrepullResult> {
  return p.ctx.temporal.workflow.getHandle(imagePrepullWorkflowId(endpointId, version)).result();
}

describe('images pulled ahead of the first call', () => {
  let fixture: OneHostPlatform | undefined;
  let p: TestPlatform;
  let hostId: string;
  let accountId: string;
  let credential: string;
  let call$: ReturnType<typeof api>;

  beforeAll(async () => {
    fixture = await startPlatform('prepull-box');
    ({ p, hostId } = fixture);
    call$ = api(p);
    accountId = (await p.ctx.db.account.findFirstOrThrow({ where: { isAdmin: true } })).id;
    const r = await call$('POST', '/v2/registries', {
      name: 'team-a',
      username: REGISTRY_USER,
      password: REGISTRY_PASSWORD,
      registry: registry.host,
    });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    credential = r.body.id as string;
  }, 600_000);

  afterAll(async () => {
    await fixture?.stop();
  }, 120_000);

  it("puts a new endpoint's image on the host with the account's credential before any worker, and the worker list says so", async () => {
    const created = await call$('POST', '/v2/serverless', {
      name: 'ahead',
      image: image('1'),
      registry: credential,
      workers: { min: 0, max: 1 },
      scaling: { type: 'QUEUE_DELAY', value: 1, idleTimeout: 120 },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const id = created.body.id as string;

    const result = await prepullResult(p, id, 1);
    expect(result).toEqual({ image: image('1'), hosts: [{ hostId, ok: true, outcome: 'pulled' }] });
    expect(onHost(image('1'))).toBe(true);
    // No worker was asked for: the pull was the pre-pull's.
    expect(await p.ctx.db.worker.count({ where: { endpointId: id } })).toBe(0);
    const row = await p.ctx.db.hostImage.findUniqueOrThrow({
      where: { hostId_accountId_image: { hostId, accountId, image: image('1') } },
    });
    expect(row.source).toBe('prepull');
    // Labelled as Gantry's other workflows are.
    const described = await p.ctx.temporal.workflow.getHandle(imagePrepullWorkflowId(id, 1)).describe();
    expect(described.typedSearchAttributes.get(GantryKind)).toBe('prepull');
    expect(described.typedSearchAttributes.get(GantryReleaseVersion)).toBe(1);
    expect(described.memo).toEqual({ endpointName: 'ahead' });

    // The first worker finds it there; the list says since when, and that it came ahead.
    const job = await call$('POST', `/v2/${id}/run`, { input: { hello: 1 } });
    expect(job.status, JSON.stringify(job.body)).toBe(200);
    await until('the job to complete', async () => {
      const s = await call$('GET', `/v2/${id}/status/${job.body.id as string}`);
      return s.body.status === 'COMPLETED';
    });
    const listed = await call$('GET', `/v2/serverless/${id}/workers`);
    expect(listed.status).toBe(200);
    expect(listed.body.workers).toHaveLength(1);
    expect(listed.body.workers[0]).toMatchObject({
      imageOnHostSince: row.pulledAt.toISOString(),
      imagePulledAhead: true,
    });
    const gql = await graphql(
      p,
      'query($id: String!) { myself { endpoint(id: $id) { pods { id imageOnHostSince imagePulledAhead podType } } } }',
      { id },
    );
    expect(gql.data.myself.endpoint.pods).toEqual([
      {
        id: listed.body.workers[0].id,
        imageOnHostSince: row.pulledAt.toISOString(),
        imagePulledAhead: true,
        podType: 'RESERVED',
      },
    ]);
    // The worker's own pull keeps the first time.
    expect(
      (
        await p.ctx.db.hostImage.findUniqueOrThrow({
          where: { hostId_accountId_image: { hostId, accountId, image: image('1') } },
        })
      ).pulledAt,
    ).toEqual(row.pulledAt);
    expect((await call$('DELETE', `/v2/serverless/${id}`)).status).toBe(204);
  }, 180_000);

  it("pulls a new release's image ahead", async () => {
    const created = await call$('POST', '/v2/serverless', {
      name: 'release-ahead',
      image: image('1'),
      registry: credential,
      workers: { min: 0, max: 1 },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const id = created.body.id as string;
    await prepullResult(p, id, 1);
    expect(onHost(image('2'))).toBe(false);

    const patched = await call$('PATCH', `/v2/serverless/${id}`, { image: image('2') });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    expect(await prepullResult(p, id, 2)).toEqual({
      image: image('2'),
      hosts: [{ hostId, ok: true, outcome: 'pulled' }],
    });
    expect(onHost(image('2'))).toBe(true);
    expect(
      await p.ctx.db.hostImage.findUnique({
        where: { hostId_accountId_image: { hostId, accountId, image: image('2') } },
      }),
    ).toMatchObject({ source: 'prepull' });
    // A change that makes no release pulls nothing more.
    expect((await call$('PATCH', `/v2/serverless/${id}`, { workers: { min: 0, max: 2 } })).status).toBe(200);
    await expect(p.ctx.temporal.workflow.getHandle(imagePrepullWorkflowId(id, 3)).describe()).rejects.toBeInstanceOf(
      WorkflowNotFoundError,
    );
    expect((await call$('DELETE', `/v2/serverless/${id}`)).status).toBe(204);
  }, 120_000);

  it('takes the best GANTRY_PREPULL_HOSTS hosts in placement order; one that fails does not stop the others', async () => {
    // Two more READY hosts with room but no stored key: placement would choose them, and a pull there fails at once.
    const fake = async (name: string, dataCenterId: string) =>
      (
        await p.ctx.db.host.create({
          data: {
            id: newId(),
            name,
            address: '127.0.0.1',
            user: 'gantry',
            dataCenterId,
            status: 'READY',
            cpuCount: 8,
            memoryMb: 32_768,
          },
        })
      ).id;
    const preferred = await fake('prepull-preferred', 'dc-2');
    const other = await fake('prepull-other', 'dc-1');
    try {
      const created = await call$('POST', '/v2/serverless', {
        name: 'ranked',
        image: image('1'),
        registry: credential,
        workers: { min: 0, max: 1 },
        dataCenterIds: ['dc-2'],
      });
      expect(created.status, JSON.stringify(created.body)).toBe(201);
      const result = await prepullResult(p, created.body.id as string, 1);
      // The preferred data center first, then placement's tie-break (the lower id); two hosts, not three.
      const second = [hostId, other].sort()[0]!;
      expect(result.hosts.map((h) => h.hostId)).toEqual([preferred, second]);
      expect(result.hosts[0]).toEqual({ hostId: preferred, ok: false, outcome: expect.stringMatching(/private key/) });
      expect(result.hosts[1]!.ok).toBe(second === hostId);
      expect((await call$('DELETE', `/v2/serverless/${created.body.id as string}`)).status).toBe(204);
    } finally {
      await p.ctx.db.host.deleteMany({ where: { id: { in: [preferred, other] } } });
    }
  }, 120_000);

  it("keeps another account's worker from an image the pre-pull left on the host", async () => {
    const other = await call$('POST', '/v2/accounts', { email: 'other@example.test', name: 'Other' });
    expect(other.status).toBe(201);
    const key = (
      await call$('POST', '/v2/keys', {
        name: 'other',
        scopes: ['READ', 'WRITE', 'RUN'],
        accountId: other.body.id,
      })
    ).body.key as string;
    expect(onHost(image('1'))).toBe(true);
    // The same name, no credential: the image is on the host, and the registry still decides.
    const created = await call$(
      'POST',
      '/v2/serverless',
      { name: 'not-mine', image: image('1'), workers: { min: 0, max: 1 } },
      key,
    );
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const id = created.body.id as string;
    const ahead = await prepullResult(p, id, 1);
    expect(ahead.hosts).toEqual([
      { hostId, ok: false, outcome: expect.stringMatching(/needs credentials.*unauthorized/) },
    ]);

    const job = await call$('POST', `/v2/${id}/run`, { input: {} }, key);
    expect(job.status, JSON.stringify(job.body)).toBe(200);
    const failure = await until(
      "the other account's worker refused its image",
      async () => (await call$('GET', `/v2/serverless/${id}/workers`, undefined, key)).body.lastFailure,
      90_000,
    );
    expect(failure.reason).toMatch(/could not pull .*needs credentials.*unauthorized/);
    expect(await p.ctx.db.worker.count({ where: { endpointId: id, status: { in: ['IDLE', 'RUNNING'] } } })).toBe(0);
    expect(await p.ctx.db.hostImage.count({ where: { accountId: other.body.id as string } })).toBe(0);
    expect((await call$('DELETE', `/v2/serverless/${id}`, undefined, key)).status).toBe(204);
  }, 150_000);
});

describe('with GANTRY_PREPULL_HOSTS=0', () => {
  let fixture: OneHostPlatform | undefined;
  let p: TestPlatform;
  let hostId: string;

  beforeAll(async () => {
    process.env.GANTRY_PREPULL_HOSTS = '0';
    try {
      fixture = await startPlatform('no-prepull-box');
    } finally {
      delete process.env.GANTRY_PREPULL_HOSTS;
    }
    ({ p, hostId } = fixture);
  }, 600_000);

  afterAll(async () => {
    await fixture?.stop();
  }, 120_000);

  it('pulls nothing ahead: the first worker pulls, and the list says the image came with it', async () => {
    const call$ = api(p);
    const cred = await call$('POST', '/v2/registries', {
      name: 'team-a',
      username: REGISTRY_USER,
      password: REGISTRY_PASSWORD,
      registry: registry.host,
    });
    expect(cred.status, JSON.stringify(cred.body)).toBe(201);
    const created = await call$('POST', '/v2/serverless', {
      name: 'not-ahead',
      image: image('3'),
      registry: cred.body.id,
      workers: { min: 0, max: 1 },
      scaling: { type: 'QUEUE_DELAY', value: 1, idleTimeout: 120 },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const id = created.body.id as string;
    // The answer comes after any pre-pull would have started: none did.
    await expect(p.ctx.temporal.workflow.getHandle(imagePrepullWorkflowId(id, 1)).describe()).rejects.toBeInstanceOf(
      WorkflowNotFoundError,
    );
    expect(onHost(image('3'))).toBe(false);
    expect(await p.ctx.db.hostImage.count()).toBe(0);

    const job = await call$('POST', `/v2/${id}/run`, { input: {} });
    await until('the job to complete', async () => {
      const s = await call$('GET', `/v2/${id}/status/${job.body.id as string}`);
      return s.body.status === 'COMPLETED';
    });
    expect(onHost(image('3'))).toBe(true);
    const [worker] = (await call$('GET', `/v2/serverless/${id}/workers`)).body.workers;
    const row = await p.ctx.db.hostImage.findFirstOrThrow({ where: { hostId, image: image('3') } });
    expect(row.source).toBe('worker');
    expect(worker).toMatchObject({ imageOnHostSince: row.pulledAt.toISOString(), imagePulledAhead: false });
    expect((await call$('DELETE', `/v2/serverless/${id}`)).status).toBe(204);
  }, 180_000);
});
