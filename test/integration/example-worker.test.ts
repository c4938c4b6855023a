/**
 * The example worker a newcomer runs without any registry: an endpoint of
 * `localhost/gantry-example-worker:py3.11` on a platform left on its default runtime base
 * (`python:3.11-slim` from Docker Hub, which no host here reaches). The host cannot pull the base,
 * so it uses Debian's Python 3.11 made on the host (hostctl/python-base.ts), builds the example on
 * it, and the job runs. The same recipe's check over SSH finds the host's own Debian mirror.
 */
import { spawnSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exampleWorkerImage } from '../../domain/apps/index.ts';
import { ensurePythonBaseOnHost } from '../../hostctl/python-base.ts';
import { SshPool } from '../../hostctl/ssh.ts';
import { call } from '../support/platform.ts';
import { ensurePythonBaseImage } from '../support/python-base-image.ts';
import { startOneHostPlatform, type OneHostPlatform } from '../support/orchestration.ts';

describe('the example worker', () => {
  let f: OneHostPlatform;
  beforeAll(async () => {
    await ensurePythonBaseImage('3.11');
    delete process.env.GANTRY_RUNTIME_BASE_IMAGE;
    f = await startOneHostPlatform('example-host');
  }, 300_000);
  afterAll(async () => {
    await f?.stop();
  }, 120_000);

  it('finds the host has Debian’s Python 3.11 base of today’s recipe, asking the host’s apt for its mirror', async () => {
    const pool = new SshPool();
    try {
      const target = {
        host: f.sshHost.host,
        port: f.sshHost.port,
        user: f.sshHost.user,
        privateKey: f.sshHost.privateKey,
      };
      expect(
        await ensurePythonBaseOnHost(pool, { hostId: f.hostId, target, runtime: 'podman' }, '3.11', {
          timeoutMs: 600_000,
        }),
      ).toBe('present');
    } finally {
      await pool.close();
    }
  }, 120_000);

  it('runs on a host that cannot pull the default base, echoes a job and fails one on request', async () => {
    const api = (method: string, route: string, body?: unknown) =>
      call(f.p.url, method, route, { key: f.p.adminKey, body });
    const created = await api('POST', '/v2/serverless', {
      name: 'example',
      image: exampleWorkerImage(),
      workers: { min: 0, max: 1 },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const id = created.body.id as string;

    const ok = await api('POST', `/v2/${id}/runsync?wait=120000`, { input: { prompt: 'hello' } });
    expect(ok.body, JSON.stringify(ok.body)).toMatchObject({
      status: 'COMPLETED',
      output: { echo: { prompt: 'hello' } },
    });
    const failed = await api('POST', `/v2/${id}/runsync`, { input: { fail: 'asked to' } });
    expect(failed.body).toMatchObject({ status: 'FAILED' });
    expect(JSON.stringify(failed.body.error)).toContain('asked to');

    // Built on the host with its recipe marked, so a changed recipe builds it again.
    const label = spawnSync(
      'podman',
      ['image', 'inspect', '--format', '{{ index .Config.Labels "io.gantry.runtime.recipe" }}', exampleWorkerImage()],
      { encoding: 'utf8' },
    );
    expect(label.stdout.trim()).toMatch(/^[0-9a-f]{12}$/);
  }, 300_000);
});
