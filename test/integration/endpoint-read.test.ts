/**
 * `GET /v2/serverless/{id}` reads its row with one statement on node-postgres (domain/endpoints/endpoints.ts
 * findOwned): the answer must be exactly what the Prisma row gives, for every kind of column (text
 * arrays, JSON, enums, doubles, nullable integers, UTC timestamps), and the same refusals.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issueApiKey } from '../../domain/accounts/index.ts';
import { endpointView } from '../../domain/endpoints/index.ts';
import { newId, randomString } from '../../domain/shared/index.ts';
import { startTestApp, type TestApp } from '../support/app.ts';

describe('the endpoint read of GET /v2/serverless/{id}', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(async () => {
    await t?.stop();
  });

  it('answers what the Prisma row gives, column for column', async () => {
    const accountId = (
      await t.ctx.db.account.create({ data: { id: newId(), email: `${newId()}@example.test`, name: 'reader' } })
    ).id;
    const { key } = await issueApiKey(t.ctx.db, accountId, 'read', ['READ']);
    const row = await t.ctx.db.endpoint.create({
      data: {
        id: newId(),
        accountId,
        name: `read-${randomString(6)}`,
        image: 'registry.example/app:2',
        args: 'python serve.py --port 8000',
        disk: 42,
        ports: ['8000/http', '22/tcp'],
        env: { MODE: 'prod', NESTED_IS_TEXT: '{"a":1}', EMPTY: '' },
        gpuPools: ['AMPERE_24', 'ADA_48_PRO'],
        gpuCount: 2,
        workersMin: 1,
        workersMax: 7,
        scalerType: 'REQUEST_COUNT',
        scalerValue: 2.75,
        idleTimeout: 33,
        dataCenterIds: ['EU-RO-1'],
        timeoutMs: 123_456,
        flashboot: 'FLASHBOOT',
        locations: 'EU',
        currentReleaseVersion: 3,
        createdAt: new Date('2026-01-02T03:04:05.678Z'),
      },
    });
    const answer = await t.call('GET', `/v2/serverless/${row.id}`, { key });
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual(JSON.parse(JSON.stringify(endpointView(row, t.ctx))));
    expect(answer.body.createdAt).toBe('2026-01-02T03:04:05.678Z');
    expect(answer.body.env).toEqual({ MODE: 'prod', NESTED_IS_TEXT: '{"a":1}', EMPTY: '' });

    // Refusals as before: another account's endpoint and one being deleted are 404; a key limited
    // to other endpoints is 403.
    const other = (
      await t.ctx.db.account.create({ data: { id: newId(), email: `${newId()}@example.test`, name: 'other' } })
    ).id;
    const { key: otherKey } = await issueApiKey(t.ctx.db, other, 'read', ['READ']);
    expect((await t.call('GET', `/v2/serverless/${row.id}`, { key: otherKey })).status).toBe(404);
    const { key: narrowKey } = await issueApiKey(t.ctx.db, accountId, 'narrow', ['READ'], undefined, [newId()]);
    expect((await t.call('GET', `/v2/serverless/${row.id}`, { key: narrowKey })).status).toBe(403);
    await t.ctx.db.endpoint.update({ where: { id: row.id }, data: { deletingAt: new Date() } });
    expect((await t.call('GET', `/v2/serverless/${row.id}`, { key })).status).toBe(404);
  });
});
