import { getIntrospectionQuery } from 'graphql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issueApiKey } from '../../domain/accounts/index.ts';
import { newId } from '../../domain/shared/index.ts';
import { call, startTestPlatform, type TestPlatform } from '../support/platform.ts';
import { endpointWorkflowId } from '../../contracts/workflows.ts';

describe('GraphQL API against real PostgreSQL and Temporal', () => {
  let p: TestPlatform;
  let templateId: string;
  beforeAll(async () => {
    p = await startTestPlatform();
    const t = await gql(
      `mutation { saveTemplate(input: {name: "tpl", imageName: "img:1", isServerless: true, dockerArgs: "serve", containerDiskInGb: 7, ports: "8000/http", env: [{key: "A", value: "1"}]}) { id name env { key value } } }`,
    );
    expect(t.errors).toBeUndefined();
    templateId = t.data.saveTemplate.id;
  });
  afterAll(async () => {
    await p?.stop();
  });

  async function gql(
    query: string,
    variables?: Record<string, unknown>,
    key: string | null = p.adminKey,
    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- GraphQL answers are arbitrary JSON
  ): Promise<any> {
    const qs = key === null ? '' : `?api_key=${encodeURIComponent(key)}`;
    const r = await call(p.url, 'POST', `/graphql${qs}`, { body: { query, variables } });
    return { status: r.status, ...r.body };
  }

  it("declares its directives at locations every client knows (graphql-core 3.2's build_client_schema included)", async () => {
    const r = await gql('{ __schema { directives { name locations } } }');
    const deprecated = r.data.__schema.directives.find((d: { name: string }) => d.name === 'deprecated');
    expect(deprecated.locations).toEqual([
      'FIELD_DEFINITION',
      'ARGUMENT_DEFINITION',
      'INPUT_FIELD_DEFINITION',
      'ENUM_VALUE',
    ]);
    // The locations of the 2018 spec and of graphql-core 3.2's DirectiveLocation, nothing newer.
    const known = new Set([
      'QUERY',
      'MUTATION',
      'SUBSCRIPTION',
      'FIELD',
      'FRAGMENT_DEFINITION',
      'FRAGMENT_SPREAD',
      'INLINE_FRAGMENT',
      'VARIABLE_DEFINITION',
      'SCHEMA',
      'SCALAR',
      'OBJECT',
      'FIELD_DEFINITION',
      'ARGUMENT_DEFINITION',
      'INTERFACE',
      'UNION',
      'ENUM',
      'ENUM_VALUE',
      'INPUT_OBJECT',
      'INPUT_FIELD_DEFINITION',
    ]);
    for (const d of r.data.__schema.directives as Array<{ name: string; locations: string[] }>)
      for (const l of d.locations) expect(known.has(l), `@${d.name} at ${l}`).toBe(true);
  });

  it('answers myself with id, email, endpoints and no discount', async () => {
    const r = await gql(
      '{ myself { id email endpoints { id } serverlessDiscount { discountFactor type expirationDate } } }',
    );
    expect(r.status).toBe(200);
    expect(r.data.myself).toMatchObject({ email: 'admin@gantry.local', endpoints: [], serverlessDiscount: null });
    expect(r.data.myself.id).toMatch(/^[a-z0-9]{14}$/);
  });

  it('creates with saveEndpoint, modifies with id, and REST reads what GraphQL wrote (and the reverse)', async () => {
    const fields =
      'id name gpuIds idleTimeout locations networkVolumeId flashBootType scalerType scalerValue templateId workersMax workersMin type pods { desiredStatus }';
    const created = await gql(
      `mutation { saveEndpoint(input: {name: "gq", templateId: "${templateId}", gpuIds: "AMPERE_24,ADA_24", type: "QB", idleTimeout: 9, locations: "US,CZ", flashBootType: FLASHBOOT, scalerType: "REQUEST_COUNT", scalerValue: 3, workersMin: 0, workersMax: 4}) { ${fields} } }`,
    );
    expect(created.errors).toBeUndefined();
    const ep = created.data.saveEndpoint;
    expect(ep).toMatchObject({
      name: 'gq',
      gpuIds: 'AMPERE_24,ADA_24',
      idleTimeout: 9,
      locations: 'US,CZ',
      flashBootType: 'FLASHBOOT',
      scalerType: 'REQUEST_COUNT',
      scalerValue: 3,
      templateId,
      workersMin: 0,
      workersMax: 4,
      type: 'QB',
      networkVolumeId: null,
      pods: [],
    });

    const rest = await call(p.url, 'GET', `/v2/serverless/${ep.id}`, { key: p.adminKey });
    expect(rest.status).toBe(200);
    expect(rest.body).toMatchObject({
      name: 'gq',
      image: 'img:1',
      args: 'serve',
      disk: 7,
      ports: ['8000/http'],
      env: { A: '1' },
      gpu: { pools: ['AMPERE_24', 'ADA_24'], count: 1 },
      workers: { min: 0, max: 4 },
      scaling: { type: 'REQUEST_COUNT', value: 3, idleTimeout: 9 },
      flashboot: 'FLASHBOOT',
    });

    // Modify through GraphQL: the running workflow gets the new scaling.
    const modified = await gql(
      `mutation { saveEndpoint(input: {id: "${ep.id}", name: "gq", templateId: "${templateId}", gpuIds: "AMPERE_24,ADA_24", workersMax: 6, scalerValue: 5}) { workersMax scalerValue workersMin } }`,
    );
    expect(modified.errors).toBeUndefined();
    expect(modified.data.saveEndpoint).toEqual({ workersMax: 6, scalerValue: 5, workersMin: 0 });
    // The workflow reads its row after the signal the answer waited for.
    const handle = p.ctx.temporal.workflow.getHandle(endpointWorkflowId(ep.id));
    let spec = await handle.query<{ workersMax: number; scalerValue: number } | null>('getSpec');
    for (let i = 0; i < 200 && !(spec?.workersMax === 6 && spec.scalerValue === 5); i++) {
      await new Promise((r) => setTimeout(r, 50));
      spec = await handle.query<{ workersMax: number; scalerValue: number } | null>('getSpec');
    }
    expect(spec).toMatchObject({ workersMax: 6, scalerValue: 5 });

    // REST writes, GraphQL reads.
    const patched = await call(p.url, 'PATCH', `/v2/serverless/${ep.id}`, {
      key: p.adminKey,
      body: { workers: { min: 0, max: 2 }, name: 'gq2' },
    });
    expect(patched.status).toBe(200);
    const seen = await gql(`{ myself { endpoints { id name workersMax } } }`);
    expect(seen.data.myself.endpoints).toContainEqual({ id: ep.id, name: 'gq2', workersMax: 2 });
  });

  it('refuses deleteEndpoint until workersMin and workersMax are both 0, then answers null', async () => {
    const c = await gql(
      `mutation { saveEndpoint(input: {name: "del", templateId: "${templateId}", gpuIds: "AMPERE_16", workersMin: 0, workersMax: 1}) { id } }`,
    );
    const id = c.data.saveEndpoint.id;
    const refused = await gql(`mutation { deleteEndpoint(id: "${id}") }`);
    expect(refused.errors[0].extensions.code).toBe('BAD_REQUEST');
    expect(refused.errors[0].message).toMatch(/workersMax 1/);
    await gql(
      `mutation { saveEndpoint(input: {id: "${id}", name: "del", templateId: "${templateId}", gpuIds: "AMPERE_16", workersMax: 0}) { id } }`,
    );
    const deleted = await gql(`mutation { deleteEndpoint(id: "${id}") }`);
    expect(deleted.errors).toBeUndefined();
    expect(deleted.data).toEqual({ deleteEndpoint: null });
    expect((await call(p.url, 'GET', `/v2/serverless/${id}`, { key: p.adminKey })).status).toBe(404);
  });

  it('maps errors to codes: UNAUTHENTICATED, FORBIDDEN, NOT_FOUND, BAD_USER_INPUT', async () => {
    const none = await gql('{ myself { id } }', undefined, null);
    expect(none.status).toBe(401);
    expect(none.errors[0].extensions.code).toBe('UNAUTHENTICATED');
    const bad = await gql('{ myself { id } }', undefined, 'gntr_not_a_key_at_all_000000');
    expect(bad.errors[0].extensions.code).toBe('UNAUTHENTICATED');

    // The bearer header works too, for tools.
    const viaHeader = await call(p.url, 'POST', '/graphql', {
      key: p.adminKey,
      body: { query: '{ myself { email } }' },
    });
    expect(viaHeader.body.data.myself.email).toBe('admin@gantry.local');

    const readOnly = await issueApiKey(
      p.ctx.db,
      (await p.ctx.db.account.findFirstOrThrow({ where: { email: 'admin@gantry.local' } })).id,
      'ro',
      ['READ'],
    );
    const forbidden = await gql(
      `mutation { saveEndpoint(input: {name: "x", templateId: "${templateId}", gpuIds: "AMPERE_16"}) { id } }`,
      undefined,
      readOnly.key,
    );
    expect(forbidden.errors[0].extensions.code).toBe('FORBIDDEN');

    const other = await p.ctx.db.account.create({ data: { id: newId(), email: `${newId()}@example.test`, name: 'o' } });
    const otherKey = await issueApiKey(p.ctx.db, other.id, 'o', ['READ', 'WRITE']);
    const mine = await gql(`{ myself { endpoints { id } } }`);
    const someId = mine.data.myself.endpoints[0].id;
    const notFound = await gql(`mutation { deleteEndpoint(id: "${someId}") }`, undefined, otherKey.key);
    expect(notFound.errors[0].extensions.code).toBe('NOT_FOUND');

    const invalid = await gql(
      `mutation { saveEndpoint(input: {name: "v", templateId: "${templateId}", gpuIds: "AMPERE_16", workersMin: -1, locations: "MARS"}) { id } }`,
    );
    expect(invalid.errors[0].extensions.code).toBe('BAD_USER_INPUT');
    expect(invalid.errors[0].extensions.errors.join(' ')).toMatch(/workersMin|locations/);
  });

  it("refuses what the hosted client's fields must not let through, and says why in the message", async () => {
    const admin = await p.ctx.db.account.findFirstOrThrow({ where: { email: 'admin@gantry.local' } });
    const podsBefore = await p.ctx.db.pod.count();
    const key = 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOnlyForThisTest000000000000000000000000 t@x';
    const settings = (pubKey: string, k: string | null = p.adminKey) =>
      gql('mutation S($k: String!) { updateUserSettings(input: {pubKey: $k}) { id email pubKey } }', { k: pubKey }, k);
    // The answer is the whole User, as `myself` shows it.
    expect((await settings(key)).data.updateUserSettings).toEqual({ id: admin.id, email: admin.email, pubKey: key });
    // Too many keys, too much text, a private key pasted by mistake, a line break inside a key: refused,
    // the stored keys unchanged.
    const tooMany = await settings(Array.from({ length: 33 }, () => key).join('\n'));
    expect(tooMany.errors[0].message).toMatch(/33 keys; at most 32/);
    expect((await settings('x'.repeat(17_000))).errors[0].extensions.code).toBe('BAD_USER_INPUT');
    const privateKey = await settings(
      '-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----',
    );
    expect(privateKey.errors[0].message).toMatch(/line 1 is not an OpenSSH public key/);
    expect((await gql('{ myself { pubKey } }')).data.myself.pubKey).toBe(key);
    // A read-only key and an endpoint-scoped key change no account settings.
    const readOnly = await issueApiKey(p.ctx.db, admin.id, 'ro-settings', ['READ']);
    expect((await settings('', readOnly.key)).errors[0].extensions.code).toBe('FORBIDDEN');
    const oneEndpoint = (await gql('{ myself { endpoints { id } } }')).data.myself.endpoints[0].id as string;
    const scoped = await issueApiKey(p.ctx.db, admin.id, 'scoped-settings', ['READ', 'WRITE'], undefined, [
      oneEndpoint,
    ]);
    expect((await settings('', scoped.key)).errors[0].extensions.code).toBe('FORBIDDEN');
    expect((await gql('{ myself { pubKey } }')).data.myself.pubKey).toBe(key);
    // Empty removes them.
    expect((await settings('')).data.updateUserSettings.pubKey).toBeNull();

    // A public template, a CUDA version that is not one, a CPU size that is not one: refused.
    const pub = await gql(`mutation { saveTemplate(input: {name: "pub", imageName: "img:1", isPublic: true}) { id } }`);
    expect(pub.errors[0].message).toMatch(/no public templates/);
    expect(await p.ctx.db.template.count({ where: { name: 'pub' } })).toBe(0);
    const cuda = await gql(
      `mutation { saveEndpoint(input: {name: "cuda", templateId: "${templateId}", gpuIds: "AMPERE_16", allowedCudaVersions: "12.4,latest"}) { id } }`,
    );
    expect(cuda.errors[0].message).toMatch(/allowedCudaVersions: latest: not a CUDA version/);
    const cpu = await gql(`mutation { deployCpuPod(input: {imageName: "img:1", instanceId: "cpu3c-1-huge"}) { id } }`);
    expect(cpu.errors[0].message).toMatch(/instanceId: 'cpu3c-1-huge' is not a CPU instance id/);
    // The hosted base template with no image: Gantry has none of that name.
    const noImage = await gql(`mutation { deployCpuPod(input: {templateId: "runpod-ubuntu"}) { id } }`);
    expect(noImage.errors[0].message).toMatch(/no template 'runpod-ubuntu'/);
    expect(await p.ctx.db.pod.count()).toBe(podsBefore);

    // Another account's endpoint cannot be moved to a template, nor to another account's template.
    const other = await p.ctx.db.account.create({
      data: { id: newId(), email: `${newId()}@example.test`, name: 'o2' },
    });
    const otherKey = await issueApiKey(p.ctx.db, other.id, 'o2', ['READ', 'WRITE']);
    const move = (endpointId: string, tpl: string, k: string) =>
      gql(
        `mutation { updateEndpointTemplate(input: {endpointId: "${endpointId}", templateId: "${tpl}"}) { id templateId } }`,
        undefined,
        k,
      );
    expect((await move(oneEndpoint, templateId, otherKey.key)).errors[0].extensions.code).toBe('NOT_FOUND');
    const otherTpl = await gql(
      `mutation { saveTemplate(input: {name: "theirs", imageName: "img:2"}) { id } }`,
      undefined,
      otherKey.key,
    );
    const stolen = await move(oneEndpoint, otherTpl.data.saveTemplate.id, p.adminKey);
    expect(stolen.errors[0].message).toMatch(/no template/);
    expect((await p.ctx.db.endpoint.findUniqueOrThrow({ where: { id: oneEndpoint } })).templateId).toBe(templateId);
  });

  it("takes the hosted flash tool's 1-vCPU size and data-center ids, and nothing else they could carry", async () => {
    const SAVE = `mutation S($input: EndpointInput!) { saveEndpoint(input: $input) { id instanceIds locations } }`;
    const save = (name: string, extra: Record<string, unknown>) =>
      gql(SAVE, { input: { name, templateId, workersMin: 0, workersMax: 0, ...extra } });
    // flash's default size runs at the smallest there is; REST answers that size.
    const one = await save('one-vcpu', { instanceIds: ['cpu3c-1-2'] });
    expect(one.data.saveEndpoint.instanceIds).toEqual(['cpu3c-2-4']);
    const rest = await call(p.url, 'GET', `/v2/serverless/${one.data.saveEndpoint.id}`, { key: p.adminKey });
    expect(rest.body.cpu).toEqual({ id: 'cpu3c', vcpuCount: 2, memory: 4 });
    const resized = await save('one-vcpu', { id: one.data.saveEndpoint.id, instanceIds: ['cpu3m-1-8'] });
    expect(resized.data.saveEndpoint.instanceIds).toEqual(['cpu3m-2-16']);
    // Other sizes keep their errors; REST's rule (vcpuCount >= 2) is unchanged.
    for (const [instance, message] of [
      ['cpu3c-1-99', /vcpuCount must be a power of two from 2/],
      ['cpu3c-0-0', /vcpuCount must be a power of two from 2/],
      ['cpu3c-3-6', /vcpuCount must be a power of two from 2/],
      ['cpu3g-1-2', /vcpuCount must be a power of two from 2/],
      ['cpu9x-1-2', /unknown CPU flavor/],
    ] as const) {
      const bad = await save(`bad-${instance}`, { instanceIds: [instance] });
      expect(bad.errors?.[0]?.message, instance).toMatch(message);
    }
    const restOne = await call(p.url, 'POST', '/v2/serverless', {
      key: p.adminKey,
      body: { name: 'rest-one', image: 'img:1', cpu: { id: 'cpu3c', vcpuCount: 1, memory: 2 } },
    });
    expect(restOne.status).toBe(400);

    // The hosted service's data centers: those this platform has are kept (as the operator spells
    // them), those it has not are dropped; countries as before.
    expect((await call(p.url, 'PUT', '/v2/datacenters/eu-ro-1', { key: p.adminKey, body: {} })).status).toBe(200);
    const hosted = await save('hosted-dcs', {
      gpuIds: 'AMPERE_16',
      locations: 'US-CA-2,EU-RO-1,EUR-NO-1,cz, US-KS-2',
    });
    expect(hosted.data.saveEndpoint.locations).toBe('eu-ro-1,CZ');
    const dropped = await save('no-dcs', { gpuIds: 'AMPERE_16', locations: 'US-CA-2,US-IL-1,EUR-NO-1' });
    expect(dropped.data.saveEndpoint.locations).toBe('');
    // Not a country, not a data center here, not of the hosted service's form; too many entries; too
    // long: refused, and the message quotes at most a little of each.
    const before = await p.ctx.db.endpoint.count();
    for (const [locations, message] of [
      ['US,my-dc', /"my-dc": neither an ISO 3166-1 alpha-2 country code/],
      ['US,$(reboot)', /"\$\(reboot\)": neither/],
      ['EU-RO-1;DROP TABLE', /"EU-RO-1;DROP TABLE": neither/],
      ['US-CA-2\nX-Injected: 1', /"US-CA-2\\nX-Injected: 1": neither/],
      [`US,${'A'.repeat(200)}`, /"A{40}": neither/],
      ['a,b,c,d,e', /"a", "b", "c" and 2 more: neither/],
      [Array.from({ length: 65 }, () => 'US').join(','), /at most 64 entries, got 65/],
      ['US,'.repeat(400), /locations/],
    ] as const) {
      const bad = await save('bad-loc', { gpuIds: 'AMPERE_16', locations });
      expect(bad.errors?.[0]?.extensions?.code, locations).toBe('BAD_USER_INPUT');
      expect(bad.errors[0].message, locations).toMatch(message);
      expect(bad.errors[0].message, locations).not.toMatch(/[\n\r]/);
    }
    expect(await p.ctx.db.endpoint.count()).toBe(before);
  });

  it('lists gpuTypes from the registered hosts', async () => {
    await p.ctx.db.host.create({
      data: {
        id: newId(),
        name: `h-${newId()}`,
        address: '127.0.0.1',
        user: 'root',
        dataCenterId: 'US-TX-1',
        status: 'READY',
        gpuPassthrough: true,
        gpuMethod: 'cdi',
        cpuCount: 32,
        memoryMb: 256000,
        gpus: [
          {
            uuid: 'GPU-1',
            name: 'NVIDIA H100 80GB HBM3',
            memoryMb: 81559,
            driverVersion: '550.54.15',
            pool: 'ADA_80_PRO',
          },
        ],
      },
    });
    const r = await gql('{ gpuTypes { id displayName memoryInGb pool totalCount availableCount } }');
    const one = await gql('{ gpuTypes(input: {ids: ["NVIDIA H100 80GB HBM3", "NVIDIA No Such Card"]}) { id } }');
    expect(one.data.gpuTypes).toEqual([{ id: 'NVIDIA H100 80GB HBM3' }]);
    // A price for no GPUs, or for more than a pod may take, is refused rather than computed.
    for (const gpuCount of [0, -3, 65]) {
      const bad = await gql(`{ gpuTypes { lowestPrice(input: {gpuCount: ${gpuCount}}) { uninterruptablePrice } } }`);
      expect(bad.errors[0].extensions.code, String(gpuCount)).toBe('BAD_USER_INPUT');
    }
    expect(r.errors).toBeUndefined();
    expect(r.data.gpuTypes).toContainEqual(
      expect.objectContaining({
        id: 'NVIDIA H100 80GB HBM3',
        memoryInGb: 80,
        pool: 'ADA_80_PRO',
        totalCount: 1,
        availableCount: 1,
      }),
    );
  });

  it("answers the hosted deploy tool's forms: podTemplate(id), saveTemplate with a nullable variable, gpuTypes by ids", async () => {
    // The tool declares `$input: SaveTemplateInput` (nullable) and reads templates back by id.
    const save =
      'mutation saveTemplate($input: SaveTemplateInput) { saveTemplate(input: $input) { id name imageName env { key value } } }';
    const made = await gql(save, {
      input: { name: 'flash-style', imageName: 'img:3', env: [{ key: 'K', value: 'v' }] },
    });
    expect(made.errors).toBeUndefined();
    const id = made.data.saveTemplate.id as string;
    const read = await gql('query t($id: String!) { podTemplate(id: $id) { id name imageName env { key value } } }', {
      id,
    });
    expect(read.data.podTemplate).toEqual(made.data.saveTemplate);
    // No input: refused with the reason; another account's template or none: null.
    const none = await gql(save, { input: null });
    expect(none.errors[0].extensions.code).toBe('BAD_USER_INPUT');
    expect(none.errors[0].message).toMatch(/\$\.input: required/);
    const other = await p.ctx.db.account.create({
      data: { id: newId(), email: `${newId()}@example.test`, name: 'o3' },
    });
    const otherKey = await issueApiKey(p.ctx.db, other.id, 'o3', ['READ', 'WRITE']);
    expect((await gql(`{ podTemplate(id: "${id}") { id } }`, undefined, otherKey.key)).data.podTemplate).toBeNull();
    expect((await gql('{ podTemplate(id: "nope") { id } }')).data.podTemplate).toBeNull();
    // gpuTypes by a list of ids answers those only: none for an id no host has.
    const byIds = await gql('{ gpuTypes(input: {ids: ["NVIDIA No Such Card"]}) { id } }');
    expect(byIds.errors).toBeUndefined();
    expect(byIds.data.gpuTypes).toEqual([]);
  });

  it('bounds queries: too deep, too costly or too many aliases is refused before any work', async () => {
    const ofTypes = (n: number): string => (n === 0 ? 'name' : `ofType { ${ofTypes(n - 1)} }`);
    const deep = await gql(`{ __schema { types { fields { type { ${ofTypes(24)} } } } } }`);
    expect(deep.errors?.[0]?.message).toMatch(/depth/i);
    expect(deep.data).toBeUndefined();
    // The standard introspection query that explorers send still passes.
    const standard = await gql(getIntrospectionQuery());
    expect(standard.errors).toBeUndefined();
    expect(standard.data.__schema.queryType.name).toBe('Query');
    const aliases = Array.from({ length: 40 }, (_, i) => `a${i}: myself { id }`).join(' ');
    const many = await gql(`{ ${aliases} }`);
    expect(many.errors?.[0]?.message).toMatch(/alias/i);
  });

  it('saves, updates and deletes registry auth and templates, never returning secrets', async () => {
    const saved = await gql(
      'mutation { saveRegistryAuth(input: {name: "ghcr", username: "bot", password: "s3cret-pw"}) { id name } }',
    );
    expect(saved.errors).toBeUndefined();
    const reg = saved.data.saveRegistryAuth;
    expect(reg.name).toBe('ghcr');
    const updated = await gql(
      `mutation { updateRegistryAuth(input: {id: "${reg.id}", username: "bot2", password: "n3w-pw"}) { id name } }`,
    );
    expect(updated.data.updateRegistryAuth).toEqual(reg);
    // The new login is what the image pull gets; no read shows it.
    const { openRegistryCredential } = await import('../../domain/registries/index.ts');
    const account = await p.ctx.db.account.findFirstOrThrow({ where: { email: 'admin@gantry.local' } });
    expect(await openRegistryCredential(p.ctx, account.id, reg.id)).toEqual({
      username: 'bot2',
      password: 'n3w-pw',
      registry: 'docker.io',
    });
    const listed = await gql('{ myself { containerRegistryCreds { id name } } }');
    expect(JSON.stringify(listed)).not.toMatch(/n3w-pw|bot2/);
    expect(listed.data.myself.containerRegistryCreds).toContainEqual(reg);
    const dup = await gql('mutation { saveRegistryAuth(input: {name: "ghcr", username: "x", password: "y"}) { id } }');
    expect(dup.errors[0].extensions.code).toBe('CONFLICT');
    expect((await gql(`mutation { deleteRegistryAuth(registryAuthId: "${reg.id}") }`)).data).toEqual({
      deleteRegistryAuth: null,
    });
    expect((await gql(`mutation { deleteRegistryAuth(registryAuthId: "${reg.id}") }`)).errors[0].extensions.code).toBe(
      'NOT_FOUND',
    );

    await gql('mutation { saveTemplate(input: {name: "gone", imageName: "img:2"}) { id } }');
    const names = async (): Promise<string[]> =>
      (await gql('{ myself { podTemplates { name } } }')).data.myself.podTemplates.map((t: { name: string }) => t.name);
    expect(await names()).toContain('gone');
    expect((await gql('mutation { deleteTemplate(templateName: "gone") }')).data).toEqual({ deleteTemplate: null });
    expect(await names()).not.toContain('gone');
  });

  it('answers introspection and serves an explorer page', async () => {
    const r = await gql('{ __type(name: "Endpoint") { fields { name } } }');
    expect(r.data.__type.fields.map((f: { name: string }) => f.name)).toEqual(
      expect.arrayContaining(['gpuIds', 'workersMin', 'pods', 'flashBootType']),
    );
    const page = await fetch(`${p.url}/graphql`, { headers: { accept: 'text/html' } });
    expect(page.status).toBe(200);
    expect(await page.text()).toMatch(/<html/i);
  });
});
