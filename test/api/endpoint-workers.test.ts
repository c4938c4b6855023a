/**
 * Why an endpoint does not serve, where a user looks: `GET /v2/serverless/{id}/workers` lists live
 * workers only, and while none of the current release is ready its `lastFailure` is the newest
 * failed worker of that release, with its reason (an image that could not be had, ...). Rows are
 * made by hand; the API alone answers (no Temporal worker acts on them).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issueApiKey } from '../../domain/accounts/index.ts';
import { newId } from '../../domain/shared/index.ts';
import type { WorkerStatus } from '../../generated/prisma/client.ts';
import { startTestApp, type TestApp } from '../support/app.ts';

describe('the last failure of an endpoint’s workers', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(async () => {
    await t?.stop();
  });

  it('names the newest failed worker of the current release while none of it is ready, to its owner only', async () => {
    const account = (name: string) =>
      t.ctx.db.account.create({ data: { id: newId(), email: `${newId()}@example.test`, name } });
    const owner = await account('owner');
    const { key } = await issueApiKey(t.ctx.db, owner.id, 'read', ['READ']);
    const endpoint = await t.ctx.db.endpoint.create({
      data: {
        id: newId(),
        accountId: owner.id,
        name: `ep-${newId()}`,
        image: 'localhost/app:1',
        currentReleaseVersion: 2,
      },
    });
    const worker = (releaseVersion: number, status: WorkerStatus, statusReason: string | null, stoppedAt?: Date) =>
      t.ctx.db.worker.create({
        data: { id: newId(), endpointId: endpoint.id, releaseVersion, status, statusReason, stoppedAt },
      });
    const workers = () => t.call('GET', `/v2/serverless/${endpoint.id}/workers`, { key });

    // Nothing has failed yet.
    expect((await workers()).body).toMatchObject({ workers: [], lastFailure: null });
    // An older release's failure is not the current one's; the newest of the current release's is.
    await worker(1, 'FAILED', 'could not start: v1 trouble', new Date(Date.now() - 1_000));
    await worker(2, 'FAILED', 'could not start: older', new Date(Date.now() - 60_000));
    const newest = await worker(2, 'FAILED', 'could not start: could not get the base image x:3.12', new Date());
    await worker(2, 'INITIALIZING', 'pulling the image');
    const down = await workers();
    expect(down.status).toBe(200);
    expect(down.body.workers.map((w: { status: string }) => w.status)).toEqual(['INITIALIZING']);
    expect(down.body.lastFailure).toEqual({
      workerId: newest.id,
      version: 2,
      failedAt: newest.stoppedAt!.toISOString(),
      reason: 'could not start: could not get the base image x:3.12',
    });

    // Another account sees nothing of it.
    const { key: otherKey } = await issueApiKey(t.ctx.db, (await account('other')).id, 'read', ['READ']);
    expect((await t.call('GET', `/v2/serverless/${endpoint.id}/workers`, { key: otherKey })).status).toBe(404);

    // Once a worker of the current release is ready, the endpoint serves: no failure to report.
    await worker(2, 'IDLE', null);
    expect((await workers()).body.lastFailure).toBeNull();
  });

  it('says when each worker last took a job; its host only to the platform admin', async () => {
    const host = await t.ctx.db.host.create({
      data: { id: newId(), name: `h-${newId()}`, address: '127.0.0.1', user: 'root', dataCenterId: 'local' },
    });
    const last = new Date(Date.now() - 5_000);
    /** An endpoint of the account with a worker that took two jobs and one that took none, on the host. */
    const endpointOf = async (accountId: string) => {
      const endpoint = await t.ctx.db.endpoint.create({
        data: { id: newId(), accountId, name: `ep-${newId()}`, image: 'localhost/app:1' },
      });
      const worker = (status: WorkerStatus) =>
        t.ctx.db.worker.create({ data: { id: newId(), endpointId: endpoint.id, hostId: host.id, status } });
      const busy = await worker('RUNNING');
      const fresh = await worker('IDLE');
      for (const startedAt of [new Date(Date.now() - 60_000), last])
        await t.ctx.db.job.create({
          data: {
            id: newId(),
            endpointId: endpoint.id,
            accountId,
            workerId: busy.id,
            status: 'COMPLETED',
            input: {},
            startedAt,
            expiresAt: new Date(Date.now() + 3_600_000),
          },
        });
      return { endpoint, busy, fresh };
    };
    const workersOf = async (endpointId: string, key: string) => {
      const r = await t.call('GET', `/v2/serverless/${endpointId}/workers`, { key });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      const body = r.body as { workers: { id: string; hostId: string | null; lastJobAt: string | null }[] };
      return new Map(body.workers.map((w) => [w.id, w]));
    };

    const tenant = await t.ctx.db.account.create({
      data: { id: newId(), email: `${newId()}@example.test`, name: 'tenant' },
    });
    const { key } = await issueApiKey(t.ctx.db, tenant.id, 'read', ['READ']);
    const theirs = await endpointOf(tenant.id);
    const seen = await workersOf(theirs.endpoint.id, key);
    expect(seen.get(theirs.busy.id)).toMatchObject({ lastJobAt: last.toISOString(), hostId: null });
    expect(seen.get(theirs.fresh.id)).toMatchObject({ lastJobAt: null, hostId: null });

    const admin = await t.ctx.db.account.findFirstOrThrow({ where: { isAdmin: true } });
    const ours = await endpointOf(admin.id);
    const operator = await workersOf(ours.endpoint.id, t.adminKey);
    expect(operator.get(ours.busy.id)).toMatchObject({ lastJobAt: last.toISOString(), hostId: host.id });
  });
});
