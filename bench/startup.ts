/**
 * Time from launching `infra/start.ts` (what `npm start` runs after its install checks) to
 * "Gantry is up", on a fresh data dir (initdb, migrations, first key) and again on the same data.
 *   node --import tsx bench/startup.ts [runs=3]
 * Uses the cached Temporal CLI (build it first with `npm start` or `npm test` once).
 */
import { spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';

const runs = Number(process.argv[2] ?? 3);

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const a = s.address();
      s.close(() => resolve(typeof a === 'object' && a ? a.port : 0));
    });
  });
}

async function timeStart(dataDir: string, ports: number[]): Promise<number> {
  const [api, temporal, ui, pg] = ports.map(String);
  const started = performance.now();
  const child = spawn(process.execPath, ['--import', 'tsx', 'infra/start.ts'], {
    env: {
      ...process.env,
      GANTRY_DATA_DIR: dataDir,
      PORT: api,
      TEMPORAL_PORT: temporal,
      TEMPORAL_UI_PORT: ui,
      GANTRY_PG_PORT: pg,
      LOG_LEVEL: 'warn',
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  await new Promise<void>((resolve, reject) => {
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.includes('Gantry is up')) resolve();
    });
    child.once('exit', (code) => reject(new Error(`exited ${code}`)));
  });
  const elapsed = performance.now() - started;
  child.kill('SIGTERM');
  await new Promise((r) => child.once('exit', r));
  return elapsed;
}

const fresh: number[] = [];
const again: number[] = [];
for (let i = 0; i < runs; i++) {
  const dir = mkdtempSync(path.join(tmpdir(), 'gantry-bench-'));
  chmodSync(dir, 0o755);
  const ports = await Promise.all([freePort(), freePort(), freePort(), freePort()]);
  fresh.push(await timeStart(path.join(dir, 'data'), ports));
  again.push(await timeStart(path.join(dir, 'data'), ports));
  rmSync(dir, { recursive: true, force: true });
}
const fmt = (xs: number[]): string => xs.map((x) => (x / 1000).toFixed(2)).join(', ');
console.log(`fresh data dir (s): ${fmt(fresh)}`);
console.log(`existing data   (s): ${fmt(again)}`);
