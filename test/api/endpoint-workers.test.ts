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
});
