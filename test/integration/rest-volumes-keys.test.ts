import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issueApiKey } from '../../domain/accounts/index.ts';
import { newId } from '../../domain/shared/index.ts';
import { call, startTestPlatform, type TestPlatform } from '../support/platform.ts';
import { problemOf, seedRestAccounts } from '../support/rest.ts';

/** REST /v2 network volumes, API keys and accounts against the running platform. */
describe('REST network volumes, keys and accounts', () => {
  let p: TestPlatform;
  let adminAccountId: string;
  /** A second, ordinary account made through the API, with a READ+WRITE key. */
  let other: { accountId: string; key: string };
  let readOnlyKey: string;

  beforeAll(async () => {
    p = await startTestPlatform();
    ({ adminAccountId, other, readOnlyKey } = await seedRestAccounts(p));
  });
  afterAll(async () => {
    await p?.stop();
  });

  describe('network volumes', () => {
    it('creates in a known data center, grows, renames, refuses to shrink, and deletes', async () => {
      const created = await call(p.url, 'POST', '/v2/network-volumes', {
        key: p.adminKey,
        body: { name: 'models', size: 50, dataCenter: 'EU-RO-1' },
      });
      expect(created.status).toBe(201);
      expect(created.body).toMatchObject({ name: 'models', size: 50, dataCenter: 'EU-RO-1', type: 'STANDARD' });
      const v = created.body;
      expect((await call(p.url, 'GET', `/v2/network-volumes/${v.id}`, { key: readOnlyKey })).body).toEqual(v);
      expect((await call(p.url, 'GET', '/v2/network-volumes', { key: p.adminKey })).body).toEqual({
        networkVolumes: [v],
      });

      const grown = await call(p.url, 'PATCH', `/v2/network-volumes/${v.id}`, {
        key: p.adminKey,
        body: { size: 80, name: 'models-2' },
      });
      expect(grown.status).toBe(200);
      expect(grown.body).toMatchObject({ id: v.id, size: 80, name: 'models-2' });
      const shrink = await call(p.url, 'PATCH', `/v2/network-volumes/${v.id}`, { key: p.adminKey, body: { size: 10 } });
      problemOf(shrink, 400);
      expect(shrink.body.detail).toBe('size cannot shrink: the volume has 80 GB, asked for 10 GB');
      const empty = await call(p.url, 'PATCH', `/v2/network-volumes/${v.id}`, { key: p.adminKey, body: {} });
      problemOf(empty, 422);

      problemOf(await call(p.url, 'GET', `/v2/network-volumes/${v.id}`, { key: other.key }), 404);
      problemOf(
        await call(p.url, 'PATCH', `/v2/network-volumes/${v.id}`, { key: other.key, body: { size: 100 } }),
        404,
      );

      const endpointId = newId();
      await p.ctx.db.endpoint.create({
        data: {
          id: endpointId,
          accountId: adminAccountId,
          name: 'mounts-volume',
          image: 'i',
          networkVolumeIds: [v.id],
        },
      });
      const inUse = await call(p.url, 'DELETE', `/v2/network-volumes/${v.id}`, { key: p.adminKey });
      problemOf(inUse, 400);
      expect(inUse.body.detail).toBe(`network volume is in use by endpoint ${endpointId}`);
      await p.ctx.db.endpoint.delete({ where: { id: endpointId } });
      expect((await call(p.url, 'DELETE', `/v2/network-volumes/${v.id}`, { key: p.adminKey })).status).toBe(204);
      // Gone for its owner at once; the row stays until a host of its data center has removed its data.
      problemOf(await call(p.url, 'GET', `/v2/network-volumes/${v.id}`, { key: p.adminKey }), 404);
      expect(await p.ctx.db.networkVolume.findUnique({ where: { id: v.id } })).toMatchObject({
        deletedAt: expect.any(Date),
        name: `${v.id}~deleted`,
      });
    });

    it('rejects unknown data centers, bad sizes, unknown properties and duplicate names', async () => {
      const unknownDc = await call(p.url, 'POST', '/v2/network-volumes', {
        key: p.adminKey,
        body: { name: 'v', size: 10, dataCenter: 'MARS-1' },
      });
      problemOf(unknownDc, 422);
      expect(unknownDc.body.errors).toEqual(["$.dataCenter: unknown data center 'MARS-1'; known: EU-RO-1"]);
      const zero = await call(p.url, 'POST', '/v2/network-volumes', {
        key: p.adminKey,
        body: { name: 'v', size: 0, dataCenter: 'EU-RO-1', tier: 'fast' },
      });
      problemOf(zero, 422);
      expect(zero.body.errors).toEqual(
        expect.arrayContaining([expect.stringMatching(/^\$\.size: /), "$: additional properties 'tier' not allowed"]),
      );
      const hps = await call(p.url, 'POST', '/v2/network-volumes', {
        key: p.adminKey,
        body: { name: 'v', size: 10, dataCenter: 'EU-RO-1', type: 'HIGH_PERFORMANCE' },
      });
      problemOf(hps, 422);

      expect(
        (
          await call(p.url, 'POST', '/v2/network-volumes', {
            key: p.adminKey,
            body: { name: 'scratch', size: 1, dataCenter: 'EU-RO-1' },
          })
        ).status,
      ).toBe(201);
      problemOf(
        await call(p.url, 'POST', '/v2/network-volumes', {
          key: p.adminKey,
          body: { name: 'scratch', size: 2, dataCenter: 'EU-RO-1' },
        }),
        409,
      );
      expect(
        (
          await call(p.url, 'POST', '/v2/network-volumes', {
            key: other.key,
            body: { name: 'scratch', size: 2, dataCenter: 'EU-RO-1' },
          })
        ).status,
      ).toBe(201);
      problemOf(
        await call(p.url, 'POST', '/v2/network-volumes', {
          key: readOnlyKey,
          body: { name: 'ro', size: 2, dataCenter: 'EU-RO-1' },
        }),
        403,
      );
    });
  });

  describe('API keys and accounts', () => {
    it('shows a new key once, lists keys without secrets, and revokes them', async () => {
      const created = await call(p.url, 'POST', '/v2/keys', {
        key: other.key,
        body: { name: 'ci reader', scopes: ['READ'] },
      });
      expect(created.status).toBe(201);
      expect(created.body.key).toMatch(/^gntr_[A-Za-z0-9]{40}$/);
      expect(created.body).toMatchObject({
        name: 'ci reader',
        scopes: ['READ'],
        accountId: other.accountId,
        endpointIds: [],
        expiresAt: null,
        revokedAt: null,
        prefix: created.body.key.slice(0, 10),
      });
      // The new key works, with its own scopes.
      expect((await call(p.url, 'GET', '/v2/templates', { key: created.body.key })).status).toBe(200);
      problemOf(
        await call(p.url, 'POST', '/v2/templates', { key: created.body.key, body: { name: 'n', image: 'i' } }),
        403,
      );

      const list = await call(p.url, 'GET', '/v2/keys', { key: other.key });
      expect(list.status).toBe(200);
      const listed = list.body.keys.find((k: { id: string }) => k.id === created.body.id);
      expect(listed).toEqual({ ...created.body, key: undefined, lastUsedAt: null });
      expect(JSON.stringify(list.body)).not.toContain(created.body.key);
      expect(JSON.stringify(list.body)).not.toMatch(/"hash"/);
      const row = await p.ctx.db.apiKey.findUniqueOrThrow({ where: { id: created.body.id } });
      expect(row.hash).not.toContain(created.body.key);

      expect((await call(p.url, 'DELETE', `/v2/keys/${created.body.id}`, { key: other.key })).status).toBe(204);
      problemOf(await call(p.url, 'GET', '/v2/templates', { key: created.body.key }), 401);
      expect((await call(p.url, 'DELETE', `/v2/keys/${created.body.id}`, { key: other.key })).status).toBe(204);
      const after = await call(p.url, 'GET', '/v2/keys', { key: other.key });
      expect(
        Date.parse(after.body.keys.find((k: { id: string }) => k.id === created.body.id).revokedAt),
      ).toBeGreaterThan(Date.now() - 60_000);
    });

    it('never lets a key make or revoke a stronger key, nor reach another account', async () => {
      const admin = await call(p.url, 'POST', '/v2/keys', {
        key: other.key,
        body: { name: 'escalate', scopes: ['READ', 'ADMIN'] },
      });
      problemOf(admin, 403);
      expect(admin.body.detail).toBe('a key cannot grant scopes it does not have: ADMIN');
      problemOf(
        await call(p.url, 'POST', '/v2/keys', {
          key: other.key,
          body: { name: 'x', scopes: ['READ'], accountId: adminAccountId },
        }),
        403,
      );
      problemOf(
        await call(p.url, 'POST', '/v2/keys', { key: readOnlyKey, body: { name: 'x', scopes: ['READ'] } }),
        403,
      );

      const runner = await call(p.url, 'POST', '/v2/keys', {
        key: p.adminKey,
        body: { name: 'runner', scopes: ['RUN', 'READ'], accountId: other.accountId },
      });
      expect(runner.status).toBe(201);
      const denied = await call(p.url, 'DELETE', `/v2/keys/${runner.body.id}`, { key: other.key });
      problemOf(denied, 403);
      expect(denied.body.detail).toBe('revoking this key needs the scopes it has: RUN');
      // Another account's key is not found for an ordinary key; the platform admin reaches it.
      const adminsOwn = await issueApiKey(p.ctx.db, adminAccountId, 'admin read', ['READ']);
      problemOf(await call(p.url, 'DELETE', `/v2/keys/${adminsOwn.id}`, { key: other.key }), 404);
      expect((await call(p.url, 'DELETE', `/v2/keys/${runner.body.id}`, { key: p.adminKey })).status).toBe(204);
      problemOf(await call(p.url, 'GET', `/v2/keys?accountId=${adminAccountId}`, { key: other.key }), 403);
      const adminView = await call(p.url, 'GET', `/v2/keys?accountId=${other.accountId}`, { key: p.adminKey });
      expect(adminView.body.keys.map((k: { name: string }) => k.name)).toEqual(
        expect.arrayContaining(['other rw', 'runner']),
      );
    });

    it('checks expiry, endpoint ids and endpoint-limited keys', async () => {
      const past = await call(p.url, 'POST', '/v2/keys', {
        key: other.key,
        body: { name: 'old', scopes: ['READ'], expiresAt: '2020-01-01T00:00:00Z' },
      });
      problemOf(past, 422);
      expect(past.body.errors).toEqual(['$.expiresAt: must be in the future']);
      const ghost = await call(p.url, 'POST', '/v2/keys', {
        key: other.key,
        body: { name: 'ghost', scopes: ['READ'], endpointIds: ['nosuchendpoint'] },
      });
      expect(ghost.body.errors).toEqual(["$.endpointIds: no endpoint 'nosuchendpoint'"]);

      const endpointId = newId();
      await p.ctx.db.endpoint.create({
        data: { id: endpointId, accountId: other.accountId, name: 'limited', image: 'i' },
      });
      const limited = await call(p.url, 'POST', '/v2/keys', {
        key: other.key,
        body: {
          name: 'limited',
          scopes: ['READ', 'WRITE'],
          endpointIds: [endpointId],
          expiresAt: new Date(Date.now() + 86_400_000).toISOString(),
        },
      });
      expect(limited.status).toBe(201);
      expect(limited.body.endpointIds).toEqual([endpointId]);
      // Account-wide resources are out of reach of a key limited to endpoints; the catalog is not.
      problemOf(await call(p.url, 'GET', '/v2/registries', { key: limited.body.key }), 403);
      problemOf(await call(p.url, 'GET', '/v2/keys', { key: limited.body.key }), 403);
      expect((await call(p.url, 'GET', '/v2/catalog/gpus', { key: limited.body.key })).status).toBe(200);
    });

    it('lets only the platform admin create and list accounts', async () => {
      const created = await call(p.url, 'POST', '/v2/accounts', {
        key: p.adminKey,
        body: {
          email: 'team@example.test',
          name: 'Team',
          serverlessDiscount: { discountFactor: 0.85, type: 'COMMITMENT', expirationDate: '2030-01-01T00:00:00Z' },
        },
      });
      expect(created.status).toBe(201);
      expect(created.body).toMatchObject({
        email: 'team@example.test',
        name: 'Team',
        isAdmin: false,
        serverlessDiscount: { discountFactor: 0.85, type: 'COMMITMENT', expirationDate: '2030-01-01T00:00:00.000Z' },
      });
      problemOf(
        await call(p.url, 'POST', '/v2/accounts', {
          key: p.adminKey,
          body: { email: 'team@example.test', name: 'Again' },
        }),
        409,
      );
      const bad = await call(p.url, 'POST', '/v2/accounts', {
        key: p.adminKey,
        body: { email: 'not-an-email', name: 'x', plan: 'pro' },
      });
      problemOf(bad, 422);
      expect(bad.body.errors).toEqual(
        expect.arrayContaining(["$: additional properties 'plan' not allowed", expect.stringMatching(/^\$\.email: /)]),
      );
      problemOf(
        await call(p.url, 'POST', '/v2/accounts', { key: other.key, body: { email: 'x@example.test', name: 'x' } }),
        403,
      );
      // An ADMIN key of an ordinary account is not the platform admin.
      const ordinaryAdmin = await issueApiKey(p.ctx.db, other.accountId, 'own admin', ['ADMIN']);
      problemOf(
        await call(p.url, 'POST', '/v2/accounts', {
          key: ordinaryAdmin.key,
          body: { email: 'y@example.test', name: 'y' },
        }),
        403,
      );
      const accounts = await call(p.url, 'GET', '/v2/accounts', { key: p.adminKey });
      expect(accounts.body.accounts.map((a: { email: string }) => a.email)).toEqual(
        expect.arrayContaining(['other@example.test', 'team@example.test']),
      );
    });
  });
});
