/**
 * Templates at the edges (issue #45), through `app.inject` on a fresh database and the suite's
 * Temporal server (no Temporal worker): a template's gpuTypeId and gpuCount as a pod's defaults, and
 * `isServerless` deciding what a template may make (endpoints: serverless ones; pods: the others).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../../domain/shared/index.ts';
import { startTestApp, type TestApp } from '../support/app.ts';

const GPU = 'NVIDIA RTX A6000';

describe('templates: GPU defaults for pods, isServerless for endpoints and pods', () => {
  let t: TestApp;

  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- GraphQL answers are arbitrary JSON
  async function gql(query: string, variables?: Record<string, unknown>): Promise<any> {
    const r = await t.call('POST', '/graphql', { key: t.adminKey, body: { query, variables } });
    return r.body;
  }
  const SAVE_TEMPLATE =
    'mutation T($input: SaveTemplateInput!) { saveTemplate(input: $input) { id isServerless gpuTypeId gpuCount } }';
  const SAVE_ENDPOINT = 'mutation S($input: EndpointInput!) { saveEndpoint(input: $input) { id templateId } }';
  const DEPLOY =
    'mutation D($input: PodFindAndDeployOnDemandInput!) { podFindAndDeployOnDemand(input: $input) { id gpuCount gpuTypeId templateId } }';
  async function template(input: Record<string, unknown>): Promise<string> {
    const r = await gql(SAVE_TEMPLATE, { input: { imageName: 'img:1', ...input } });
    expect(r.errors, JSON.stringify(r.errors)).toBeUndefined();
    return r.data.saveTemplate.id as string;
  }

  beforeAll(async () => {
    t = await startTestApp();
    // A host with two GPUs of one type: pods asking for them can be placed some day.
    await t.ctx.db.host.create({
      data: {
        id: newId(),
        name: `edges-gpu-${newId()}`,
        address: '127.0.0.1',
        user: 'root',
        dataCenterId: 'dc-1',
        status: 'READY',
        gpuPassthrough: true,
        gpuMethod: 'cdi',
        gpus: [
          { uuid: 'GPU-a', name: GPU, memoryMb: 49140, driverVersion: '550.54.15', pool: 'AMPERE_48' },
          { uuid: 'GPU-b', name: GPU, memoryMb: 49140, driverVersion: '550.54.15', pool: 'AMPERE_48' },
        ],
      },
    });
  });
  afterAll(async () => {
    await t?.stop();
  });

  it('stores gpuTypeId and gpuCount on a template, and a pod from it takes them when its input names none', async () => {
    const made = await gql(SAVE_TEMPLATE, {
      input: { name: 'edges-gpu-tpl', imageName: 'img:1', gpuTypeId: GPU, gpuCount: 2 },
    });
    expect(made.errors, JSON.stringify(made.errors)).toBeUndefined();
    expect(made.data.saveTemplate).toMatchObject({ isServerless: false, gpuTypeId: GPU, gpuCount: 2 });
    const id = made.data.saveTemplate.id as string;
    const read = await gql(`{ podTemplate(id: "${id}") { gpuTypeId gpuCount } }`);
    expect(read.data.podTemplate).toEqual({ gpuTypeId: GPU, gpuCount: 2 });
    // Saved again without them: kept (fields left out keep their values).
    const again = await gql(SAVE_TEMPLATE, { input: { id, name: 'edges-gpu-tpl', imageName: 'img:2' } });
    expect(again.data.saveTemplate).toMatchObject({ gpuTypeId: GPU, gpuCount: 2 });

    const pod = await gql(DEPLOY, { input: { name: 'edges-from-tpl', templateId: id } });
    expect(pod.errors, JSON.stringify(pod.errors)).toBeUndefined();
    expect(pod.data.podFindAndDeployOnDemand).toMatchObject({ gpuCount: 2, gpuTypeId: GPU, templateId: id });
    // The input's own values win.
    const one = await gql(DEPLOY, { input: { name: 'edges-own-count', templateId: id, gpuCount: 1 } });
    expect(one.data.podFindAndDeployOnDemand).toMatchObject({ gpuCount: 1, gpuTypeId: GPU });
    // A CPU pod from it takes no GPU type.
    const cpu = await gql(
      'mutation C($input: DeployCpuPodInput!) { deployCpuPod(input: $input) { id gpuCount gpuTypeId } }',
      { input: { name: 'edges-cpu-from-tpl', templateId: id } },
    );
    expect(cpu.errors, JSON.stringify(cpu.errors)).toBeUndefined();
    expect(cpu.data.deployCpuPod).toMatchObject({ gpuCount: 0, gpuTypeId: null });

    // gpuCount 0 (CPU pods) beside a GPU type is refused; an empty gpuTypeId clears it.
    const both = await gql(SAVE_TEMPLATE, { input: { id, name: 'edges-gpu-tpl', imageName: 'img:2', gpuCount: 0 } });
    expect(both.errors[0].extensions.code).toBe('BAD_USER_INPUT');
    expect(JSON.stringify(both.errors[0])).toMatch(/\$\.gpuTypeId: a template with gpuCount 0 makes CPU pods/);
    const cleared = await gql(SAVE_TEMPLATE, {
      input: { id, name: 'edges-gpu-tpl', imageName: 'img:2', gpuTypeId: '', gpuCount: 0 },
    });
    expect(cleared.data.saveTemplate).toMatchObject({ gpuTypeId: null, gpuCount: 0 });
    const cpuByDefault = await gql(DEPLOY, { input: { name: 'edges-cpu-by-default', templateId: id } });
    expect(cpuByDefault.data.podFindAndDeployOnDemand).toMatchObject({ gpuCount: 0, gpuTypeId: null });
  });

  it('makes endpoints from serverless templates only (GraphQL BAD_USER_INPUT)', async () => {
    const podTemplate = await template({ name: 'edges-pod-only', isServerless: false });
    const serverless = await template({ name: 'edges-serverless', isServerless: true });
    const refused = await gql(SAVE_ENDPOINT, {
      input: { name: 'edges-from-pod-tpl', templateId: podTemplate, gpuIds: 'AMPERE_24' },
    });
    expect(refused.errors[0].extensions).toMatchObject({
      code: 'BAD_USER_INPUT',
      errors: [
        `$.templateId: template '${podTemplate}' is a pod template (isServerless false); an endpoint runs a serverless template (saveTemplate with isServerless: true)`,
      ],
    });
    expect(await t.ctx.db.endpoint.count({ where: { name: 'edges-from-pod-tpl' } })).toBe(0);

    const made = await gql(SAVE_ENDPOINT, {
      input: { name: 'edges-ok', templateId: serverless, gpuIds: 'AMPERE_24' },
    });
    expect(made.errors, JSON.stringify(made.errors)).toBeUndefined();
    const id = made.data.saveEndpoint.id as string;
    // Moving it to a pod template is refused both ways GraphQL has.
    const moved = await gql(SAVE_ENDPOINT, {
      input: { id, name: 'edges-ok', templateId: podTemplate, gpuIds: 'AMPERE_24' },
    });
    expect(moved.errors[0].extensions.code).toBe('BAD_USER_INPUT');
    const viaUpdate = await gql(
      `mutation { updateEndpointTemplate(input: {endpointId: "${id}", templateId: "${podTemplate}"}) { id } }`,
    );
    expect(viaUpdate.errors[0].extensions.code).toBe('BAD_USER_INPUT');
    expect((await t.ctx.db.endpoint.findUniqueOrThrow({ where: { id } })).templateId).toBe(serverless);

    // An endpoint that already runs a pod template (made before the rule) is still saved with it.
    await t.ctx.db.endpoint.update({ where: { id }, data: { templateId: podTemplate } });
    const kept = await gql(SAVE_ENDPOINT, {
      input: { id, name: 'edges-ok', templateId: podTemplate, gpuIds: 'AMPERE_24', workersMax: 2 },
    });
    expect(kept.errors, JSON.stringify(kept.errors)).toBeUndefined();
  });

  it('makes pods from pod templates only (GraphQL BAD_USER_INPUT, REST 422 problem)', async () => {
    const serverless = await template({ name: 'edges-worker-tpl', isServerless: true });
    const podTemplate = await template({ name: 'edges-pod-tpl', isServerless: false, ports: '8080/http' });
    const message = `$.templateId: template '${serverless}' is a serverless template (isServerless true); a pod starts from a pod template (isServerless false)`;

    const refused = await gql(DEPLOY, {
      input: { name: 'edges-pod-from-worker', templateId: serverless, gpuCount: 0 },
    });
    expect(refused.errors[0].extensions).toMatchObject({ code: 'BAD_USER_INPUT', errors: [message] });

    const rest = await t.call('POST', '/v2/pods', {
      key: t.adminKey,
      body: { name: 'edges-rest-from-worker', templateId: serverless, cpu: { id: 'cpu3c', vcpuCount: 2 } },
    });
    expect(rest.status, JSON.stringify(rest.body)).toBe(422);
    expect(rest.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(rest.body.errors).toEqual([message]);
    expect(await t.ctx.db.pod.count({ where: { name: { startsWith: 'edges-rest-from-worker' } } })).toBe(0);

    const pod = await t.call('POST', '/v2/pods', {
      key: t.adminKey,
      body: { name: 'edges-rest-pod', templateId: podTemplate, cpu: { id: 'cpu3c', vcpuCount: 2 } },
    });
    expect(pod.status, JSON.stringify(pod.body)).toBe(201);
    const patched = await t.call('PATCH', `/v2/pods/${pod.body.id}`, {
      key: t.adminKey,
      body: { templateId: serverless },
    });
    expect(patched.status, JSON.stringify(patched.body)).toBe(422);
    expect(patched.body.errors).toEqual([message]);
    expect((await t.ctx.db.pod.findUniqueOrThrow({ where: { id: pod.body.id } })).imageName).toBe('img:1');
  });
});
