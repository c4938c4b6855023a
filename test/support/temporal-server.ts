/**
 * Temporal's own server (not the dev server) over PostgreSQL, for the scale-out path and its test:
 * several history shards, the SQL visibility store, and frontend, history, matching and worker
 * services in one process, as a small production cluster runs them. No npm package ships it; it
 * builds from the Go module proxy, once per machine, into the per-machine cache beside the Temporal
 * CLI (`<cacheDir>/bin`, `~/.cache/gantry/bin` by default). The schema files come with the module
 * source that the build leaves in the Go module cache; nothing of Temporal's is copied here.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { existsSync, mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Connection } from '@temporalio/client';
import { msToTs } from '@temporalio/common/lib/time.js';
import pg from 'pg';
import YAML from 'yaml';
import { randomString } from '../../domain/shared/index.ts';
import { releaseBuildLock, tryBuildLock } from '../../infra/build-lock.ts';
import { loadConfig } from '../../infra/config.ts';
import { stopChild, waitForTemporal } from '../../infra/temporal.ts';

/** v1.29.1 is the server the Temporal CLI v1.5.1 (the dev server) embeds: one behaviour in both. */
export const TEMPORAL_SERVER_VERSION = 'v1.29.1';
const SERVER_PACKAGE = 'go.temporal.io/server/cmd/server';
const SQL_TOOL_PACKAGE = 'go.temporal.io/server/cmd/tools/sql';

/** A build that takes longer than this is taken for dead, and its lock for stale. */
const STALE_LOCK_MS = 30 * 60_000;

export interface TemporalServerBinaries {
  /** `temporal-server`: `server --root --config --env --allow-no-auth start`. */
  server: string;
  /** `temporal-sql-tool`: `setup-schema`, `update-schema`. */
  sqlTool: string;
  /** `schema/postgresql/v12` of the module source in the Go module cache. */
  schemaDir: string;
}

function run(
  command: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  log: (line: string) => void,
): Promise<{ code: number; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    const forward = (chunk: Buffer): void => {
      const text = chunk.toString('utf8');
      output = (output + text).slice(-8000);
      for (const line of text.split('\n')) if (line.trim()) log(line);
    };
    child.stdout.on('data', forward);
    child.stderr.on('data', forward);
    child.once('error', reject);
    child.once('close', (code) => resolve({ code: code ?? 1, output }));
  });
}

/** The environment `go` runs with: pure Go, and no -mod flag that `go install pkg@version` refuses. */
function goEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  return {
    ...process.env,
    CGO_ENABLED: '0',
    GOFLAGS: (process.env.GOFLAGS ?? '')
      .split(/\s+/)
      .filter((f) => f && !f.startsWith('-mod='))
      .join(' '),
    ...extra,
  };
}

/**
 * Where the module source of the server lies: the schema directories are read from there. `go
 * install` put it there; a module cache cleaned since (`go clean -modcache`) is filled again by
 * `go mod download`, which needs no build.
 */
async function moduleSchemaDir(log: (line: string) => void): Promise<string> {
  const { code, output } = await run('go', ['env', 'GOMODCACHE'], goEnv(), () => {});
  if (code !== 0) throw new Error(`go env GOMODCACHE failed: ${output}`);
  const schemaDir = path.join(
    output.trim(),
    `go.temporal.io/server@${TEMPORAL_SERVER_VERSION}`,
    'schema',
    'postgresql',
    'v12',
  );
  if (!existsSync(schemaDir)) {
    const tmp = mkdtempSync(path.join(tmpdir(), 'gantry-temporal-mod-'));
    try {
      // `go mod download` outside a module needs a go.mod to hang on; an empty one does.
      writeFileSync(path.join(tmp, 'go.mod'), 'module gantry.local/temporal-schema\n');
      const r = await run('go', ['mod', 'download', `go.temporal.io/server@${TEMPORAL_SERVER_VERSION}`], goEnv(), log);
      if (r.code !== 0)
        throw new Error(`go mod download go.temporal.io/server@${TEMPORAL_SERVER_VERSION} failed: ${r.output}`);
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
  }
  if (!existsSync(path.join(schemaDir, 'temporal', 'versioned'))) throw new Error(`no Temporal schema at ${schemaDir}`);
  return schemaDir;
}

/**
 * The paths of Temporal's server and SQL tool, built with `go install` into `<cacheDir>/bin` when they
 * are not there yet (about 4 minutes the first time on a 2-core machine). Several processes
 * (parallel test files) may call this at once: a lock directory lets one build while the others wait.
 */
export async function ensureTemporalServerBinaries(
  options: { log?: (line: string) => void; cacheDir?: string } = {},
): Promise<TemporalServerBinaries> {
  const log = options.log ?? ((line: string) => console.error(line));
  const binDir = path.join(options.cacheDir ?? loadConfig().cacheDir, 'bin');
  const server = path.join(binDir, `temporal-server-${TEMPORAL_SERVER_VERSION}`);
  const sqlTool = path.join(binDir, `temporal-sql-tool-${TEMPORAL_SERVER_VERSION}`);
  const built = (): boolean => existsSync(server) && existsSync(sqlTool);
  if (!built()) {
    mkdirSync(binDir, { recursive: true });
    const lock = path.join(binDir, '.building-temporal-server');
    while (!tryBuildLock(lock, STALE_LOCK_MS)) {
      await sleep(2000);
      if (built()) break;
    }
    try {
      if (!built()) {
        // GOBIN is a directory of its own: `go install` names its outputs `server` and `sql`, and the
        // cached binaries must appear under their versioned names only when whole (the renames below;
        // the SQL tool first, so that `built()` never sees a server without its tool).
        const buildBin = path.join(lock, 'bin');
        const modules = [
          `${SERVER_PACKAGE}@${TEMPORAL_SERVER_VERSION}`,
          `${SQL_TOOL_PACKAGE}@${TEMPORAL_SERVER_VERSION}`,
        ];
        log(
          `Building Temporal's server and SQL tool (${modules.join(', ')}) from the Go module proxy into ${binDir}; this happens once per machine and takes about 4 minutes.`,
        );
        const started = Date.now();
        const { code } = await run('go', ['install', ...modules], goEnv({ GOBIN: buildBin }), log).catch(
          (err: unknown) => {
            throw new Error(`cannot run go to build the Temporal server (install Go 1.24 or later): ${String(err)}`);
          },
        );
        if (code !== 0 || !existsSync(path.join(buildBin, 'server')) || !existsSync(path.join(buildBin, 'sql'))) {
          throw new Error(`building the Temporal server failed (go install exited with ${code})`);
        }
        renameSync(path.join(buildBin, 'sql'), sqlTool);
        renameSync(path.join(buildBin, 'server'), server);
        log(`Built Temporal's server and SQL tool in ${Math.round((Date.now() - started) / 1000)} s.`);
      }
    } finally {
      releaseBuildLock(lock);
    }
  }
  return { server, sqlTool, schemaDir: await moduleSchemaDir(log) };
}

export interface TemporalCluster {
  /** The frontend's `host:port`, for TEMPORAL_ADDRESS. */
  address: string;
  namespace: string;
  /** The two databases made on the given PostgreSQL: history and visibility. */
  databases: { temporal: string; visibility: string };
  /** The server's process, for tests that stop it. */
  pid: number | undefined;
  /** Stops the server, drops its databases, removes its directory. */
  stop(): Promise<void>;
}

export interface TemporalClusterOptions {
  /** A PostgreSQL superuser URL (or a role that may create databases): the cluster's two databases are made there. */
  postgresAdminUrl: string;
  /** Fixed for the cluster's lifetime (a workflow id hashes to a shard). A production cluster has hundreds to thousands; a few already spread load across shard owners. */
  historyShards?: number;
  namespace?: string;
  /** Connections per Temporal service to the history database (4 services in this one process). */
  maxConns?: number;
  /** More dynamic config (key: value), e.g. `matching.numTaskqueueReadPartitions`. */
  dynamicConfig?: Record<string, unknown>;
  binaries?: TemporalServerBinaries;
  log?: (line: string) => void;
}

/** The server's YAML config: the shape of `config/development-postgres12.yaml`, with this machine's addresses and free ports. */
function clusterConfig(o: {
  pg: URL;
  databases: { temporal: string; visibility: string };
  historyShards: number;
  maxConns: number;
  ports: Record<
    | 'frontend'
    | 'frontendMembership'
    | 'frontendHttp'
    | 'history'
    | 'historyMembership'
    | 'matching'
    | 'matchingMembership'
    | 'worker'
    | 'workerMembership',
    number
  >;
  dynamicConfigFile: string;
}): Record<string, unknown> {
  const sql = (databaseName: string, maxConns: number): Record<string, unknown> => ({
    sql: {
      pluginName: 'postgres12',
      databaseName,
      connectAddr: `${o.pg.hostname}:${o.pg.port || '5432'}`,
      connectProtocol: 'tcp',
      user: decodeURIComponent(o.pg.username) || 'postgres',
      password: decodeURIComponent(o.pg.password),
      maxConns,
      maxIdleConns: maxConns,
      maxConnLifetime: '1h',
    },
  });
  const service = (
    grpcPort: number,
    membershipPort: number,
    extra: Record<string, unknown> = {},
  ): Record<string, unknown> => ({
    rpc: { grpcPort, membershipPort, bindOnLocalHost: true, ...extra },
  });
  return {
    log: { stdout: true, level: 'warn' },
    persistence: {
      defaultStore: 'postgres-default',
      visibilityStore: 'postgres-visibility',
      numHistoryShards: o.historyShards,
      datastores: {
        'postgres-default': sql(o.databases.temporal, o.maxConns),
        'postgres-visibility': sql(o.databases.visibility, 2),
      },
    },
    // Membership (ringpop) over loopback: the four services find each other as a cluster's hosts do.
    global: { membership: { maxJoinDuration: '30s', broadcastAddress: '127.0.0.1' } },
    services: {
      frontend: service(o.ports.frontend, o.ports.frontendMembership, { httpPort: o.ports.frontendHttp }),
      history: service(o.ports.history, o.ports.historyMembership),
      matching: service(o.ports.matching, o.ports.matchingMembership),
      worker: service(o.ports.worker, o.ports.workerMembership),
    },
    clusterMetadata: {
      enableGlobalNamespace: false,
      failoverVersionIncrement: 10,
      masterClusterName: 'active',
      currentClusterName: 'active',
      clusterInformation: {
        active: {
          enabled: true,
          initialFailoverVersion: 1,
          rpcName: 'frontend',
          rpcAddress: `127.0.0.1:${o.ports.frontend}`,
        },
      },
    },
    dcRedirectionPolicy: { policy: 'noop' },
    dynamicConfigClient: { filepath: o.dynamicConfigFile, pollInterval: '10s' },
  };
}

/**
 * A free loopback port below 32768. The cluster's membership table keeps each service's port as a
 * SMALLINT (`cluster_membership.rpc_port`), so a port from the kernel's ephemeral range (32768 and
 * up on Linux) stops the server at start ("value ... is out of range for type smallint"). Picked
 * from 10000-19999: under the ephemeral range, and apart from the host ports Gantry gives
 * load-balancing workers (20000-29999).
 */
async function freeLowPort(taken: Set<number>): Promise<number> {
  for (let attempt = 0; attempt < 200; attempt++) {
    const port = 10_000 + Math.floor(Math.random() * 10_000);
    if (taken.has(port)) continue;
    const free = await new Promise<boolean>((resolve) => {
      const server = createServer();
      server.once('error', () => resolve(false));
      server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
    });
    if (free) {
      taken.add(port);
      return port;
    }
  }
  throw new Error('no free loopback port in 10000-19999');
}

const grpcMessage = (err: unknown): string => (err instanceof Error ? err.message : String(err));

/** Until the namespace is known to the history service too (each service refreshes its namespace registry every 2 s). */
async function waitForNamespace(connection: Connection, namespace: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  while (Date.now() < deadline) {
    try {
      // A workflow that does not exist: the history service answers "workflow not found" once it
      // knows the namespace, "namespace ... not found" before.
      await connection.workflowService.describeWorkflowExecution({
        namespace,
        execution: { workflowId: `gantry-readiness-probe-${randomString(8)}` },
      });
      return;
    } catch (err) {
      last = grpcMessage(err);
      if ((err as { code?: number }).code === 5 && /workflow not found/i.test(last)) return;
    }
    await sleep(250);
  }
  throw new Error(`Temporal namespace '${namespace}' not usable within ${timeoutMs} ms: ${last}`);
}

/**
 * A Temporal cluster of one process (frontend, history, matching and worker services) on `historyShards`
 * shards over two fresh databases of the given PostgreSQL, with the namespace registered and usable.
 * Gantry's search attributes are not registered here: Gantry's own start does that on whatever
 * cluster it is given (infra/temporal.ts ensureSearchAttributes), as it would on a production one.
 */
export async function startTemporalCluster(options: TemporalClusterOptions): Promise<TemporalCluster> {
  const log = options.log ?? ((line: string) => console.error(line));
  const namespace = options.namespace ?? 'default';
  const historyShards = options.historyShards ?? 4;
  const binaries = options.binaries ?? (await ensureTemporalServerBinaries({ log }));
  const suffix = randomString(10).toLowerCase();
  const databases = { temporal: `temporal_${suffix}`, visibility: `temporal_vis_${suffix}` };
  const pgUrl = new URL(options.postgresAdminUrl);
  const dir = mkdtempSync(path.join(tmpdir(), 'gantry-temporal-cluster-'));
  let child: ChildProcess | undefined;
  let created = false;

  const dropDatabases = async (): Promise<void> => {
    if (!created) return;
    const admin = new pg.Client({ connectionString: options.postgresAdminUrl });
    await admin.connect();
    try {
      // WITH (FORCE): the server's pooled connections may outlive its process by a moment.
      for (const db of Object.values(databases)) await admin.query(`drop database if exists ${db} with (force)`);
    } finally {
      await admin.end();
    }
  };
  const stop = async (): Promise<void> => {
    if (child) await stopChild(child, 10_000);
    await dropDatabases().catch((err: unknown) => log(`dropping the Temporal databases failed: ${String(err)}`));
    rmSync(dir, { recursive: true, force: true });
  };

  try {
    const admin = new pg.Client({ connectionString: options.postgresAdminUrl });
    await admin.connect();
    try {
      created = true;
      for (const db of Object.values(databases)) await admin.query(`create database ${db}`);
    } finally {
      await admin.end();
    }

    // The SQL tool reads its connection from the environment: the password stays off the command line.
    const sqlEnv = (database: string): NodeJS.ProcessEnv => ({
      ...process.env,
      SQL_PLUGIN: 'postgres12',
      SQL_HOST: pgUrl.hostname,
      SQL_PORT: pgUrl.port || '5432',
      SQL_USER: decodeURIComponent(pgUrl.username) || 'postgres',
      SQL_PASSWORD: decodeURIComponent(pgUrl.password),
      SQL_DATABASE: database,
    });
    for (const [database, schema] of [
      [databases.temporal, 'temporal'],
      [databases.visibility, 'visibility'],
    ] as const) {
      for (const args of [
        ['setup-schema', '-v', '0.0'],
        ['update-schema', '-d', path.join(binaries.schemaDir, schema, 'versioned')],
      ]) {
        const r = await run(binaries.sqlTool, args, sqlEnv(database), () => {});
        if (r.code !== 0)
          throw new Error(`temporal-sql-tool ${args[0]} on ${database} failed (${r.code}): ${r.output}`);
      }
    }

    const taken = new Set<number>();
    const ports = {
      frontend: await freeLowPort(taken),
      frontendMembership: await freeLowPort(taken),
      frontendHttp: await freeLowPort(taken),
      history: await freeLowPort(taken),
      historyMembership: await freeLowPort(taken),
      matching: await freeLowPort(taken),
      matchingMembership: await freeLowPort(taken),
      worker: await freeLowPort(taken),
      workerMembership: await freeLowPort(taken),
    };
    const configDir = path.join(dir, 'config');
    mkdirSync(configDir, { mode: 0o700 });
    const dynamicConfigFile = path.join(configDir, 'dynamic.yaml');
    // Dynamic config values are lists of {value, constraints}; none given is the server's defaults.
    const dynamic = Object.fromEntries(
      Object.entries(options.dynamicConfig ?? {}).map(([k, v]) => [k, [{ value: v }]]),
    );
    writeFileSync(dynamicConfigFile, Object.keys(dynamic).length ? YAML.stringify(dynamic) : '{}\n', { mode: 0o600 });
    // The config holds the database password: owner-only.
    writeFileSync(
      path.join(configDir, 'development.yaml'),
      YAML.stringify(
        clusterConfig({
          pg: pgUrl,
          databases,
          historyShards,
          maxConns: options.maxConns ?? 10,
          ports,
          dynamicConfigFile,
        }),
      ),
      { mode: 0o600 },
    );

    let output = '';
    // Detached: its own process group, so a terminal's Ctrl-C reaches it only through stop().
    const started = spawn(
      binaries.server,
      ['--root', dir, '--config', 'config', '--env', 'development', '--allow-no-auth', 'start'],
      {
        cwd: dir,
        detached: true,
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    child = started;
    const keep = (chunk: Buffer): void => {
      output = (output + chunk.toString('utf8')).slice(-8000);
    };
    started.stdout?.on('data', keep);
    started.stderr?.on('data', keep);
    // A process that exits without calling stop() still takes the server with it.
    const stopOnExit = (): void => {
      if (started.exitCode === null && started.signalCode === null) started.kill('SIGTERM');
    };
    process.once('exit', stopOnExit);
    started.once('exit', () => process.off('exit', stopOnExit));

    const address = `127.0.0.1:${ports.frontend}`;
    await waitForTemporal(address, 90_000, started).catch((err: unknown) => {
      throw new Error(`${grpcMessage(err)}; server output: ${output.trim()}`);
    });
    const connection = await Connection.connect({ address });
    try {
      try {
        await connection.workflowService.registerNamespace({
          namespace,
          workflowExecutionRetentionPeriod: msToTs(24 * 3600_000),
        });
      } catch (err) {
        if ((err as { code?: number }).code !== 6) throw err; // ALREADY_EXISTS
      }
      await waitForNamespace(connection, namespace, 30_000);
    } finally {
      await connection.close();
    }
    return { address, namespace, databases, pid: started.pid, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
