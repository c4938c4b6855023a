/**
 * Finding 2: a registry credential goes only to the registry it is bound to. The binding is stored
 * and shown (REST and GraphQL), every place an image is paired with a credential refuses another
 * registry when it is written, a credential from before binding (null) is refused until its owner
 * binds it with its login, and the migration withdraws the bindings it had guessed.
 */
import { cp, mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../../domain/shared/index.ts';
import { applyMigrations } from '../../infra/migrations.ts';
import { migrationsDir } from '../../infra/platform.ts';
import { freshDatabase } from '../support/databases.ts';
import { call, startTestPlatform, type TestPlatform } from '../support/platform.ts';

/** Distinctive, so that finding it in an answer means the password leaked (a short one can appear inside a random id). */
const PASSWORD = 'registry-password-7f3e9c';

describe('registry credentials are bound to one registry', () => {
  let p: TestPlatform;
  let accountId: string;

  beforeAll(async () => {
    p = await startTestPlatform();
    accountId = (await p.ctx.db.account.findFirstOrThrow({ where: { isAdmin: true } })).id;
  });
  afterAll(async () => {
    await p?.stop();
  });

  const rest = (method: string, route: string, body?: unknown) => call(p.url, method, route, { key: p.adminKey, body });
  const gql = (query: string, variables?: unknown) =>
    call(p.url, 'POST', '/graphql', { key: p.adminKey, body: { query, variables } });
  const unique = (prefix: string) => `${prefix}-${newId().slice(0, 8)}`;

  it('stores the registry given or derived on create and shows it in every read', async () => {
    const given = await rest('POST', '/v2/registries', {
      name: unique('given'),
      username: 'bot',
      password: PASSWORD,
      registry: 'GHCR.io',
    });
    expect(given.status).toBe(201);
    expect(given.body).toEqual({ id: expect.any(String), name: expect.any(String), registry: 'ghcr.io' });
    const byName = await rest('POST', '/v2/registries', { name: 'quay.io', username: 'bot', password: PASSWORD });
    expect(byName.body.registry).toBe('quay.io');
    const plain = await rest('POST', '/v2/registries', { name: unique('hub'), username: 'bot', password: PASSWORD });
    expect(plain.body.registry).toBe('docker.io');
    const badHost = await rest('POST', '/v2/registries', {
      name: unique('bad'),
      username: 'bot',
      password: PASSWORD,
      registry: 'evil.example/path',
    });
    expect(badHost.status).toBe(422);
    expect(badHost.body.errors[0]).toMatch(/^\$\.registry: /);

    expect((await rest('GET', `/v2/registries/${given.body.id}`)).body.registry).toBe('ghcr.io');
    expect((await rest('GET', '/v2/registries')).body.registries).toContainEqual(given.body);
    const g = await gql(
      'mutation { saveRegistryAuth(input: {name: "gql-reg", username: "u", password: "p", registry: "registry.example.com:5000"}) { id name registry } }',
    );
    expect(g.body.data.saveRegistryAuth.registry).toBe('registry.example.com:5000');
    const listed = await gql('{ myself { containerRegistryCreds { id registry } } }');
    expect(listed.body.data.myself.containerRegistryCreds).toContainEqual({ id: given.body.id, registry: 'ghcr.io' });
    // The secret parts are still never returned.
    expect(JSON.stringify(listed.body)).not.toContain(PASSWORD);
  });

  it('refuses an image on another registry than its credential, wherever the two meet (REST and GraphQL)', async () => {
    const ghcr = (
      await rest('POST', '/v2/registries', {
        name: unique('ghcr'),
        username: 'bot',
        password: 'secret-pw',
        registry: 'ghcr.io',
      })
    ).body.id as string;
    const mismatch = `$.registry: registry credential '${ghcr}' is bound to ghcr.io, and the image 'attacker.example/app:1' is on attacker.example`;

    const created = await rest('POST', '/v2/serverless', {
      name: unique('ep'),
      image: 'attacker.example/app:1',
      registry: ghcr,
    });
    expect(created.status).toBe(422);
    expect(created.body.errors).toEqual([mismatch]);
    // Docker Hub names (no host) are docker.io, not the credential's registry.
    expect(
      (await rest('POST', '/v2/serverless', { name: unique('ep'), image: 'team/app:1', registry: ghcr })).status,
    ).toBe(422);

    const ok = await rest('POST', '/v2/serverless', {
      name: unique('ep'),
      image: 'ghcr.io/team/app:1',
      registry: ghcr,
    });
    expect(ok.status).toBe(201);
    expect(ok.body.registry).toBe(ghcr);
    const moved = await rest('PATCH', `/v2/serverless/${ok.body.id}`, { image: 'attacker.example/app:1' });
    expect(moved.status).toBe(422);
    expect(moved.body.errors).toEqual([mismatch]);
    const hub = (await rest('POST', '/v2/registries', { name: unique('hub'), username: 'u', password: 'p' })).body
      .id as string;
    const swapped = await rest('PATCH', `/v2/serverless/${ok.body.id}`, { registry: hub });
    expect(swapped.status).toBe(422);
    expect((await p.ctx.db.endpoint.findUniqueOrThrow({ where: { id: ok.body.id } })).image).toBe('ghcr.io/team/app:1');

    const template = await rest('POST', '/v2/templates', {
      name: unique('tpl'),
      image: 'attacker.example/app:1',
      registry: ghcr,
    });
    expect(template.status).toBe(422);
    expect(template.body.errors).toEqual([mismatch]);

    const gqlTemplate = await gql(
      `mutation { saveTemplate(input: {name: "${unique('gtpl')}", imageName: "attacker.example/app:1", containerRegistryAuthId: "${ghcr}"}) { id } }`,
    );
    expect(gqlTemplate.body.errors[0].extensions.code).toBe('BAD_USER_INPUT');
    expect(JSON.stringify(gqlTemplate.body.errors[0].extensions.errors)).toContain(
      "is bound to ghcr.io, and the image 'attacker.example/app:1' is on attacker.example",
    );

    const pod = await gql(
      `mutation { podFindAndDeployOnDemand(input: {name: "${unique('pod')}", imageName: "attacker.example/app:1", gpuCount: 0, containerRegistryAuthId: "${ghcr}"}) { id } }`,
    );
    expect(pod.body.errors[0].extensions.code).toBe('BAD_USER_INPUT');
    expect(JSON.stringify(pod.body.errors[0].extensions.errors)).toContain(
      '$.containerRegistryAuthId: registry credential',
    );

    expect(await p.ctx.db.endpoint.count({ where: { image: { startsWith: 'attacker.example/' } } })).toBe(0);
    expect(await p.ctx.db.template.count({ where: { imageName: { startsWith: 'attacker.example/' } } })).toBe(0);
    expect(await p.ctx.db.pod.count({ where: { imageName: { startsWith: 'attacker.example/' } } })).toBe(0);
  });

  it('a credential from before binding is refused until its owner binds it with its login', async () => {
    // What the migration leaves for credentials that existed before binding.
    const legacy = await p.ctx.db.registryCredential.create({
      data: { id: newId(), accountId, name: unique('legacy'), registry: null, secret: Buffer.from([1]) },
    });
    expect((await rest('GET', `/v2/registries/${legacy.id}`)).body.registry).toBeNull();
    const used = await rest('POST', '/v2/serverless', {
      name: unique('ep'),
      image: 'ghcr.io/team/app:1',
      registry: legacy.id,
    });
    expect(used.status).toBe(422);
    expect(used.body.errors).toEqual([
      `$.registry: registry credential '${legacy.id}' is not bound to a registry yet; give its registry together with its login (updateRegistryAuth)`,
    ]);

    // Binding takes the login too: a key that does not know the password cannot point it anywhere.
    expect((await rest('PATCH', `/v2/registries/${legacy.id}`, { registry: 'ghcr.io' })).status).toBe(422);
    const bound = await rest('PATCH', `/v2/registries/${legacy.id}`, {
      username: 'bot',
      password: 'new-pw',
      registry: 'ghcr.io',
    });
    expect(bound.status).toBe(200);
    expect(bound.body.registry).toBe('ghcr.io');
    const ep = await rest('POST', '/v2/serverless', {
      name: unique('ep'),
      image: 'ghcr.io/team/app:1',
      registry: legacy.id,
    });
    expect(ep.status).toBe(201);

    // Moving it while an endpoint pulls from its registry would strand that endpoint: refused.
    const away = await gql(
      `mutation { updateRegistryAuth(input: {id: "${legacy.id}", username: "bot", password: "pw", registry: "attacker.example"}) { registry } }`,
    );
    expect(away.body.errors[0].extensions.code).toBe('BAD_USER_INPUT');
    expect(JSON.stringify(away.body.errors[0].extensions.errors)).toContain(
      `endpoint ${ep.body.id} pulls 'ghcr.io/team/app:1' from ghcr.io`,
    );
    expect((await p.ctx.db.registryCredential.findUniqueOrThrow({ where: { id: legacy.id } })).registry).toBe(
      'ghcr.io',
    );
    // Replacing only the login keeps the binding.
    const relogin = await gql(
      `mutation { updateRegistryAuth(input: {id: "${legacy.id}", username: "bot", password: "pw2"}) { registry } }`,
    );
    expect(relogin.body.data.updateRegistryAuth.registry).toBe('ghcr.io');
  });
});

describe('the binding migration', () => {
  const BINDING = '20261124003000_registry_host_binding';

  /** A migrations directory holding the migrations before `until` (exclusive) or through it. */
  async function partialDir(until: string, inclusive: boolean): Promise<string> {
    const dir = await mkdtemp(path.join(tmpdir(), 'gantry-migrations-'));
    for (const entry of await readdir(migrationsDir)) {
      if (entry.endsWith('.toml') || entry < until || (inclusive && entry === until))
        await cp(path.join(migrationsDir, entry), path.join(dir, entry), { recursive: true });
    }
    return dir;
  }

  it('leaves credentials from before binding unbound (no guess from the images that used them) and keeps later ones', async () => {
    const url = await freshDatabase();
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    const dirs: string[] = [];
    try {
      await client.query(`drop schema public cascade; create schema public; set time zone 'UTC'`);
      const before = await partialDir(BINDING, false);
      const through = await partialDir(BINDING, true);
      dirs.push(before, through);
      await applyMigrations(url, before);
      await client.query(`insert into "Account" (id, email, name) values ('acct1', 'a@example.com', 'a')`);
      // Used by an endpoint whose image is on the attacker's registry (the exfiltration this fixes):
      // the first binding migration would bind it there.
      await client.query(
        `insert into "RegistryCredential" (id, "accountId", name, secret, "updatedAt") values ('old1', 'acct1', 'old', '\\x01', now())`,
      );
      await client.query(
        `insert into "Template" (id, "accountId", name, "imageName", "registryId", "updatedAt") values ('tpl1', 'acct1', 't', 'attacker.example/app:1', 'old1', now())`,
      );
      await applyMigrations(url, through);
      expect((await client.query(`select registry from "RegistryCredential" where id = 'old1'`)).rows[0].registry).toBe(
        'attacker.example',
      );
      // Made by the app after binding existed: its owner stated the registry.
      await new Promise((r) => setTimeout(r, 20));
      await client.query(
        `insert into "RegistryCredential" (id, "accountId", name, secret, registry, "updatedAt") values ('new1', 'acct1', 'new', '\\x01', 'ghcr.io', now())`,
      );

      await applyMigrations(url, migrationsDir);
      const rows = (await client.query(`select id, registry from "RegistryCredential" order by id`)).rows;
      expect(rows).toEqual([
        { id: 'new1', registry: 'ghcr.io' },
        { id: 'old1', registry: null },
      ]);
      const column = (
        await client.query(
          `select is_nullable, column_default from information_schema.columns where table_name = 'RegistryCredential' and column_name = 'registry'`,
        )
      ).rows[0];
      expect(column).toEqual({ is_nullable: 'YES', column_default: null });
    } finally {
      await client.end();
      for (const d of dirs) await rm(d, { recursive: true, force: true });
    }
  });
});
