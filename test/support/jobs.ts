/** Shared set-up of the job API tests: an endpoint, workers with credentials, the compat worker. */
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'vitest';
import { registerWorkerCredential } from '../../domain/workers/index.ts';
import { randomString } from '../../domain/shared/index.ts';
import { call, type TestPlatform } from './platform.ts';

export const COMPAT_WORKER_DIR = path.join(
  path.dirname(fileURLToPath(import.meta.url)),
  '..',
  'fixtures',
  'compat-worker',
);

export async function createQueueEndpoint(
  p: TestPlatform,
  name = `jobs-${randomString(6)}`,
  extra: Record<string, unknown> = {},
): Promise<string> {
  const r = await call(p.url, 'POST', '/v2/serverless', {
    key: p.adminKey,
    body: { name, image: 'localhost/none:1', gpu: { pools: ['AMPERE_24'] }, workers: { min: 0, max: 0 }, ...extra },
  });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  return r.body.id as string;
}

export interface TestWorker {
  id: string;
  key: string;
}

/** A Worker row as the orchestration creates it (IDLE), with its credential. */
export async function createWorker(
  p: TestPlatform,
  endpointId: string,
  id = `wk${randomString(10)}`,
): Promise<TestWorker> {
  await p.ctx.db.worker.create({ data: { id, endpointId, status: 'IDLE' } });
  const key = await registerWorkerCredential(p.ctx.db, { workerId: id, endpointId });
  return { id, key };
}

/** A worker-protocol call: `Authorization: <key>` without Bearer, bodies as the SDK sends them. */
export async function workerCall(
  base: string,
  method: string,
  route: string,
  key: string,
  body?: unknown,
  contentType = 'application/x-www-form-urlencoded',
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- tests read arbitrary JSON
): Promise<{ status: number; body: any }> {
  const res = await fetch(base + route, {
    method,
    headers: { authorization: key, ...(body !== undefined ? { 'content-type': contentType } : {}) },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    // not JSON
  }
  return { status: res.status, body: parsed };
}

/** The environment the platform gives a worker container (docs/jobs.md), pointing at `base`. */
export function workerEnv(
  base: string,
  endpointId: string,
  worker: TestWorker,
  extra: Record<string, string> = {},
): Record<string, string> {
  const v2 = `${base}/v2/${endpointId}`;
  return {
    RUNPOD_WEBHOOK_GET_JOB: `${v2}/job-take/$ID?gpu=NVIDIA+TEST`,
    RUNPOD_WEBHOOK_POST_OUTPUT: `${v2}/job-done/$RUNPOD_POD_ID/$ID?gpu=NVIDIA+TEST`,
    RUNPOD_WEBHOOK_POST_STREAM: `${v2}/job-stream/$RUNPOD_POD_ID/$ID?gpu=NVIDIA+TEST`,
    RUNPOD_WEBHOOK_PING: `${v2}/ping/$RUNPOD_POD_ID`,
    RUNPOD_PING_INTERVAL: '10000',
    RUNPOD_AI_API_KEY: worker.key,
    RUNPOD_POD_ID: worker.id,
    RUNPOD_ENDPOINT_ID: endpointId,
    RUNPOD_POD_HOSTNAME: `${worker.id}-host`,
    RUNPOD_GPU_COUNT: '1',
    ...extra,
  };
}

export interface WorkerProcess {
  child: ChildProcess;
  /** Every JSON line it logged. */
  events: Array<Record<string, unknown>>;
  exited: Promise<number | null>;
  waitFor(pred: (e: Record<string, unknown>) => boolean, timeoutMs?: number): Promise<Record<string, unknown>>;
  kill(signal?: NodeJS.Signals): Promise<void>;
}

/** Runs the compat worker as a plain process on this machine. */
export function startCompatWorker(env: Record<string, string>): WorkerProcess {
  const child = spawn(process.execPath, [path.join(COMPAT_WORKER_DIR, 'index.js')], {
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  return wrapWorker(child);
}

export function wrapWorker(child: ChildProcess): WorkerProcess {
  const events: Array<Record<string, unknown>> = [];
  let buf = '';
  child.stdout?.on('data', (d: Buffer) => {
    buf += d.toString();
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      try {
        events.push(JSON.parse(line) as Record<string, unknown>);
      } catch {
        events.push({ event: 'text', line });
      }
    }
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return {
    child,
    events,
    exited,
    async waitFor(pred, timeoutMs = 20_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const found = events.find(pred);
        if (found) return found;
        if (Date.now() > deadline)
          throw new Error(`worker event not seen in ${timeoutMs} ms; saw ${JSON.stringify(events.slice(-10))}`);
        await sleep(20);
      }
    },
    async kill(signal = 'SIGKILL') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      await exited;
    },
  };
}

/** Polls `fn` until it returns a truthy value. */
export async function eventually<T>(
  fn: () => Promise<T | undefined | null | false>,
  timeoutMs = 20_000,
  what = 'condition',
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
      last = v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline)
      throw new Error(
        `${what} not reached in ${timeoutMs} ms (last: ${last instanceof Error ? last.message : JSON.stringify(last)})`,
      );
    await sleep(50);
  }
}
