/**
 * The compat worker (written against docs/jobs.md alone) in a real container: a locally built Podman
 * image with node in it, run with `--network host` against the test API, serving jobs end to end,
 * and a container killed mid-job whose job another container finishes.
 */
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureTestWorkerImage } from '../support/test-image.ts';
import { call, startTestPlatform, type TestPlatform } from '../support/platform.ts';
import {
  COMPAT_WORKER_DIR,
  createQueueEndpoint,
  createWorker,
  eventually,
  workerEnv,
  wrapWorker,
  type TestWorker,
  type WorkerProcess,
} from '../support/jobs.ts';
import { jobWorkflowId } from '../../contracts/workflows.ts';

const IMAGE = 'localhost/gantry-test-compat-worker:1';
const LABEL = 'io.gantry.test=compat-worker';
const PING_MS = 400;

let p: TestPlatform;
let ep: string;
const containers: string[] = [];
const running: WorkerProcess[] = [];

/** Runs the worker image attached (its stdout is the worker's JSON log), as the platform would. */
function runContainer(
  endpointId: string,
  worker: TestWorker,
  extra: Record<string, string> = {},
): { name: string; proc: WorkerProcess } {
  const name = `gantry-compat-${randomBytes(4).toString('hex')}`;
  containers.push(name);
  // As the platform runs workers: on the bridge network, reaching the worker-facing listener.
  const env = workerEnv(p.ctx.workerUrl ?? p.url, endpointId, worker, {
    RUNPOD_PING_INTERVAL: String(PING_MS),
    ...extra,
  });
  const args = [
    'run',
    '--rm',
    '--name',
    name,
    '--label',
    LABEL,
    '--network',
    'bridge',
    ...Object.entries(env).flatMap(([k, v]) => ['-e', `${k}=${v}`]),
    IMAGE,
  ];
  const proc = wrapWorker(spawn('podman', args, { stdio: ['ignore', 'pipe', 'inherit'] }));
  running.push(proc);
  return { name, proc };
}

beforeAll(async () => {
  ensureTestWorkerImage(IMAGE, { appDir: COMPAT_WORKER_DIR });
  process.env.GANTRY_WORKER_PING_INTERVAL_MS = String(PING_MS);
  process.env.GANTRY_JOB_TAKE_HOLD_MS = '3000';
  p = await startTestPlatform();
  ep = await createQueueEndpoint(p);
}, 600_000);

afterAll(async () => {
  if (containers.length)
    spawnSync('podman', ['rm', '--force', '--time', '0', '--ignore', ...containers], { stdio: 'ignore' });
  for (const r of running) await r.kill();
  await p?.stop();
}, 120_000);

describe('the compat worker in a Podman container', () => {
  it('serves runsync, run + status, failures and streams end to end', async () => {
    const w = await createWorker(p, ep);
    const { proc } = runContainer(ep, w, { WORKER_CONCURRENCY: '2' });
    await proc.waitFor((e) => e.event === 'worker-up', 60_000);

    const sync = await call(p.url, 'POST', `/v2/${ep}/runsync`, {
      key: p.adminKey,
      body: { input: { op: 'echo', from: 'container' } },
    });
    expect(sync.body).toMatchObject({
      id: expect.stringMatching(/^sync-/),
      status: 'COMPLETED',
      output: { op: 'echo', from: 'container' },
      workerId: w.id,
    });

    const runs = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        call(p.url, 'POST', `/v2/${ep}/run`, { key: p.adminKey, body: { input: { op: 'sleep', ms: 300, i } } }).then(
          (r) => r.body.id as string,
        ),
      ),
    );
    await eventually(
      async () => {
        const states = await Promise.all(
          runs.map((id) => call(p.url, 'GET', `/v2/${ep}/status/${id}`, { key: p.adminKey })),
        );
        return states.every((s) => s.body.status === 'COMPLETED' && s.body.output?.slept === 300);
      },
      30_000,
      'six jobs done in the container',
    );

    const failed = await call(p.url, 'POST', `/v2/${ep}/runsync`, {
      key: p.adminKey,
      body: { input: { op: 'fail', message: 'from a container' } },
    });
    expect(failed.body.status).toBe('FAILED');
    expect(JSON.parse(failed.body.error)).toMatchObject({ error_message: 'from a container', hostname: w.id });

    const streamed = (
      await call(p.url, 'POST', `/v2/${ep}/run`, {
        key: p.adminKey,
        body: { input: { op: 'stream', chunks: [1, 2, 3], ms: 50 } },
      })
    ).body.id as string;
    const chunks: unknown[] = [];
    for (;;) {
      const s = await call(p.url, 'GET', `/v2/${ep}/stream/${streamed}`, { key: p.adminKey });
      chunks.push(...s.body.stream.map((c: { output: unknown }) => c.output));
      if (s.body.status === 'COMPLETED') break;
    }
    expect(chunks).toEqual([1, 2, 3]);
    // The worker pinged from inside the container.
    expect((await p.ctx.db.worker.findUniqueOrThrow({ where: { id: w.id } })).lastPingAt?.getTime()).toBeGreaterThan(
      Date.now() - 10_000,
    );
  }, 180_000);

  it('a container killed mid-job: its job goes back to the queue and another container finishes it', async () => {
    const ep = await createQueueEndpoint(p);
    const w1 = await createWorker(p, ep);
    const w2 = await createWorker(p, ep);
    // Only the first container runs until it has the job.
    const first = runContainer(ep, w1);
    await first.proc.waitFor((e) => e.event === 'worker-up', 60_000);
    const id = (
      await call(p.url, 'POST', `/v2/${ep}/run`, {
        key: p.adminKey,
        body: { input: { op: 'sleep', ms: 2_000, tag: 'killed' } },
      })
    ).body.id as string;
    await first.proc.waitFor((e) => e.event === 'job-start' && e.job === id, 30_000);
    spawnSync('podman', ['kill', first.name], { stdio: 'ignore' });
    await first.proc.exited;

    const second = runContainer(ep, w2);
    await eventually(
      async () => (await call(p.url, 'GET', `/v2/${ep}/status/${id}`, { key: p.adminKey })).body.status === 'COMPLETED',
      60_000,
      'job finished by the second container',
    );
    const s = await call(p.url, 'GET', `/v2/${ep}/status/${id}`, { key: p.adminKey });
    expect(s.body).toMatchObject({ status: 'COMPLETED', workerId: w2.id, retries: 1, output: { slept: 2000 } });
    // The container says so on its output after its job-done call answered: that line may come a moment later.
    await second.proc.waitFor((e) => e.event === 'job-done' && e.job === id, 10_000);
    await eventually(
      async () => (await p.ctx.temporal.workflow.getHandle(jobWorkflowId(id)).describe()).status.name === 'COMPLETED',
      30_000,
      'workflow done',
    );
  }, 180_000);
});
