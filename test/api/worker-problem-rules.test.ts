/**
 * Which worker problem an endpoint has (domain/endpoints/worker-problem.ts), rule by rule, on rows
 * made by hand: the API alone answers (no Temporal worker acts on them), on every surface at once:
 * the workers route, the job API's /health, a queued job's status, GraphQL. The lifecycle that
 * writes such rows is tested against real parts in worker-problem.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issueApiKey } from '../../domain/accounts/index.ts';
import { newId } from '../../domain/shared/index.ts';
import type { Prisma } from '../../generated/prisma/client.ts';
import { startTestApp, type TestApp } from '../support/app.ts';

describe('the worker problem, rule by rule', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(async () => {
    await t?.stop();
  });

  it('is the waiting unplaceable worker, else the newest never-ready failure of the current release, until one serves', async () => {
    const account = (name: string) =>
      t.ctx.db.account.create({ data: { id: newId(), email: `${newId()}@example.test`, name } });
    const owner = await account('owner');
    const { key } = await issueApiKey(t.ctx.db, owner.id, 'owner', ['READ', 'RUN']);
    const endpoint = await t.ctx.db.endpoint.create({
      data: {
        id: newId(),
        accountId: owner.id,
        name: `ep-${newId()}`,
        image: 'localhost/app:1',
        currentReleaseVersion: 2,
      },
    });
    const ago = (s: number) => new Date(Date.now() - s * 1000);
    const worker = (data: Omit<Prisma.WorkerUncheckedCreateInput, 'id' | 'endpointId'>) =>
      t.ctx.db.worker.create({ data: { id: newId(), endpointId: endpoint.id, releaseVersion: 2, ...data } });
    const job = await t.call('POST', `/v2/${endpoint.id}/run`, { key, body: { input: {} } });
    expect(job.status).toBe(200);
    const jobId = job.body.id as string;

    /** The problem as every surface answers it; they must agree. */
    const problem = async () => {
      const [workers, health, status, graphql] = await Promise.all([
        t.call('GET', `/v2/serverless/${endpoint.id}/workers`, { key }),
        t.call('GET', `/v2/${endpoint.id}/health`, { key }),
        t.call('GET', `/v2/${endpoint.id}/status/${jobId}`, { key }),
        t.call('POST', '/graphql', {
          key,
          body: {
            query: `{ myself { endpoint(id: "${endpoint.id}") { workerProblem { kind reason workerId since } } } }`,
          },
        }),
      ]);
      expect([workers.status, health.status, status.status, graphql.status]).toEqual([200, 200, 200, 200]);
      expect(status.body.status).toBe('IN_QUEUE');
      expect(health.body.workerProblem).toEqual(workers.body.workerProblem);
      expect(status.body.workerProblem ?? null).toEqual(workers.body.workerProblem);
      // Absent, not null, from a queued job's answer while nothing stands in the way.
      expect('workerProblem' in status.body).toBe(workers.body.workerProblem !== null);
      expect(graphql.body.data.myself.endpoint.workerProblem).toEqual(workers.body.workerProblem);
      return workers.body.workerProblem;
    };

    expect(await problem()).toBeNull();
    // Another release's failure, and workers that wait for busy hosts, are no problem of this one.
    await worker({ releaseVersion: 1, status: 'FAILED', statusReason: 'could not start: v1', stoppedAt: ago(1) });
    await worker({ status: 'PENDING', statusReason: 'no capacity: no READY host has 1 free GPU of pool ADA_24' });
    expect(await problem()).toBeNull();

    // A worker that failed before its container started: its image.
    const pull = await worker({
      status: 'FAILED',
      statusReason: 'could not start: could not pull localhost/app:1: ...',
      hostId: null,
      stoppedAt: ago(50),
    });
    expect(await problem()).toEqual({
      kind: 'image',
      reason: 'could not start: could not pull localhost/app:1: ...',
      workerId: pull.id,
      since: pull.stoppedAt!.toISOString(),
    });
    // A newer one whose container ran: its start. One that served and then crashed is not a failed start.
    const exited = await worker({
      status: 'FAILED',
      statusReason: 'the container exited with code 3 before the worker was ready',
      startedAt: ago(45),
      stoppedAt: ago(40),
    });
    await worker({
      status: 'FAILED',
      statusReason: 'the container exited with code 137',
      startedAt: ago(35),
      readyAt: ago(34),
      stoppedAt: ago(30),
    });
    expect(await problem()).toMatchObject({
      kind: 'start',
      workerId: exited.id,
      reason: expect.stringMatching(/exited with code 3/),
    });

    // A worker no host can take comes first (nothing else can be tried until it is placed).
    const unplaceable = await worker({
      status: 'PENDING',
      statusReason: 'cannot be placed: no READY host has 1 free GPU of pool ADA_24 on one host',
    });
    expect(await problem()).toEqual({
      kind: 'placement',
      reason: 'cannot be placed: no READY host has 1 free GPU of pool ADA_24 on one host',
      workerId: unplaceable.id,
      since: unplaceable.createdAt.toISOString(),
    });
    await t.ctx.db.worker.delete({ where: { id: unplaceable.id } });

    // A worker of the release that became ready after the failure (and has since stopped): the
    // failure is old news. A newer failure is news again.
    await worker({ status: 'STOPPED', startedAt: ago(25), readyAt: ago(20), stoppedAt: ago(10) });
    expect(await problem()).toBeNull();
    const again = await worker({
      status: 'FAILED',
      statusReason: 'could not start: could not pull localhost/app:1: again',
      stoppedAt: ago(5),
    });
    expect(await problem()).toMatchObject({ kind: 'image', workerId: again.id });

    // Another account sees nothing of it.
    const { key: otherKey } = await issueApiKey(t.ctx.db, (await account('other')).id, 'other', ['READ', 'RUN']);
    for (const route of [
      `/v2/serverless/${endpoint.id}/workers`,
      `/v2/${endpoint.id}/health`,
      `/v2/${endpoint.id}/status/${jobId}`,
    ])
      expect((await t.call('GET', route, { key: otherKey })).status, route).toBe(404);

    // Once a worker of the current release is ready, nothing stands in the way.
    await worker({ status: 'IDLE', startedAt: ago(2), readyAt: ago(1) });
    expect(await problem()).toBeNull();
  });
});
