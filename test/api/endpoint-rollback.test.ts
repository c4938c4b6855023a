/**
 * POST /v2/serverless/{id}/releases/{version}/rollback (domain/endpoints/rollback.ts) through
 * `app.inject` on a fresh database and the suite's Temporal server (no Temporal worker: the endpoint
 * workflow is told and stays queued; the rows are the truth): a new release with the earlier
 * release's container fields, and the refusals: the current release or one with the same fields
 * (409), an unknown version (404), a key without WRITE (403), another account's key (404).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issueApiKey } from '../../domain/accounts/index.ts';
import { newId } from '../../domain/shared/index.ts';
import { startTestApp, type TestApp } from '../support/app.ts';

describe('rolling an endpoint back to an earlier release', () => {
  let t: TestApp;
  let id: string;
  let readOnly: string;
  let otherAccount: string;

  const versions = async (): Promise<number[]> =>
    (await t.ctx.db.release.findMany({ where: { endpointId: id }, orderBy: { version: 'asc' } })).map((r) => r.version);
  const rollback = (version: string | number, key = t.adminKey) =>
    t.call('POST', `/v2/serverless/${id}/releases/${version}/rollback`, { key });

  beforeAll(async () => {
    t = await startTestApp();
    const admin = await t.ctx.db.account.findFirstOrThrow({ where: { isAdmin: true } });
    readOnly = (await issueApiKey(t.ctx.db, admin.id, 'read-only', ['READ'])).key;
    const b = await t.ctx.db.account.create({ data: { id: newId(), email: `${newId()}@example.test`, name: 'b' } });
    otherAccount = (await issueApiKey(t.ctx.db, b.id, 'b', ['READ', 'WRITE', 'RUN'])).key;
    const created = await t.call('POST', '/v2/serverless', {
      key: t.adminKey,
      body: { name: 'rollback', image: 'localhost/app:1', gpu: { pools: ['AMPERE_24'] }, ports: ['8000/http'] },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    id = created.body.id;
    const patched = await t.call('PATCH', `/v2/serverless/${id}`, {
      key: t.adminKey,
      body: { image: 'localhost/app:2', env: { MODE: 'two' }, disk: 20, workers: { max: 5 } },
    });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    expect(await versions()).toEqual([1, 2]);
  });
  afterAll(async () => {
    await t?.stop();
  });

  it('makes release 3 with release 1’s container fields, leaving the rest as it is', async () => {
    const r = await rollback(1);
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    expect(r.body).toMatchObject({ version: 3, status: 'ROLLING_OUT' });
    const byField = Object.fromEntries(
      (r.body.diff as Array<{ field: string; old: unknown; new: unknown }>).map((d) => [d.field, [d.old, d.new]]),
    );
    expect(byField).toEqual({
      image: ['localhost/app:2', 'localhost/app:1'],
      disk: [20, 10],
      env: [{ MODE: 'two' }, {}],
    });
    const endpoint = await t.call('GET', `/v2/serverless/${id}`, { key: t.adminKey });
    expect(endpoint.body).toMatchObject({ image: 'localhost/app:1', disk: 10, env: {}, ports: ['8000/http'] });
    // Not a container field: the PATCH's workers stay.
    expect(endpoint.body.workers.max).toBe(5);
    const listed = await t.call('GET', `/v2/serverless/${id}/releases`, { key: t.adminKey });
    expect(listed.body.endpointVersion).toBe(3);
    expect(listed.body.releases.map((x: { version: number; status: string }) => [x.version, x.status])).toEqual([
      [3, 'ROLLING_OUT'],
      [2, 'SUPERSEDED'],
      [1, 'SUPERSEDED'],
    ]);
    const row = await t.ctx.db.release.findUniqueOrThrow({
      where: { endpointId_version: { endpointId: id, version: 3 } },
    });
    expect(row).toMatchObject({ image: 'localhost/app:1', disk: 10, env: {} });
  });

  it('refuses the current release and a release with the fields the endpoint runs (409): no release made', async () => {
    const current = await rollback(3);
    expect(current.status, JSON.stringify(current.body)).toBe(409);
    expect(current.body.detail).toMatch(/release 3 is the endpoint's current release/);
    // Release 1 has the fields release 3 restored.
    const same = await rollback(1);
    expect(same.status, JSON.stringify(same.body)).toBe(409);
    expect(same.body.detail).toMatch(/would change nothing/);
    expect(await versions()).toEqual([1, 2, 3]);
  });

  it('answers 404 for a version the endpoint never had and for one that is no version', async () => {
    for (const v of [99, 0, 'abc', '1.5']) {
      const r = await rollback(v);
      expect(r.status, `${v}: ${JSON.stringify(r.body)}`).toBe(404);
      expect(r.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    }
    expect((await rollback(99)).body.detail).toMatch(/no release "99"/);
    expect((await t.call('POST', `/v2/serverless/${newId()}/releases/1/rollback`, { key: t.adminKey })).status).toBe(
      404,
    );
    expect(await versions()).toEqual([1, 2, 3]);
  });

  it('answers 403 to a key without WRITE and 404 to another account’s key: nothing changes', async () => {
    const refused = await rollback(2, readOnly);
    expect(refused.status, JSON.stringify(refused.body)).toBe(403);
    const other = await rollback(2, otherAccount);
    expect(other.status, JSON.stringify(other.body)).toBe(404);
    expect(JSON.stringify(other.body)).not.toContain('localhost/app');
    expect(await versions()).toEqual([1, 2, 3]);
    expect((await t.ctx.db.endpoint.findUniqueOrThrow({ where: { id } })).image).toBe('localhost/app:1');
    // The owner can still roll forward to release 2's fields: release 4.
    const forward = await rollback(2);
    expect(forward.status, JSON.stringify(forward.body)).toBe(201);
    expect(forward.body.version).toBe(4);
    expect((await t.ctx.db.endpoint.findUniqueOrThrow({ where: { id } })).image).toBe('localhost/app:2');
  });

  it('is in the OpenAPI document with its scope', async () => {
    const doc = (await t.call('GET', '/v2/openapi.json')).body;
    const op = doc.paths['/v2/serverless/{id}/releases/{version}/rollback'].post;
    expect(op.operationId).toBe('rollbackEndpointRelease');
    expect(op['x-required-scope']).toBe('WRITE');
    expect(op.description).toMatch(/Scope: WRITE/);
  });
});
