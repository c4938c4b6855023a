/** Helpers shared by the load-balancing tests (not a test file itself). */
import { spawn, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import path from 'node:path';
import { expect } from 'vitest';
import type { Db } from '../../domain/shared/index.ts';
import { newId } from '../../domain/shared/index.ts';
import { call, type TestPlatform } from './platform.ts';
import { freePort } from './ports.ts';
import { LB_WORKER_DIR } from './test-image.ts';

export { ensureLbWorkerImage, LB_WORKER_DIR, LB_WORKER_IMAGE } from './test-image.ts';

export interface LbWorkerProcess {
  name: string;
  port: number;
  proc: ChildProcess;
  output: () => string;
  /** Resolves with the exit code once the process has exited. */
  exited: Promise<number | null>;
  stop: (signal?: NodeJS.Signals) => Promise<number | null>;
}

export async function until<T>(
  what: string,
  fn: () => Promise<T | undefined | null | false> | T | undefined | null | false,
  timeoutMs = 20_000,
  everyMs = 50,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** The test worker (test/fixtures/lb-worker) as its own process on a free loopback port, answering its health check. */
export async function startLbWorker(name: string, env: Record<string, string> = {}): Promise<LbWorkerProcess> {
  const port = await freePort();
  const proc = spawn(process.execPath, [path.join(LB_WORKER_DIR, 'index.js')], {
    env: { PATH: process.env.PATH ?? '', PORT: String(port), WORKER_NAME: name, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  proc.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  proc.stderr!.on('data', (c: Buffer) => (out += c.toString()));
  const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
  await until(`worker ${name} to listen`, async () => {
    if (proc.exitCode !== null) throw new Error(`worker ${name} exited: ${out}`);
    try {
      const r = await fetch(`http://127.0.0.1:${port}/health`);
      await r.arrayBuffer();
      return r.status === 200;
    } catch {
      return false;
    }
  });
  return {
    name,
    port,
    proc,
    output: () => out,
    exited,
    stop: async (signal = 'SIGKILL') => {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal);
      return exited;
    },
  };
}

/** A Host row for workers started by the test itself: DISABLED, so that placement never uses it. */
export async function createLoopbackHost(db: Db): Promise<string> {
  const id = newId();
  await db.host.create({
    data: {
      id,
      name: `lb-test-${id}`,
      address: '127.0.0.1',
      user: 'test',
      dataCenterId: 'dc-test',
      status: 'DISABLED',
    },
  });
  return id;
}

/** Registers a running worker process as a Worker row of the endpoint, the way the orchestration leaves a ready one. */
export async function registerWorker(
  db: Db,
  w: {
    endpointId: string;
    hostId: string;
    port: number;
    status?: 'IDLE' | 'INITIALIZING' | 'RUNNING';
    releaseVersion?: number;
  },
): Promise<string> {
  const id = newId();
  const status = w.status ?? 'IDLE';
  await db.worker.create({
    data: {
      id,
      endpointId: w.endpointId,
      hostId: w.hostId,
      hostPort: w.port,
      status,
      releaseVersion: w.releaseVersion ?? 1,
      startedAt: new Date(),
      readyAt: status === 'INITIALIZING' ? null : new Date(),
    },
  });
  return id;
}

export async function createLbEndpoint(
  p: TestPlatform,
  name: string,
  extra: Record<string, unknown> = {},
): Promise<string> {
  const r = await call(p.url, 'POST', '/v2/serverless', {
    key: p.adminKey,
    body: {
      name,
      type: 'LOAD_BALANCING',
      image: 'localhost/lb-test:1',
      gpu: { pools: ['AMPERE_24'] },
      workers: { min: 0, max: 3 },
      ...extra,
    },
  });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  return r.body.id as string;
}

export interface RawAnswer {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
  json: () => any; // eslint-disable-line @typescript-eslint/no-explicit-any -- tests read arbitrary JSON
}

/** An HTTP request with headers fetch will not send (Host), straight over node:http. */
export function rawRequest(
  url: string,
  opts: { method?: string; headers?: Record<string, string>; body?: string | Buffer } = {},
): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: opts.method ?? 'GET', headers: opts.headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json: () => JSON.parse(text) });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(opts.body);
  });
}

/** A worker's own counts (the fixture's /stats). */
export const stats = async (w: LbWorkerProcess): Promise<{ served: number; inFlight: number; maxInFlight: number }> =>
  (await fetch(`http://127.0.0.1:${w.port}/stats`)).json() as never;

/** A problem+json answer of the platform: this status, a detail that matches. */
export function expectProblem(
  r: { status: number; headers: Headers | http.IncomingHttpHeaders; body?: unknown },
  status: number,
  detail: RegExp,
): void {
  const type = r.headers instanceof Headers ? r.headers.get('content-type') : r.headers['content-type'];
  expect(type).toMatch(/^application\/problem\+json/);
  expect(r.body).toMatchObject({ status, title: expect.any(String), detail: expect.stringMatching(detail) });
}
