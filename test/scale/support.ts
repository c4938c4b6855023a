/** Helpers of the scale-out test (not a test file itself): Gantry as OS processes, and a load balancer in front. */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const REPO_ROOT = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

export interface GantryProcess {
  name: string;
  role: 'api' | 'worker';
  child: ChildProcess;
  /** The API's own address (api role). */
  url: string | undefined;
  /** The last of its output, for failure messages. */
  output(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** kill -9: no graceful stop, nothing flushed. */
  kill9(): Promise<void>;
  /** SIGTERM, as an orchestrator stops a process; resolves with how it ended. */
  stop(timeoutMs?: number): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/**
 * Starts `node --import tsx infra/start.ts` as its own OS process with `env` over this process's
 * environment, and waits for its "Gantry is up" line.
 */
export async function startGantryProcess(
  name: string,
  role: 'api' | 'worker',
  env: Record<string, string>,
  port?: number,
): Promise<GantryProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(REPO_ROOT, 'infra', 'start.ts')], {
    cwd: REPO_ROOT,
    env: {
      ...process.env,
      // The suite's own test settings must not leak into a process that reads the environment once.
      GANTRY_ROLE: role,
      GANTRY_DATA_DIR: mkdtempSync(path.join(tmpdir(), `gantry-scale-${name}-`)),
      ...(port === undefined ? {} : { PORT: String(port) }),
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const keep = (chunk: Buffer): void => {
    out = (out + chunk.toString('utf8')).slice(-20_000);
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  // A test process that dies leaves no Gantry behind.
  const killOnExit = (): void => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  };
  process.once('exit', killOnExit);
  void exited.then(() => process.off('exit', killOnExit));

  const deadline = Date.now() + 180_000;
  while (!out.includes('Gantry is up')) {
    if (child.exitCode !== null || child.signalCode !== null)
      throw new Error(`${name} exited (${child.exitCode ?? child.signalCode}) before it was up: ${out}`);
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`${name} not up within 180 s: ${out}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    name,
    role,
    child,
    url: port === undefined ? undefined : `http://127.0.0.1:${port}`,
    output: () => out,
    exited,
    async kill9() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
    async stop(timeoutMs = 60_000) {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
      try {
        return await exited;
      } finally {
        clearTimeout(timer);
      }
    },
  };
}

export interface LoadBalancer {
  url: string;
  port: number;
  /** Connections each backend took, by index. */
  connections: number[];
  /** Connections refused by a backend and handed to the next one. */
  retried: number;
  close(): Promise<void>;
}

/**
 * A round-robin TCP load balancer on loopback, as a cloud one in front of several API processes:
 * each client connection goes to the next backend; a backend that refuses the connection (a dead
 * process) is skipped and the next one tried, each backend at most once per connection, with the
 * client's first bytes held until one accepts. Connections already open to a backend that dies are
 * reset, as a real one would.
 */
export async function startLoadBalancer(backends: Array<{ host: string; port: number }>): Promise<LoadBalancer> {
  let next = 0;
  const sockets = new Set<net.Socket>();
  const state = { connections: backends.map(() => 0), retried: 0 };
  const server = net.createServer((client) => {
    sockets.add(client);
    client.once('close', () => sockets.delete(client));
    client.pause();
    // A client gone before a backend took it: nothing to forward (and no unhandled 'error').
    client.on('error', () => client.destroy());
    // The connection's own sequence from its turn on: a retry drawn from the shared counter could
    // land on the dead backend again (other connections move the counter meanwhile), and a
    // connection that had tried it twice was closed unanswered although a live backend was there.
    const first = next++;
    const tryBackend = (attempt: number): void => {
      if (attempt >= backends.length) {
        client.destroy();
        return;
      }
      const index = (first + attempt) % backends.length;
      const backend = backends[index]!;
      const upstream = net.connect(backend.port, backend.host);
      sockets.add(upstream);
      upstream.once('close', () => sockets.delete(upstream));
      const onError = (): void => {
        upstream.destroy();
        state.retried++;
        tryBackend(attempt + 1);
      };
      upstream.once('error', onError);
      upstream.once('connect', () => {
        upstream.off('error', onError);
        state.connections[index]!++;
        upstream.on('error', () => client.destroy());
        client.on('error', () => upstream.destroy());
        // A client that hangs up takes its backend connection with it; the other way, pipe() ends the client once the backend's data is written.
        client.once('close', () => upstream.destroy());
        client.pipe(upstream);
        upstream.pipe(client);
        client.resume();
      });
    };
    tryBackend(0);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    get connections() {
      return state.connections;
    },
    get retried() {
      return state.retried;
    },
    async close() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const s of sockets) s.destroy();
      await closed;
    },
  };
}
