/**
 * `GET /v2/serverless/{id}` reads its row with one statement on node-postgres (domain/endpoints/endpoints.ts
 * findOwned): the answer must be exactly what the Prisma row gives, for every kind of column (text
 * arrays, JSON, enums, doubles, nullable integers, UTC timestamps), and the same refusals. The row
 * is remembered while the process hears every change of it (a trigger's notification).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issueApiKey } from '../../domain/accounts/index.ts';
import { endpointView } from '../../api/routes/shapes/endpoint.ts';
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
    // A write outside this process's domain calls is seen once its change notification arrives.
    await t.ctx.db.endpoint.update({ where: { id: row.id }, data: { deletingAt: new Date() } });
    await expectSoon(async () => (await t.call('GET', `/v2/serverless/${row.id}`, { key })).status, 404);
  });

  it('remembers the row while the process follows changes: its own writes are read back at once, others within their notification', async () => {
    const created = await t.call('POST', '/v2/serverless', {
      key: t.adminKey,
      body: { name: `cached-${randomString(6)}`, image: 'img:1', gpu: { pools: ['AMPERE_24'] } },
    });
    expect(created.status).toBe(201);
    const id = created.body.id as string;
    expect(t.ctx.records!.followsChanges).toBe(true);
    expect((await t.call('GET', `/v2/serverless/${id}`, { key: t.adminKey })).body.workers.max).toBe(
      created.body.workers.max,
    );
    expect(t.ctx.records!.endpointRows.peek(id)?.id).toBe(id);

    // This process's own PATCH: the next read has it, without waiting for any notification.
    const patched = await t.call('PATCH', `/v2/serverless/${id}`, { key: t.adminKey, body: { workers: { max: 5 } } });
    expect(patched.status).toBe(200);
    expect((await t.call('GET', `/v2/serverless/${id}`, { key: t.adminKey })).body.workers.max).toBe(5);

    // Another process's write (here, straight to the database): read within its notification's delivery.
    const started = Date.now();
    await t.ctx.db.endpoint.update({ where: { id }, data: { workersMax: 6 } });
    await expectSoon(
      async () => (await t.call('GET', `/v2/serverless/${id}`, { key: t.adminKey })).body.workers.max,
      6,
    );
    expect(Date.now() - started).toBeLessThan(500);

    // Without the change feed nothing is remembered: every read is a read.
    t.ctx.records!.changeFeed(false);
    try {
      await t.call('GET', `/v2/serverless/${id}`, { key: t.adminKey });
      expect(t.ctx.records!.endpointRows.peek(id)).toBeUndefined();
    } finally {
      t.ctx.records!.changeFeed(true);
    }
  });
});

/** Polls `read` until it answers `expected` (at most 2 s). */
async function expectSoon<T>(read: () => Promise<T>, expected: T): Promise<void> {
  const deadline = Date.now() + 2_000;
  let last: T = await read();
  while (last !== expected && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 10));
    last = await read();
  }
  expect(last).toBe(expected);
}
