/**
 * The hosted service's deploy tool run as its users run it: `flash deploy` of a tiny project
 * (test/fixtures/flash-app) with nothing but its URL and key variables pointed at Gantry, then `flash app`,
 * `flash env`, `flash undeploy` and `flash app delete`. The endpoints it makes are Gantry's; the
 * resources are scaled to zero and nothing here waits for a worker (flash-workers.test.ts has their
 * workers serve).
 */
import { cpSync, mkdirSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestPlatform } from '../support/platform.ts';
import { flashCli as runFlash } from '../support/flash-cli.ts';
import { ensurePythonClients, FLASH_CLIENT_REQUIREMENTS } from '../support/python-clients.ts';
import { type OneHostPlatform, startOneHostPlatform } from '../support/orchestration.ts';

const FIXTURE = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'fixtures', 'flash-app');

let fixture: OneHostPlatform | undefined;
let p: TestPlatform;
let python: string;
const home = mkdtempSync(path.join(tmpdir(), 'flash-home-'));
/** flash names the app after the project's directory. */
const project = path.join(mkdtempSync(path.join(tmpdir(), 'flash-cli-')), 'flashdemo');

beforeAll(async () => {
  python = await ensurePythonClients({ requirements: FLASH_CLIENT_REQUIREMENTS });
  mkdirSync(project);
  cpSync(FIXTURE, project, { recursive: true });
  // Nothing here starts a worker: a flash runtime to pull (never pulled) keeps saveEndpoint from
  // asking the host for flash's default Python 3.12 base, which it cannot get (flash-init.test.ts).
  process.env.GANTRY_FLASH_RUNTIME_IMAGE = 'localhost/gantry-flash-deploy-test:{python}';
  fixture = await startOneHostPlatform('flash-cli-box');
  ({ p } = fixture);
}, 600_000);

afterAll(async () => {
  delete process.env.GANTRY_FLASH_RUNTIME_IMAGE;
  await fixture?.stop();
}, 120_000);

/** `flash <args>` in the project, as a user with nothing but the URL and key variables set runs it. */
const flashCli = (args: string[]): ReturnType<typeof runFlash> =>
  runFlash({ python, project, home, url: p.url, key: p.adminKey }, args);

describe('flash, the hosted deploy tool, against Gantry', () => {
  it('deploys a project, lists its app and environment, undeploys it and deletes the app', async () => {
    const deploy = await flashCli(['deploy', '--no-deps']);
    expect(deploy.code, deploy.output).toBe(0);
    expect(deploy.output).toContain('deployed to production');

    const app = await p.ctx.db.app.findFirstOrThrow({ where: { name: 'flashdemo' }, include: { environments: true } });
    expect(app.environments.map((e) => e.name)).toEqual(['production']);
    const env = app.environments[0]!;
    const build = await p.ctx.db.build.findUniqueOrThrow({ where: { id: env.currentBuildId ?? '' } });
    expect(build).toMatchObject({ kind: 'FLASH', status: 'READY' });
    const endpoints = await p.ctx.db.endpoint.findMany({
      where: { appEnvironmentId: env.id, deletingAt: null },
      orderBy: { name: 'asc' },
    });
    expect(endpoints.map((e) => [e.name, e.type, e.cpuFlavorId, e.cpuVcpuCount, e.workersMax])).toEqual([
      ['cpu_worker', 'QUEUE_BASED', 'cpu3c', 2, 1],
      ['lb_worker', 'LOAD_BALANCING', 'cpu3c', 2, 2],
    ]);
    expect(endpoints[0]!.image).toMatch(/^runpod\/flash-cpu:py3\.\d+-latest$/);
    expect(endpoints[1]!.image).toMatch(/^runpod\/flash-lb-cpu:py3\.\d+-latest$/);
    // flash recorded what it made in the build's manifest, and printed the queue endpoint's URL.
    const recorded = build.manifest as { resources_endpoints?: Record<string, string> };
    expect(recorded.resources_endpoints?.cpu_worker).toBe(`${p.url}/v2/${endpoints[0]!.id}`);
    expect(recorded.resources_endpoints?.lb_worker).toContain(endpoints[1]!.id);
    expect(deploy.output).toContain(`${p.url}/v2/${endpoints[0]!.id}/runsync`);
    // The local manifest flash keeps says the same.
    const local = JSON.parse(readFileSync(path.join(project, '.flash', 'flash_manifest.json'), 'utf8'));
    expect(local.resources.cpu_worker.endpoint_id).toBe(endpoints[0]!.id);

    const apps = await flashCli(['app', 'list']);
    expect(apps.code, apps.output).toBe(0);
    expect(apps.output).toContain('flashdemo');
    const shown = await flashCli(['env', 'get', 'production']);
    expect(shown.code, shown.output).toBe(0);
    for (const e of endpoints) expect(shown.output).toContain(e.id);
    expect(shown.output).toContain(build.id.slice(0, 12));
    const appShown = await flashCli(['app', 'get', 'flashdemo']);
    expect(appShown.code, appShown.output).toBe(0);
    expect(appShown.output).toMatch(/production\s+\S+/);
    expect(appShown.output).toContain('1 build');
    const created = await flashCli(['env', 'create', 'staging']);
    expect(created.code, created.output).toBe(0);
    const envs = await flashCli(['env', 'list']);
    expect(envs.code, envs.output).toBe(0);
    expect(envs.output).toContain('production');
    expect(envs.output).toContain('staging');
    expect(await p.ctx.db.appEnvironment.count({ where: { appId: app.id } })).toBe(2);

    // A second deploy of the same code, now naming its environment, keeps the endpoints (flash
    // compares manifests and asks Gantry for each endpoint's health).
    const again = await flashCli(['deploy', '--no-deps', '--env', 'production']);
    expect(again.code, again.output).toBe(0);
    const after = await p.ctx.db.endpoint.findMany({ where: { appEnvironmentId: env.id, deletingAt: null } });
    expect(after.map((e) => e.id).sort()).toEqual(endpoints.map((e) => e.id).sort());

    const undeploy = await flashCli(['undeploy', '--all', '--force']);
    expect(undeploy.code, undeploy.output).toBe(0);
    expect(await p.ctx.db.endpoint.count({ where: { appEnvironmentId: env.id, deletingAt: null } })).toBe(0);

    const removed = await flashCli(['app', 'delete', 'flashdemo']);
    expect(removed.code, removed.output).toBe(0);
    expect(await p.ctx.db.app.count({ where: { name: 'flashdemo' } })).toBe(0);
  }, 600_000);
});
