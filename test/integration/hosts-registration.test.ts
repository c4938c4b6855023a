/**
 * Host registration against real parts: an OpenSSH server with Podman behind it, the platform's
 * API, its host workflows on the suite's Temporal server, and PostgreSQL.
 */
import { writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issueApiKey } from '../../domain/accounts/index.ts';
import { applyHostConfig, readHostsFile } from '../../domain/hosts/index.ts';
import { loadConfig } from '../../infra/config.ts';
import { newId } from '../../domain/shared/index.ts';
import { cpuOvercommitOf, LOCAL_HOST_CPU_WORKERS } from '../../domain/workers/index.ts';
import { startSshTestHost, type SshTestHost } from '../support/ssh-test-host.ts';
import { call, startTestPlatform, type TestPlatform } from '../support/platform.ts';
import { hostWorkflowId } from '../../contracts/workflows.ts';

let host: SshTestHost;
let p: TestPlatform;
let dir: string;

beforeAll(async () => {
  host = await startSshTestHost();
  process.env.GANTRY_ORCHESTRATION = JSON.stringify({ hostProbeIntervalSec: 2, hostRetryIntervalSec: 1 });
  p = await startTestPlatform();
  dir = mkdtempSync(path.join(tmpdir(), 'gantry-hosts-file-'));
}, 600_000);

afterAll(async () => {
  await p?.stop();
  await host?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const body = () => ({
  name: `h-${newId()}`,
  address: host.host,
  port: host.port,
  user: host.user,
  privateKey: host.privateKey,
  dataCenterId: 'dc-test',
  labels: { rack: 'r1' },
});

async function until<T>(what: string, fn: () => Promise<T | undefined | null | false>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

describe('hosts: admin API, probe, host-key pinning, config file', () => {
  it('registers a host: probes it over SSH, pins its key, seals the private key', async () => {
    const b = body();
    const created = await call(p.url, 'POST', '/v2/hosts', { key: p.adminKey, body: b });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const h = created.body;
    expect(h).toMatchObject({
      name: b.name,
      address: '127.0.0.1',
      port: host.port,
      user: 'root',
      dataCenterId: 'dc-test',
      labels: { rack: 'r1' },
      source: 'api',
      status: 'READY',
      statusReason: null,
      hostKeySha256: host.hostKeySha256,
      containerRuntime: 'podman',
      gpus: [],
      gpuMethod: 'none',
      workers: 0,
    });
    expect(h.cpuCount).toBeGreaterThan(0);
    expect(h.memoryMb).toBeGreaterThan(100);
    expect(h.probe).toMatchObject({ runtime: { name: 'podman' } });
    expect(JSON.stringify(h)).not.toContain('PRIVATE KEY');
    const row = await p.ctx.db.host.findUniqueOrThrow({ where: { id: h.id } });
    expect(Buffer.from(row.privateKey!).toString('utf8')).not.toContain('PRIVATE KEY');
    expect(p.ctx.secrets.open(row.privateKey!)).toBe(host.privateKey);

    const list = await call(p.url, 'GET', '/v2/hosts', { key: p.adminKey });
    expect(list.body.hosts.map((x: { id: string }) => x.id)).toContain(h.id);
    const one = await call(p.url, 'GET', `/v2/hosts/${h.id}`, { key: p.adminKey });
    expect(one.body).toMatchObject({ id: h.id, status: 'READY' });

    // Re-probed periodically by its workflow.
    const first = Date.parse(h.lastProbeAt);
    await until('a periodic probe', async () => {
      const again = await p.ctx.db.host.findUniqueOrThrow({ where: { id: h.id } });
      return again.lastProbeAt!.getTime() > first;
    });
    // And on demand.
    const before = (await p.ctx.db.host.findUniqueOrThrow({ where: { id: h.id } })).lastProbeAt!.getTime();
    const probed = await call(p.url, 'POST', `/v2/hosts/${h.id}/probe`, { key: p.adminKey });
    expect(probed.status).toBe(200);
    expect(Date.parse(probed.body.lastProbeAt)).toBeGreaterThan(before);

    const dup = await call(p.url, 'POST', '/v2/hosts', { key: p.adminKey, body: { ...b } });
    expect(dup.status).toBe(409);
  });

  it('answers 401 without a key and 403 to keys that are not admin keys', async () => {
    expect((await call(p.url, 'GET', '/v2/hosts')).status).toBe(401);
    const admin = await p.ctx.db.account.findFirstOrThrow({ where: { isAdmin: true } });
    const writer = await issueApiKey(p.ctx.db, admin.id, 'writer', ['READ', 'WRITE', 'RUN']);
    const denied = await call(p.url, 'POST', '/v2/hosts', { key: writer.key, body: body() });
    expect(denied.status).toBe(403);
    expect(denied.body.title).toBe('Forbidden');
    const other = await p.ctx.db.account.create({
      data: { id: newId(), email: `${newId()}@example.test`, name: 'tenant' },
    });
    const tenantAdmin = await issueApiKey(p.ctx.db, other.id, 'tenant admin scope', ['ADMIN']);
    expect((await call(p.url, 'GET', '/v2/hosts', { key: tenantAdmin.key })).status).toBe(403);
  });

  it('refuses bad bodies with 422 and stores nothing', async () => {
    const badKey = await call(p.url, 'POST', '/v2/hosts', {
      key: p.adminKey,
      body: { ...body(), privateKey: 'not a key' },
    });
    expect(badKey.status).toBe(422);
    expect(badKey.body.errors[0]).toMatch(/^\$\.privateKey: not a private key/);
    const agent = await call(p.url, 'POST', '/v2/hosts', {
      key: p.adminKey,
      body: { ...body(), privateKey: undefined, useAgent: true },
    });
    expect(agent.status).toBe(422);
    expect(agent.body.errors).toEqual(['$.useAgent: SSH agent authentication is not available; give privateKey']);
    const publicKey = await call(p.url, 'POST', '/v2/hosts', {
      key: p.adminKey,
      body: { ...body(), privateKey: host.publicKey },
    });
    expect(publicKey.status).toBe(422);
    const unknown = await call(p.url, 'POST', '/v2/hosts', { key: p.adminKey, body: { ...body(), colour: 'red' } });
    expect(unknown.status).toBe(422);
    expect(unknown.body.errors).toContain("$: additional properties 'colour' not allowed");
    const missing = await call(p.url, 'POST', '/v2/hosts', { key: p.adminKey, body: { address: 'x' } });
    expect(missing.status).toBe(422);
    expect(missing.body.errors).toContain("$: missing property 'dataCenterId'");
    expect(await p.ctx.db.host.count({ where: { address: 'x' } })).toBe(0);
  });

  it('marks a host that cannot be reached UNREACHABLE, with the reason', async () => {
    const closed = await call(p.url, 'POST', '/v2/hosts', { key: p.adminKey, body: { ...body(), port: 1 } });
    expect(closed.status).toBe(201);
    expect(closed.body.status).toBe('UNREACHABLE');
    expect(closed.body.statusReason).toMatch(/^unreachable: cannot connect to 127\.0\.0\.1:1: .*ECONNREFUSED/);
    expect(closed.body.hostKeySha256).toBeNull();
  });

  it('refuses a host whose key differs from the pinned one until the operator accepts the new key', async () => {
    const wrong = `SHA256:${createHash('sha256').update('some other host').digest('base64').replace(/=+$/, '')}`;
    const created = await call(p.url, 'POST', '/v2/hosts', {
      key: p.adminKey,
      body: { ...body(), hostKeySha256: wrong },
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ status: 'HOST_KEY_MISMATCH', hostKeySha256: wrong });
    expect(created.body.statusReason).toContain(`pinned ${wrong}, the host now presents ${host.hostKeySha256}`);
    expect(created.body.statusReason).toContain('Work on this host has stopped');
    // A plain probe does not trust it again.
    const still = await call(p.url, 'POST', `/v2/hosts/${created.body.id}/probe`, { key: p.adminKey, body: {} });
    expect(still.body.status).toBe('HOST_KEY_MISMATCH');
    const accepted = await call(p.url, 'POST', `/v2/hosts/${created.body.id}/probe`, {
      key: p.adminKey,
      body: { acceptHostKey: host.hostKeySha256 },
    });
    expect(accepted.status).toBe(200);
    expect(accepted.body).toMatchObject({ status: 'READY', hostKeySha256: host.hostKeySha256, statusReason: null });
  });

  it('applies a YAML (or JSON) hosts file at start: creates, then updates by name', async () => {
    writeFileSync(path.join(dir, 'id_test'), host.privateKey, { mode: 0o600 });
    const file = path.join(dir, 'hosts.yaml');
    writeFileSync(
      file,
      [
        '# hosts this installation runs workers on',
        '- name: from-file',
        `  address: ${host.host}`,
        `  port: ${host.port}`,
        '  user: root',
        '  privateKeyFile: id_test',
        '  dataCenterId: dc-file',
        '  maxWorkers: 3',
        '  labels: { zone: a }',
        '',
      ].join('\n'),
    );
    await applyHostConfig(p.ctx, { hostsFile: file });
    const h = await until('the file host READY', async () => {
      const row = await p.ctx.db.host.findUnique({ where: { name: 'from-file' } });
      return row?.status === 'READY' ? row : undefined;
    });
    expect(h).toMatchObject({
      source: 'file',
      dataCenterId: 'dc-file',
      maxWorkers: 3,
      labels: { zone: 'a' },
      hostKeySha256: host.hostKeySha256,
    });

    const json = path.join(dir, 'hosts.json');
    writeFileSync(
      json,
      JSON.stringify([
        {
          name: 'from-file',
          address: host.host,
          port: host.port,
          privateKey: host.privateKey,
          dataCenterId: 'dc-moved',
        },
      ]),
    );
    await applyHostConfig(p.ctx, { hostsFile: json });
    const moved = await p.ctx.db.host.findUniqueOrThrow({ where: { name: 'from-file' } });
    expect(moved).toMatchObject({ id: h.id, dataCenterId: 'dc-moved', maxWorkers: null });

    writeFileSync(
      json,
      JSON.stringify([{ name: 'x', address: 'a', dataCenterId: 'd', privateKey: 'nope' }, { nme: 'typo' }]),
    );
    expect(() => readHostsFile(json)).toThrow(/hosts\.json: .*\$\[1\]: additional properties 'nme' not allowed/);
    writeFileSync(json, JSON.stringify([{ name: 'x', address: 'a', dataCenterId: 'd', privateKey: 'nope' }]));
    expect(() => readHostsFile(json)).toThrow(/\$\[0\]\.privateKey: not a private key/);

    // The object form also describes data centers: a country, and shared storage for network volumes.
    const withDcs = path.join(dir, 'hosts-dcs.yaml');
    writeFileSync(
      withDcs,
      [
        'dataCenters:',
        '  - id: dc-moved',
        '    country: no',
        '    networkVolumePath: /srv/gantry-volumes/',
        'hosts:',
        '  - name: from-file',
        `    address: ${host.host}`,
        `    port: ${host.port}`,
        '    privateKeyFile: id_test',
        '    dataCenterId: dc-moved',
        '',
      ].join('\n'),
    );
    await applyHostConfig(p.ctx, { hostsFile: withDcs });
    expect(await p.ctx.db.dataCenter.findUniqueOrThrow({ where: { id: 'dc-moved' } })).toMatchObject({
      country: 'NO',
      networkVolumePath: '/srv/gantry-volumes',
      source: 'file',
    });
    const dcView = await call(p.url, 'GET', '/v2/datacenters/dc-moved', { key: p.adminKey });
    expect(dcView.body).toMatchObject({
      id: 'dc-moved',
      country: 'NO',
      networkVolumes: 'shared-path',
      hosts: 1,
      source: 'file',
    });
    writeFileSync(withDcs, 'dataCenters:\n  - id: dc-moved\n    networkVolumePath: relative/dir\n');
    expect(() => readHostsFile(withDcs)).toThrow(/hosts-dcs\.yaml: .*\$\.dataCenters\[0\]\.networkVolumePath/);
    writeFileSync(withDcs, 'dataCenters:\n  - id: a\n  - id: a\n');
    expect(() => readHostsFile(withDcs)).toThrow(/data center 'a' appears twice/);
  });

  it('registers this machine as the host "local" only when GANTRY_LOCAL_HOST=1', async () => {
    const keyFile = path.join(dir, 'id_local');
    writeFileSync(keyFile, host.privateKey, { mode: 0o600 });
    const env = {
      GANTRY_LOCAL_HOST_KEY: keyFile,
      GANTRY_LOCAL_HOST_PORT: String(host.port),
      GANTRY_LOCAL_HOST_USER: 'root',
    };
    await applyHostConfig(p.ctx, { localHost: loadConfig(env).localHost });
    expect(await p.ctx.db.host.findUnique({ where: { name: 'local' } })).toBeNull();
    await applyHostConfig(p.ctx, { localHost: loadConfig({ ...env, GANTRY_LOCAL_HOST: '1' }).localHost });
    const local = await until('the local host READY', async () => {
      const row = await p.ctx.db.host.findUnique({ where: { name: 'local' } });
      return row?.status === 'READY' ? row : undefined;
    });
    expect(local).toMatchObject({
      address: '127.0.0.1',
      port: host.port,
      user: 'root',
      source: 'local',
      dataCenterId: 'local',
      labels: {},
    });
    // Without the label it holds LOCAL_HOST_CPU_WORKERS default CPU workers (2 vCPUs, 4 GB) at once,
    // however small the probe found this machine; the same machine registered through the API keeps 1.
    const factor = cpuOvercommitOf(local);
    expect(local.cpuCount! * factor).toBeGreaterThanOrEqual(LOCAL_HOST_CPU_WORKERS * 2);
    expect(local.memoryMb! * factor).toBeGreaterThanOrEqual(LOCAL_HOST_CPU_WORKERS * 4 * 1024);
    expect(cpuOvercommitOf({ ...local, source: 'api' })).toBe(1);
    // Its labels come from GANTRY_LOCAL_HOST_LABELS, at every start; the API cannot change them.
    const labels = { 'gantry.io/cpu-overcommit': '8' };
    await applyHostConfig(p.ctx, {
      localHost: loadConfig({ ...env, GANTRY_LOCAL_HOST: '1', GANTRY_LOCAL_HOST_LABELS: JSON.stringify(labels) })
        .localHost,
    });
    const relabelled = await p.ctx.db.host.findUniqueOrThrow({ where: { name: 'local' } });
    expect(relabelled.labels).toEqual(labels);
    // The label wins over the local host's default.
    expect(cpuOvercommitOf(relabelled)).toBe(8);
    const patched = await call(p.url, 'PATCH', `/v2/hosts/${local.id}`, { key: p.adminKey, body: { labels: {} } });
    expect(patched.status).toBe(409);
    expect(patched.body.detail).toMatch(/GANTRY_LOCAL_HOST_LABELS/);
    expect(() => loadConfig({ ...env, GANTRY_LOCAL_HOST: '1', GANTRY_LOCAL_HOST_LABELS: '["x"]' })).toThrow(
      /GANTRY_LOCAL_HOST_LABELS must be a JSON object of string values/,
    );
    expect(() => readHostsFile(path.join(dir, 'missing.yaml'))).toThrow(/missing\.yaml/);
  });

  it('changes the labels, data center and worker limit of a host registered through the API', async () => {
    const created = await call(p.url, 'POST', '/v2/hosts', { key: p.adminKey, body: body() });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const url = `/v2/hosts/${created.body.id}`;
    const changed = await call(p.url, 'PATCH', url, {
      key: p.adminKey,
      body: { labels: { 'gantry.io/cpu-overcommit': '4', tier: 'small' }, dataCenterId: 'dc-9', maxWorkers: 3 },
    });
    expect(changed.status, JSON.stringify(changed.body)).toBe(200);
    expect(changed.body).toMatchObject({
      labels: { 'gantry.io/cpu-overcommit': '4', tier: 'small' },
      dataCenterId: 'dc-9',
      maxWorkers: 3,
    });
    // Labels replace; the rest stays.
    const again = await call(p.url, 'PATCH', url, {
      key: p.adminKey,
      body: { labels: { tier: 'big' }, maxWorkers: null },
    });
    expect(again.body).toMatchObject({ labels: { tier: 'big' }, dataCenterId: 'dc-9', maxWorkers: null });
    // Bad bodies change nothing; other keys may not.
    for (const bad of [{}, { colour: 'red' }, { labels: { tier: 7 } }, { maxWorkers: -1 }, { dataCenterId: '' }]) {
      const r = await call(p.url, 'PATCH', url, { key: p.adminKey, body: bad });
      expect(r.status, JSON.stringify(bad)).toBe(422);
    }
    const admin = await p.ctx.db.account.findFirstOrThrow({ where: { isAdmin: true } });
    const writer = await issueApiKey(p.ctx.db, admin.id, 'patch-writer', ['READ', 'WRITE', 'RUN']);
    expect((await call(p.url, 'PATCH', url, { key: writer.key, body: { labels: {} } })).status).toBe(403);
    expect((await call(p.url, 'PATCH', '/v2/hosts/nope', { key: p.adminKey, body: { labels: {} } })).status).toBe(404);
    expect((await p.ctx.db.host.findUniqueOrThrow({ where: { id: created.body.id } })).labels).toEqual({ tier: 'big' });
    expect((await call(p.url, 'DELETE', url, { key: p.adminKey })).status).toBe(204);
  });

  it('removes a host without workers at once', async () => {
    const created = await call(p.url, 'POST', '/v2/hosts', { key: p.adminKey, body: body() });
    const removed = await call(p.url, 'DELETE', `/v2/hosts/${created.body.id}`, { key: p.adminKey });
    expect(removed.status).toBe(204);
    expect((await call(p.url, 'GET', `/v2/hosts/${created.body.id}`, { key: p.adminKey })).status).toBe(404);
    const wf = await p.ctx.temporal.workflow.getHandle(hostWorkflowId(created.body.id)).describe();
    expect(wf.status.name).not.toBe('RUNNING');
  });
});
