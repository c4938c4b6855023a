/**
 * Issue #45 "Edges" (a two-tenant probe), through `app.inject` and the commands an operator runs:
 * bodiless DELETEs sent with `Content-Type: application/json`; a revoked admin key and the way back
 * in from the machine (`npm run admin-key`); accounts and their first keys as docs/security.md shows
 * them; two Idempotency-Key headers; unassigned country codes in `locations`; the hosted network
 * volume shape's field names.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issueApiKey } from '../../domain/accounts/index.ts';
import { ensureAdmin } from '../../domain/accounts/index.ts';
import { newId } from '../../domain/shared/index.ts';
import { startTestApp, type Answer, type TestApp } from '../support/app.ts';

const repoRoot = path.resolve(import.meta.dirname, '../..');

interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** A shell command in the repository, with the node this suite runs on first on PATH. */
function sh(command: string, env: Record<string, string | undefined>): Promise<Ran> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', ['-euo', 'pipefail', '-c', command], {
      cwd: repoRoot,
      env: { ...process.env, PATH: `${path.dirname(process.execPath)}:${process.env.PATH ?? ''}`, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

function expectProblem(r: Answer, status: number): void {
  expect(r.status, JSON.stringify(r.body)).toBe(status);
  expect(r.headers.get('content-type')).toMatch(/^application\/problem\+json/);
}

describe('edges of the API', () => {
  let t: TestApp;
  let accountId: string;
  let key: string;
  /** The platform admin's key: GANTRY_ADMIN_API_KEY, until it is revoked below. */
  let adminKey: string;

  beforeAll(async () => {
    t = await startTestApp();
    accountId = (
      await t.ctx.db.account.create({ data: { id: newId(), email: `${newId()}@example.test`, name: 'edges' } })
    ).id;
    key = (await issueApiKey(t.ctx.db, accountId, 'edges', ['READ', 'WRITE', 'RUN'])).key;
    adminKey = t.adminKey;
  });
  afterAll(async () => {
    await t?.stop();
  });

  it('takes a DELETE with Content-Type: application/json and no body on every management route', async () => {
    // The admin key: hosts and public models are the platform admin's, refused (403) before any body is read otherwise.
    const bodiless = (method: string, url: string, headers: Record<string, string> = {}) =>
      t.app.inject({
        method: method as 'DELETE',
        url,
        headers: { authorization: `Bearer ${adminKey}`, 'content-type': 'application/json', ...headers },
      });
    // A real delete: a key, revoked (204), as clients send it.
    const made = await t.call('POST', '/v2/keys', { key: adminKey, body: { name: 'gone', scopes: ['READ'] } });
    expect(made.status).toBe(201);
    const revoked = await bodiless('DELETE', `/v2/keys/${made.body.id}`);
    expect(revoked.statusCode, revoked.body).toBe(204);
    expect((await t.call('GET', '/v2/keys', { key: made.body.key })).status).toBe(401);
    // A registry credential, made and deleted the same way.
    const registry = await t.call('POST', '/v2/registries', {
      key: adminKey,
      body: { name: `r-${newId()}`, username: 'u', password: 'p', registry: 'ghcr.io' },
    });
    expect(registry.status, JSON.stringify(registry.body)).toBe(201);
    const deleted = await bodiless('DELETE', `/v2/registries/${registry.body.id}`, { 'content-length': '0' });
    expect(deleted.statusCode, deleted.body).toBe(204);
    // Every other management DELETE reads no body either: 404 for what is not there, never 400.
    for (const url of [
      '/v2/keys/nosuchkey',
      '/v2/apps/nosuchapp',
      '/v2/apps/nosuchapp/environments/dev',
      '/v2/hosts/nosuchhost',
      '/v2/networkvolumes/nosuchvolume',
      '/v2/network-volumes/nosuchvolume',
      '/v2/pods/nosuchpod',
      '/v2/public-endpoints/no-such-model',
      '/v2/registries/nosuchregistry',
      '/v2/serverless/nosuchendpoint',
      '/v2/templates/nosuchtemplate',
    ]) {
      const r = await bodiless('DELETE', url);
      expect(r.statusCode, `${url}: ${r.body}`).toBe(404);
    }
    // A body that is there is still read, and malformed JSON still refused.
    const malformed = await t.app.inject({
      method: 'DELETE',
      url: '/v2/keys/nosuchkey',
      headers: { authorization: `Bearer ${adminKey}`, 'content-type': 'application/json' },
      payload: '{"a": ',
    });
    expect(malformed.statusCode).toBe(400);
    // A bodiless POST that needs a body is still a 400 where no scope accepts an empty one.
    const post = await bodiless('POST', '/v2/keys');
    expect(post.statusCode).toBe(400);
  });

  it('a revoked GANTRY_ADMIN_API_KEY stays revoked at a restart; `npm run admin-key` mints a new one from the machine', async () => {
    const admin = adminKey;
    const list = await t.call('GET', '/v2/keys', { key: admin });
    const mine = (list.body.keys as Array<{ id: string; prefix: string; revokedAt: string | null }>).find((k) =>
      admin.startsWith(k.prefix),
    );
    expect(mine).toBeDefined();
    expect((await t.call('DELETE', `/v2/keys/${mine!.id}`, { key: admin })).status).toBe(204);
    expect((await t.call('GET', '/v2/accounts', { key: admin })).status).toBe(401);
    // A restart with the same GANTRY_ADMIN_API_KEY: revoking a leaked key sticks.
    await ensureAdmin(t.ctx.db, admin);
    expect((await t.call('GET', '/v2/accounts', { key: admin })).status).toBe(401);

    // The documented way back: the npm script as package.json has it, against this database.
    const script = (
      JSON.parse(readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as { scripts: Record<string, string> }
    ).scripts['admin-key'];
    expect(script).toBeDefined();
    const ran = await sh(`${script!} --name "locked out"`, { DATABASE_URL: t.databaseUrl });
    expect(ran.code, ran.stderr).toBe(0);
    const printed = ran.stdout.trim();
    expect(printed).toMatch(/^gntr_[A-Za-z0-9]{40}$/);
    expect(ran.stderr).toContain('shown this once');
    expect(ran.stderr).not.toContain(printed);
    // It is the platform admin's: accounts, and keys of any account.
    const accounts = await t.call('GET', '/v2/accounts', { key: printed });
    expect(accounts.status).toBe(200);
    const keys = await t.call('GET', '/v2/keys', { key: printed });
    expect(keys.body.keys).toContainEqual(
      expect.objectContaining({ name: 'locked out', scopes: ['READ', 'WRITE', 'RUN', 'ADMIN'], revokedAt: null }),
    );
    expect((await t.call('GET', `/v2/keys?accountId=${accountId}`, { key: printed })).status).toBe(200);
    // The revoked one stays revoked.
    expect((await t.call('GET', '/v2/serverless', { key: admin })).status).toBe(401);
    // Without a database to reach it says so and prints no key.
    const none = await sh(script!, { DATABASE_URL: 'postgresql://nobody:x@127.0.0.1:1/none?sslmode=disable' });
    expect(none.code).not.toBe(0);
    expect(none.stdout).toBe('');
    // Nor without DATABASE_URL and a data dir that has no embedded database yet.
    const empty = mkdtempSync(path.join(tmpdir(), 'gantry-no-data-'));
    const fresh = await sh(script!, { DATABASE_URL: undefined, GANTRY_DATA_DIR: empty });
    expect(fresh.code).not.toBe(0);
    expect(fresh.stdout).toBe('');
    expect(fresh.stderr).toContain('run npm start first');
    adminKey = printed;
  });

  it("the 'Accounts and teams' commands of docs/security.md work as written", async () => {
    const doc = readFileSync(path.join(repoRoot, 'docs/security.md'), 'utf8');
    const section = doc.slice(doc.indexOf('\n## Accounts and teams'), doc.indexOf('\n## Authentication and limits'));
    const script = /^```sh\n([\s\S]*?)^```/m.exec(section)?.[1];
    expect(script).toBeTruthy();
    await t.app.listen({ host: '127.0.0.1', port: 0 });
    const api = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    const email = `alice-${newId()}@example.com`;
    const ran = await sh(
      `${script!.replace('alice@example.com', email)}\necho\necho "ACCOUNT=$ACCOUNT"\necho "ALICE=$ALICE"`,
      {
        API: api,
        KEY: adminKey,
      },
    );
    expect(ran.code, ran.stderr).toBe(0);
    const account = /^ACCOUNT=(\S+)$/m.exec(ran.stdout)?.[1];
    const alice = /^ALICE=(\S+)$/m.exec(ran.stdout)?.[1];
    expect(alice).toMatch(/^gntr_/);
    const made = await t.ctx.db.account.findUniqueOrThrow({ where: { email } });
    expect(made.id).toBe(account);
    expect(made.isAdmin).toBe(false);
    // Alice's key is of her account and only that; the CI key it made was revoked by the last line.
    const keys = await t.call('GET', '/v2/keys', { key: alice });
    expect(keys.status).toBe(200);
    expect(keys.body.keys).toEqual([
      expect.objectContaining({ name: 'alice', accountId: account, scopes: ['READ', 'WRITE', 'RUN'], revokedAt: null }),
      expect.objectContaining({ name: 'ci', scopes: ['RUN'], revokedAt: expect.any(String) }),
    ]);
    expect((await t.call('GET', '/v2/accounts', { key: alice })).status).toBe(403);
  });

  it('refuses two Idempotency-Key headers, also when they arrive joined as one', async () => {
    const endpoint = await t.ctx.db.endpoint.create({
      data: { id: newId(), accountId, name: 'idem', image: 'img:1' },
    });
    const run = (headers: Record<string, string | string[]>) =>
      t.app.inject({
        method: 'POST',
        url: `/v2/${endpoint.id}/run`,
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...headers },
        payload: { input: { n: 1 } },
      });
    for (const value of [['a', 'b'], ['"a"', '"b"'], ['same', 'same'], 'a, b', 'a,b']) {
      for (const path of ['run', 'runsync']) {
        const r = await t.app.inject({
          method: 'POST',
          url: `/v2/${endpoint.id}/${path}`,
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'idempotency-key': value },
          payload: { input: { n: 1 } },
        });
        expect(r.statusCode, `${JSON.stringify(value)} ${path}: ${r.body}`).toBe(400);
        expect(r.headers['content-type']).toMatch(/^application\/problem\+json/);
        expect(r.json().detail).toMatch(/Idempotency-Key header is given more than once/);
      }
    }
    expect(await t.ctx.db.job.count({ where: { endpointId: endpoint.id } })).toBe(0);
    // One key, bare or quoted (a quoted one may hold a comma), is taken.
    expect((await run({ 'idempotency-key': 'one-key' })).statusCode).toBe(200);
    expect((await run({ 'idempotency-key': '"with, comma"' })).statusCode).toBe(200);
    expect(await t.ctx.db.job.count({ where: { endpointId: endpoint.id } })).toBe(2);
  });

  it('refuses locations that are not assigned ISO 3166-1 alpha-2 codes', async () => {
    const gql = async (query: string, variables?: unknown) =>
      (await t.call('POST', '/graphql', { key, body: { query, variables } })).body;
    const tpl = await gql(
      'mutation { saveTemplate(input: {name: "edges-tpl", imageName: "img:1", isServerless: true}) { id } }',
    );
    expect(tpl.errors).toBeUndefined();
    const save = (name: string, locations: string) =>
      gql('mutation S($input: EndpointInput!) { saveEndpoint(input: $input) { id locations } }', {
        input: {
          name,
          templateId: tpl.data.saveTemplate.id,
          gpuIds: 'AMPERE_16',
          workersMin: 0,
          workersMax: 0,
          locations,
        },
      });
    const before = await t.ctx.db.endpoint.count({ where: { accountId } });
    for (const bad of ['XX', 'ZZ', 'LO', 'US,XX', 'zz', 'UK', 'EU', 'XK', 'AA', 'QM']) {
      const r = await save('bad-loc', bad);
      expect(r.errors?.[0]?.extensions?.code, bad).toBe('BAD_USER_INPUT');
      expect(r.errors[0].message, bad).toMatch(/neither an ISO 3166-1 alpha-2 country code/);
    }
    expect(await t.ctx.db.endpoint.count({ where: { accountId } })).toBe(before);
    const good = await save('good-loc', 'us,CZ,GB,ax, cw');
    expect(good.errors, JSON.stringify(good.errors)).toBeUndefined();
    expect(good.data.saveEndpoint.locations).toBe('US,CZ,GB,AX,CW');
  });

  it('names the hosted network-volume field as it was sent: dataCenterId', async () => {
    const r = await t.call('POST', '/v2/networkvolumes', {
      key,
      body: { name: 'v', size: 10, dataCenterId: 'NO-SUCH-1' },
    });
    expectProblem(r, 422);
    expect(r.body.errors).toEqual([expect.stringMatching(/^\$\.dataCenterId: unknown data center 'NO-SUCH-1'/)]);
    // The /v2/network-volumes shape keeps its own name.
    const own = await t.call('POST', '/v2/network-volumes', {
      key,
      body: { name: 'v', size: 10, dataCenter: 'NO-SUCH-1' },
    });
    expectProblem(own, 422);
    expect(own.body.errors).toEqual([expect.stringMatching(/^\$\.dataCenter: unknown data center/)]);
  });
});
