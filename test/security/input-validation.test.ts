/**
 * What a tenant writes is checked when it is written: nothing that the database cannot store
 * (500s), nothing that becomes a container runtime option, nothing a worker could never start
 * with, no endpoint made by a key limited to other endpoints, and no registry password sent to a
 * registry the image names.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issueApiKey } from '../../domain/accounts/index.ts';
import { createQueueEndpoint } from '../support/jobs.ts';
import { call, startTestPlatform, type TestPlatform } from '../support/platform.ts';

describe('input a tenant writes', () => {
  let p: TestPlatform;
  let accountId: string;

  beforeAll(async () => {
    p = await startTestPlatform();
    accountId = (await p.ctx.db.account.findFirstOrThrow({ where: { isAdmin: true } })).id;
  });
  afterAll(async () => {
    await p?.stop();
  });

  const rest = (method: string, route: string, body?: unknown, key = p.adminKey) =>
    call(p.url, method, route, { key, body });
  const gql = (query: string, variables?: unknown, key = p.adminKey) =>
    call(p.url, 'POST', '/graphql', { key, body: { query, variables } });
  const endpoint = (extra: Record<string, unknown>) =>
    rest('POST', '/v2/serverless', { name: `in-${Math.random().toString(36).slice(2, 8)}`, image: 'img:1', ...extra });

  it('NUL characters, deep nesting and integers beyond int4 are 4xx naming the field, never 500', async () => {
    const ep = await createQueueEndpoint(p);
    const nulId = await rest('GET', '/v2/serverless/ab%00cd');
    expect(nulId.status).toBe(422);
    expect(nulId.body.errors).toEqual(['$params.id: must not contain NUL characters']);

    const nulInput = await rest('POST', `/v2/${ep}/run`, { input: { a: 'x\u0000y' } });
    expect(nulInput.status).toBe(422);
    expect(nulInput.body.errors).toEqual(['$.input.a: must not contain NUL characters']);

    const deep = await call(p.url, 'POST', `/v2/${ep}/run`, {
      key: p.adminKey,
      rawBody: `{"input":${'['.repeat(100_000)}${']'.repeat(100_000)}}`,
    });
    expect(deep.status).toBe(422);
    expect(deep.body.errors[0]).toMatch(/^\$\.input(\[0\])+: nested deeper than 64 levels$/);

    const big = await endpoint({ timeout: 137_438_953_471 });
    expect(big.status).toBe(422);
    expect(big.body.errors).toEqual(['$.timeout: must be <= 2147483647']);

    const literal = await gql('mutation { saveTemplate(input: {name: "a\\u0000b", imageName: "img:1"}) { id } }');
    expect(literal.body.errors[0].message).toMatch(/NUL/);
    expect(literal.body.errors[0].extensions.code).toBe('GRAPHQL_VALIDATION_FAILED');
    const variable = await gql(
      'mutation T($name: String!) { saveTemplate(input: {name: $name, imageName: "img:1"}) { id } }',
      { name: 'a\u0000b' },
    );
    expect(variable.status).toBe(400);
    expect(variable.body.errors[0]).toMatchObject({
      message: '$variables.name: must not contain NUL characters',
      extensions: { code: 'BAD_USER_INPUT' },
    });
    expect(await p.ctx.db.template.count({ where: { name: { contains: 'a' } } })).toBe(0);
  });

  it('image references follow the reference grammar: an option-shaped name is refused everywhere it can be written', async () => {
    for (const image of ['--privileged', '-v/:/host', 'img:1 --privileged', 'UPPER CASE', `${'a'.repeat(520)}:1`]) {
      const r = await endpoint({ image });
      expect(r.status, image).toBe(422);
      expect(r.body.errors[0], image).toMatch(/^\$\.image: /);
    }
    const template = await rest('POST', '/v2/templates', { name: 'opt-image', image: '--privileged' });
    expect(template.status).toBe(422);
    const pod = await gql(
      'mutation { podFindAndDeployOnDemand(input: {name: "p", imageName: "--privileged", gpuCount: 0}) { id } }',
    );
    expect(pod.body.errors[0].extensions.code).toBe('BAD_USER_INPUT');
    expect(JSON.stringify(pod.body.errors[0].extensions.errors)).toContain('$.imageName');
    expect(await p.ctx.db.pod.count()).toBe(0);
    for (const image of [
      'docker.io/library/alpine:3.20',
      'ghcr.io/team/app@sha256:' + 'a'.repeat(64),
      'localhost:5000/x/y:z',
    ]) {
      expect((await endpoint({ image })).status, image).toBe(201);
    }
  });

  it('environment, args and mount paths a worker could not start with are 422s', async () => {
    for (const env of [
      { 'A=B': 'x' },
      { '': 'x' },
      { 'a.b': 'x' },
      { A: 'line\nbreak' },
      Object.fromEntries(Array.from({ length: 101 }, (_, i) => [`K${i}`, 'v'])),
    ]) {
      const r = await endpoint({ env });
      expect(r.status, JSON.stringify(env).slice(0, 60)).toBe(422);
      expect(r.body.errors[0]).toMatch(/^\$\.env/);
    }
    // 90 KiB of values: each fits, together they do not.
    const heavy = await endpoint({ env: { A: 'x'.repeat(30_000), B: 'x'.repeat(30_000), C: 'x'.repeat(30_000) } });
    expect(heavy.status).toBe(422);
    expect(heavy.body.errors).toEqual(['$.env: must hold at most 65536 bytes of names and values (has 90003)']);
    expect((await endpoint({ args: 'x '.repeat(5_000) })).status).toBe(422);
    const templateEnv = await rest('POST', '/v2/templates', {
      name: 'bad-env',
      image: 'img:1',
      env: { 'not-a-name': 'x' },
    });
    expect(templateEnv.status).toBe(422);
    const mount = await gql(
      'mutation { saveTemplate(input: {name: "m", imageName: "img:1", volumeInGb: 1, volumeMountPath: "/data\\nx"}) { id } }',
    );
    expect(mount.body.errors[0].extensions.code).toBe('BAD_USER_INPUT');
    expect(JSON.stringify(mount.body.errors[0].extensions.errors)).toContain('$.volumeMountPath');
  });

  it('a key limited to some endpoints creates no endpoint, over REST or GraphQL', async () => {
    const own = await createQueueEndpoint(p);
    const limited = await issueApiKey(p.ctx.db, accountId, 'limited', ['READ', 'WRITE', 'RUN'], undefined, [own]);
    const r = await rest('POST', '/v2/serverless', { name: 'by-limited', image: 'img:1' }, limited.key);
    expect(r.status).toBe(403);
    const template = (
      await p.ctx.db.template.create({
        data: { id: `tpl${Date.now()}`, accountId, name: `tpl-${Date.now()}`, imageName: 'img:1', isServerless: true },
      })
    ).id;
    const g = await gql(
      `mutation { saveEndpoint(input: {name: "by-limited", templateId: "${template}", gpuIds: "AMPERE_24"}) { id } }`,
      undefined,
      limited.key,
    );
    expect(g.body.errors[0].extensions.code).toBe('FORBIDDEN');
    expect(await p.ctx.db.endpoint.count({ where: { name: { startsWith: 'by-limited' } } })).toBe(0);
    // Its own endpoint it may still change.
    expect((await rest('PATCH', `/v2/serverless/${own}`, { workers: { min: 0, max: 1 } }, limited.key)).status).toBe(
      200,
    );
  });

  it('a registry credential is bound to its registry: an image elsewhere cannot use it', async () => {
    const ghcr = await rest('POST', '/v2/registries', {
      name: 'team-ghcr',
      username: 'bot',
      password: 'pw-secret',
      registry: 'ghcr.io',
    });
    expect(ghcr.status).toBe(201);
    expect(ghcr.body.registry).toBe('ghcr.io');
    // A name that is a registry host binds to it; any other name to Docker Hub.
    expect(
      (await rest('POST', '/v2/registries', { name: 'registry.example.com:5000', username: 'u', password: 'p' })).body
        .registry,
    ).toBe('registry.example.com:5000');

    const elsewhere = await endpoint({ image: 'attacker.example/app:1', registry: ghcr.body.id });
    expect(elsewhere.status).toBe(422);
    expect(elsewhere.body.errors).toEqual([
      `$.registry: registry credential '${ghcr.body.id}' is bound to ghcr.io, and the image 'attacker.example/app:1' is on attacker.example`,
    ]);
    const right = await endpoint({ image: 'ghcr.io/team/app:1', registry: ghcr.body.id });
    expect(right.status).toBe(201);
    // Changing only the image of an endpoint that uses the credential is checked as well.
    const moved = await rest('PATCH', `/v2/serverless/${right.body.id}`, { image: 'attacker.example/app:2' });
    expect(moved.status).toBe(422);
    const tpl = await gql(
      `mutation { saveTemplate(input: {name: "t-reg", imageName: "docker.io/library/alpine:3", containerRegistryAuthId: "${ghcr.body.id}"}) { id } }`,
    );
    expect(tpl.body.errors[0].extensions.code).toBe('BAD_USER_INPUT');
    const listed = await gql('{ myself { containerRegistryCreds { id registry } } }');
    expect(listed.body.data.myself.containerRegistryCreds).toContainEqual({ id: ghcr.body.id, registry: 'ghcr.io' });
  });
});
