import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issueApiKey } from '../../domain/accounts/index.ts';
import { newId } from '../../domain/shared/index.ts';
import { endpointWorkflowId, getSpec } from '../../contracts/workflows.ts';
import { call, startTestPlatform, type TestPlatform } from '../support/platform.ts';

describe('POST/GET /v2/serverless against real PostgreSQL and Temporal', () => {
  let p: TestPlatform;
  beforeAll(async () => {
    p = await startTestPlatform();
  });
  afterAll(async () => {
    await p?.stop();
  });

  const body = {
    name: 'hello',
    image: 'docker.io/library/alpine:3.20',
    gpu: { pools: ['AMPERE_24'] },
    workers: { min: 0, max: 2 },
    scaling: { type: 'REQUEST_COUNT', value: 2, idleTimeout: 7 },
    env: { MODE: 'test' },
  };

  it('creates an endpoint, reads it back, and runs its workflow with a readable id', async () => {
    const created = await call(p.url, 'POST', '/v2/serverless', { key: p.adminKey, body });
    expect(created.status).toBe(201);
    const ep = created.body;
    expect(ep.id).toMatch(/^[a-z0-9]{14}$/);
    expect(ep).toMatchObject({
      name: 'hello',
      type: 'QUEUE_BASED',
      image: body.image,
      gpu: { pools: ['AMPERE_24'], count: 1 },
      cpu: null,
      workers: { min: 0, max: 2 },
      scaling: { type: 'REQUEST_COUNT', value: 2, idleTimeout: 7 },
      env: { MODE: 'test' },
      dataCenterIds: [],
      networkVolumes: [],
      timeout: 600000,
      flashboot: 'OFF',
      requestUrls: { run: `${p.ctx.publicUrl}/v2/${ep.id}/run`, runSync: `${p.ctx.publicUrl}/v2/${ep.id}/runsync` },
    });
    expect(Date.parse(ep.createdAt)).toBeGreaterThan(Date.now() - 60_000);

    const read = await call(p.url, 'GET', `/v2/serverless/${ep.id}`, { key: p.adminKey });
    expect(read.status).toBe(200);
    expect(read.body).toEqual(ep);

    const list = await call(p.url, 'GET', '/v2/serverless', { key: p.adminKey });
    expect(list.body.endpoints.map((e: { id: string }) => e.id)).toContain(ep.id);

    const handle = p.ctx.temporal.workflow.getHandle(endpointWorkflowId(ep.id));
    const described = await handle.describe();
    expect(described.status.name).toBe('RUNNING');
    expect(described.type).toBe('endpointWorkflow');
    // The workflow loads the desired state through its activity, moments after it starts.
    let spec = await handle.query(getSpec);
    for (let i = 0; spec === null && i < 100; i++) {
      await new Promise((r) => setTimeout(r, 50));
      spec = await handle.query(getSpec);
    }
    expect(spec).toMatchObject({
      endpointId: ep.id,
      workersMin: 0,
      workersMax: 2,
      scalerType: 'REQUEST_COUNT',
      scalerValue: 2,
      idleTimeout: 7,
      releaseVersion: 1,
    });
    // Release 1 was recorded with the container configuration.
    const releases = await p.ctx.db.release.findMany({ where: { endpointId: ep.id } });
    expect(releases).toHaveLength(1);
    expect(releases[0]).toMatchObject({ version: 1, image: body.image });
  });

  it('refuses a second endpoint with the same name in the account', async () => {
    const again = await call(p.url, 'POST', '/v2/serverless', { key: p.adminKey, body: { ...body, name: 'dup' } });
    expect(again.status).toBe(201);
    const dup = await call(p.url, 'POST', '/v2/serverless', { key: p.adminKey, body: { ...body, name: 'dup' } });
    expect(dup.status).toBe(409);
    expect(dup.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(dup.body).toMatchObject({ title: 'Conflict', status: 409 });
  });

  it('answers problem+json for missing, malformed and unknown keys', async () => {
    const none = await call(p.url, 'GET', '/v2/serverless');
    expect(none.status).toBe(401);
    expect(none.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(none.body).toEqual({ title: 'Unauthorized', status: 401, detail: 'missing bearer token' });
    const basic = await call(p.url, 'GET', '/v2/serverless', { headers: { authorization: 'Basic abc' } });
    expect(basic.status).toBe(401);
    const unknown = await call(p.url, 'GET', '/v2/serverless', { key: 'gntr_definitely_not_a_real_key_000' });
    expect(unknown.status).toBe(401);
    expect(unknown.body.detail).toBe('invalid bearer token');
  });

  it('answers 403 to a key without the scope and 404 for another account', async () => {
    const readOnly = await issueApiKey(p.ctx.db, (await p.ctx.db.account.findFirstOrThrow()).id, 'ro', ['READ']);
    const denied = await call(p.url, 'POST', '/v2/serverless', { key: readOnly.key, body: { ...body, name: 'nope' } });
    expect(denied.status).toBe(403);
    expect(denied.body.title).toBe('Forbidden');

    const other = await p.ctx.db.account.create({
      data: { id: newId(), email: `${newId()}@example.test`, name: 'other' },
    });
    const otherKey = await issueApiKey(p.ctx.db, other.id, 'other', ['READ', 'WRITE']);
    const mine = await call(p.url, 'POST', '/v2/serverless', { key: p.adminKey, body: { ...body, name: 'mine' } });
    const hidden = await call(p.url, 'GET', `/v2/serverless/${mine.body.id}`, { key: otherKey.key });
    expect(hidden.status).toBe(404);
    const theirs = await call(p.url, 'GET', '/v2/serverless', { key: otherKey.key });
    expect(theirs.body).toEqual({ endpoints: [] });
  });

  it('rejects invalid bodies with 400 or 422 and lists each failure', async () => {
    const malformed = await call(p.url, 'POST', '/v2/serverless', { key: p.adminKey, rawBody: '{"name": ' });
    expect(malformed.status).toBe(400);
    expect(malformed.body.title).toBe('Bad Request');

    const unknownProp = await call(p.url, 'POST', '/v2/serverless', {
      key: p.adminKey,
      body: { ...body, name: 'x1', colour: 'red' },
    });
    expect(unknownProp.status).toBe(422);
    expect(unknownProp.body).toMatchObject({
      title: 'Unprocessable Entity',
      status: 422,
      detail: 'Request validation failed.',
    });
    expect(unknownProp.body.errors).toContain("$: additional properties 'colour' not allowed");

    const bad = await call(p.url, 'POST', '/v2/serverless', {
      key: p.adminKey,
      body: {
        name: 'x2',
        image: 'i',
        disk: 0,
        workers: { min: -1, max: 1 },
        scaling: { type: 'QUEUE_DELAY', value: 0.1, idleTimeout: 1 },
      },
    });
    expect(bad.status).toBe(422);
    expect(bad.body.errors).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^\$\.disk: /),
        expect.stringMatching(/^\$\.workers\.min: /),
        expect.stringMatching(/^\$\.scaling\.value: /),
      ]),
    );

    const minOverMax = await call(p.url, 'POST', '/v2/serverless', {
      key: p.adminKey,
      body: { ...body, name: 'x3', workers: { min: 3, max: 1 } },
    });
    expect(minOverMax.status).toBe(422);
    expect(minOverMax.body.errors).toContain('$: workers.min must not exceed workers.max');

    const cpu = await call(p.url, 'POST', '/v2/serverless', {
      key: p.adminKey,
      body: { ...body, name: 'x4', cpu: [{ id: 'cpu3c', vcpuCount: 2 }] },
    });
    expect(cpu.status).toBe(400);
    expect(cpu.body.detail).toMatch(/`cpu` is read-only: leave `gpu` out to make a CPU endpoint/);

    // Nothing of the refused requests was stored.
    const names = (await p.ctx.db.endpoint.findMany({ select: { name: true } })).map((e) => e.name);
    expect(names.filter((n) => n.startsWith('x'))).toEqual([]);
  });

  it('serves health, readiness and Prometheus metrics', async () => {
    expect((await call(p.url, 'GET', '/healthz')).body).toEqual({ status: 'ok' });
    expect((await call(p.url, 'GET', '/readyz')).body).toEqual({ status: 'ready' });
    const metrics = await fetch(`${p.url}/metrics`).then((r) => r.text());
    expect(metrics).toMatch(/gantry_http_request_duration_seconds_bucket\{.*route="\/v2\/serverless".*\}/);
    expect(metrics).toMatch(/gantry_process_cpu_user_seconds_total/);
  });
});
