/**
 * Stopping `npm start` the ways people stop it, against its real processes (bootstrap, Gantry, the
 * embedded PostgreSQL, the Temporal dev server): one SIGTERM to the process, and a terminal's
 * Ctrl+C (SIGINT to the whole process group, npm included, which passes it on to its script too).
 * Both stop gracefully: requests in flight get their normal answers, the process exits 0, and no
 * process of that data dir is left. So does a stop during start-up, and Gantry whose parent was
 * killed. A second signal exits at once and still stops the servers.
 * NODE_ENV is unset in the children, as in a terminal: libraries that act on stop signals by
 * themselves outside NODE_ENV=test (Apollo Server) show up only then.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { call } from '../support/platform.ts';
import { freePort } from '../support/ports.ts';

const ADMIN_KEY = `graceful_${'k'.repeat(32)}`;

describe('stopping npm start', () => {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'gantry-graceful-'));
  chmodSync(dataDir, 0o755); // as root, the embedded PostgreSQL runs as the postgres user
  const started: ChildProcess[] = [];
  let ports: { api: number; temporal: number; ui: number; pg: number };
  let base: string;

  beforeAll(async () => {
    ports = { api: await freePort(), temporal: await freePort(), ui: await freePort(), pg: await freePort() };
    base = `http://127.0.0.1:${ports.api}`;
  });

  afterAll(async () => {
    for (const c of started) if (c.pid && c.exitCode === null) killGroup(c.pid, 'SIGKILL');
    for (const pid of leftovers(dataDir)) killQuietly(pid, 'SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
  });

  /**
   * `npm start` (or the command it runs), detached: its own process group, as in a terminal. It
   * returns once the output says `until`, or, for 'postgres' and 'temporal', once that embedded
   * server's process is there (the start is still under way).
   */
  async function start(
    command: 'npm' | 'bootstrap',
    until = 'Gantry is up',
  ): Promise<{ child: ChildProcess; output: () => string }> {
    const serverOf: Record<string, string> = { postgres: `${dataDir}/pg`, temporal: `${dataDir}/temporal` };
    const env: Record<string, string | undefined> = {
      ...process.env,
      NODE_ENV: undefined,
      GANTRY_DATA_DIR: dataDir,
      PORT: String(ports.api),
      TEMPORAL_PORT: String(ports.temporal),
      TEMPORAL_UI_PORT: String(ports.ui),
      GANTRY_PG_PORT: String(ports.pg),
      TEMPORAL_CLI_PATH: inject('temporalBinary'),
      GANTRY_ADMIN_API_KEY: ADMIN_KEY,
      DATABASE_URL: undefined,
      TEMPORAL_ADDRESS: undefined,
      LOG_LEVEL: 'warn',
    };
    const [cmd, args] = command === 'npm' ? ['npm', ['start']] : [process.execPath, ['tooling/bootstrap.mjs', 'start']];
    if (command === 'npm') env.PATH = `${path.dirname(process.execPath)}${path.delimiter}${env.PATH ?? ''}`;
    const child = spawn(cmd, args, { env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    started.push(child);
    let out = '';
    child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr?.on('data', (d: Buffer) => (out += d.toString()));
    const deadline = Date.now() + 150_000;
    while (
      !out.includes(until) &&
      !(until in serverOf && leftovers(dataDir).some((pid) => cmdlineOf(pid).includes(serverOf[until]!)))
    ) {
      if (child.exitCode !== null) throw new Error(`start exited ${child.exitCode}:\n${out}`);
      if (Date.now() > deadline) throw new Error(`start did not come up:\n${out}`);
      await sleep(100);
    }
    return { child, output: () => out };
  }

  /** Requests that are under way when the stop signal comes. */
  async function inFlight(): Promise<{
    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- JSON answers
    runsync: Promise<{ status: number; body: any }>;
    slowCreate: { finish(): void; answer: Promise<{ status: number; body: string }> };
  }> {
    const endpoint = await call(base, 'POST', '/v2/serverless', {
      key: ADMIN_KEY,
      body: { name: `queue-${Date.now()}`, image: 'img:1' },
    });
    expect(endpoint.status, JSON.stringify(endpoint.body)).toBe(201);
    // A synchronous job on a queue with no worker: it waits (up to 20 s) until it finishes or the
    // server closes, which answers the waits in flight at once, as they stand.
    let runsyncDone = false;
    const runsync = call(base, 'POST', `/v2/${endpoint.body.id}/runsync?wait=20000`, {
      key: ADMIN_KEY,
      body: { input: { n: 1 } },
    }).finally(() => (runsyncDone = true));
    // A request whose body is still arriving: nothing can answer it before the rest comes.
    const body = JSON.stringify({ name: `slow-${Date.now()}`, image: 'img:1' });
    const req = http.request(`${base}/v2/serverless`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${ADMIN_KEY}`,
        'content-type': 'application/json',
        'content-length': Buffer.byteLength(body),
      },
    });
    const answer = new Promise<{ status: number; body: string }>((resolve, reject) => {
      req.on('response', (res) => {
        let text = '';
        res.on('data', (d: Buffer) => (text += d.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
        res.on('error', reject);
      });
      req.on('error', reject);
    });
    // Where a test expects a request to fail (a second Ctrl+C), it looks at the failure later.
    answer.catch(() => undefined);
    runsync.catch(() => undefined);
    req.write(body.slice(0, 10));
    await sleep(1500);
    expect(runsyncDone, 'the runsync is still waiting when the signal comes').toBe(false);
    return { runsync, slowCreate: { finish: () => req.end(body.slice(10)), answer } };
  }

  async function expectAnswered(requests: Awaited<ReturnType<typeof inFlight>>): Promise<void> {
    // The body's rest arrives two seconds into the stop: the request is still served.
    await sleep(2000);
    requests.slowCreate.finish();
    const created = await requests.slowCreate.answer;
    expect(created.status, created.body).toBe(201);
    expect(JSON.parse(created.body).id).toBeTruthy();
    const sync = await requests.runsync;
    expect(sync.status, JSON.stringify(sync.body)).toBe(200);
    expect(sync.body.status).toBe('IN_QUEUE');
  }

  it('one SIGTERM to the process: in-flight requests are answered, it exits 0, nothing is left', async () => {
    const { child, output } = await start('bootstrap');
    const requests = await inFlight();
    const exit = exited(child);
    child.kill('SIGTERM');
    await expectAnswered(requests);
    expect(await exit, output()).toBe(0);
    expect(output()).toContain('Stopping (SIGTERM)');
    expect(output()).not.toMatch(/second SIG/);
    expect(await noLeftovers(dataDir), output()).toEqual([]);
  }, 240_000);

  it("Ctrl+C in a terminal (SIGINT to npm start's whole process group): the same graceful stop", async () => {
    const { child, output } = await start('npm');
    const requests = await inFlight();
    const exit = exited(child);
    killGroup(child.pid!, 'SIGINT');
    await expectAnswered(requests);
    expect(await exit, output()).toBe(0);
    expect(output()).toContain('Stopping (SIGINT)');
    expect(output()).not.toMatch(/second SIG/);
    expect(await noLeftovers(dataDir), output()).toEqual([]);
  }, 240_000);

  // The stop cuts the start short rather than waiting for the rest of it (the Temporal dev server,
  // the workflow bundle, the API: many seconds on a busy machine, past the 20 s grace delay, after
  // which Gantry exits with code 1): it exits well within that delay.
  for (const server of ['postgres', 'temporal'] as const) {
    it(`Ctrl+C during start-up (the embedded ${server} starting): what was started is stopped, nothing is left`, async () => {
      const { child, output } = await start('npm', server);
      const exit = exited(child);
      const signalled = Date.now();
      killGroup(child.pid!, 'SIGINT');
      expect(await exit, output()).toBe(0);
      expect(Date.now() - signalled, output()).toBeLessThan(10_000);
      expect(output()).toContain('Stopping (SIGINT)');
      expect(output()).toContain('Start-up cut short');
      expect(output()).not.toContain('Gantry is up');
      expect(await noLeftovers(dataDir), output()).toEqual([]);
    }, 240_000);
  }

  it('bootstrap killed (kill -9, a closed terminal): Gantry notices, stops gracefully by itself, nothing is left', async () => {
    const { child, output } = await start('bootstrap');
    child.kill('SIGKILL');
    const deadline = Date.now() + 30_000;
    while (!output().includes('Stopped in') && Date.now() < deadline) await sleep(100);
    expect(output()).toContain('Stopping (parent process gone)');
    expect(await noLeftovers(dataDir), output()).toEqual([]);
  }, 240_000);

  it('a second Ctrl+C exits at once and still stops the embedded servers', async () => {
    const { child, output } = await start('npm');
    const requests = await inFlight();
    const exit = exited(child);
    killGroup(child.pid!, 'SIGINT');
    await sleep(1000);
    const second = Date.now();
    killGroup(child.pid!, 'SIGINT');
    expect(await exit, output()).toBe(1);
    expect(Date.now() - second).toBeLessThan(5000);
    expect(output()).toMatch(/second SIGINT/);
    requests.slowCreate.finish();
    await requests.slowCreate.answer.catch(() => undefined);
    await requests.runsync.catch(() => undefined);
    expect(await noLeftovers(dataDir), output()).toEqual([]);
  }, 240_000);
});

const exited = (c: ChildProcess): Promise<number | null> =>
  new Promise((r) =>
    c.exitCode !== null || c.signalCode !== null ? r(c.exitCode) : c.once('exit', (code) => r(code)),
  );

function killGroup(pid: number, signal: NodeJS.Signals): void {
  killQuietly(-pid, signal);
}

function killQuietly(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch {
    // already gone
  }
}

/**
 * Processes of this data dir, by command line (postgres -D <dir>/pg, temporal --db-filename
 * <dir>/...) or environment (Gantry's own process has GANTRY_DATA_DIR=<dir>); zombies do not count.
 */
function leftovers(dataDir: string): number[] {
  const found: number[] = [];
  for (const entry of readdirSync('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    try {
      if (/^\S+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'))) continue;
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      const environ = readFileSync(`/proc/${pid}/environ`, 'utf8');
      if (cmdline.includes(dataDir) || environ.split('\0').includes(`GANTRY_DATA_DIR=${dataDir}`)) found.push(pid);
    } catch {
      // gone meanwhile, or not ours to read
    }
  }
  return found;
}

/** Leftovers after giving the processes a few seconds to finish exiting. */
async function noLeftovers(dataDir: string): Promise<string[]> {
  const deadline = Date.now() + 10_000;
  let pids = leftovers(dataDir);
  while (pids.length > 0 && Date.now() < deadline) {
    await sleep(200);
    pids = leftovers(dataDir);
  }
  return pids.map((pid) => `${pid}: ${cmdlineOf(pid)}`);
}

function cmdlineOf(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
  } catch {
    return '';
  }
}
