/**
 * Edges of changing an endpoint (issue #45), through `app.inject` on a fresh database and the suite's
 * Temporal server (no Temporal worker: the endpoint workflows are told and stay queued):
 * saveEndpoint's `type` and `gpuCount` with `id`, network volumes making a release, and what the
 * OpenAPI document says of `cpu` in a PATCH.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../../domain/shared/index.ts';
import { startTestApp, type Answer, type TestApp } from '../support/app.ts';

describe('changing an endpoint: type, gpuCount, network volumes', () => {
  let t: TestApp;
  let accountId: string;
  let templateId: string;

  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- GraphQL answers are arbitrary JSON
  async function gql(query: string, variables?: Record<string, unknown>): Promise<any> {
    const r = await t.call('POST', '/graphql', { key: t.adminKey, body: { query, variables } });
    return r.body;
  }
  const SAVE =
    'mutation S($input: EndpointInput!) { saveEndpoint(input: $input) { id type gpuIds gpuCount version networkVolumeId } }';
  const releases = async (id: string): Promise<Answer> =>
    t.call('GET', `/v2/serverless/${id}/releases`, { key: t.adminKey });

  beforeAll(async () => {
    t = await startTestApp();
    accountId = (await t.ctx.db.account.findFirstOrThrow({ where: { isAdmin: true } })).id;
    const tpl = await gql(
      'mutation T($input: SaveTemplateInput!) { saveTemplate(input: $input) { id isServerless } }',
      { input: { name: 'edges-endpoints', imageName: 'img:1', isServerless: true, ports: '8000/http' } },
    );
    expect(tpl.errors, JSON.stringify(tpl.errors)).toBeUndefined();
    templateId = tpl.data.saveTemplate.id;
  });
  afterAll(async () => {
    await t?.stop();
  });

  it('changes the type with id for real: a new release each way, refused while jobs are queued', async () => {
    const made = await gql(SAVE, { input: { name: 'edges-type', templateId, gpuIds: 'AMPERE_24' } });
    expect(made.errors, JSON.stringify(made.errors)).toBeUndefined();
    const id = made.data.saveEndpoint.id as string;
    expect(made.data.saveEndpoint).toMatchObject({ type: 'QB', version: 1 });

    const lb = await gql(SAVE, { input: { id, name: 'edges-type', templateId, gpuIds: 'AMPERE_24', type: 'LB' } });
    expect(lb.errors, JSON.stringify(lb.errors)).toBeUndefined();
    expect(lb.data.saveEndpoint).toMatchObject({ type: 'LB', version: 2 });
    expect((await t.ctx.db.endpoint.findUniqueOrThrow({ where: { id } })).type).toBe('LOAD_BALANCING');
    const rest = await t.call('GET', `/v2/serverless/${id}`, { key: t.adminKey });
    expect(rest.body.type).toBe('LOAD_BALANCING');
    expect(rest.body.requestUrls.base).toEqual(expect.any(String));
    // Every worker is replaced by one of the new kind: the change is release 2.
    const listed = await releases(id);
    expect(listed.body.releases[0]).toMatchObject({
      version: 2,
      status: 'ROLLING_OUT',
      diff: [{ field: 'type', old: 'QUEUE_BASED', new: 'LOAD_BALANCING' }],
    });

    // Saved again with the type it has: nothing changes.
    const same = await gql(SAVE, { input: { id, name: 'edges-type', templateId, gpuIds: 'AMPERE_24', type: 'LB' } });
    expect(same.data.saveEndpoint).toMatchObject({ type: 'LB', version: 2 });

    const back = await gql(SAVE, { input: { id, name: 'edges-type', templateId, gpuIds: 'AMPERE_24', type: 'QB' } });
    expect(back.errors, JSON.stringify(back.errors)).toBeUndefined();
    expect(back.data.saveEndpoint).toMatchObject({ type: 'QB', version: 3 });

    // A queued job would be stranded on a load-balancing endpoint: refused, nothing changed.
    const run = await t.call('POST', `/v2/${id}/run`, { key: t.adminKey, body: { input: { n: 1 } } });
    expect(run.status, JSON.stringify(run.body)).toBe(200);
    const refused = await gql(SAVE, { input: { id, name: 'edges-type', templateId, gpuIds: 'AMPERE_24', type: 'LB' } });
    expect(refused.errors[0].extensions.code).toBe('BAD_USER_INPUT');
    expect(JSON.stringify(refused.errors[0])).toMatch(/\$\.type: the endpoint has 1 queued or running job/);
    const row = await t.ctx.db.endpoint.findUniqueOrThrow({ where: { id } });
    expect(row).toMatchObject({ type: 'QUEUE_BASED', currentReleaseVersion: 3 });
  });

  it('applies gpuCount given with id and without gpuIds', async () => {
    const made = await gql(SAVE, { input: { name: 'edges-count', templateId, gpuIds: 'AMPERE_24,ADA_24' } });
    const id = made.data.saveEndpoint.id as string;
    expect(made.data.saveEndpoint.gpuCount).toBe(1);
    const counted = await gql(SAVE, { input: { id, name: 'edges-count', templateId, gpuCount: 2 } });
    expect(counted.errors, JSON.stringify(counted.errors)).toBeUndefined();
    expect(counted.data.saveEndpoint).toMatchObject({ gpuCount: 2, gpuIds: 'AMPERE_24,ADA_24' });
    expect(await t.ctx.db.endpoint.findUniqueOrThrow({ where: { id } })).toMatchObject({
      gpuCount: 2,
      gpuPools: ['AMPERE_24', 'ADA_24'],
    });
    // Kept when a later save names the pools without a count.
    const again = await gql(SAVE, { input: { id, name: 'edges-count', templateId, gpuIds: 'ADA_24' } });
    expect(again.data.saveEndpoint).toMatchObject({ gpuCount: 2, gpuIds: 'ADA_24' });
  });

  it('makes a new release when the network volumes change (REST and GraphQL), with the volumes in it', async () => {
    const volume = (dc: string) =>
      t.ctx.db.networkVolume.create({
        data: { id: newId(), accountId, name: `edges-${dc}-${newId()}`, size: 10, dataCenterId: dc },
      });
    const [v1, v2] = [await volume('dc-a'), await volume('dc-b')];
    const created = await gql(SAVE, { input: { name: 'edges-volumes', templateId, gpuIds: 'AMPERE_24' } });
    expect(created.errors, JSON.stringify(created.errors)).toBeUndefined();
    const id = created.data.saveEndpoint.id as string;

    const patched = await t.call('PATCH', `/v2/serverless/${id}`, {
      key: t.adminKey,
      body: { networkVolumes: [v1.id] },
    });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    expect(patched.body.networkVolumes).toEqual([v1.id]);
    let listed = await releases(id);
    expect(listed.body.endpointVersion).toBe(2);
    expect(listed.body.releases[0]).toMatchObject({
      version: 2,
      status: 'ROLLING_OUT',
      diff: [{ field: 'networkVolumes', old: [], new: [v1.id] }],
    });

    // The same volumes again: no release.
    await t.call('PATCH', `/v2/serverless/${id}`, { key: t.adminKey, body: { networkVolumes: [v1.id] } });
    expect((await releases(id)).body.endpointVersion).toBe(2);

    // GraphQL's networkVolumeId goes the same way.
    const moved = await gql(SAVE, {
      input: { id, name: 'edges-volumes', templateId, gpuIds: 'AMPERE_24', networkVolumeId: v2.id },
    });
    expect(moved.errors, JSON.stringify(moved.errors)).toBeUndefined();
    expect(moved.data.saveEndpoint).toMatchObject({ version: 3, networkVolumeId: v2.id });
    listed = await releases(id);
    expect(listed.body.releases.map((r: { version: number; status: string }) => [r.version, r.status])).toEqual([
      [3, 'ROLLING_OUT'],
      [2, 'SUPERSEDED'],
      [1, 'SUPERSEDED'],
    ]);
    expect(listed.body.releases[0].diff).toEqual([{ field: 'networkVolumes', old: [v1.id], new: [v2.id] }]);
    const release = await t.ctx.db.release.findUniqueOrThrow({
      where: { endpointId_version: { endpointId: id, version: 3 } },
    });
    expect(release.changes).toEqual([{ field: 'networkVolumes', old: [v1.id], new: [v2.id] }]);
  });

  it('says in the OpenAPI document what a PATCH does with `cpu` and with a CPU endpoint, as the code does', async () => {
    const doc = (await t.call('GET', '/v2/openapi.json')).body;
    const description = doc.paths['/v2/serverless/{id}'].patch.description as string;
    expect(description).not.toMatch(/CPU endpoints cannot be updated/);
    expect(description).toContain(
      'A body with `cpu` is 400 (`cpu` is read-only). A CPU endpoint takes every other field',
    );
    expect(description).toContain('`networkVolumes` makes a new release');

    const cpu = await t.call('POST', '/v2/serverless', {
      key: t.adminKey,
      body: { name: 'edges-cpu', image: 'img:1' },
    });
    expect(cpu.body.cpu).toMatchObject({ id: 'cpu3c' });
    const withCpu = await t.call('PATCH', `/v2/serverless/${cpu.body.id}`, {
      key: t.adminKey,
      body: { cpu: { id: 'cpu3c' } },
    });
    expect(withCpu.status).toBe(400);
    const scaled = await t.call('PATCH', `/v2/serverless/${cpu.body.id}`, {
      key: t.adminKey,
      body: { workers: { max: 2 }, env: { A: '1' } },
    });
    expect(scaled.status, JSON.stringify(scaled.body)).toBe(200);
    expect(scaled.body).toMatchObject({ workers: { max: 2 }, env: { A: '1' }, cpu: { id: 'cpu3c' } });
  });
});
