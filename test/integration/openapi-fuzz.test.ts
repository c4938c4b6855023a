import { Ajv, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import { generateSync, type JsonSchema } from 'json-schema-faker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issueApiKey } from '../../domain/accounts/index.ts';
import { newId } from '../../domain/shared/index.ts';
import { call, startTestPlatform, type TestPlatform } from '../support/platform.ts';

/**
 * Requests generated from the served OpenAPI document, valid and invalid, against every operation:
 * never a 5xx; every error is problem+json with the status it is sent with; every success matches
 * the response schema the document gives for it.
 */

type Schema = Record<string, unknown>;
type Parameter = { name: string; in: string; required?: boolean; schema?: Schema };
type Operation = {
  operationId?: string;
  parameters?: Parameter[];
  requestBody?: { content?: Record<string, { schema?: Schema }> };
  responses?: Record<string, { content?: Record<string, { schema?: Schema }> }>;
};
type Doc = { paths: Record<string, Record<string, Operation>>; components?: { schemas?: Record<string, Schema> } };

const ORDER = ['get', 'post', 'put', 'patch', 'delete']; // deletions last: they remove the fixtures
const VALID_PER_OPERATION = 6;

function deref(schema: unknown, doc: Doc, depth = 0): unknown {
  if (Array.isArray(schema)) return schema.map((s) => deref(s, doc, depth));
  if (!schema || typeof schema !== 'object') return schema;
  const ref = (schema as { $ref?: string }).$ref;
  if (ref?.startsWith('#/components/schemas/') && depth < 8)
    return deref(doc.components?.schemas?.[ref.slice('#/components/schemas/'.length)], doc, depth + 1);
  return Object.fromEntries(Object.entries(schema).map(([k, v]) => [k, deref(v, doc, depth)]));
}

function generate(schema: Schema, seed: number): unknown {
  try {
    return generateSync(schema as JsonSchema, { seed, optionalsProbability: 0.6, maxLength: 40 });
  } catch {
    return generateSync(schema as JsonSchema, { seed, alwaysFakeOptionals: true, maxLength: 40 });
  }
}

/** A value of another JSON type than the schema asks for. */
function wrongType(schema: Schema | undefined): unknown {
  const type = schema?.type;
  if (type === 'string') return 12345;
  if (type === 'integer' || type === 'number') return 'not a number';
  if (type === 'array') return { not: 'an array' };
  if (type === 'boolean') return 'yes';
  if (type === 'object') return ['not', 'an', 'object'];
  return { unexpected: true };
}

describe('OpenAPI-driven fuzzing of the REST API', () => {
  let p: TestPlatform;
  let doc: Doc;
  let key: string;
  const ids: Record<string, string> = {};
  const responseValidators = new Map<string, ValidateFunction>();
  const ajv = new Ajv({ strict: false, allErrors: true });
  addFormats.default(ajv);
  const seen = { requests: 0, byClass: {} as Record<string, number> };

  beforeAll(async () => {
    p = await startTestPlatform();
    const db = p.ctx.db;
    const account = await db.account.findFirstOrThrow({ where: { isAdmin: true } });
    await db.account.update({
      where: { id: account.id },
      data: { rateLimitPerMinute: 1_000_000, rateLimitPerHour: 1_000_000, rateLimitPerDay: 1_000_000 },
    });
    key = p.adminKey;
    const ep = await call(p.url, 'POST', '/v2/serverless', { key, body: { name: 'fuzz-endpoint', image: 'img:1' } });
    ids.serverless = ep.body.id;
    ids.registries = (
      await db.registryCredential.create({
        data: { id: newId(), accountId: account.id, name: 'fuzz-reg', secret: Buffer.from([1]) },
      })
    ).id;
    ids.templates = (
      await db.template.create({ data: { id: newId(), accountId: account.id, name: 'fuzz-tpl', imageName: 'img:1' } })
    ).id;
    ids['network-volumes'] = (
      await db.networkVolume.create({
        data: { id: newId(), accountId: account.id, name: 'fuzz-vol', size: 10, dataCenterId: 'dc-1' },
      })
    ).id;
    ids.keys = (await issueApiKey(db, account.id, 'fuzz-spare', ['READ'])).id;
    ids.pods = (
      await db.pod.create({
        data: { id: newId(), accountId: account.id, name: 'fuzz-pod', imageName: 'img:1', desiredStatus: 'EXITED' },
      })
    ).id;
    doc = (await call(p.url, 'GET', '/v2/openapi.json')).body;
  });
  afterAll(async () => {
    await p?.stop();
  });

  /** An id that exists for `/v2/a/b/{id}`: a fixture, or the first `id` GET /v2/a/b lists. */
  async function realId(path: string): Promise<string | undefined> {
    const group = path.split('/')[2] ?? '';
    if (ids[group] && path.indexOf('{') === `/v2/${group}/`.length) return ids[group];
    const collection = path.slice(0, path.indexOf('/{'));
    const listed = await call(p.url, 'GET', collection, { key });
    if (listed.status !== 200 || !listed.body || typeof listed.body !== 'object') return undefined;
    const list = Object.values(listed.body as Record<string, unknown>).find(Array.isArray) as
      Array<{ id?: unknown }> | undefined;
    const id = list?.find((x) => typeof x?.id === 'string')?.id;
    return typeof id === 'string' ? id : undefined;
  }

  function validatorFor(op: Operation, status: number): ValidateFunction | undefined {
    const response = op.responses?.[String(status)];
    const schema = response?.content?.['application/json']?.schema;
    if (!schema) return undefined;
    const cacheKey = `${op.operationId}:${status}`;
    let fn = responseValidators.get(cacheKey);
    if (!fn) responseValidators.set(cacheKey, (fn = ajv.compile(deref(schema, doc) as Schema)));
    return fn;
  }

  async function send(
    what: string,
    op: Operation,
    method: string,
    url: string,
    opts: { body?: unknown; rawBody?: string; headers?: Record<string, string> } = {},
  ): Promise<{ status: number; body: { errors?: string[] } }> {
    const r = await call(p.url, method.toUpperCase(), url, { key, ...opts });
    seen.requests++;
    const cls = `${String(r.status).slice(0, 1)}xx`;
    seen.byClass[cls] = (seen.byClass[cls] ?? 0) + 1;
    const label = `${method.toUpperCase()} ${url.slice(0, 120)} (${what}) → ${r.status} ${JSON.stringify(r.body)?.slice(0, 300)}`;
    expect(r.status, label).toBeLessThan(500);
    if (r.status >= 400) {
      expect(r.headers.get('content-type'), label).toMatch(/^application\/problem\+json/);
      expect(r.body, label).toMatchObject({ title: expect.any(String), status: r.status, detail: expect.any(String) });
      if (r.body.errors !== undefined)
        expect(
          r.body.errors.every((e: unknown) => typeof e === 'string'),
          label,
        ).toBe(true);
    } else {
      const validate = validatorFor(op, r.status);
      if (validate) expect(validate(r.body), `${label}: ${JSON.stringify(validate.errors)}`).toBe(true);
    }
    return r;
  }

  it('describes the API as OpenAPI 3.1, version 2.0.0, and serves an explorer that loads nothing from elsewhere', async () => {
    expect(doc).toMatchObject({
      openapi: '3.1.0',
      info: { version: '2.0.0' },
      components: { securitySchemes: { bearerAuth: { type: 'http', scheme: 'bearer' } } },
    });
    const update = doc.paths['/v2/serverless/{id}']?.patch as Operation & {
      security?: unknown;
      responses: Record<string, unknown>;
    };
    expect(update.operationId).toBe('updateEndpoint');
    expect(update.security).toEqual([{ bearerAuth: [] }]);
    expect(Object.keys(update.responses)).toEqual(
      expect.arrayContaining(['200', '400', '401', '403', '404', '409', '422', '429', 'default']),
    );
    expect(doc.paths['/v2/serverless/{id}/releases']?.get?.operationId).toBe('listEndpointReleases');
    // Only the management API: job and worker routes (`/v2/{endpointId}/...`) are not in it.
    for (const path of Object.keys(doc.paths)) expect(path).not.toMatch(/^\/v2\/\{/);

    const page = await fetch(`${p.url}/v2/docs`);
    expect(page.status).toBe(200);
    const html = await page.text();
    const refs = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!);
    expect(refs.length).toBeGreaterThan(2);
    for (const ref of refs) {
      expect(ref, 'no asset from another host').not.toMatch(/^(https?:)?\/\//);
      const asset = await fetch(new URL(ref, `${p.url}/v2/docs`));
      expect(asset.status, ref).toBe(200);
      await asset.arrayBuffer(); // read to the end, so the connection is free when the server stops
    }
    const init = await (
      await fetch(
        new URL(
          refs.find((r) => r.endsWith('swagger-initializer.js'))!,
          `${p.url}/v2/docs`,
        ),
      )
    ).text();
    // Swagger UI's default validator badge would call validator.swagger.io.
    expect(init).toContain('validatorUrl: null');
    expect((await call(p.url, 'GET', '/v2/docs/json')).body.info.version).toBe('2.0.0');
  });

  it('never answers 5xx, always problem+json for errors, and successes match the document', async () => {
    const ops: Array<{ method: string; path: string; op: Operation }> = [];
    for (const method of ORDER)
      for (const [path, item] of Object.entries(doc.paths))
        if (item[method]) ops.push({ method, path, op: item[method]! });
    expect(ops.length).toBeGreaterThanOrEqual(7);

    for (const { method, path, op } of ops) {
      const bodySchema = op.requestBody?.content?.['application/json']?.schema;
      const schema = bodySchema ? (deref(bodySchema, doc) as Schema) : undefined;
      const query = (op.parameters ?? []).filter((q) => q.in === 'query');
      const existing = path.includes('{') ? await realId(path) : undefined;
      const urlWith = (...values: string[]): string => {
        let i = 0;
        return path.replace(/\{[^}]+\}/g, () => encodeURIComponent(values[i++] ?? 'zzzzzzzzzzzzzz'));
      };
      const queryString = (seed: number): string => {
        const pairs = query
          .map((q) => [q.name, q.schema ? generate(deref(q.schema, doc) as Schema, seed) : 'x'] as const)
          .filter(([, v], i) => query[i]!.required || seed % 2 === 0 || v === undefined)
          .map(
            ([n, v]) => `${encodeURIComponent(n)}=${encodeURIComponent(typeof v === 'string' ? v : JSON.stringify(v))}`,
          );
        return pairs.length > 0 ? `?${pairs.join('&')}` : '';
      };

      // Valid requests: schema-conforming bodies and queries, on an existing id and on a made-up one.
      for (let seed = 1; seed <= VALID_PER_OPERATION; seed++) {
        const id = seed % 3 === 0 || !existing ? newId() : existing;
        const body = schema ? generate(schema, seed) : undefined;
        await send(`valid #${seed}`, op, method, urlWith(id) + queryString(seed), { body });
      }

      const target = urlWith(existing ?? newId());
      // Path parameters no route expects.
      if (path.includes('{')) {
        for (const odd of ['x'.repeat(2000), 'ü-ñ-☃', '..', "' or 1=1 --", '%00', ' ', 'ab\u0000cd', '\u0000'])
          await send(`odd id ${odd.slice(0, 10)}`, op, method, urlWith(odd), {
            body: schema ? generate(schema, 1) : undefined,
          });
      }
      // Query strings that break their schemas.
      for (const q of query)
        await send(
          `bad query ${q.name}`,
          op,
          method,
          `${target}?${encodeURIComponent(q.name)}=${encodeURIComponent('%%%not-valid%%%')}`,
          { body: schema ? generate(schema, 1) : undefined },
        );

      if (!schema) continue;
      const valid = generate(schema, 1) as Record<string, unknown>;
      // Unknown properties: 422 naming them, exactly as the spec words it.
      if (schema.additionalProperties === false && valid && typeof valid === 'object' && !Array.isArray(valid)) {
        const r = await send('unknown property', op, method, target, { body: { ...valid, zzFuzzUnknown: 1 } });
        expect(r.status, `${method} ${path}`).toBe(422);
        expect(r.body.errors).toContain("$: additional properties 'zzFuzzUnknown' not allowed");
      }
      // Each property of the wrong type, each required property missing.
      const properties = (schema.properties ?? {}) as Record<string, Schema>;
      for (const [name, propSchema] of Object.entries(properties)) {
        await send(`wrong type for ${name}`, op, method, target, { body: { ...valid, [name]: wrongType(propSchema) } });
        await send(`huge ${name}`, op, method, target, { body: { ...valid, [name]: 'x'.repeat(100_000) } });
        // PostgreSQL text cannot hold NUL, and its integer columns stop at 2^31-1: both are the
        // client's mistake (4xx), never a failed statement (5xx).
        if (propSchema.type === 'string')
          await send(`NUL in ${name}`, op, method, target, { body: { ...valid, [name]: 'x\u0000y' } });
        if (propSchema.type === 'integer' || propSchema.type === 'number')
          await send(`int overflow ${name}`, op, method, target, { body: { ...valid, [name]: 137_438_953_471 } });
      }
      for (const name of (schema.required ?? []) as string[]) {
        const { [name]: _dropped, ...rest } = valid;
        const r = await send(`missing ${name}`, op, method, target, { body: rest });
        expect(r.status, `${method} ${path} without ${name}`).toBe(422);
      }
      // Bodies that are not the object asked for, malformed JSON, another media type.
      const deep = `${'['.repeat(100_000)}${']'.repeat(100_000)}`;
      for (const raw of [
        '[]',
        '"text"',
        'null',
        '42',
        '{"a":',
        '{"__proto__":{"polluted":1}}',
        '\u0000',
        '{"a":"x\\u0000y"}',
        deep,
      ])
        await send(`raw body ${raw.slice(0, 20)}`, op, method, target, { rawBody: raw });
      await send('text/plain body', op, method, target, {
        rawBody: 'hello',
        headers: { 'content-type': 'text/plain' },
      });
      await send('no body', op, method, target, {});
    }
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(seen.requests).toBeGreaterThan(200);
    // Both kinds of answer happened: the generator produced accepted requests, not only refusals.
    expect(seen.byClass['2xx'] ?? 0).toBeGreaterThan(10);
    expect(seen.byClass['4xx'] ?? 0).toBeGreaterThan(100);
  }, 300_000);
});
