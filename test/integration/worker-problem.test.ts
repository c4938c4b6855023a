/**
 * A worker that cannot start says why where the user looks, against real parts (PostgreSQL,
 * Temporal, an SSH host in front of this machine's Podman): the endpoint's `workerProblem` on the
 * workers route, the job API's /health, a queued job's status and runsync answers, and GraphQL,
 * for an image that cannot be pulled, a container that exits before it is ready and a worker no
 * host can take; the next try's status carries the last error (docs/endpoints.md#why-a-job-waits).
 */
import { createServer, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issueApiKey } from '../../domain/accounts/index.ts';
import { newId } from '../../domain/shared/index.ts';
import { freeLoopbackPort } from '../support/local-port.ts';
import { call, type TestPlatform } from '../support/platform.ts';
import {
  ensureOrchestrationWorkerImage,
  type OneHostPlatform,
  ORCHESTRATION_WORKER_IMAGE,
  startOneHostPlatform,
  until,
} from '../support/orchestration.ts';

const BAD_IMAGE = 'docker.io/library/gantry-no-such-image:1';

let fixture: OneHostPlatform | undefined;
let p: TestPlatform;
let otherKey: string;

beforeAll(async () => {
  ensureOrchestrationWorkerImage();
  fixture = await startOneHostPlatform('box-1');
  ({ p } = fixture);
  const other = await p.ctx.db.account.create({
    data: { id: newId(), email: `${newId()}@example.test`, name: 'other' },
  });
  otherKey = (await issueApiKey(p.ctx.db, other.id, 'other', ['READ', 'RUN'])).key;
}, 600_000);

afterAll(async () => {
  await fixture?.stop();
}, 120_000);

const get = (route: string, key = p.adminKey) => call(p.url, 'GET', route, { key });

async function createEndpoint(body: Record<string, unknown>): Promise<string> {
  const r = await call(p.url, 'POST', '/v2/serverless', { key: p.adminKey, body });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  return r.body.id as string;
}

async function submit(endpointId: string): Promise<string> {
  const r = await call(p.url, 'POST', `/v2/${endpointId}/run`, { key: p.adminKey, body: { input: { n: 1 } } });
  expect(r.status).toBe(200);
  return r.body.id as string;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- GraphQL answers are arbitrary JSON
async function gql(query: string, key = p.adminKey): Promise<any> {
  const r = await call(p.url, 'POST', `/graphql?api_key=${encodeURIComponent(key)}`, { body: { query } });
  expect(r.status).toBe(200);
  return r.body;
}

const graphqlProblem = (endpointId: string, key = p.adminKey) =>
  gql(`{ myself { endpoint(id: "${endpointId}") { id workerProblem { kind reason workerId since } } } }`, key);

/** The workers route's problem once it is of `kind` (within 60 s of the job). */
const problemOfKind = (endpointId: string, kind: string) =>
  until(
    `a workerProblem of kind ${kind}`,
    async () => {
      const w = (await get(`/v2/serverless/${endpointId}/workers`)).body;
      return w.workerProblem?.kind === kind ? w.workerProblem : undefined;
    },
    60_000,
    250,
    async () => (await get(`/v2/serverless/${endpointId}/workers`)).body,
  );

describe('the worker problem', () => {
  it('names an image that cannot be pulled on the workers route, /health, a queued job and GraphQL, to its owner only', async () => {
    const id = await createEndpoint({ name: 'no-such-image', image: BAD_IMAGE, workers: { min: 0, max: 1 } });
    // Nothing tried yet: nothing stands in the way.
    expect((await get(`/v2/${id}/health`)).body.workerProblem).toBeNull();
    expect((await get(`/v2/serverless/${id}/workers`)).body.workerProblem).toBeNull();

    const submitted = Date.now();
    const jobId = await submit(id);
    const problem = await problemOfKind(id, 'image');
    // The plain words first (here the host cannot resolve docker.io; with a network, the registry
    // refuses a name it does not have), the image named, the runtime's message kept after them.
    expect(problem.reason).toMatch(/^could not start: could not pull docker\.io\/library\/gantry-no-such-image:1: /);
    expect(problem.reason).toContain(`; pulling ${BAD_IMAGE} `);
    expect(Date.parse(problem.since)).toBeGreaterThanOrEqual(submitted - 1000);
    const failed = await p.ctx.db.worker.findUniqueOrThrow({ where: { id: problem.workerId } });
    expect(failed).toMatchObject({ endpointId: id, status: 'FAILED', startedAt: null, readyAt: null });

    const health = await get(`/v2/${id}/health`);
    expect(health.status).toBe(200);
    expect(health.body.jobs.inQueue).toBe(1);
    expect(health.body.workerProblem).toMatchObject({ kind: 'image', reason: expect.stringContaining(BAD_IMAGE) });
    expect(health.body.workerProblem.workerId).toEqual(expect.any(String));

    const status = await get(`/v2/${id}/status/${jobId}`);
    expect(status.status).toBe(200);
    expect(status.body).toMatchObject({
      id: jobId,
      status: 'IN_QUEUE',
      workerProblem: { kind: 'image', reason: expect.stringContaining(BAD_IMAGE), since: expect.any(String) },
    });
    // runsync's wait ends with the job queued: the answer to poll says why as well.
    const sync = await call(p.url, 'POST', `/v2/${id}/runsync?wait=1000`, { key: p.adminKey, body: { input: {} } });
    expect(sync.status).toBe(200);
    expect(sync.body).toMatchObject({ status: 'IN_QUEUE', workerProblem: { kind: 'image' } });
    expect(sync.body.id).toMatch(/^sync-/);

    const g = await graphqlProblem(id);
    expect(g.errors).toBeUndefined();
    expect(g.data.myself.endpoint.workerProblem).toMatchObject({
      kind: 'image',
      reason: expect.stringContaining(BAD_IMAGE),
      workerId: expect.any(String),
    });
    expect(Number.isNaN(Date.parse(g.data.myself.endpoint.workerProblem.since))).toBe(false);

    // Another account sees nothing of it.
    for (const route of [`/v2/serverless/${id}/workers`, `/v2/${id}/health`, `/v2/${id}/status/${jobId}`])
      expect((await get(route, otherKey)).status, route).toBe(404);
    expect((await graphqlProblem(id, otherKey)).data.myself.endpoint).toBeNull();

    // Only a queued job's answer carries it: a cancelled one's does not, though the image is still bad.
    expect((await call(p.url, 'POST', `/v2/${id}/cancel/${jobId}`, { key: p.adminKey })).body.status).toBe('CANCELLED');
    const cancelled = await get(`/v2/${id}/status/${jobId}`);
    expect(cancelled.body.status).toBe('CANCELLED');
    expect(cancelled.body).not.toHaveProperty('workerProblem');
    expect((await get(`/v2/${id}/health`)).body.workerProblem?.kind).toBe('image');
    await call(p.url, 'DELETE', `/v2/serverless/${id}`, { key: p.adminKey });
  }, 120_000);

  it('names a gpu pool no host has, on /health, the queued job and GraphQL', async () => {
    const id = await createEndpoint({
      name: 'no-such-gpu',
      image: ORCHESTRATION_WORKER_IMAGE,
      gpu: { pools: ['ADA_24'] },
      workers: { min: 0, max: 1 },
    });
    const jobId = await submit(id);
    const health = await until(
      'health to name the placement',
      async () => {
        const h = (await get(`/v2/${id}/health`)).body;
        return h.workerProblem?.kind === 'placement' ? h : undefined;
      },
      60_000,
      250,
      async () => (await get(`/v2/serverless/${id}/workers`)).body,
    );
    expect(health.workerProblem.reason).toMatch(/^cannot be placed: .*ADA_24/);
    expect(health.workers.throttled).toBe(1);
    const waiting = await p.ctx.db.worker.findUniqueOrThrow({ where: { id: health.workerProblem.workerId } });
    expect(waiting).toMatchObject({ endpointId: id, status: 'PENDING', hostId: null });
    expect(health.workerProblem.since).toBe(waiting.createdAt.toISOString());

    const status = (await get(`/v2/${id}/status/${jobId}`)).body;
    expect(status).toMatchObject({ status: 'IN_QUEUE', workerProblem: { kind: 'placement' } });
    expect(status.workerProblem.reason).toBe(health.workerProblem.reason);
    expect((await get(`/v2/serverless/${id}/workers`)).body.workerProblem).toEqual(health.workerProblem);
    expect((await graphqlProblem(id)).data.myself.endpoint.workerProblem).toEqual(health.workerProblem);
    expect((await get(`/v2/${id}/health`, otherKey)).status).toBe(404);
    expect((await get(`/v2/${id}/status/${jobId}`, otherKey)).status).toBe(404);
    await call(p.url, 'DELETE', `/v2/serverless/${id}`, { key: p.adminKey });
  }, 120_000);

  it('names a container that exits before it is ready, with its exit code and last lines; null once a worker serves', async () => {
    // Thirty long lines, then exit 5: the reason keeps the last ones, bounded.
    const script = 'for (let i = 1; i <= 30; i++) console.log("line " + i + " " + "x".repeat(200)); process.exit(5)';
    const id = await createEndpoint({
      name: 'exits-at-once',
      image: ORCHESTRATION_WORKER_IMAGE,
      args: `node -e '${script}'`,
      workers: { min: 0, max: 1 },
    });
    const jobId = await submit(id);
    const problem = await problemOfKind(id, 'start');
    expect(problem.reason).toMatch(/^the container exited with code 5 before the worker was ready; last output:\n/);
    expect(problem.reason).toContain('line 30 xxx');
    expect(problem.reason).not.toContain('line 20 ');
    expect(problem.reason.length).toBeLessThan(1700);
    expect((await get(`/v2/${id}/status/${jobId}`)).body.workerProblem).toMatchObject({ kind: 'start' });

    // A release whose workers start: the job runs, and nothing stands in the way any more.
    const patched = await call(p.url, 'PATCH', `/v2/serverless/${id}`, { key: p.adminKey, body: { args: '' } });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    await until(
      'the job to complete',
      async () => (await get(`/v2/${id}/status/${jobId}`)).body.status === 'COMPLETED',
      60_000,
    );
    const done = await get(`/v2/${id}/status/${jobId}`);
    expect(done.body).not.toHaveProperty('workerProblem');
    expect((await get(`/v2/${id}/health`)).body.workerProblem).toBeNull();
    expect((await get(`/v2/serverless/${id}/workers`)).body.workerProblem).toBeNull();
    await call(p.url, 'DELETE', `/v2/serverless/${id}`, { key: p.adminKey });
  }, 180_000);

  it("shows the last try's error in the status of the worker pulling again", async () => {
    // A registry address where nothing listens (the first pull fails: refused), then a server that
    // takes connections and never answers (the next pull hangs, so its status can be read).
    const port = await freeLoopbackPort();
    const image = `127.0.0.1:${port}/team/app:1`;
    const id = await createEndpoint({ name: 'pull-again', image, workers: { min: 0, max: 1 } });
    await submit(id);
    const first = await problemOfKind(id, 'image');
    expect(first.reason).toContain(`could not pull ${image}: 127.0.0.1:${port} refused the connection`);

    const sockets = new Set<Socket>();
    const silent: Server = createServer((s) => {
      sockets.add(s);
      s.on('error', () => {});
    });
    await new Promise<void>((resolve) => silent.listen(port, '127.0.0.1', resolve));
    try {
      const pulling = await until(
        'a worker pulling again with the last error',
        async () => {
          const w = (await get(`/v2/serverless/${id}/workers`)).body;
          return w.workers.find((x: { status: string; statusReason: string | null }) =>
            x.statusReason?.startsWith('pulling the image (the last try failed: '),
          );
        },
        60_000,
        200,
        async () => (await get(`/v2/serverless/${id}/workers`)).body,
      );
      expect(pulling.status).toBe('INITIALIZING');
      expect(pulling.statusReason).toMatch(
        new RegExp(
          `^pulling the image \\(the last try failed: could not pull 127\\.0\\.0\\.1:${port}/team/app:1: 127\\.0\\.0\\.1:${port} refused the connection`,
        ),
      );
      // Shortened: about 300 characters of the reason, on one line.
      expect(pulling.statusReason.length).toBeLessThanOrEqual('pulling the image (the last try failed: '.length + 301);
      expect(pulling.statusReason).not.toContain('\n');
      // While it pulls, the endpoint's problem is still the last failure.
      expect((await get(`/v2/${id}/health`)).body.workerProblem?.kind).toBe('image');
    } finally {
      for (const s of sockets) s.destroy();
      await new Promise((resolve) => silent.close(resolve));
      await call(p.url, 'DELETE', `/v2/serverless/${id}`, { key: p.adminKey });
    }
  }, 120_000);
});
