import { Client, Connection, WorkflowUpdateFailedError } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../api/server.ts';
import { issueApiKey } from '../../domain/accounts/index.ts';
import { reconcileEndpointWorkflows } from '../../domain/endpoints/index.ts';
import { newId } from '../../domain/shared/index.ts';
import {
  endpointWorkflowId,
  getSpec,
  rolloutWorkflowId,
  updateSpec,
  type EndpointSpec,
} from '../../contracts/workflows.ts';
import { call, startTestPlatform, type TestPlatform } from '../support/platform.ts';
import { freePort } from '../support/ports.ts';

const PROBLEM = /^application\/problem\+json/;
/** A worker list's summary with no worker. */
const NO_WORKERS = { running: 0, idle: 0, initializing: 0, throttled: 0, unhealthy: 0, standby: 0, total: 0 };

describe('serverless endpoints: update, delete, workers, releases', () => {
  let p: TestPlatform;
  let accountId: string;
  beforeAll(async () => {
    p = await startTestPlatform();
    accountId = (await p.ctx.db.account.findFirstOrThrow({ where: { isAdmin: true } })).id;
  });
  afterAll(async () => {
    await p?.stop();
  });

  let seq = 0;
  async function create(extra: Record<string, unknown> = {}): Promise<{ id: string; [k: string]: unknown }> {
    const r = await call(p.url, 'POST', '/v2/serverless', {
      key: p.adminKey,
      body: {
        name: `ep-${++seq}-${newId()}`,
        image: 'registry.local/app:1',
        gpu: { pools: ['AMPERE_24'], count: 1 },
        workers: { min: 0, max: 2 },
        scaling: { type: 'QUEUE_DELAY', value: 4, idleTimeout: 5 },
        env: { A: '1' },
        ...extra,
      },
    });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    return r.body;
  }

  const patch = (id: string, body: unknown, key = p.adminKey) =>
    call(p.url, 'PATCH', `/v2/serverless/${id}`, { key, body });

  async function workflowSpec(id: string): Promise<EndpointSpec | null> {
    const handle = p.ctx.temporal.workflow.getHandle(endpointWorkflowId(id));
    let spec = await handle.query(getSpec);
    for (let i = 0; spec === null && i < 100; i++) {
      await new Promise((r) => setTimeout(r, 50));
      spec = await handle.query(getSpec);
    }
    return spec;
  }

  /**
   * Waits until the workflow holds `expected`: it reads its row after the `endpointChanged` signal
   * that the answer waited for, a moment after the answer.
   */
  async function workflowHolds(id: string, expected: Partial<EndpointSpec>): Promise<void> {
    const handle = p.ctx.temporal.workflow.getHandle(endpointWorkflowId(id));
    let spec: EndpointSpec | null = null;
    for (let i = 0; i < 200; i++) {
      spec = await handle.query(getSpec);
      if (spec && Object.entries(expected).every(([k, v]) => spec![k as keyof EndpointSpec] === v)) return;
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(spec).toMatchObject(expected);
  }

  it('changes only what the body names and hands workers, scaling and timeout to the workflow', async () => {
    const ep = await create();
    await workflowSpec(ep.id); // loaded
    const r = await patch(ep.id, {
      workers: { max: 7 },
      scaling: { type: 'REQUEST_COUNT', value: 2.5 },
      timeout: 30_000,
    });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body).toEqual({
      ...ep,
      workers: { min: 0, max: 7 },
      scaling: { type: 'REQUEST_COUNT', value: 2.5, idleTimeout: 5 },
      timeout: 30_000,
    });
    expect((await call(p.url, 'GET', `/v2/serverless/${ep.id}`, { key: p.adminKey })).body).toEqual(r.body);
    // The signal was taken before the answer: the workflow reads the new values from the row.
    await workflowHolds(ep.id, {
      workersMin: 0,
      workersMax: 7,
      scalerType: 'REQUEST_COUNT',
      scalerValue: 2.5,
      idleTimeout: 5,
      timeoutMs: 30_000,
      releaseVersion: 1,
    });

    // An empty body changes nothing and makes no release.
    const same = await patch(ep.id, {});
    expect(same.status).toBe(200);
    expect(same.body).toEqual(r.body);
    expect(await p.ctx.db.release.count({ where: { endpointId: ep.id } })).toBe(1);
  });

  it('rejects unknown properties and every broken limit with 422, storing nothing', async () => {
    const ep = await create();
    const unknown = await patch(ep.id, { colour: 'red', workers: { min: 1, burst: 2 } });
    expect(unknown.status).toBe(422);
    expect(unknown.headers.get('content-type')).toMatch(PROBLEM);
    expect(unknown.body).toMatchObject({
      title: 'Unprocessable Entity',
      status: 422,
      detail: 'Request validation failed.',
    });
    expect(unknown.body.errors).toEqual(
      expect.arrayContaining([
        "$: additional properties 'colour' not allowed",
        "$.workers: additional properties 'burst' not allowed",
      ]),
    );
    // `type` and `templateId` are not updatable fields.
    expect((await patch(ep.id, { type: 'LOAD_BALANCING' })).body.errors).toEqual([
      "$: additional properties 'type' not allowed",
    ]);
    // Container args must split into words: a stray quote is refused now, not at container start.
    const quote = await patch(ep.id, { args: 'python handler.py --name "open' });
    expect(quote.status).toBe(422);
    expect(quote.body.errors).toEqual(['$.args: unterminated " quote in args']);
    expect(await p.ctx.db.release.count({ where: { endpointId: ep.id } })).toBe(1);
    const before = await p.ctx.db.endpoint.count();
    const created = await call(p.url, 'POST', '/v2/serverless', {
      key: p.adminKey,
      body: { name: `ep-quote-${newId()}`, image: 'registry.local/app:1', args: "sh -c 'x" },
    });
    expect(created.status).toBe(422);
    expect(created.body.errors).toEqual(["$.args: unterminated ' quote in args"]);
    expect(await p.ctx.db.endpoint.count()).toBe(before);

    const bad = await patch(ep.id, {
      disk: 0,
      scaling: { value: 0.4 },
      workers: { min: -1 },
      gpu: { pools: ['AMPERE_24'], count: 0 },
      timeout: 'soon',
    });
    expect(bad.status).toBe(422);
    expect(bad.body.errors).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^\$\.disk: must be >= 1/),
        expect.stringMatching(/^\$\.scaling\.value: must be >= 0.5/),
        expect.stringMatching(/^\$\.workers\.min: must be >= 0/),
        expect.stringMatching(/^\$\.gpu\.count: must be >= 1/),
        expect.stringMatching(/^\$\.timeout: must be integer/),
      ]),
    );
    expect((await patch(ep.id, { gpu: { pools: [] } })).body.errors).toEqual([
      expect.stringMatching(/^\$\.gpu\.pools: must NOT have fewer than 1 items/),
    ]);
    expect((await patch(ep.id, { gpu: { count: 2 } })).body.errors).toEqual(["$.gpu: missing property 'pools'"]);
    expect((await patch(ep.id, { gpu: { pools: ['NOT_A_POOL'] } })).body.errors).toEqual([
      "$.gpu.pools[0]: unknown GPU pool 'NOT_A_POOL'",
    ]);
    expect((await patch(ep.id, { registry: 'nope' })).body.errors).toEqual([
      "$.registry: no registry credential 'nope'",
    ]);
    expect((await patch(ep.id, { networkVolumes: ['nv-missing'] })).body.errors).toEqual([
      "$.networkVolumes[0]: no network volume 'nv-missing'",
    ]);
    // min over max is judged on the merged result: max is 2.
    const minOverMax = await patch(ep.id, { workers: { min: 3 } });
    expect([minOverMax.status, minOverMax.body.errors]).toEqual([422, ['$: workers.min must not exceed workers.max']]);
    // A body that is not an object at all.
    expect((await call(p.url, 'PATCH', `/v2/serverless/${ep.id}`, { key: p.adminKey, rawBody: '[1]' })).status).toBe(
      422,
    );
    expect(
      (await call(p.url, 'PATCH', `/v2/serverless/${ep.id}`, { key: p.adminKey, rawBody: '{"name":' })).status,
    ).toBe(400);

    const read = await call(p.url, 'GET', `/v2/serverless/${ep.id}`, { key: p.adminKey });
    expect(read.body).toEqual(ep);
  });

  it("keeps names unique per account (409), refuses the read-only cpu field (400), and changes CPU endpoints' other fields", async () => {
    const a = await create({ name: `taken-${newId()}` });
    const b = await create();
    const clash = await patch(b.id, { name: a.name });
    expect(clash.status).toBe(409);
    expect(clash.headers.get('content-type')).toMatch(PROBLEM);
    expect(clash.body).toMatchObject({ title: 'Conflict', status: 409 });
    expect((await patch(a.id, { name: a.name })).status).toBe(200);
    const renamed = await patch(b.id, { name: `renamed-${newId()}`, flashboot: 'FLASHBOOT', dataCenterIds: ['dc-1'] });
    expect(renamed.status).toBe(200);
    expect(renamed.body).toMatchObject({ flashboot: 'FLASHBOOT', dataCenterIds: ['dc-1'] });

    expect((await patch(b.id, { cpu: [{ id: 'cpu3c', vcpuCount: 2 }] })).body).toMatchObject({
      status: 400,
      detail: expect.stringMatching(/read-only/),
    });
    const cpuId = newId();
    await p.ctx.db.endpoint.create({
      data: {
        id: cpuId,
        accountId,
        name: `cpu-${cpuId}`,
        image: 'img:1',
        cpuFlavorId: 'cpu3c',
        cpuVcpuCount: 4,
        cpuMemoryGb: 8,
      },
    });
    const cpuPatch = await patch(cpuId, { workers: { max: 1 } });
    expect(cpuPatch.status, JSON.stringify(cpuPatch.body)).toBe(200);
    const cpuRead = await call(p.url, 'GET', `/v2/serverless/${cpuId}`, { key: p.adminKey });
    expect(cpuRead.body.cpu).toEqual({ id: 'cpu3c', vcpuCount: 4, memory: 8 });
    expect(cpuRead.body.workers).toEqual({ min: 0, max: 1 });
    expect((await patch(cpuId, { cpu: { id: 'cpu3g' } })).body).toMatchObject({
      status: 400,
      detail: expect.stringMatching(/read-only/),
    });
    // gpu moves it to GPUs.
    const toGpu = await patch(cpuId, { gpu: { pools: ['ADA_24'] } });
    expect(toGpu.body).toMatchObject({ gpu: { pools: ['ADA_24'], count: 1 }, cpu: null });
  });

  it('makes release N+1 for container changes only, and tells the workflow its version', async () => {
    const ep = await create();
    const registry = await p.ctx.db.registryCredential.create({
      data: { id: newId(), accountId, name: `reg-${newId()}`, registry: 'registry.local', secret: Buffer.from([1]) },
    });

    // Not container-affecting: no release.
    expect((await patch(ep.id, { gpu: { pools: ['ADA_24'], count: 2 }, flashboot: 'FLASHBOOT' })).body.gpu).toEqual({
      pools: ['ADA_24'],
      count: 2,
    });
    expect(await p.ctx.db.release.count({ where: { endpointId: ep.id } })).toBe(1);

    const v2 = await patch(ep.id, { image: 'registry.local/app:2', env: { A: '1', B: '2' }, registry: registry.id });
    expect(v2.status, JSON.stringify(v2.body)).toBe(200);
    expect(v2.body).toMatchObject({
      image: 'registry.local/app:2',
      env: { A: '1', B: '2' },
      registry: registry.id,
      args: '',
      disk: 10,
    });
    const endpointRow = await p.ctx.db.endpoint.findUniqueOrThrow({ where: { id: ep.id } });
    expect(endpointRow.currentReleaseVersion).toBe(2);
    const rel = await p.ctx.db.release.findMany({ where: { endpointId: ep.id }, orderBy: { version: 'asc' } });
    expect(rel.map((r) => r.version)).toEqual([1, 2]);
    expect(rel[0]!.status).toBe('SUPERSEDED');
    // ROLLING_OUT when made; the endpoint's rollout (no workers to replace here) may already have completed it.
    expect(['ROLLING_OUT', 'COMPLETED']).toContain(rel[1]!.status);
    expect(rel[1]).toMatchObject({
      image: 'registry.local/app:2',
      args: '',
      disk: 10,
      ports: [],
      env: { A: '1', B: '2' },
      registryId: registry.id,
    });
    expect(rel[1]!.changes).toEqual([
      { field: 'image', old: 'registry.local/app:1', new: 'registry.local/app:2' },
      { field: 'env', old: { A: '1' }, new: { A: '1', B: '2' } },
      { field: 'registry', old: null, new: registry.id },
    ]);
    await workflowHolds(ep.id, { releaseVersion: 2 });

    // Same values again (env keys in another order): no release.
    expect((await patch(ep.id, { image: 'registry.local/app:2', env: { B: '2', A: '1' } })).status).toBe(200);
    expect(await p.ctx.db.release.count({ where: { endpointId: ep.id } })).toBe(2);

    const v3 = await patch(ep.id, { disk: 20, ports: ['8000/http'], args: 'serve', registry: null });
    expect(v3.status).toBe(200);
    const rel3 = await p.ctx.db.release.findMany({ where: { endpointId: ep.id }, orderBy: { version: 'asc' } });
    expect(rel3.map((r) => r.version)).toEqual([1, 2, 3]);
    expect(rel3.slice(0, 2).map((r) => r.status)).toEqual(['SUPERSEDED', 'SUPERSEDED']);
    expect(['ROLLING_OUT', 'COMPLETED']).toContain(rel3[2]!.status);
    expect(rel3[1]!.finishedAt).not.toBeNull();
    expect(rel3[2]!.changes).toEqual([
      { field: 'args', old: '', new: 'serve' },
      { field: 'disk', old: 10, new: 20 },
      { field: 'ports', old: [], new: ['8000/http'] },
      { field: 'registry', old: registry.id, new: null },
    ]);
    await workflowHolds(ep.id, { releaseVersion: 3 });
  });

  it('lists releases newest first with their diff, worker counts by state and a rollout summary', async () => {
    const ep = await create();
    await patch(ep.id, { image: 'registry.local/app:2' });
    // The rows below are made up: no workflow may act on them (start rollouts, drain workers).
    for (const id of [endpointWorkflowId(ep.id), rolloutWorkflowId(ep.id, 2)])
      await p.ctx.temporal.workflow
        .getHandle(id)
        .terminate('test: fixed rows')
        .catch(() => undefined);
    const releaseStatus = (await p.ctx.db.release.findFirstOrThrow({ where: { endpointId: ep.id, version: 2 } }))
      .status;
    const host = await p.ctx.db.host.create({
      data: { id: newId(), name: `h-${newId()}`, address: '127.0.0.1', user: 'gantry', dataCenterId: 'dc-test' },
    });
    const started = new Date(Date.now() - 120_000);
    const workers = [
      { releaseVersion: 1, status: 'RUNNING' as const },
      { releaseVersion: 1, status: 'DRAINING' as const },
      { releaseVersion: 2, status: 'IDLE' as const },
      { releaseVersion: 2, status: 'INITIALIZING' as const },
      { releaseVersion: 2, status: 'PENDING' as const },
      { releaseVersion: 1, status: 'STOPPED' as const },
      { releaseVersion: 2, status: 'FAILED' as const },
    ];
    for (const w of workers) {
      await p.ctx.db.worker.create({
        data: {
          id: newId(),
          endpointId: ep.id,
          ...w,
          hostId: host.id,
          gpuUuids: ['GPU-1'],
          gpuTypeId: 'NVIDIA GeForce RTX 3090',
          startedAt: started,
        },
      });
    }
    const r = await call(p.url, 'GET', `/v2/serverless/${ep.id}/releases`, { key: p.adminKey });
    expect(r.status).toBe(200);
    expect(r.body.endpointVersion).toBe(2);
    expect(r.body.rollout).toEqual({
      inProgress: true,
      currentVersion: 2,
      workersOnLatest: 3,
      workersOnOlder: 2,
      workersTotal: 5,
      percentOnLatest: 60,
    });
    expect(r.body.releases.map((x: { version: number }) => x.version)).toEqual([2, 1]);
    const [latest, first] = r.body.releases;
    expect(latest).toMatchObject({
      version: 2,
      source: 'MANUAL',
      status: releaseStatus,
      workerCount: 3,
      workers: { running: 0, idle: 1, initializing: 1, throttled: 1, unhealthy: 0, total: 3 },
      diff: [{ field: 'image', old: 'registry.local/app:1', new: 'registry.local/app:2' }],
    });
    expect(Date.parse(latest.createdAt)).toBeGreaterThan(Date.now() - 60_000);
    const superseded = { status: 'SUPERSEDED', workerCount: 2, workers: { running: 2, total: 2 }, diff: [] };
    expect(first).toMatchObject({ version: 1, ...superseded });

    const w = await call(p.url, 'GET', `/v2/serverless/${ep.id}/workers`, { key: p.adminKey });
    expect([w.status, w.body.endpointVersion]).toEqual([200, 2]);
    expect(w.body.summary).toEqual({ ...NO_WORKERS, running: 2, idle: 1, initializing: 1, throttled: 1, total: 5 });
    expect(w.body.workers).toHaveLength(5);
    expect(w.body.workers.filter((x: { isStale: boolean }) => x.isStale)).toHaveLength(2);
    expect(w.body.workers[0]).toEqual({
      id: expect.any(String),
      status: 'RUNNING',
      isStale: true,
      version: 1,
      gpuCount: 1,
      image: 'registry.local/app:1',
      uptimeSeconds: expect.any(Number),
      gpuTypeId: 'NVIDIA GeForce RTX 3090',
      dataCenterId: 'dc-test',
      // The admin account's own endpoint: its key sees the host.
      hostId: host.id,
      lastJobAt: null,
      startedAt: started.toISOString(),
      statusReason: null,
      imageOnHostSince: null,
      imagePulledAhead: false,
    });
    expect(w.body.workers[0].uptimeSeconds).toBeGreaterThanOrEqual(119);
    expect(w.body.lastFailure).toBeNull(); // a worker of the current release is ready

    // A fresh endpoint: one release, nothing rolling.
    const fresh = await create();
    const fr = await call(p.url, 'GET', `/v2/serverless/${fresh.id}/releases`, { key: p.adminKey });
    expect(fr.body.rollout).toEqual({
      inProgress: false,
      currentVersion: 1,
      workersOnLatest: 0,
      workersOnOlder: 0,
      workersTotal: 0,
      percentOnLatest: 0,
    });
    expect(fr.body.releases).toHaveLength(1);
    expect((await call(p.url, 'GET', `/v2/serverless/${fresh.id}/workers`, { key: p.adminKey })).body).toEqual({
      endpointVersion: 1,
      summary: NO_WORKERS,
      workers: [],
      lastFailure: null,
      workerProblem: null,
    });
  });

  it('gives request URLs by endpoint type, with GANTRY_LB_DOMAIN for load-balancing hosts', async () => {
    const qb = await create();
    expect(qb.requestUrls).toEqual({
      run: `${p.ctx.publicUrl}/v2/${qb.id}/run`,
      runSync: `${p.ctx.publicUrl}/v2/${qb.id}/runsync`,
    });
    const lb = await create({ type: 'LOAD_BALANCING' });
    expect(lb.requestUrls).toEqual({ base: `${p.ctx.publicUrl}/lb/${lb.id}` });
    // What GANTRY_LB_DOMAIN sets at start, on the running platform's settings.
    p.ctx.settings.lbDomain = 'lb.example.test';
    try {
      const read = await call(p.url, 'GET', `/v2/serverless/${lb.id}`, { key: p.adminKey });
      expect(read.body.requestUrls).toEqual({ base: `https://${lb.id}.lb.example.test` });
    } finally {
      p.ctx.settings.lbDomain = undefined;
    }
  });

  it('deletes: 204, 404 to reads at once, and the workflow removes the row', async () => {
    const ep = await create();
    await workflowSpec(ep.id);
    const del = await call(p.url, 'DELETE', `/v2/serverless/${ep.id}`, { key: p.adminKey });
    expect(del.status).toBe(204);
    expect(del.body).toBeUndefined();
    expect(del.headers.get('ratelimit')).toMatch(/^"minute";r=\d+;t=\d+, "hour";r=\d+;t=\d+, "day";r=\d+;t=\d+$/);
    for (const [method, path] of [
      ['GET', `/v2/serverless/${ep.id}`],
      ['PATCH', `/v2/serverless/${ep.id}`],
      ['GET', `/v2/serverless/${ep.id}/workers`],
      ['GET', `/v2/serverless/${ep.id}/releases`],
    ] as const) {
      const r = await call(p.url, method, path, {
        key: p.adminKey,
        body: method === 'PATCH' ? { workers: { max: 1 } } : undefined,
      });
      expect(r.status, `${method} ${path}`).toBe(404);
      expect(r.headers.get('content-type')).toMatch(PROBLEM);
    }
    const list = await call(p.url, 'GET', '/v2/serverless', { key: p.adminKey });
    expect(list.body.endpoints.map((e: { id: string }) => e.id)).not.toContain(ep.id);

    // The workflow drains and removes the row, then completes.
    await p.ctx.temporal.workflow.getHandle(endpointWorkflowId(ep.id)).result();
    expect(await p.ctx.db.endpoint.findUnique({ where: { id: ep.id } })).toBeNull();
    expect((await call(p.url, 'DELETE', `/v2/serverless/${ep.id}`, { key: p.adminKey })).status).toBe(404);
  });

  it('deletes an endpoint whose workflow is gone by removing the row itself', async () => {
    const ep = await create();
    await workflowSpec(ep.id);
    await p.ctx.temporal.workflow.getHandle(endpointWorkflowId(ep.id)).terminate('test: the workflow is gone');
    expect((await call(p.url, 'DELETE', `/v2/serverless/${ep.id}`, { key: p.adminKey })).status).toBe(204);
    expect(await p.ctx.db.endpoint.findUnique({ where: { id: ep.id } })).toBeNull();
  });

  it('answers 404 to another account and 403 to a key without the write scope', async () => {
    const ep = await create();
    const other = await p.ctx.db.account.create({
      data: { id: newId(), email: `${newId()}@example.test`, name: 'other' },
    });
    const otherKey = await issueApiKey(p.ctx.db, other.id, 'other', ['READ', 'WRITE']);
    for (const [method, path] of [
      ['GET', `/v2/serverless/${ep.id}`],
      ['PATCH', `/v2/serverless/${ep.id}`],
      ['DELETE', `/v2/serverless/${ep.id}`],
      ['GET', `/v2/serverless/${ep.id}/workers`],
      ['GET', `/v2/serverless/${ep.id}/releases`],
    ] as const) {
      const r = await call(p.url, method, path, {
        key: otherKey.key,
        body: method === 'PATCH' ? { workers: { max: 1 } } : undefined,
      });
      expect(r.status, `${method} ${path}`).toBe(404);
    }
    const readOnly = await issueApiKey(p.ctx.db, accountId, 'ro', ['READ']);
    expect((await patch(ep.id, { workers: { max: 1 } }, readOnly.key)).status).toBe(403);
    // 403 comes before validation: an invalid body does not reveal the rules to a key that may not write.
    expect((await patch(ep.id, { bogus: 1 }, readOnly.key)).status).toBe(403);
    expect((await call(p.url, 'DELETE', `/v2/serverless/${ep.id}`, { key: readOnly.key })).status).toBe(403);
    expect((await call(p.url, 'GET', `/v2/serverless/${ep.id}/releases`, { key: readOnly.key })).status).toBe(200);
    // A key limited to other endpoints does not reach this one.
    const scoped = await issueApiKey(p.ctx.db, accountId, 'scoped', ['READ', 'WRITE'], undefined, ['someotherid000']);
    expect((await patch(ep.id, { workers: { max: 1 } }, scoped.key)).status).toBe(403);
    const after = await p.ctx.db.endpoint.findUniqueOrThrow({ where: { id: ep.id } });
    expect([after.workersMax, after.deletingAt]).toEqual([2, null]);
  });

  it('leaves no older state last when changes race (several API processes alike)', async () => {
    const ep = await create({ workers: { min: 0, max: 50 } });
    await workflowSpec(ep.id);
    const results = await Promise.all(
      Array.from({ length: 12 }, (_, i) => patch(ep.id, { workers: { max: 20 + i }, scaling: { value: 1 + i } })),
    );
    expect(results.map((r) => r.status)).toEqual(Array(12).fill(200));
    const row = await p.ctx.db.endpoint.findUniqueOrThrow({ where: { id: ep.id } });
    await workflowHolds(ep.id, { workersMax: row.workersMax, scalerValue: row.scalerValue });
    // And it stays there: no older state arrives after the newest.
    await new Promise((r) => setTimeout(r, 500));
    expect(await p.ctx.temporal.workflow.getHandle(endpointWorkflowId(ep.id)).query(getSpec)).toMatchObject({
      workersMax: row.workersMax,
      scalerValue: row.scalerValue,
    });
  });

  it('keeps the legacy updateSpec Update working for API processes of the previous version (validator included)', async () => {
    const ep = await create();
    await workflowSpec(ep.id);
    const handle = p.ctx.temporal.workflow.getHandle(endpointWorkflowId(ep.id));
    const err = await handle
      .executeUpdate(updateSpec, { args: [{ workersMin: 5, workersMax: 1 }] })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(WorkflowUpdateFailedError);
    expect((err as WorkflowUpdateFailedError).cause?.message).toBe('workers.min must not exceed workers.max');
    expect(await handle.query(getSpec)).toMatchObject({ workersMin: 0, workersMax: 2 });
    // An old API process sends the row's whole state after its commit: the workflow takes it.
    expect(await handle.executeUpdate(updateSpec, { args: [{ workersMin: 1, workersMax: 3 }] })).toMatchObject({
      workersMin: 1,
      workersMax: 3,
    });
    expect(await handle.query(getSpec)).toMatchObject({ workersMin: 1, workersMax: 3 });
  });

  it('when Temporal cannot be reached after the commit: 503, the row is the truth, and the workflow converges', async () => {
    const ep = await create();
    await workflowSpec(ep.id);
    // A second API process on the same database whose Temporal is down (nothing listens there).
    const deadPort = await freePort();
    const deadClient = new Client({ connection: Connection.lazy({ address: `127.0.0.1:${deadPort}` }) });
    const cut = buildApp({ ...p.ctx, temporal: deadClient }, { logLevel: 'silent' });
    const cutUrl = await cut.listen({ host: '127.0.0.1', port: 0 });
    try {
      const started = Date.now();
      const r = await call(cutUrl, 'PATCH', `/v2/serverless/${ep.id}`, {
        key: p.adminKey,
        body: { workers: { max: 9 }, image: 'registry.local/app:9' },
      });
      expect(r.status).toBe(503);
      expect(r.headers.get('content-type')).toMatch(PROBLEM);
      expect(r.body.detail).toMatch(/saved.*repeat the request/);
      expect(Date.now() - started).toBeLessThan(20_000);
      // Committed: reads show it, release 2 exists; the workflow still has the old state.
      expect((await call(p.url, 'GET', `/v2/serverless/${ep.id}`, { key: p.adminKey })).body).toMatchObject({
        workers: { min: 0, max: 2 + 7 },
        image: 'registry.local/app:9',
      });
      const handle = p.ctx.temporal.workflow.getHandle(endpointWorkflowId(ep.id));
      expect(await handle.query(getSpec)).toMatchObject({ workersMax: 2, releaseVersion: 1 });

      // A process start reconciles: the workflow reads the row.
      await reconcileEndpointWorkflows(p.ctx);
      await workflowHolds(ep.id, { workersMax: 9, releaseVersion: 2 });

      // Repeating the request also applies it (the workflow reads the whole row).
      const r2 = await call(cutUrl, 'PATCH', `/v2/serverless/${ep.id}`, { key: p.adminKey, body: { timeout: 5000 } });
      expect(r2.status).toBe(503);
      const again = await call(p.url, 'PATCH', `/v2/serverless/${ep.id}`, { key: p.adminKey, body: { timeout: 5000 } });
      expect(again.status).toBe(200);
      await workflowHolds(ep.id, { timeoutMs: 5000 });

      // A deletion that cannot reach the workflow is recorded (404 to reads, jobs cancelled), finished by a repeat.
      const jobIds = [newId(), newId(), newId()];
      const statuses = ['IN_QUEUE', 'IN_QUEUE', 'IN_PROGRESS'] as const;
      await p.ctx.db.job.createMany({
        data: jobIds.map((id, i) => ({
          id,
          endpointId: ep.id,
          accountId,
          status: statuses[i],
          input: {},
          expiresAt: new Date(Date.now() + 3_600_000),
        })),
      });
      const del = await call(cutUrl, 'DELETE', `/v2/serverless/${ep.id}`, { key: p.adminKey });
      expect(del.status).toBe(503);
      const jobs = await p.ctx.db.job.findMany({ where: { id: { in: jobIds } } });
      expect(jobs.map((j) => [j.id, j.status, j.completedAt !== null]).sort()).toEqual(
        [
          [jobIds[0], 'CANCELLED', true],
          [jobIds[1], 'CANCELLED', true],
          [jobIds[2], 'IN_PROGRESS', false],
        ].sort(),
      );
      expect((await p.ctx.db.endpoint.findUniqueOrThrow({ where: { id: ep.id } })).deletingAt).not.toBeNull();
      expect((await call(p.url, 'GET', `/v2/serverless/${ep.id}`, { key: p.adminKey })).status).toBe(404);
      expect((await handle.describe()).status.name).toBe('RUNNING');
      expect((await call(p.url, 'DELETE', `/v2/serverless/${ep.id}`, { key: p.adminKey })).status).toBe(204);
      await handle.result();
      expect(await p.ctx.db.endpoint.findUnique({ where: { id: ep.id } })).toBeNull();
    } finally {
      await cut.close();
      await deadClient.connection.close();
    }
  }, 90_000);
});
