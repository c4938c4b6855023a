import { Ajv } from 'ajv';
import addFormats from 'ajv-formats';
import { generateSync, type JsonSchema } from 'json-schema-faker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issueApiKey, type Scope } from '../../domain/accounts/index.ts';
import { newId } from '../../domain/shared/index.ts';
import { startTestApp, type TestApp } from '../support/app.ts';

/**
 * Walks EVERY operation of the served OpenAPI document (so routes added later are covered without
 * touching this file) with: no key, malformed keys, an unknown key (401); keys of the owning
 * account without the needed scope (403); a key of another account on the owner's ids (404).
 * Through `app.inject`: authorization needs no network, no Temporal worker and no workflow.
 */

type Doc = { paths: Record<string, Record<string, Operation>>; components?: { schemas?: Record<string, JsonSchema> } };
type Operation = {
  operationId?: string;
  'x-required-scope'?: Scope | Scope[];
  requestBody?: { content?: Record<string, { schema?: JsonSchema }> };
};

const METHODS = ['get', 'post', 'put', 'patch', 'delete'];
const ajv = addFormats.default(new Ajv({ strict: false, allErrors: false }));
const ALL: Scope[] = ['READ', 'WRITE', 'RUN', 'ADMIN'];

/** The scopes an operation takes (any one of them): declared in the document, else reads need READ and changes WRITE. */
const neededScopes = (method: string, op: Operation): Scope[] =>
  [op['x-required-scope'] ?? (method === 'get' ? 'READ' : 'WRITE')].flat();

/** Inlines `#/components/schemas/...` references so the generator sees plain schemas. */
function deref(schema: unknown, doc: Doc, depth = 0): unknown {
  if (Array.isArray(schema)) return schema.map((s) => deref(s, doc, depth));
  if (!schema || typeof schema !== 'object') return schema;
  const ref = (schema as { $ref?: string }).$ref;
  if (ref?.startsWith('#/components/schemas/') && depth < 8)
    return deref(doc.components?.schemas?.[ref.slice('#/components/schemas/'.length)], doc, depth + 1);
  return Object.fromEntries(Object.entries(schema).map(([k, v]) => [k, deref(v, doc, depth)]));
}

// Each test walks every operation (hundreds of requests): minutes on a loaded two-core machine, not seconds.
describe('authorization matrix over every /v2 operation in the OpenAPI document', { timeout: 240_000 }, () => {
  let p: TestApp;
  let doc: Doc;
  const keys: Record<string, string> = {};
  /** Ids of account A's resources, by the first path segment after /v2. */
  const ownedIds: Record<string, string> = {};
  /** Installation-wide resources (no owning account; hosts, data centers and accounts are admin-only): no cross-account check. */
  const shared = new Set(['catalog', 'hosts', 'datacenters', 'accounts', 'public-endpoints']);

  beforeAll(async () => {
    // Hundreds of deliberately bad keys from one address: the failed-authentication throttle
    // (tested in test/security) would answer 429 long before the matrix is through.
    p = await startTestApp({ limits: { authFailuresPerMinute: 1_000_000 } });
    const db = p.ctx.db;
    const account = async (name: string) =>
      db.account.create({
        data: {
          id: newId(),
          email: `${name}-${newId()}@example.test`,
          name,
          rateLimitPerMinute: 100_000,
          rateLimitPerHour: 1_000_000,
          rateLimitPerDay: 10_000_000,
        },
      });
    const a = await account('a');
    const b = await account('b');
    keys.a = (await issueApiKey(db, a.id, 'a-all', ['READ', 'WRITE', 'RUN'])).key;
    keys.none = (await issueApiKey(db, a.id, 'a-none', [])).key;
    // A key of account A with every scope but those an operation takes (and ADMIN, which holds them all).
    for (const scopes of [...ALL.map((s) => [s]), ['READ', 'RUN'] as Scope[], ['READ', 'WRITE', 'RUN'] as Scope[]]) {
      keys[`without-${scopes.join(',')}`] = (
        await issueApiKey(
          db,
          a.id,
          `a-no-${scopes.join('-')}`,
          ALL.filter((s) => !scopes.includes(s) && s !== 'ADMIN'),
        )
      ).key;
    }
    keys.b = (await issueApiKey(db, b.id, 'b-all', ['READ', 'WRITE', 'RUN'])).key;

    ownedIds.serverless = (
      await db.endpoint.create({
        data: { id: newId(), accountId: a.id, name: 'a-endpoint', image: 'img:1', workersMax: 0 },
      })
    ).id;
    ownedIds.registries = (
      await db.registryCredential.create({
        data: { id: newId(), accountId: a.id, name: 'a-reg', secret: Buffer.from([1]) },
      })
    ).id;
    ownedIds.templates = (
      await db.template.create({ data: { id: newId(), accountId: a.id, name: 'a-tpl', imageName: 'img:1' } })
    ).id;
    ownedIds['network-volumes'] = (
      await db.networkVolume.create({
        data: { id: newId(), accountId: a.id, name: 'a-vol', size: 10, dataCenterId: 'dc-1' },
      })
    ).id;
    // The hosted service's shape of the same volumes (api/routes/network-volumes-hosted.ts).
    ownedIds.networkvolumes = ownedIds['network-volumes'];
    ownedIds.keys = (await issueApiKey(db, a.id, 'a-spare', ['READ'])).id;
    ownedIds.pods = (
      await db.pod.create({
        data: { id: newId(), accountId: a.id, name: 'a-pod', imageName: 'img:1', desiredStatus: 'EXITED' },
      })
    ).id;
    ownedIds.apps = (
      await db.app.create({
        data: {
          id: newId(),
          accountId: a.id,
          name: 'a-app',
          environments: { create: { id: newId(), name: 'production' } },
        },
      })
    ).id;

    const served = await p.call('GET', '/v2/openapi.json');
    expect(served.status).toBe(200);
    doc = served.body;
  });
  afterAll(async () => {
    await p?.stop();
  });

  function operations(): Array<{ method: string; path: string; op: Operation }> {
    const out = [];
    for (const [path, item] of Object.entries(doc.paths)) {
      for (const method of METHODS) if (item[method]) out.push({ method, path, op: item[method]! });
    }
    return out;
  }

  /** A concrete URL: `{id}`-like parameters of owned groups get account A's id, others a made-up one. */
  function url(path: string): { url: string; group: string; hasParams: boolean } {
    const group = path.split('/')[2] ?? '';
    let first = true;
    const concrete = path.replace(/\{[^}]+\}/g, () => {
      const id = first ? ownedIds[group] : undefined;
      first = false;
      return encodeURIComponent(id ?? 'zzzzzzzzzzzzzz');
    });
    return { url: concrete, group, hasParams: path.includes('{') };
  }

  /**
   * A body that passes the operation's schema, so that only authorization decides the answer. The
   * generator does not always honour every keyword inside unions (the app manifest's compute), so a
   * few seeds are tried until one validates.
   */
  const bodies = new Map<Operation, unknown>();
  function body(op: Operation): unknown {
    if (!bodies.has(op)) bodies.set(op, validBody(op));
    return bodies.get(op);
  }

  function validBody(op: Operation): unknown {
    const schema = op.requestBody?.content?.['application/json']?.schema;
    if (!schema) return undefined;
    const plain = deref(schema, doc) as JsonSchema;
    const valid = ajv.compile(plain as object);
    let last: unknown;
    for (let seed = 7; seed < 40; seed++) {
      try {
        last = generateSync(plain, { seed, optionalsProbability: 0 });
      } catch {
        // Schemas such as `minProperties: 1` need optional properties.
        last = generateSync(plain, { seed, alwaysFakeOptionals: true });
      }
      if (valid(last)) return last;
    }
    return last;
  }

  async function expectProblem(
    method: string,
    path: string,
    status: number,
    opts: { key?: string; headers?: Record<string, string>; body?: unknown },
    why: string,
  ): Promise<void> {
    const r = await p.call(method.toUpperCase(), path, opts);
    expect(r.status, `${method.toUpperCase()} ${path}: ${why} → ${JSON.stringify(r.body)}`).toBe(status);
    expect(r.headers.get('content-type'), `${method} ${path}: ${why}`).toMatch(/^application\/problem\+json/);
    expect(r.body).toMatchObject({ status, title: expect.any(String), detail: expect.any(String) });
  }

  it('finds the serverless operations and more in the document', () => {
    const ids = operations().map((o) => o.op.operationId);
    expect(ids).toEqual(
      expect.arrayContaining([
        'createEndpoint',
        'listEndpoints',
        'getEndpoint',
        'updateEndpoint',
        'deleteEndpoint',
        'listEndpointWorkers',
        'listEndpointReleases',
      ]),
    );
    for (const { path } of operations()) expect(path).toMatch(/^\/v2\/[a-z]/);
  });

  it('answers 401 without a key, with malformed keys and with an unknown key, everywhere', async () => {
    for (const { method, path, op } of operations()) {
      const { url: u } = url(path);
      const b = body(op);
      await expectProblem(method, u, 401, { body: b }, 'no key');
      await expectProblem(
        method,
        u,
        401,
        { headers: { authorization: 'Bearer not a key!' }, body: b },
        'malformed key',
      );
      await expectProblem(
        method,
        u,
        401,
        { headers: { authorization: `Basic ${Buffer.from('a:b').toString('base64')}` }, body: b },
        'wrong scheme',
      );
      await expectProblem(method, u, 401, { key: 'short', body: b }, 'malformed key (too short)');
      await expectProblem(method, u, 401, { key: `gntr_${'x'.repeat(40)}`, body: b }, 'unknown key');
    }
  });

  it('answers 403 to keys of the owning account that lack the needed scope', async () => {
    for (const { method, path, op } of operations()) {
      const { url: u } = url(path);
      const b = body(op);
      await expectProblem(method, u, 403, { key: keys.none, body: b }, 'key without any scope');
      const without = neededScopes(method, op).join(',');
      expect(keys[`without-${without}`], `no key without ${without}: add it to this test`).toBeDefined();
      await expectProblem(method, u, 403, { key: keys[`without-${without}`], body: b }, `key without ${without}`);
    }
    // Nothing was changed by the refused calls.
    expect((await p.call('GET', `/v2/serverless/${ownedIds.serverless}`, { key: keys.a })).status).toBe(200);
  });

  it("answers 404 to another account's key on the owner's resource ids", async () => {
    let checked = 0;
    for (const { method, path, op } of operations()) {
      const { url: u, group, hasParams } = url(path);
      if (!hasParams || shared.has(group)) continue;
      expect(ownedIds[group], `no fixture of account A for ${path}: add its resource to this test`).toBeDefined();
      await expectProblem(method, u, 404, { key: keys.b, body: body(op) }, "another account's resource");
      checked++;
    }
    expect(checked).toBeGreaterThanOrEqual(5);
    // The owner still has every resource.
    expect((await p.call('GET', `/v2/serverless/${ownedIds.serverless}`, { key: keys.a })).status).toBe(200);
  });
});
