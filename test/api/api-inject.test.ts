/**
 * The API's surfaces through `app.inject`, on a fresh database of the suite and a client of its
 * Temporal server (no Temporal worker, no socket): which scope authenticates and counts what, in
 * which order, the answers' shapes, the OpenAPI document and the public routes. The full-stack
 * behaviour (workflows, workers, containers) stays in the tests over HTTP.
 */
import Fastify from 'fastify';
import { parseList } from 'structured-headers';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { authenticateRequests, requireDeclaredScopes } from '../../api/auth.ts';
import { issueApiKey, type Scope } from '../../domain/accounts/index.ts';
import { newId } from '../../domain/shared/index.ts';
import { startTestApp, type Answer, type TestApp } from '../support/app.ts';

const MANAGEMENT = { minute: 1000, hour: 20_000, day: 200_000 };
// Windows of an hour: a test that counts up to the quota cannot straddle a minute's end.
const JOBS = { minute: 1000, hour: 3, day: 1000 };
const AUTH_FAILURES_PER_MINUTE = 3;

/** `"minute";r=1;t=2, ...` → {minute: {r: 1, t: 2}, ...}. */
function fields(header: string | null): Record<string, Record<string, unknown>> {
  expect(header).toBeTruthy();
  return Object.fromEntries(parseList(header!).map(([name, params]) => [String(name), Object.fromEntries(params)]));
}

function expectProblem(r: Answer, status: number, detail?: string | RegExp): void {
  expect(r.status, JSON.stringify(r.body)).toBe(status);
  expect(r.headers.get('content-type')).toMatch(/^application\/problem\+json/);
  expect(r.body).toMatchObject({ status, title: expect.any(String), detail: expect.any(String) });
  if (typeof detail === 'string') expect(r.body.detail).toBe(detail);
  else if (detail) expect(r.body.detail).toMatch(detail);
}

/** Fixed windows: failures counted up to the limit must fall in one minute (a few requests, well under a second). */
async function awayFromMinuteEdge(): Promise<void> {
  const intoMinute = Date.now() % 60_000;
  if (intoMinute > 55_000) await new Promise((r) => setTimeout(r, 60_000 - intoMinute + 500));
}

let addresses = 0;
/** A client address of its own: failed authentications in one test do not lock out another. */
const freshAddress = (): string => `10.77.0.${++addresses}`;

describe('the API through app.inject', () => {
  let t: TestApp;
  let accountId: string;
  const keys: Partial<Record<'read' | 'write' | 'none' | 'revoked' | 'expired', string>> = {};

  beforeAll(async () => {
    t = await startTestApp({
      limits: { management: MANAGEMENT, jobs: JOBS, authFailuresPerMinute: AUTH_FAILURES_PER_MINUTE },
    });
    accountId = (
      await t.ctx.db.account.create({ data: { id: newId(), email: `${newId()}@example.test`, name: 'inject' } })
    ).id;
    keys.read = (await issueApiKey(t.ctx.db, accountId, 'read', ['READ'])).key;
    keys.write = (await issueApiKey(t.ctx.db, accountId, 'write', ['READ', 'WRITE'])).key;
    keys.none = (await issueApiKey(t.ctx.db, accountId, 'none', [])).key;
    const revoked = await issueApiKey(t.ctx.db, accountId, 'revoked', ['READ']);
    await t.ctx.db.apiKey.update({ where: { id: revoked.id }, data: { revokedAt: new Date() } });
    keys.revoked = revoked.key;
    const expired = await issueApiKey(t.ctx.db, accountId, 'expired', ['READ']);
    await t.ctx.db.apiKey.update({ where: { id: expired.id }, data: { expiresAt: new Date(Date.now() - 1000) } });
    keys.expired = expired.key;
  });
  afterAll(async () => {
    await t?.stop();
  });

  it('serves the public routes without a key, counted against no quota', async () => {
    const checks: Array<[string, RegExp]> = [
      ['/healthz', /^application\/json/],
      ['/readyz', /^application\/json/],
      ['/metrics', /^text\/plain/],
      ['/v2/openapi.json', /^application\/json/],
      ['/graphql/explorer/explorer.js', /^text\/javascript/],
    ];
    for (const [path, type] of checks) {
      for (const key of [undefined, t.adminKey, 'not a key at all']) {
        const r = await t.call('GET', path, { key, remoteAddress: freshAddress() });
        expect(r.status, `${path} with key ${key}`).toBe(200);
        expect(r.headers.get('content-type'), path).toMatch(type);
        expect(r.headers.get('ratelimit'), path).toBeNull();
      }
    }
    expect((await t.call('GET', '/healthz')).body).toEqual({ status: 'ok' });
    expect((await t.call('GET', '/readyz')).body).toEqual({ status: 'ready' });
    // The explorers: Swagger UI for REST, GraphiQL for a browser's GET /graphql.
    const docs = await t.app.inject({ method: 'GET', url: '/v2/docs/' });
    expect(docs.statusCode).toBe(200);
    expect(docs.headers['content-type']).toMatch(/^text\/html/);
    const graphiql = await t.app.inject({ method: 'GET', url: '/graphql', headers: { accept: 'text/html' } });
    expect(graphiql.statusCode).toBe(200);
    expect(graphiql.body).toContain('graphql/explorer/explorer.js');
    // The metrics name the route patterns.
    await t.call('GET', '/v2/serverless', { key: keys.read });
    expect((await t.call('GET', '/metrics')).body).toMatch(
      /gantry_http_request_duration_seconds_bucket\{.*route="\/v2\/serverless".*\}/,
    );
  });

  it('answers 401 problem+json to every kind of bad key, before the body is read', async () => {
    const cases: Array<[string, Record<string, string>, string]> = [
      ['no key', {}, 'missing bearer token'],
      ['another scheme', { authorization: 'Basic YTpi' }, 'malformed Authorization header; expected "Bearer <key>"'],
      ['a malformed key', { authorization: 'Bearer short' }, 'malformed bearer token'],
      ['an unknown key', { authorization: `Bearer gntr_${'x'.repeat(40)}` }, 'invalid bearer token'],
      ['a revoked key', { authorization: `Bearer ${keys.revoked}` }, 'invalid bearer token'],
      ['an expired key', { authorization: `Bearer ${keys.expired}` }, 'expired bearer token'],
    ];
    for (const [why, headers, detail] of cases) {
      // A body that is not even JSON: authentication answers first.
      const r = await t.call('POST', '/v2/serverless', {
        headers,
        rawBody: '{"name": ',
        remoteAddress: freshAddress(),
      });
      expectProblem(r, 401, detail);
      expect(r.headers.get('ratelimit'), why).toBeNull();
    }
    // HEAD routes Fastify adds for GET routes are in the same scope.
    expect(
      (await t.app.inject({ method: 'HEAD', url: '/v2/serverless', remoteAddress: freshAddress() })).statusCode,
    ).toBe(401);
    expect(
      (await t.app.inject({ method: 'HEAD', url: '/v2/serverless', headers: { authorization: `Bearer ${keys.read}` } }))
        .statusCode,
    ).toBe(200);
  });

  it('refuses in the order 401, 429, 403, 422, all but the last before the body is read', async () => {
    const bad = { rawBody: '{"name": ' };
    const invalid = { body: { bogus: true } };
    expectProblem(await t.call('GET', '/v2/serverless', { key: keys.none }), 403, 'this key lacks the read scope');
    // A key without WRITE: 403 whatever the body.
    expectProblem(
      await t.call('POST', '/v2/serverless', { key: keys.read, ...bad }),
      403,
      'this key lacks the write scope',
    );
    expectProblem(await t.call('POST', '/v2/serverless', { key: keys.read, ...invalid }), 403);
    // With WRITE, the body decides: 400 unparsable, 422 invalid.
    expectProblem(await t.call('POST', '/v2/serverless', { key: keys.write, ...bad }), 400);
    const unprocessable = await t.call('POST', '/v2/serverless', { key: keys.write, ...invalid });
    expectProblem(unprocessable, 422, 'Request validation failed.');
    expect(unprocessable.body.errors).toContain("$: additional properties 'bogus' not allowed");
    // An account over its quota: 429 before the scope and the body are looked at.
    const blocked = await t.ctx.db.account.create({
      data: { id: newId(), email: `${newId()}@example.test`, name: 'blocked', rateLimitPerMinute: 0 },
    });
    const blockedKey = (await issueApiKey(t.ctx.db, blocked.id, 'ro', ['READ'])).key;
    const limited = await t.call('POST', '/v2/serverless', { key: blockedKey, ...bad });
    expectProblem(limited, 429, 'rate limit exceeded for the minute window');
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(fields(limited.headers.get('ratelimit')).minute).toMatchObject({ r: 0 });
  });

  it('counts every authenticated management answer and says so in RateLimit headers', async () => {
    const policy = `"minute";q=${MANAGEMENT.minute};w=60, "hour";q=${MANAGEMENT.hour};w=3600, "day";q=${MANAGEMENT.day};w=86400`;
    const answers = [
      await t.call('GET', '/v2/serverless', { key: keys.read }),
      await t.call('GET', '/v2/serverless/nosuchendpoint', { key: keys.read }),
      await t.call('DELETE', '/v2/templates/nosuchtemplate', { key: keys.read }),
      await t.call('POST', '/v2/registries', { key: keys.write, body: {} }),
      await t.call('GET', '/v2/hosts', { key: keys.write }),
    ];
    expect(answers.map((a) => a.status)).toEqual([200, 404, 403, 422, 403]);
    const remaining = answers.map((a) => {
      expect(a.headers.get('ratelimit-policy')).toBe(policy);
      return fields(a.headers.get('ratelimit')).hour!.r as number;
    });
    // One account, one counter: each answer counted once.
    for (let i = 1; i < remaining.length; i++) expect(remaining[i]).toBe(remaining[i - 1]! - 1);
    // GraphQL shares the account's quota.
    const gql = await t.call('POST', '/graphql', { key: keys.read, body: { query: '{ myself { id } }' } });
    expect(gql.status).toBe(200);
    expect(gql.headers.get('ratelimit-policy')).toBe(policy);
    expect(fields(gql.headers.get('ratelimit')).hour!.r).toBe(remaining.at(-1)! - 1);
    // A 204 carries no body and no content type, and is counted like the rest.
    const template = await t.ctx.db.template.create({
      data: { id: newId(), accountId, name: 'to-delete', imageName: 'img:1' },
    });
    const deleted = await t.app.inject({
      method: 'DELETE',
      url: `/v2/templates/${template.id}`,
      headers: { authorization: `Bearer ${keys.write}` },
    });
    expect([
      deleted.statusCode,
      deleted.body,
      deleted.headers['content-type'],
      deleted.headers['content-length'],
    ]).toEqual([204, '', undefined, undefined]);
    expect(deleted.headers.ratelimit).toBeDefined();
  });

  it('answers unknown routes and methods with a 404 problem, without a key and uncounted', async () => {
    for (const [method, url, detail] of [
      ['GET', '/v2/nosuchroute?api_key=secret', 'no route GET /v2/nosuchroute'],
      ['PUT', '/v2/serverless', 'no route PUT /v2/serverless'],
      ['POST', '/v2/serverless/abc', 'no route POST /v2/serverless/abc'],
      ['GET', '/nowhere', 'no route GET /nowhere'],
    ] as const) {
      const r = await t.call(method, url, { key: keys.read });
      expectProblem(r, 404, detail);
      expect(r.headers.get('ratelimit')).toBeNull();
    }
    // Input no handler could store is refused before authentication reads it; bad encoding likewise.
    const nul = await t.call('GET', '/v2/serverless/a%00b');
    expectProblem(nul, 422);
    expect(nul.body.errors).toEqual(['$params.id: must not contain NUL characters']);
    expectProblem(await t.call('GET', '/v2/serverless/%E0%A4%A'), 400, 'the URL is not validly encoded');
    // The framework's own refusals are problems too.
    expectProblem(
      await t.call('POST', '/v2/serverless', {
        key: keys.write,
        rawBody: '<x/>',
        headers: { 'content-type': 'application/xml' },
      }),
      415,
    );
  });

  it('refuses JSON bodies no handler could store where routes take JSON; GraphQL in its own shape', async () => {
    const deep = JSON.parse('['.repeat(100) + ']'.repeat(100)) as unknown;
    const nul = await t.call('POST', '/v2/templates', { key: keys.write, body: { name: 'a\u0000b', image: 'img:1' } });
    expectProblem(nul, 422);
    expect(nul.body.errors).toEqual(['$.name: must not contain NUL characters']);
    expectProblem(
      await t.call('PATCH', '/v2/serverless/whatever', { key: keys.write, body: { env: { A: deep } } }),
      422,
      'Request validation failed.',
    );
    const endpoint = await t.ctx.db.endpoint.create({
      data: { id: newId(), accountId, name: 'nul-input', image: 'img:1' },
    });
    const runKey = (await issueApiKey(t.ctx.db, accountId, 'run-nul', ['RUN'])).key;
    const run = await t.call('POST', `/v2/${endpoint.id}/run`, {
      key: runKey,
      body: { input: { prompt: 'a\u0000b' } },
    });
    expectProblem(run, 422);
    expect(run.body.errors).toEqual(['$.input.prompt: must not contain NUL characters']);
    const gql = await t.call('POST', '/graphql', {
      key: keys.read,
      body: { query: 'query Q($v: String) { myself { id } }', variables: { v: 'a\u0000b' } },
    });
    expect(gql.status).toBe(400);
    expect(gql.body.errors[0]).toMatchObject({
      message: '$variables.v: must not contain NUL characters',
      extensions: { code: 'BAD_USER_INPUT' },
    });
  });

  it('describes exactly the management operations in the OpenAPI document, each with its scope', async () => {
    const doc = (await t.call('GET', '/v2/openapi.json')).body as {
      openapi: string;
      paths: Record<
        string,
        Record<
          string,
          {
            operationId: string;
            security: unknown;
            'x-required-scope': Scope | Scope[];
            responses: Record<string, unknown>;
          }
        >
      >;
    };
    expect(doc.openapi).toBe('3.1.0');
    const operations = Object.entries(doc.paths).flatMap(([path, methods]) =>
      Object.entries(methods).map(([method, op]) => ({ path, method, op })),
    );
    expect(operations.length).toBeGreaterThan(40);
    for (const { path, method, op } of operations) {
      const where = `${method.toUpperCase()} ${path}`;
      // Management paths begin with a fixed word; the job API and worker protocol begin with an endpoint id.
      expect(path, where).toMatch(/^\/v2\/[a-z-]+(\/|$)/);
      // One scope, or several of which any one will do (the public-model catalogue: READ or RUN).
      for (const scope of [op['x-required-scope']].flat())
        expect(['READ', 'WRITE', 'RUN', 'ADMIN'], where).toContain(scope);
      expect(op.security, where).toEqual([{ bearerAuth: [] }]);
      for (const code of ['401', '403', '429']) expect(op.responses[code], `${where} ${code}`).toBeDefined();
    }
    const ids = operations.map((o) => o.op.operationId);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids).toEqual(
      expect.arrayContaining([
        'createEndpoint',
        'streamWorkerLogs',
        'createPod',
        'listGpuTypes',
        'createHost',
        'putDataCenterSettings',
        'createApiKey',
        'listAccounts',
      ]),
    );
    const scopeOf = (id: string) => operations.find((o) => o.op.operationId === id)!.op['x-required-scope'];
    expect([scopeOf('listEndpoints'), scopeOf('createEndpoint'), scopeOf('createHost')]).toEqual([
      'READ',
      'WRITE',
      'ADMIN',
    ]);
    // Nothing of the other surfaces or the public routes (an endpoint's metrics are a management read).
    expect(
      Object.keys(doc.paths).filter((p) => /endpointId|openapi|docs|graphql|healthz|^\/metrics|\/lb\//.test(p)),
    ).toEqual([]);
  });

  it('refuses to start with a route in an authenticated scope that declares no scope', async () => {
    const bare = Fastify();
    void bare.register(async (scope) => {
      authenticateRequests(scope, t.ctx);
      requireDeclaredScopes(scope);
      scope.get('/declared', { config: { requiredScope: 'READ' } }, async () => ({}));
      scope.get('/forgotten', async () => ({}));
    });
    await expect(bare.ready()).rejects.toThrow(
      /GET \/forgotten: a route of this scope must declare config.requiredScope/,
    );
    await bare.close();
  });

  it('keeps the job API on its own key check and quota per account and endpoint, and the worker protocol on its own credential', async () => {
    const [a, b] = [newId(), newId()];
    for (const [id, name] of [
      [a, 'jobs-a'],
      [b, 'jobs-b'],
    ])
      await t.ctx.db.endpoint.create({ data: { id: id!, accountId, name: name!, image: 'img:1' } });
    const jobsPolicy = `"minute";q=${JOBS.minute};w=60, "hour";q=${JOBS.hour};w=3600, "day";q=${JOBS.day};w=86400`;
    const runKey = (await issueApiKey(t.ctx.db, accountId, 'run', ['RUN'])).key;
    const answers = [];
    for (let i = 0; i < JOBS.hour + 1; i++)
      answers.push(await t.call('GET', `/v2/${a}/status/nosuchjob${i}`, { key: runKey }));
    expect(answers.map((r) => r.status)).toEqual([404, 404, 404, 429]);
    expect(answers[0]!.headers.get('ratelimit-policy')).toBe(jobsPolicy);
    expect(fields(answers[0]!.headers.get('ratelimit')).hour).toMatchObject({ r: JOBS.hour - 1 });
    expectProblem(answers[3]!, 429, 'rate limit exceeded for the hour window');
    expect(answers[3]!.headers.get('retry-after')).toMatch(/^\d+$/);
    // Another endpoint has its own counter; the management quota is untouched by job calls.
    expect((await t.call('GET', `/v2/${b}/status/nosuchjob`, { key: runKey })).status).toBe(404);
    // Authentication first, as on the management API: no key is 401 and counts nothing.
    const anonymous = await t.call('POST', `/v2/${b}/run`, { rawBody: '{"input": ', remoteAddress: freshAddress() });
    expectProblem(anonymous, 401, 'missing bearer token');
    expect(anonymous.headers.get('ratelimit')).toBeNull();
    // The worker protocol answers with its own check, an API key is no worker's credential, and
    // the job API's quota does not count it.
    for (const path of [`/v2/${b}/ping/nosuchworker`, `/v2/${b}/job-take/nosuchworker`]) {
      const r = await t.call('GET', path, { key: runKey, remoteAddress: freshAddress() });
      expect(r.status, path).toBe(401);
      expect(r.headers.get('ratelimit'), path).toBeNull();
    }
  });

  it('refuses an address that keeps failing authentication, before any key is looked up, on every surface', async () => {
    await awayFromMinuteEdge();
    const address = freshAddress();
    const bad = [];
    for (let i = 0; i < AUTH_FAILURES_PER_MINUTE + 1; i++)
      bad.push(
        (await t.call('GET', '/v2/serverless', { key: `gntr_wrong_${'k'.repeat(20)}${i}`, remoteAddress: address }))
          .status,
      );
    expect(bad).toEqual([...Array<number>(AUTH_FAILURES_PER_MINUTE).fill(401), 429]);
    // A good key from that address is refused too, everywhere; other addresses are not.
    const refused = await t.call('GET', '/v2/serverless', { key: keys.read, remoteAddress: address });
    expectProblem(refused, 429, /too many failed authentications from this address/);
    expect(
      (await t.call('POST', `/v2/${newId()}/run`, { key: keys.read, body: { input: {} }, remoteAddress: address }))
        .status,
    ).toBe(429);
    expect(
      (
        await t.call('POST', '/graphql', {
          key: keys.read,
          body: { query: '{ myself { id } }' },
          remoteAddress: address,
        })
      ).status,
    ).toBe(429);
    expect((await t.call('GET', '/v2/serverless', { key: keys.read, remoteAddress: freshAddress() })).status).toBe(200);
    // Public routes stay open to it.
    expect((await t.call('GET', '/healthz', { remoteAddress: address })).status).toBe(200);
  });
});
