/**
 * Finding 6: a key limited to some endpoints (`endpointIds`) creates nothing account-wide: no
 * endpoint, template, registry credential, network volume, pod, API key or account, over REST or
 * GraphQL; what it may do to its own endpoint it still does.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issueApiKey } from '../../domain/accounts/index.ts';
import { newId } from '../../domain/shared/index.ts';
import { call, startTestPlatform, type TestPlatform } from '../support/platform.ts';

describe('keys limited to endpoints', () => {
  let p: TestPlatform;
  let accountId: string;
  let own: string;
  let limitedKey: string;
  let limitedAdminKey: string;
  let templateId: string;

  beforeAll(async () => {
    p = await startTestPlatform();
    accountId = (await p.ctx.db.account.findFirstOrThrow({ where: { isAdmin: true } })).id;
    own = (await call(p.url, 'POST', '/v2/serverless', { key: p.adminKey, body: { name: 'own', image: 'img:1' } })).body
      .id;
    templateId = (
      await p.ctx.db.template.create({ data: { id: newId(), accountId, name: 'account-template', imageName: 'img:1' } })
    ).id;
    limitedKey = (await issueApiKey(p.ctx.db, accountId, 'limited', ['READ', 'WRITE', 'RUN'], undefined, [own])).key;
    // Even a key of the admin account with every scope is limited once it names endpoints.
    limitedAdminKey = (
      await issueApiKey(p.ctx.db, accountId, 'limited admin', ['READ', 'WRITE', 'RUN', 'ADMIN'], undefined, [own])
    ).key;
  });
  afterAll(async () => {
    await p?.stop();
  });

  async function counts() {
    const db = p.ctx.db;
    const [endpoints, templates, registries, volumes, pods, keys, accounts, hosts] = await Promise.all([
      db.endpoint.count(),
      db.template.count(),
      db.registryCredential.count(),
      db.networkVolume.count(),
      db.pod.count(),
      db.apiKey.count(),
      db.account.count(),
      db.host.count(),
    ]);
    return { endpoints, templates, registries, volumes, pods, keys, accounts, hosts };
  }

  it('every REST create answers 403 problem+json and makes nothing', async () => {
    const before = await counts();
    const creates: Array<[string, unknown]> = [
      ['/v2/serverless', { name: 'by-limited', image: 'img:1' }],
      ['/v2/templates', { name: 'by-limited', image: 'img:1' }],
      ['/v2/registries', { name: 'by-limited', username: 'u', password: 'p', registry: 'ghcr.io' }],
      ['/v2/network-volumes', { name: 'by-limited', size: 10, dataCenter: 'dc-1' }],
      ['/v2/keys', { name: 'by-limited', scopes: ['READ'] }],
      ['/v2/accounts', { email: 'limited@example.com', name: 'by-limited' }],
      ['/v2/hosts', { name: 'by-limited', address: '127.0.0.1', privateKey: 'not-a-key', dataCenterId: 'dc-1' }],
    ];
    for (const key of [limitedKey, limitedAdminKey]) {
      for (const [route, body] of creates) {
        const r = await call(p.url, 'POST', route, { key, body });
        expect(r.status, `${route} ${key === limitedKey ? 'limited' : 'limited admin'}`).toBe(403);
        expect(r.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      }
    }
    expect(await counts()).toEqual(before);
  });

  it('every GraphQL create answers FORBIDDEN and makes nothing', async () => {
    const before = await counts();
    const mutations = [
      `mutation { saveEndpoint(input: {name: "by-limited", templateId: "${templateId}", gpuIds: "AMPERE_24"}) { id } }`,
      'mutation { saveTemplate(input: {name: "by-limited", imageName: "img:1"}) { id } }',
      'mutation { saveRegistryAuth(input: {name: "by-limited", username: "u", password: "p"}) { id } }',
      'mutation { podFindAndDeployOnDemand(input: {name: "by-limited", imageName: "img:1", gpuCount: 0}) { id } }',
    ];
    for (const key of [limitedKey, limitedAdminKey]) {
      for (const query of mutations) {
        const r = await call(p.url, 'POST', '/graphql', { key, body: { query } });
        expect(r.body.errors?.[0]?.extensions?.code, query).toBe('FORBIDDEN');
      }
    }
    expect(await counts()).toEqual(before);
  });

  it('the same key still changes its own endpoint, and a key for the whole account still creates', async () => {
    expect(
      (await call(p.url, 'PATCH', `/v2/serverless/${own}`, { key: limitedKey, body: { workers: { min: 0, max: 2 } } }))
        .status,
    ).toBe(200);
    const whole = (await issueApiKey(p.ctx.db, accountId, 'whole', ['READ', 'WRITE'])).key;
    expect(
      (await call(p.url, 'POST', '/v2/templates', { key: whole, body: { name: 'by-whole', image: 'img:1' } })).status,
    ).toBe(201);
  });
});
