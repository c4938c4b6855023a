/**
 * Issue #45 "Edges" (a two-tenant probe), the parts that reach the log: a key in any spelling of a
 * URL that does not authenticate (an array or dotted name, a `;` inside the query, a NUL in the
 * name, a path segment) is redacted by its shape wherever it appears, and keyless GraphQL requests
 * that may not run are clean 4xx answers with a GraphQL code and no error-level line.
 */
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { redactUrl } from '../../api/redact.ts';
import { issueApiKey } from '../../domain/accounts/index.ts';
import { newApiKey, newId } from '../../domain/shared/index.ts';
import { startTestApp, type TestApp } from '../support/app.ts';

interface Line {
  level: number;
  msg?: string;
  err?: { stack?: string };
}

describe('edges: what reaches the log', () => {
  let t: TestApp;
  const lines: string[] = [];
  let minted: string;
  let workerShaped: string;
  let address = 0;
  const freshAddress = (): string => `10.45.0.${++address}`;
  const parsed = (): Line[] => lines.map((l) => JSON.parse(l) as Line);

  beforeAll(async () => {
    t = await startTestApp({ logLevel: 'info', logStream: { write: (line: string) => void lines.push(line) } });
    const account = await t.ctx.db.account.create({
      data: { id: newId(), email: `${newId()}@example.test`, name: 'edges' },
    });
    minted = (await issueApiKey(t.ctx.db, account.id, 'probe', ['READ'])).key;
    // A worker credential has the same prefix (domain/workers/credentials.ts).
    workerShaped = `gntr_wk_${newApiKey().slice(5)}`;
  });
  afterAll(async () => {
    await t?.stop();
  });

  it('redacts key-shaped values anywhere in a URL, in every spelling the probe tried', () => {
    const key = newApiKey();
    const encoded = key.replace('_', '%5F');
    for (const url of [
      `/graphql?api_key[]=${key}`,
      `/graphql?api_key.x=${key}`,
      `/graphql?foo=1;api_key=${key}`,
      `/graphql?api_key%00=${key}`,
      `/nonexistent/${key}`,
      `/nonexistent/${key}/more?x=1`,
      `/v2/x?q=${encoded}`,
      `/v2/x?q=a,${key},b`,
      `/v2/x#${key}`,
    ]) {
      const out = redactUrl(url);
      expect(out, url).not.toContain(key);
      expect(out, url).not.toContain(key.slice(5));
      expect(out, url).toContain('[redacted]');
    }
    // Names too, past what the parser would read as the name.
    expect(redactUrl('/graphql?api_key[]=S&x=1')).toBe('/graphql?api_key[]=[redacted]&x=1');
    expect(redactUrl('/graphql?api_key.x=S')).toBe('/graphql?api_key.x=[redacted]');
    expect(redactUrl('/graphql?foo=1;api_key=S')).toBe('/graphql?foo=1;api_key=[redacted]');
    expect(redactUrl('/graphql?api_key%00=S')).toBe('/graphql?api_key%00=[redacted]');
    // Nothing else changes.
    expect(redactUrl('/v2/serverless?limit=5&keys=2&gntr=1')).toBe('/v2/serverless?limit=5&keys=2&gntr=1');
  });

  it('logs no key of any spelling, in request and error lines, and answers none back', async () => {
    lines.length = 0;
    const keys = [minted, t.adminKey, workerShaped];
    for (const key of keys) {
      const urls = [
        `/graphql?api_key[]=${key}`,
        `/graphql?api_key.x=${key}`,
        `/graphql?foo=1;api_key=${key}`,
        `/graphql?api_key%00=${key}`,
        `/v2/serverless?api_key[]=${key}`,
        `/v2/serverless?foo=1;api_key=${key}`,
        `/nonexistent/${key}`,
        `/v2/serverless/${key}`,
        `/v2/serverless/${key.replace('_', '%5F')}`,
      ];
      for (const url of urls) {
        for (const method of ['GET', 'POST'] as const) {
          const r = await t.app.inject({
            method,
            url,
            remoteAddress: freshAddress(),
            ...(method === 'POST' ? { payload: { query: '{ myself { id } }' } } : {}),
          });
          expect(r.statusCode, `${method} ${url}`).toBeGreaterThanOrEqual(400);
          expect(r.statusCode, `${method} ${url}`).toBeLessThan(500);
          expect(r.body, `${method} ${url}`).not.toContain(key);
        }
      }
    }
    // An error line: its message and stack go through the same redaction (an error quoting a URL).
    const failure = new Error(`could not route /nonexistent/${minted}?api_key.x=${t.adminKey}`);
    t.app.log.error({ err: failure }, 'unhandled error');
    t.app.log.error({ err: 'not an error at all' }, 'odd');
    const errorLine = parsed().find((l) => l.msg === 'unhandled error');
    expect(errorLine?.err?.stack).toContain('could not route /nonexistent/[redacted]');
    expect(parsed().find((l) => l.msg === 'odd')?.err).toBe('not an error at all');
    const log = lines.join('');
    expect(lines.length).toBeGreaterThan(50);
    for (const key of keys) {
      expect(log).not.toContain(key);
      expect(log).not.toContain(key.slice(5));
    }
    expect(log).toContain('[redacted]');
  });

  it('keyless GraphQL that may not run is a clean 4xx with a GraphQL code, and no error-level line', async () => {
    lines.length = 0;
    const status = (op: string) => ({
      query: `${op} { flashAuthRequestStatus(flashAuthRequestId: "${'a'.repeat(43)}") { id status } }`,
    });
    const ask = (payload: unknown, url = '/graphql') =>
      t.app.inject({ method: 'POST', url, payload: payload as object, remoteAddress: freshAddress() });

    // (a) a subscription: no keyless operation (and the schema has no subscriptions).
    const sub = await ask(status('subscription'));
    expect(sub.statusCode, sub.body).toBe(401);
    expect(sub.json().errors[0].extensions.code).toBe('UNAUTHENTICATED');

    // (b) a persisted-query hash that is not the query's.
    const mismatch = await ask({
      ...status('query'),
      extensions: { persistedQuery: { version: 1, sha256Hash: 'f'.repeat(64) } },
    });
    expect(mismatch.statusCode, mismatch.body).toBe(400);
    expect(mismatch.json().errors[0].extensions.code).toBe('PERSISTED_QUERY_HASH_MISMATCH');
    // A version there is none of.
    const version = await ask({ ...status('query'), extensions: { persistedQuery: { version: 2, sha256Hash: 'f' } } });
    expect(version.statusCode, version.body).toBe(400);
    expect(version.json().errors[0].extensions.code).toBe('BAD_REQUEST');
    // A hash alone (no query) that was never stored: the persisted-query protocol's own answer.
    const unknown = await ask({ extensions: { persistedQuery: { version: 1, sha256Hash: 'e'.repeat(64) } } });
    expect(unknown.statusCode, unknown.body).toBe(401);

    // The same with a key: the keyed path answers them cleanly too.
    const keyed = await t.app.inject({
      method: 'POST',
      url: '/graphql',
      headers: { authorization: `Bearer ${t.adminKey}` },
      payload: status('subscription'),
    });
    expect(keyed.statusCode, keyed.body).toBe(400);
    expect(keyed.json().errors[0].extensions.code).toBe('GRAPHQL_VALIDATION_FAILED');
    const keyedMismatch = await t.app.inject({
      method: 'POST',
      url: '/graphql',
      headers: { authorization: `Bearer ${t.adminKey}` },
      payload: {
        query: '{ myself { id } }',
        extensions: { persistedQuery: { version: 1, sha256Hash: 'f'.repeat(64) } },
      },
    });
    expect(keyedMismatch.statusCode, keyedMismatch.body).toBe(400);
    expect(keyedMismatch.json().errors[0].extensions.code).toBe('PERSISTED_QUERY_HASH_MISMATCH');
    // The right hash is no problem: the query runs.
    const query = '{ myself { id } }';
    const hash = createHash('sha256').update(query).digest('hex');
    const keyedMatch = await t.app.inject({
      method: 'POST',
      url: '/graphql',
      headers: { authorization: `Bearer ${t.adminKey}` },
      payload: { query, extensions: { persistedQuery: { version: 1, sha256Hash: hash } } },
    });
    expect(keyedMatch.statusCode, keyedMatch.body).toBe(200);
    expect(keyedMatch.json().data.myself.id).toBeTruthy();

    // The keyless operations themselves still run.
    const fine = await ask(status('query'));
    expect(fine.statusCode, fine.body).toBe(200);
    expect(fine.json().errors?.[0]?.extensions?.code).toBe('NOT_FOUND');

    const errors = parsed().filter((l) => l.level >= 50);
    expect(errors, JSON.stringify(errors).slice(0, 2000)).toEqual([]);
  });
});
