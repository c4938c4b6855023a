import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Principal } from '../../domain/accounts/index.ts';
import { newId } from '../../domain/shared/index.ts';
import { openRegistryCredential } from '../../domain/registries/index.ts';
import { listTemplates, saveTemplate } from '../../domain/templates/index.ts';
import { podTemplateNode } from '../../api/graphql/shapes/template.ts';
import { call, startTestPlatform, type TestPlatform } from '../support/platform.ts';
import { problemOf, seedRestAccounts } from '../support/rest.ts';

/** REST /v2 registries, templates, network volumes, keys and accounts against the running platform. */
describe('REST management resources', () => {
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

  it('describes every operation of these resources in /v2/openapi.json', async () => {
    const doc = await call(p.url, 'GET', '/v2/openapi.json');
    expect(doc.status).toBe(200);
    type Operation = { operationId?: string; requestBody?: unknown; responses: Record<string, unknown> };
    const operations = new Map<string, Operation>();
    for (const methods of Object.values(doc.body.paths as Record<string, Record<string, Operation>>)) {
      for (const op of Object.values(methods)) if (op.operationId) operations.set(op.operationId, op);
    }
    const ours = [
      ...['createRegistry', 'listRegistries', 'getRegistry', 'deleteRegistry'],
      ...['createTemplate', 'listTemplates', 'getTemplate', 'updateTemplate', 'deleteTemplate'],
      ...[
        'createNetworkVolume',
        'listNetworkVolumes',
        'getNetworkVolume',
        'updateNetworkVolume',
        'deleteNetworkVolume',
      ],
      ...['listGpuTypes', 'getGpuType', 'listCpuTypes', 'getCpuType', 'listDataCenters', 'getDataCenter'],
      ...['listBilling', 'listServerlessBilling', 'listEndpointBilling'],
      ...['createApiKey', 'listApiKeys', 'revokeApiKey', 'createAccount', 'listAccounts'],
    ];
    expect(ours.filter((id) => !operations.has(id))).toEqual([]);
    expect(operations.get('createRegistry')!.requestBody).toBeDefined();
    expect(Object.keys(operations.get('getRegistry')!.responses)).toContain('200');
  });

  describe('registries', () => {
    it('stores a credential sealed, returns only id and name, and opens it for pulls', async () => {
      const password = 'correct-horse-battery-staple-31337';
      const created = await call(p.url, 'POST', '/v2/registries', {
        key: p.adminKey,
        body: { name: 'dockerhub', username: 'gantry-bot', password },
      });
      expect(created.status).toBe(201);
      expect(Object.keys(created.body).sort()).toEqual(['id', 'name', 'registry']);
      expect(created.body.name).toBe('dockerhub');
      // Bound when created: a name that is no registry host means Docker Hub.
      expect(created.body.registry).toBe('docker.io');

      const row = await p.ctx.db.registryCredential.findUniqueOrThrow({ where: { id: created.body.id } });
      const stored = Buffer.from(row.secret);
      expect(stored.includes(Buffer.from(password))).toBe(false);
      expect(stored.includes(Buffer.from('gantry-bot'))).toBe(false);
      expect(stored[0]).toBe(1); // the SecretBox format byte
      expect(await openRegistryCredential(p.ctx, adminAccountId, created.body.id)).toEqual({
        username: 'gantry-bot',
        password,
        registry: 'docker.io',
      });
      // One account's workers never pull with another's secret.
      await expect(openRegistryCredential(p.ctx, other.accountId, created.body.id)).rejects.toThrow(/not found/);

      const read = await call(p.url, 'GET', `/v2/registries/${created.body.id}`, { key: p.adminKey });
      expect(read.status).toBe(200);
      expect(read.body).toEqual({ id: created.body.id, name: 'dockerhub', registry: 'docker.io' });
      const list = await call(p.url, 'GET', '/v2/registries', { key: readOnlyKey });
      expect(list.status).toBe(200);
      expect(list.body).toEqual({ registries: [{ id: created.body.id, name: 'dockerhub', registry: 'docker.io' }] });
      for (const res of [created, read, list]) expect(JSON.stringify(res.body)).not.toContain(password);
    });

    it('keeps names unique per account (409) but not across accounts', async () => {
      const body = { name: 'ghcr', username: 'u', password: 'p' };
      expect((await call(p.url, 'POST', '/v2/registries', { key: p.adminKey, body })).status).toBe(201);
      const dup = await call(p.url, 'POST', '/v2/registries', { key: p.adminKey, body });
      problemOf(dup, 409);
      expect(dup.body.detail).toBe("a registry credential named 'ghcr' already exists");
      expect((await call(p.url, 'POST', '/v2/registries', { key: other.key, body })).status).toBe(201);
    });

    it('validates bodies, checks scopes and hides other accounts', async () => {
      const extra = await call(p.url, 'POST', '/v2/registries', {
        key: p.adminKey,
        body: { name: 'x', username: 'u', password: 'p', email: 'a@b.c' },
      });
      problemOf(extra, 422);
      expect(extra.body.errors).toEqual(["$: additional properties 'email' not allowed"]);
      const missing = await call(p.url, 'POST', '/v2/registries', {
        key: p.adminKey,
        body: { name: 'x', username: 'u' },
      });
      problemOf(missing, 422);
      expect(missing.body.errors).toEqual(["$: missing property 'password'"]);
      // Authentication and scope come before the body is looked at.
      problemOf(await call(p.url, 'POST', '/v2/registries', { body: { bogus: true } }), 401);
      problemOf(await call(p.url, 'POST', '/v2/registries', { key: readOnlyKey, body: { bogus: true } }), 403);

      const mine = await call(p.url, 'POST', '/v2/registries', {
        key: p.adminKey,
        body: { name: 'private-one', username: 'u', password: 'p' },
      });
      problemOf(await call(p.url, 'GET', `/v2/registries/${mine.body.id}`, { key: other.key }), 404);
      problemOf(await call(p.url, 'DELETE', `/v2/registries/${mine.body.id}`, { key: other.key }), 404);
      const theirs = await call(p.url, 'GET', '/v2/registries', { key: other.key });
      expect(theirs.body.registries.map((r: { name: string }) => r.name)).toEqual(['ghcr']);
    });

    it('refuses to delete a credential an endpoint pulls with, and templates lose the reference', async () => {
      const reg = await call(p.url, 'POST', '/v2/registries', {
        key: p.adminKey,
        body: { name: 'in-use', username: 'u', password: 'p' },
      });
      const endpointId = newId();
      await p.ctx.db.endpoint.create({
        data: {
          id: endpointId,
          accountId: adminAccountId,
          name: 'pulls-private',
          image: 'private/img:1',
          registryId: reg.body.id,
        },
      });
      const refused = await call(p.url, 'DELETE', `/v2/registries/${reg.body.id}`, { key: p.adminKey });
      problemOf(refused, 400);
      expect(refused.body.detail).toContain(endpointId);

      await p.ctx.db.endpoint.delete({ where: { id: endpointId } });
      const tpl = await call(p.url, 'POST', '/v2/templates', {
        key: p.adminKey,
        body: { name: 'uses-reg', image: 'private/img:1', registry: reg.body.id },
      });
      expect(tpl.body.registry).toBe(reg.body.id);
      problemOf(await call(p.url, 'DELETE', `/v2/registries/${reg.body.id}`, { key: readOnlyKey }), 403);
      const deleted = await call(p.url, 'DELETE', `/v2/registries/${reg.body.id}`, { key: p.adminKey });
      expect(deleted.status).toBe(204);
      expect(deleted.body).toBeUndefined();
      problemOf(await call(p.url, 'GET', `/v2/registries/${reg.body.id}`, { key: p.adminKey }), 404);
      expect((await call(p.url, 'GET', `/v2/templates/${tpl.body.id}`, { key: p.adminKey })).body.registry).toBeNull();
    });
  });

  describe('templates', () => {
    it('creates with defaults, reads, lists, patches and deletes', async () => {
      const created = await call(p.url, 'POST', '/v2/templates', {
        key: p.adminKey,
        body: { name: 'base', image: 'docker.io/library/python:3.12' },
      });
      expect(created.status).toBe(201);
      const t = created.body;
      expect(t).toMatchObject({
        name: 'base',
        image: 'docker.io/library/python:3.12',
        args: '',
        disk: 10,
        mounts: {},
        ports: [],
        env: {},
        registry: null,
        serverless: false,
        public: false,
        readme: '',
      });
      expect(t.id).toMatch(/^[a-z0-9]{14}$/);
      expect((await call(p.url, 'GET', `/v2/templates/${t.id}`, { key: readOnlyKey })).body).toEqual(t);

      const patched = await call(p.url, 'PATCH', `/v2/templates/${t.id}`, {
        key: p.adminKey,
        body: {
          env: { MODE: 'prod', HF_HOME: '/cache' },
          ports: ['8000/http', '22/tcp'],
          args: 'python serve.py',
          mounts: { persistent: { size: 20, path: '/data' } },
        },
      });
      expect(patched.status).toBe(200);
      expect(patched.body).toMatchObject({
        name: 'base',
        image: 'docker.io/library/python:3.12',
        args: 'python serve.py',
        env: { MODE: 'prod', HF_HOME: '/cache' },
        ports: ['8000/http', '22/tcp'],
        mounts: { persistent: { size: 20, path: '/data' } },
      });
      // Stored in the model's own fields (GraphQL reads the same row).
      const row = await p.ctx.db.template.findUniqueOrThrow({ where: { id: t.id } });
      expect(row).toMatchObject({
        imageName: 'docker.io/library/python:3.12',
        dockerArgs: 'python serve.py',
        ports: '8000/http,22/tcp',
        volumeInGb: 20,
        volumeMountPath: '/data',
        isServerless: false,
      });

      const unmounted = await call(p.url, 'PATCH', `/v2/templates/${t.id}`, {
        key: p.adminKey,
        body: { mounts: { persistent: null } },
      });
      expect(unmounted.body.mounts).toEqual({});
      expect(unmounted.body.env).toEqual({ MODE: 'prod', HF_HOME: '/cache' });

      const list = await call(p.url, 'GET', '/v2/templates', { key: p.adminKey });
      expect(list.body.templates.map((x: { id: string }) => x.id)).toContain(t.id);
      expect((await call(p.url, 'GET', '/v2/templates', { key: other.key })).body).toEqual({ templates: [] });

      expect((await call(p.url, 'DELETE', `/v2/templates/${t.id}`, { key: p.adminKey })).status).toBe(204);
      problemOf(await call(p.url, 'GET', `/v2/templates/${t.id}`, { key: p.adminKey }), 404);
    });

    it('enforces unique names, valid ports, serverless volumes, own registries and own templates', async () => {
      const a = await call(p.url, 'POST', '/v2/templates', {
        key: p.adminKey,
        body: { name: 'tpl-a', image: 'img:a', serverless: true },
      });
      const b = await call(p.url, 'POST', '/v2/templates', {
        key: p.adminKey,
        body: { name: 'tpl-b', image: 'img:b' },
      });
      expect([a.status, b.status]).toEqual([201, 201]);
      problemOf(
        await call(p.url, 'POST', '/v2/templates', { key: p.adminKey, body: { name: 'tpl-a', image: 'img:x' } }),
        409,
      );
      const rename = await call(p.url, 'PATCH', `/v2/templates/${b.body.id}`, {
        key: p.adminKey,
        body: { name: 'tpl-a' },
      });
      problemOf(rename, 409);

      const ports = await call(p.url, 'POST', '/v2/templates', {
        key: p.adminKey,
        body: { name: 'bad-ports', image: 'i', ports: ['70000/http', '80/ftp'] },
      });
      problemOf(ports, 422);
      expect(ports.body.errors).toEqual(expect.arrayContaining([expect.stringMatching(/^\$\.ports\[1\]: /)]));
      const bigPort = await call(p.url, 'POST', '/v2/templates', {
        key: p.adminKey,
        body: { name: 'big-port', image: 'i', ports: ['70000/http'] },
      });
      expect(bigPort.body.errors).toEqual([
        "$.ports: '70000/http' is not port/protocol with a port 1-65535 and protocol http, tcp or udp",
      ]);

      const volume = await call(p.url, 'PATCH', `/v2/templates/${a.body.id}`, {
        key: p.adminKey,
        body: { mounts: { persistent: { size: 5, path: '/data' } } },
      });
      problemOf(volume, 422);
      expect(volume.body.errors[0]).toMatch(
        /^\$\.mounts\.persistent: serverless templates cannot have a persistent volume/,
      );

      const theirRegistry = (await call(p.url, 'GET', '/v2/registries', { key: other.key })).body.registries[0].id;
      const foreign = await call(p.url, 'PATCH', `/v2/templates/${b.body.id}`, {
        key: p.adminKey,
        body: { registry: theirRegistry },
      });
      problemOf(foreign, 422);
      expect(foreign.body.errors).toEqual([`$.registry: no registry credential '${theirRegistry}'`]);

      const unknown = await call(p.url, 'PATCH', `/v2/templates/${b.body.id}`, {
        key: p.adminKey,
        body: { imageName: 'x' },
      });
      problemOf(unknown, 422);
      expect(unknown.body.errors).toEqual(["$: additional properties 'imageName' not allowed"]);

      const quote = await call(p.url, 'PATCH', `/v2/templates/${b.body.id}`, {
        key: p.adminKey,
        body: { args: "sh -c 'echo" },
      });
      problemOf(quote, 422);
      expect(quote.body.errors).toEqual(["$.args: unterminated ' quote in args"]);

      problemOf(
        await call(p.url, 'PATCH', `/v2/templates/${b.body.id}`, { key: other.key, body: { name: 'stolen' } }),
        404,
      );
      problemOf(await call(p.url, 'DELETE', `/v2/templates/${b.body.id}`, { key: other.key }), 404);
      problemOf(
        await call(p.url, 'PATCH', `/v2/templates/${b.body.id}`, { key: readOnlyKey, body: { name: 'ro' } }),
        403,
      );
      // Nothing of the refused changes stuck.
      expect(await p.ctx.db.template.findUniqueOrThrow({ where: { id: b.body.id } })).toMatchObject({
        name: 'tpl-b',
        registryId: null,
      });
    });

    it('refuses to delete a template an endpoint was made from', async () => {
      const t = await call(p.url, 'POST', '/v2/templates', {
        key: p.adminKey,
        body: { name: 'bound', image: 'img:bound', serverless: true },
      });
      const endpointId = newId();
      await p.ctx.db.endpoint.create({
        data: {
          id: endpointId,
          accountId: adminAccountId,
          name: 'from-template',
          image: 'img:bound',
          templateId: t.body.id,
        },
      });
      const refused = await call(p.url, 'DELETE', `/v2/templates/${t.body.id}`, { key: p.adminKey });
      problemOf(refused, 400);
      expect(refused.body.detail).toBe(`template is in use by endpoint ${endpointId}`);
      await p.ctx.db.endpoint.update({ where: { id: endpointId }, data: { deletingAt: new Date() } });
      expect((await call(p.url, 'DELETE', `/v2/templates/${t.body.id}`, { key: p.adminKey })).status).toBe(204);
    });

    it('serves the GraphQL shape through saveTemplate with and without id', async () => {
      const principal: Principal = {
        accountId: other.accountId,
        keyId: 'k',
        scopes: new Set(['READ', 'WRITE']),
        endpointIds: [],
        isAdmin: false,
      };
      const created = podTemplateNode(
        await saveTemplate(p.ctx, principal, {
          name: 'gql-worker',
          imageName: 'runpod/worker:1',
          containerDiskInGb: 15,
          volumeInGb: 0,
          env: [
            { key: 'A', value: '1' },
            { key: 'B', value: '2' },
          ],
          ports: '8000/http',
          isServerless: true,
          readme: '# hi',
        }),
      );
      expect(created).toMatchObject({
        name: 'gql-worker',
        imageName: 'runpod/worker:1',
        containerDiskInGb: 15,
        env: [
          { key: 'A', value: '1' },
          { key: 'B', value: '2' },
        ],
        ports: '8000/http',
        isServerless: true,
        containerRegistryAuthId: null,
      });
      const updated = podTemplateNode(
        await saveTemplate(p.ctx, principal, {
          id: created.id,
          name: 'gql-worker',
          imageName: 'runpod/worker:2',
          env: [{ key: 'A', value: '3' }],
        }),
      );
      expect(updated).toMatchObject({
        id: created.id,
        imageName: 'runpod/worker:2',
        containerDiskInGb: 15,
        env: [{ key: 'A', value: '3' }],
        readme: '# hi',
      });
      expect((await listTemplates(p.ctx, principal)).map((r) => r.id)).toEqual([created.id]);
      // The REST view of the same template.
      expect((await call(p.url, 'GET', `/v2/templates/${created.id}`, { key: other.key })).body).toMatchObject({
        image: 'runpod/worker:2',
        env: { A: '3' },
        serverless: true,
      });
      await expect(
        saveTemplate(p.ctx, principal, {
          name: 'dup-env',
          imageName: 'i',
          env: [
            { key: 'A', value: '1' },
            { key: 'A', value: '2' },
          ],
        }),
      ).rejects.toMatchObject({
        kind: 'validation',
        errors: ["$.env: key 'A' is given twice"],
      });
      await expect(
        saveTemplate(p.ctx, principal, { name: 'vol', imageName: 'i', isServerless: true, volumeInGb: 5 }),
      ).rejects.toMatchObject({ kind: 'validation' });
      // Another account's template id is not found, not changed.
      const admins = await call(p.url, 'POST', '/v2/templates', {
        key: p.adminKey,
        body: { name: 'admins', image: 'i' },
      });
      await expect(
        saveTemplate(p.ctx, principal, { id: admins.body.id, name: 'x', imageName: 'y' }),
      ).rejects.toMatchObject({ kind: 'not_found' });
    });
  });
});
