import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Connection } from '@temporalio/client';
import type { GantryConfig } from './config.ts';

/** The Temporal CLI release that `go install` can build (later ones carry `replace` directives). */
export const TEMPORAL_CLI_MODULE = 'github.com/temporalio/cli/cmd/temporal@v1.5.1';

export interface RunningTemporal {
  address: string;
  uiUrl: string | undefined;
  /** The dev server's process, where this process started one. */
  pid?: number;
  stop(): Promise<void>;
}

function onPath(name: string): string | undefined {
  const r = spawnSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' });
  const found = r.stdout.trim();
  return r.status === 0 && found ? found : undefined;
}

/**
 * Finds the Temporal CLI: TEMPORAL_CLI_PATH, then PATH, then the per-machine cache, then builds it
 * into the cache from the Go module proxy (once per machine). Returns undefined when none can be had,
 * so the caller may fall back to the SDK's own download.
 */
export function resolveTemporalBinary(config: Pick<GantryConfig, 'temporalCliPath' | 'cacheDir'>, log = console.error): string | undefined {
  if (config.temporalCliPath) {
    if (!existsSync(config.temporalCliPath)) throw new Error(`TEMPORAL_CLI_PATH=${config.temporalCliPath} does not exist`);
    return config.temporalCliPath;
  }
  const fromPath = onPath('temporal');
  if (fromPath) return fromPath;
  const binDir = path.join(config.cacheDir, 'bin');
  const cached = path.join(binDir, 'temporal');
  if (existsSync(cached)) return cached;
  const go = onPath('go');
  if (!go) return undefined;
  mkdirSync(binDir, { recursive: true });
  // A lock directory keeps two processes on one machine from building at once.
  const lock = path.join(binDir, '.building');
  for (;;) {
    try {
      mkdirSync(lock);
      break;
    } catch {
      const age = Date.now() - statSync(lock).mtimeMs;
      if (age > 30 * 60_000) rmSync(lock, { recursive: true, force: true });
      else spawnSync('sleep', ['2']);
      if (existsSync(cached)) return cached;
    }
  }
  try {
    log(`Building the Temporal CLI (${TEMPORAL_CLI_MODULE}) from the Go module proxy into ${binDir}; this happens once per machine and takes a few minutes.`);
    const started = Date.now();
    const r = spawnSync(go, ['install', TEMPORAL_CLI_MODULE], {
      stdio: ['ignore', 'inherit', 'inherit'],
      env: { ...process.env, GOBIN: binDir, CGO_ENABLED: '0' },
    });
    if (r.status !== 0 || !existsSync(cached)) {
      log('Building the Temporal CLI failed.');
      return undefined;
    }
    log(`Built the Temporal CLI in ${Math.round((Date.now() - started) / 1000)} s.`);
    return cached;
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

/** Polls until the frontend answers, or the child exits, or the deadline passes. */
export async function waitForTemporal(address: string, timeoutMs: number, child?: ChildProcess): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  while (Date.now() < deadline) {
    if (child && child.exitCode !== null) throw new Error(`Temporal dev server exited with code ${child.exitCode}`);
    try {
      const connection = await Connection.connect({ address, connectTimeout: 1000 });
      await connection.healthService.check({});
      await connection.close();
      return;
    } catch (err) {
      lastError = err;
      await sleep(200);
    }
  }
  throw new Error(`Temporal at ${address} did not answer within ${timeoutMs} ms: ${String(lastError)}`);
}

export interface DevServerOptions {
  binary: string;
  port: number;
  uiPort: number | undefined;
  /** SQLite file; undefined keeps state in memory (tests). */
  dbFile: string | undefined;
  namespace: string;
  /** More `start-dev` flags (benchmarks try dynamic config values with these). */
  extraArgs?: string[];
}

/** Starts `temporal server start-dev` as a child process and waits for it. */
export async function startTemporalDevServer(opts: DevServerOptions): Promise<RunningTemporal> {
  const args = ['server', 'start-dev', '--ip', '127.0.0.1', '--port', String(opts.port), '--namespace', opts.namespace, '--log-level', 'error'];
  const pidFile = opts.dbFile ? `${opts.dbFile}.pid` : undefined;
  if (opts.dbFile && pidFile) {
    // Workflow histories hold job inputs and outputs: owner-only, whatever the SQLite files' modes.
    mkdirSync(path.dirname(opts.dbFile), { recursive: true, mode: 0o700 });
    chmodSync(path.dirname(opts.dbFile), 0o700);
    // WAL with synchronous=normal: every commit is still on disk when the process dies, only an OS
    // crash can lose the last few, and the job and endpoint rows in PostgreSQL (the source of truth,
    // swept and reconciled at start) bring such workflows back. The default rollback journal with
    // an fsync per commit held job workflows to ~5/s on this hardware (bench/README.md).
    args.push('--db-filename', opts.dbFile, '--sqlite-pragma', 'journal_mode=wal', '--sqlite-pragma', 'synchronous=normal');
    await stopLeftover(pidFile);
  }
  if (opts.uiPort) args.push('--ui-port', String(opts.uiPort), '--ui-ip', '127.0.0.1');
  else args.push('--headless');
  args.push(...(opts.extraArgs ?? []));
  const child = spawn(opts.binary, args, { stdio: ['ignore', 'ignore', 'inherit'] });
  if (pidFile && child.pid) writeFileSync(pidFile, String(child.pid));
  // A process that exits without stopping it (a second Ctrl-C cuts the graceful stop short) still
  // tells the server to stop: 'exit' listeners run on every exit but SIGKILL.
  const stopOnExit = (): void => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
  };
  process.once('exit', stopOnExit);
  child.once('exit', () => process.off('exit', stopOnExit));
  const address = `127.0.0.1:${opts.port}`;
  try {
    await waitForTemporal(address, 60_000, child);
  } catch (err) {
    child.kill('SIGKILL');
    throw err;
  }
  return {
    address,
    uiUrl: opts.uiPort ? `http://127.0.0.1:${opts.uiPort}` : undefined,
    pid: child.pid,
    stop: () => stopChild(child),
  };
}

/**
 * A dev server left behind by a Gantry process that was killed (SIGKILL gives it no chance to stop
 * its children) still holds the SQLite file and the ports: stop it before starting a new one.
 */
async function stopLeftover(pidFile: string): Promise<void> {
  if (!existsSync(pidFile)) return;
  const pid = Number(readFileSync(pidFile, 'utf8').trim());
  rmSync(pidFile, { force: true });
  const isDevServer = (): boolean => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('start-dev');
    } catch {
      return false;
    }
  };
  if (!Number.isInteger(pid) || pid <= 0 || !isDevServer()) return;
  process.kill(pid, 'SIGTERM');
  for (let i = 0; i < 100 && isDevServer(); i++) await sleep(100);
  if (isDevServer()) process.kill(pid, 'SIGKILL');
}

export async function stopChild(child: ChildProcess, graceMs = 10_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
}

/**
 * Uses TEMPORAL_ADDRESS when set; otherwise starts the embedded dev server (SQLite in the data dir,
 * Web UI on TEMPORAL_UI_PORT). Where no binary can be found or built, the SDK downloads one.
 */
export async function ensureTemporal(config: GantryConfig, log = console.error): Promise<RunningTemporal> {
  if (config.temporalAddress) {
    await waitForTemporal(config.temporalAddress, 30_000);
    return { address: config.temporalAddress, uiUrl: undefined, stop: async () => {} };
  }
  const dbFile = path.join(config.dataDir, 'temporal', 'temporal.db');
  const binary = resolveTemporalBinary(config, log);
  if (binary) {
    return startTemporalDevServer({ binary, port: config.temporalPort, uiPort: config.temporalUiPort, dbFile, namespace: config.temporalNamespace });
  }
  log('No Temporal CLI found and none could be built; trying the Temporal SDK download.');
  const { TestWorkflowEnvironment } = await import('@temporalio/testing');
  const env = await TestWorkflowEnvironment.createLocal({
    server: {
      executable: { type: 'cached-download', downloadDir: path.join(config.cacheDir, 'download') },
      ip: '127.0.0.1',
      port: config.temporalPort,
      ui: true,
      uiPort: config.temporalUiPort,
      dbFilename: dbFile,
      namespace: config.temporalNamespace,
    },
  });
  return { address: env.address, uiUrl: `http://127.0.0.1:${config.temporalUiPort}`, stop: () => env.teardown() };
}
