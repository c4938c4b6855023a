import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Connection } from '@temporalio/client';
import { TypedSearchAttributes } from '@temporalio/common';
import { encodeSearchAttributeIndexedValueType } from '@temporalio/common/lib/search-attributes.js';
import { GANTRY_SEARCH_ATTRIBUTES } from '../contracts/search-attributes.ts';
import type { GantryConfig } from './config.ts';
import { releaseBuildLock, tryBuildLock } from './build-lock.ts';
import pRetry from 'p-retry';

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
export function resolveTemporalBinary(
  config: Pick<GantryConfig, 'temporalCliPath' | 'cacheDir'>,
  log = console.error,
): string | undefined {
  if (config.temporalCliPath) {
    if (!existsSync(config.temporalCliPath))
      throw new Error(`TEMPORAL_CLI_PATH=${config.temporalCliPath} does not exist`);
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
  // Two processes on one machine never build it at once.
  const lock = path.join(binDir, '.building');
  while (!tryBuildLock(lock, 30 * 60_000)) {
    spawnSync('sleep', ['2']);
    if (existsSync(cached)) return cached;
  }
  try {
    log(
      `Building the Temporal CLI (${TEMPORAL_CLI_MODULE}) from the Go module proxy into ${binDir}; this happens once per machine and takes a few minutes.`,
    );
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
    releaseBuildLock(lock);
  }
}

/** Polls until the frontend answers, or the child exits, or the deadline passes, or `signal` aborts. */
export async function waitForTemporal(
  address: string,
  timeoutMs: number,
  child?: ChildProcess,
  signal?: AbortSignal,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  while (Date.now() < deadline) {
    signal?.throwIfAborted();
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
  /**
   * A stop during start-up: no server is started after it, and one starting is stopped again
   * (SIGTERM, as at a normal stop) before this rejects with the signal's reason.
   */
  signal?: AbortSignal;
}

/** Starts `temporal server start-dev` as a child process and waits for it. */
export async function startTemporalDevServer(opts: DevServerOptions): Promise<RunningTemporal> {
  const args = [
    'server',
    'start-dev',
    '--ip',
    '127.0.0.1',
    '--port',
    String(opts.port),
    '--namespace',
    opts.namespace,
    '--log-level',
    'error',
  ];
  const pidFile = opts.dbFile ? `${opts.dbFile}.pid` : undefined;
  if (opts.dbFile && pidFile) {
    // Workflow histories hold job inputs and outputs: owner-only, whatever the SQLite files' modes.
    mkdirSync(path.dirname(opts.dbFile), { recursive: true, mode: 0o700 });
    chmodSync(path.dirname(opts.dbFile), 0o700);
    // WAL with synchronous=normal: every commit is still on disk when the process dies, only an OS
    // crash can lose the last few, and the job and endpoint rows in PostgreSQL (the source of truth,
    // swept and reconciled at start) bring such workflows back. The default rollback journal with
    // an fsync per commit held job workflows to ~5/s on this hardware (bench/README.md).
    args.push(
      '--db-filename',
      opts.dbFile,
      '--sqlite-pragma',
      'journal_mode=wal',
      '--sqlite-pragma',
      'synchronous=normal',
    );
    await stopLeftover(pidFile);
  }
  if (opts.uiPort) args.push('--ui-port', String(opts.uiPort), '--ui-ip', '127.0.0.1');
  else args.push('--headless');
  // Gantry's search attributes, registered on a new database's namespaces (an existing SQLite file
  // keeps what it had: the platform's start registers what is missing, ensureSearchAttributes).
  for (const key of GANTRY_SEARCH_ATTRIBUTES)
    args.push('--search-attribute', `${key.name}=${TypedSearchAttributes.toMetadataType(key.type)}`);
  args.push(...(opts.extraArgs ?? []));
  return pRetry(() => startDevServerOnce(opts, args, pidFile), {
    retries: 2,
    minTimeout: 0,
    signal: opts.signal,
    shouldRetry: ({ error }) => error instanceof DevServerExited && innerPortTaken(error.output, opts),
  });
}

/**
 * The server picks free ports for its inner services and binds them later: on a busy machine another
 * process can take one in between. Its frontend and UI ports are ours, and a bind error naming one
 * of them stays an error.
 */
function innerPortTaken(output: string, opts: DevServerOptions): boolean {
  return (
    /address already in use/.test(output) &&
    ![opts.port, opts.uiPort].some((port) => port !== undefined && output.includes(`:${port}:`))
  );
}

/** The dev server ended during start-up; `output` is the end of what it printed. */
class DevServerExited extends Error {
  constructor(
    code: number | null,
    readonly output: string,
  ) {
    super(
      `Temporal dev server exited with code ${code} during start-up${output ? `: ${output}` : ' (it printed nothing)'}`,
    );
  }
}

async function startDevServerOnce(
  opts: DevServerOptions,
  args: string[],
  pidFile: string | undefined,
): Promise<RunningTemporal> {
  // Its stderr is passed on as before; its stdout (where the server's own log lines go) is read too,
  // and the end of both is kept for the error when it exits during start-up.
  const child = spawn(opts.binary, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const keep = (d: Buffer): void => {
    output = (output + d.toString('utf8')).slice(-4_000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', (d: Buffer) => {
    keep(d);
    process.stderr.write(d);
  });
  // 'close' comes once its output is all read.
  const closed = new Promise<void>((resolve) => child.once('close', () => resolve()));
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
    await waitForTemporal(address, 60_000, child, opts.signal);
  } catch (err) {
    if (opts.signal?.aborted) {
      await stopChild(child);
      throw err;
    }
    child.kill('SIGKILL');
    if (child.exitCode !== null) {
      await Promise.race([closed, sleep(2_000)]);
      throw new DevServerExited(child.exitCode, output.trim());
    }
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
export async function ensureTemporal(
  config: GantryConfig,
  log = console.error,
  signal?: AbortSignal,
): Promise<RunningTemporal> {
  if (config.temporalAddress) {
    await waitForTemporal(config.temporalAddress, 30_000, undefined, signal);
    return { address: config.temporalAddress, uiUrl: config.temporalUiUrl, stop: async () => {} };
  }
  const dbFile = path.join(config.dataDir, 'temporal', 'temporal.db');
  const binary = resolveTemporalBinary(config, log);
  if (binary) {
    const server = await startTemporalDevServer({
      binary,
      port: config.temporalPort,
      uiPort: config.temporalUiPort,
      dbFile,
      namespace: config.temporalNamespace,
      signal,
    });
    return { ...server, uiUrl: config.temporalUiUrl ?? server.uiUrl };
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
      searchAttributes: [...GANTRY_SEARCH_ATTRIBUTES],
    },
  });
  return {
    address: env.address,
    uiUrl: config.temporalUiUrl ?? `http://127.0.0.1:${config.temporalUiPort}`,
    stop: () => env.teardown(),
  };
}

/** The CLI commands that register `names` (all of one type per command) on `namespace`. */
function registrationCommands(namespace: string, names: readonly string[]): string[] {
  const byType = new Map<string, string[]>();
  for (const key of GANTRY_SEARCH_ATTRIBUTES.filter((k) => names.includes(k.name))) {
    const type = TypedSearchAttributes.toMetadataType(key.type);
    byType.set(type, [...(byType.get(type) ?? []), key.name]);
  }
  return [...byType].map(
    ([type, list]) =>
      `temporal operator search-attribute create --namespace ${namespace} ${list.map((n) => `--name ${n}`).join(' ')} --type ${type}`,
  );
}

/**
 * Registers Gantry's search attributes (contracts/search-attributes.ts) on the namespace where they
 * are missing, through the operator service. Every workflow start carries them and fails while they
 * are unknown, so this runs at each start: a cluster (TEMPORAL_ADDRESS) and a dev server whose
 * SQLite file predates them alike. Another process registering at the same moment is fine; where
 * this identity may not register them (a managed or locked-down cluster), the commands an operator
 * must run are logged instead. Answers the names it added.
 */
export async function ensureSearchAttributes(
  connection: Connection,
  namespace: string,
  log: (msg: string) => void = console.error,
): Promise<string[]> {
  let existing: Record<string, unknown>;
  try {
    existing = (await connection.operatorService.listSearchAttributes({ namespace })).customAttributes ?? {};
  } catch (err) {
    log(
      `Could not list the search attributes of Temporal namespace '${namespace}' (${grpcMessage(err)}); if workflow starts fail with "search attribute ... is not defined", run:\n  ` +
        registrationCommands(
          namespace,
          GANTRY_SEARCH_ATTRIBUTES.map((k) => k.name),
        ).join('\n  '),
    );
    return [];
  }
  const wrongType = GANTRY_SEARCH_ATTRIBUTES.filter(
    (k) => k.name in existing && existing[k.name] !== encodeSearchAttributeIndexedValueType(k.type),
  );
  for (const k of wrongType)
    log(
      `Temporal search attribute ${k.name} exists on namespace '${namespace}' with another type than ${TypedSearchAttributes.toMetadataType(k.type)}: visibility queries on it may fail.`,
    );
  let missing = GANTRY_SEARCH_ATTRIBUTES.filter((k) => !(k.name in existing));
  if (missing.length === 0) return [];
  try {
    await pRetry(
      async (attempt) => {
        if (attempt > 1) {
          const now =
            (await connection.operatorService.listSearchAttributes({ namespace }).catch(() => undefined))
              ?.customAttributes ?? {};
          missing = missing.filter((k) => !(k.name in now));
          if (missing.length === 0) return;
        }
        try {
          await connection.operatorService.addSearchAttributes({
            namespace,
            searchAttributes: Object.fromEntries(
              missing.map((k) => [k.name, encodeSearchAttributeIndexedValueType(k.type)!]),
            ),
          });
        } catch (err) {
          // ALREADY_EXISTS: another process registered them a moment ago.
          if (grpcCode(err) !== 6) throw err;
          missing = [];
        }
      },
      // A real cluster with SQL visibility answers UNAVAILABLE to one of two processes registering at
      // once (its attribute mapping is being written): look again, and try again for what is missing.
      { retries: 4, minTimeout: 500 },
    );
  } catch (err) {
    log(
      `Could not register Gantry's search attributes on Temporal namespace '${namespace}' (${grpcMessage(err)}); workflow starts fail until an operator runs:\n  ` +
        registrationCommands(
          namespace,
          missing.map((k) => k.name),
        ).join('\n  '),
    );
    return [];
  }
  if (missing.length === 0) return [];
  log(`Registered Temporal search attributes on namespace '${namespace}': ${missing.map((k) => k.name).join(', ')}`);
  return missing.map((k) => k.name);
}

const grpcCode = (err: unknown): number | undefined =>
  typeof (err as { code?: unknown })?.code === 'number' ? (err as { code: number }).code : undefined;
const grpcMessage = (err: unknown): string => (err instanceof Error ? err.message : String(err));
