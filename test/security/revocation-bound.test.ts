/**
 * One revocation bound on every path (domain/shared/record-cache.ts, docs/security.md): a deleted
 * endpoint and a revoked worker credential stop working on the job API, the load-balancing proxy
 * and the worker protocol within the bound, and not before the bound allows it (those paths
 * remember what they read, for exactly that long). A revoked key, or one whose endpoint list
 * changed, stops on every path as soon as the trigger's notification reaches the process, long
 * before the bound; while the process hears no notifications, management REST and GraphQL read
 * every key and refuse at once, and the job API and the proxy fall back to the bound. An expired
 * key stops at its expiry; nothing that failed is remembered, so what is created works at once.
 *
 * The app runs with a bound of BOUND_MS (through startTestApp) so that a loaded machine still has
 * room to show both sides of it. Each case classifies every request by when it was sent and
 * answered: one answered before `primed + bound` (the cached record's read began after `primed`)
 * must be admitted; one sent after `read + bound` (the read ended by `read`) and after the change
 * was committed must be refused.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issueApiKey, hashKey } from '../../domain/accounts/index.ts';
import { newId, randomString } from '../../domain/shared/index.ts';
import { recordCachesOf } from '../../domain/shared/index.ts';
import { registerWorkerCredential } from '../../domain/workers/index.ts';
import { startTestApp, type Answer, type TestApp } from '../support/app.ts';

const BOUND_MS = 2_000;

interface Probe {
  name: string;
  /** Whether the path remembers what it read (within the bound) or reads every time. */
  cached: boolean;
  call(): Promise<Answer>;
  admitted(r: Answer): boolean;
  refused(r: Answer): boolean;
}

interface Sample {
  sent: number;
  answered: number;
  r: Answer;
}

/** Calls every probe in turn, `pauseMs` apart, until `until`: each answer with when it was sent and answered. */
async function callUntil(probes: Probe[], until: number, pauseMs: number): Promise<Array<Sample & { p: Probe }>> {
  const samples: Array<Sample & { p: Probe }> = [];
  while (Date.now() < until) {
    for (const p of probes) {
      const sent = Date.now();
      const r = await p.call();
      samples.push({ p, sent, answered: Date.now(), r });
    }
    await sleep(pauseMs);
  }
  return samples;
}

const show = (r: Answer): string => `${r.status} ${JSON.stringify(r.body)?.slice(0, 300)}`;

describe('the revocation bound', () => {
  let t: TestApp;
  let accountId: string;
  let addresses = 0;

  beforeAll(async () => {
    t = await startTestApp({ revocationBoundMs: BOUND_MS });
    accountId = (
      await t.ctx.db.account.create({ data: { id: newId(), email: `${newId()}@example.test`, name: 'revocation' } })
    ).id;
  });
  afterAll(async () => {
    await t?.stop();
  });

  /** Every call from an address of its own: the refusals polled here never reach the failed-authentication throttle. */
  const call = (method: string, route: string, key: string, body?: unknown): Promise<Answer> =>
    t.call(method, route, { key, body, remoteAddress: `10.99.${Math.floor(++addresses / 250)}.${addresses % 250}` });

  async function queueEndpoint(): Promise<string> {
    return (
      await t.ctx.db.endpoint.create({ data: { id: newId(), accountId, name: `q-${randomString(6)}`, image: 'img:1' } })
    ).id;
  }
  /** A load-balancing endpoint with workers.max 0: an admitted request is answered at once with 503 (no worker will start). */
  async function lbEndpoint(): Promise<string> {
    return (
      await t.ctx.db.endpoint.create({
        data: {
          id: newId(),
          accountId,
          name: `lb-${randomString(6)}`,
          image: 'img:1',
          type: 'LOAD_BALANCING',
          workersMax: 0,
        },
      })
    ).id;
  }

  const jobApi = (endpointId: string, key: () => string, refusedStatus: number): Probe => ({
    name: 'job API',
    cached: true,
    call: () => call('GET', `/v2/${endpointId}/health`, key()),
    admitted: (r) => r.status === 200 && typeof r.body?.jobs === 'object',
    refused: (r) => r.status === refusedStatus,
  });
  const proxy = (endpointId: string, key: () => string, refusedStatus: number): Probe => ({
    name: 'load-balancing proxy',
    cached: true,
    call: () => call('GET', `/lb/${endpointId}/ping`, key()),
    admitted: (r) => r.status === 503 && /workers\.max 0/.test(String(r.body?.detail)),
    refused: (r) => r.status === refusedStatus,
  });

  /**
   * Primes every probe (each admitted), commits `change`, then calls the probes until well past the
   * bound: uncached ones must refuse at once; cached ones must admit what they answer before
   * `primed + bound` and refuse what is sent after `read + bound`.
   */
  async function expectBound(probes: Probe[], change: () => Promise<void>): Promise<void> {
    const primed = Date.now();
    for (const p of probes) {
      const r = await p.call();
      expect(p.admitted(r), `${p.name} before the change: ${show(r)}`).toBe(true);
    }
    const read = Date.now();
    await change();
    const changed = Date.now();
    for (const p of probes.filter((q) => !q.cached)) {
      const r = await p.call();
      expect(p.refused(r), `${p.name} right after the change (it caches nothing): ${show(r)}`).toBe(true);
    }

    const cached = probes.filter((q) => q.cached);
    // Date.now() has millisecond steps; the cache reads a finer clock: 2 ms of margin.
    const refusedFrom = Math.max(read + BOUND_MS + 2, changed);
    const samples = await callUntil(cached, refusedFrom + 400, 50);
    for (const p of cached) {
      const list = samples.filter((s) => s.p === p);
      const early = list.filter((s) => s.answered < primed + BOUND_MS);
      const late = list.filter((s) => s.sent >= refusedFrom);
      // Not before the bound allows: the path remembers the record it read, so right after the
      // change it still admits (this is what the bound bounds).
      expect(early.length, `${p.name}: calls answered within the bound`).toBeGreaterThan(0);
      for (const s of early)
        expect(
          p.admitted(s.r),
          `${p.name} ${s.answered - changed} ms after the change, within the bound: ${show(s.r)}`,
        ).toBe(true);
      // Within the bound: every call sent once the bound ran out is refused.
      expect(late.length, `${p.name}: calls sent after the bound`).toBeGreaterThan(0);
      for (const s of late)
        expect(p.refused(s.r), `${p.name} ${s.sent - changed} ms after the change, past the bound: ${show(s.r)}`).toBe(
          true,
        );
      // In between, either answer, never another one.
      for (const s of list) expect(p.admitted(s.r) || p.refused(s.r), `${p.name}: ${show(s.r)}`).toBe(true);
      // The headline: nothing is admitted that was sent more than the bound after the change.
      const lastAdmitted = list.filter((s) => p.admitted(s.r)).at(-1)!;
      expect(lastAdmitted.sent - changed, `${p.name}: last admission after the change`).toBeLessThanOrEqual(
        BOUND_MS + 2,
      );
    }
  }

  /** Longest a key change may take to reach the process through its notification, on a loaded machine. */
  const NOTIFIED_MS = 300;

  /**
   * Primes every probe (each admitted), commits `change`, then calls the probes for a while: every
   * call sent NOTIFIED_MS after the change, far inside the bound, must be refused.
   */
  async function expectRefusedOnNotice(probes: Probe[], change: () => Promise<void>): Promise<void> {
    for (const p of probes) {
      const r = await p.call();
      expect(p.admitted(r), `${p.name} before the change: ${show(r)}`).toBe(true);
    }
    // The remembered key is what a refusal now must overrule.
    expect(recordCachesOf(t.ctx).followsChanges).toBe(true);
    await change();
    const changed = Date.now();
    const samples = await callUntil(probes, changed + NOTIFIED_MS + 400, 20);
    expect(Date.now()).toBeLessThan(changed + BOUND_MS);
    for (const p of probes) {
      const list = samples.filter((s) => s.p === p);
      const late = list.filter((s) => s.sent >= changed + NOTIFIED_MS);
      expect(late.length, `${p.name}: calls sent after the notice`).toBeGreaterThan(0);
      for (const s of late)
        expect(p.refused(s.r), `${p.name} ${s.sent - changed} ms after the change: ${show(s.r)}`).toBe(true);
      for (const s of list) expect(p.admitted(s.r) || p.refused(s.r), `${p.name}: ${show(s.r)}`).toBe(true);
    }
  }

  /** Management REST and GraphQL with `key`: admitted while it holds, refused with 401 once revoked. */
  const managementProbes = (key: string, cached: boolean): Probe[] => [
    {
      name: 'management REST',
      cached,
      call: () => call('GET', '/v2/serverless', key),
      admitted: (r) => r.status === 200,
      refused: (r) => r.status === 401 && r.body?.detail === 'invalid bearer token',
    },
    {
      name: 'GraphQL',
      cached,
      call: () => call('POST', '/graphql', key, { query: '{ myself { id } }' }),
      admitted: (r) => r.status === 200 && r.body?.data?.myself?.id === accountId,
      refused: (r) => r.status === 401 && r.body?.errors?.[0]?.extensions?.code === 'UNAUTHENTICATED',
    },
  ];

  it('is the one bound of every cache', () => {
    const records = recordCachesOf(t.ctx);
    expect(records.boundMs).toBe(BOUND_MS);
    expect([records.keys.ttlMs, records.workers.ttlMs, records.endpoints.ttlMs]).toEqual([
      BOUND_MS,
      BOUND_MS,
      BOUND_MS,
    ]);
  });

  it('a revoked key: every path refuses it as soon as the change notification arrives, long before the bound', async () => {
    const [queue, lb] = [await queueEndpoint(), await lbEndpoint()];
    const issued = await issueApiKey(t.ctx.db, accountId, 'to revoke', ['READ', 'RUN']);
    const key = () => issued.key;
    await expectRefusedOnNotice(
      [jobApi(queue, key, 401), proxy(lb, key, 401), ...managementProbes(issued.key, true)],
      async () => {
        await t.ctx.db.apiKey.update({ where: { id: issued.id }, data: { revokedAt: new Date() } });
      },
    );
  });

  it('a revoked key while the process hears no key changes: management REST and GraphQL at once, the job API and the proxy within the bound', async () => {
    const [queue, lb] = [await queueEndpoint(), await lbEndpoint()];
    const issued = await issueApiKey(t.ctx.db, accountId, 'to revoke unheard', ['READ', 'RUN']);
    const key = () => issued.key;
    const records = recordCachesOf(t.ctx);
    // What a lost LISTEN session means: no notification arrives, and the process knows it.
    await t.ctx.db.$executeRawUnsafe('ALTER TABLE "ApiKey" DISABLE TRIGGER "ApiKey_notify_change"');
    records.changeFeed(false);
    try {
      await expectBound(
        [jobApi(queue, key, 401), proxy(lb, key, 401), ...managementProbes(issued.key, false)],
        async () => {
          await t.ctx.db.apiKey.update({ where: { id: issued.id }, data: { revokedAt: new Date() } });
        },
      );
    } finally {
      await t.ctx.db.$executeRawUnsafe('ALTER TABLE "ApiKey" ENABLE TRIGGER "ApiKey_notify_change"');
      records.changeFeed(true);
    }
  });

  it("a key's changed endpoint list: every path as soon as the change notification arrives", async () => {
    const [queue, lb] = [await queueEndpoint(), await lbEndpoint()];
    const issued = await issueApiKey(t.ctx.db, accountId, 'narrowed', ['READ', 'RUN'], undefined, [queue, lb]);
    const key = () => issued.key;
    const listsQueue = (endpoints: unknown): boolean =>
      Array.isArray(endpoints) && endpoints.some((e: { id?: string }) => e.id === queue);
    await expectRefusedOnNotice(
      [
        jobApi(queue, key, 403),
        proxy(lb, key, 403),
        {
          name: 'management REST',
          cached: false,
          call: () => call('GET', '/v2/serverless', issued.key),
          admitted: (r) => r.status === 200 && listsQueue(r.body?.endpoints),
          refused: (r) => r.status === 200 && Array.isArray(r.body?.endpoints) && !listsQueue(r.body.endpoints),
        },
        {
          name: 'GraphQL',
          cached: false,
          call: () => call('POST', '/graphql', issued.key, { query: '{ myself { endpoints { id } } }' }),
          admitted: (r) => r.status === 200 && listsQueue(r.body?.data?.myself?.endpoints),
          refused: (r) =>
            r.status === 200 &&
            Array.isArray(r.body?.data?.myself?.endpoints) &&
            !listsQueue(r.body.data.myself.endpoints),
        },
      ],
      async () => {
        await t.ctx.db.apiKey.update({ where: { id: issued.id }, data: { endpointIds: [newId()] } });
      },
    );
  });

  /** Management REST's read of one endpoint: admitted while it lives, 404 once it is being deleted. */
  const endpointRead = (endpointId: string, key: string, cached: boolean): Probe => ({
    name: 'management REST read',
    cached,
    call: () => call('GET', `/v2/serverless/${endpointId}`, key),
    admitted: (r) => r.status === 200 && r.body?.id === endpointId,
    refused: (r) => r.status === 404,
  });

  it('a deleted endpoint: every path as soon as the change notification arrives', async () => {
    const [queue, lb] = [await queueEndpoint(), await lbEndpoint()];
    const issued = await issueApiKey(t.ctx.db, accountId, 'endpoint user', ['RUN', 'READ']);
    const key = () => issued.key;
    await expectRefusedOnNotice(
      [jobApi(queue, key, 404), proxy(lb, key, 404), endpointRead(queue, issued.key, true)],
      async () => {
        await t.ctx.db.endpoint.updateMany({ where: { id: { in: [queue, lb] } }, data: { deletingAt: new Date() } });
      },
    );
  });

  it('a deleted endpoint while the process hears no changes: management reads at once, the job API and the proxy within the bound', async () => {
    const [queue, lb] = [await queueEndpoint(), await lbEndpoint()];
    const issued = await issueApiKey(t.ctx.db, accountId, 'endpoint user unheard', ['RUN', 'READ']);
    const key = () => issued.key;
    const records = recordCachesOf(t.ctx);
    await t.ctx.db.$executeRawUnsafe('ALTER TABLE "Endpoint" DISABLE TRIGGER "Endpoint_notify_change"');
    records.changeFeed(false);
    try {
      await expectBound(
        [jobApi(queue, key, 404), proxy(lb, key, 404), endpointRead(queue, issued.key, false)],
        async () => {
          await t.ctx.db.endpoint.updateMany({ where: { id: { in: [queue, lb] } }, data: { deletingAt: new Date() } });
        },
      );
    } finally {
      await t.ctx.db.$executeRawUnsafe('ALTER TABLE "Endpoint" ENABLE TRIGGER "Endpoint_notify_change"');
      records.changeFeed(true);
    }
  });

  it('a revoked worker credential: the worker protocol within the bound; the new credential works at once', async () => {
    const queue = await queueEndpoint();
    const workerId = `wk${randomString(10)}`;
    await t.ctx.db.worker.create({ data: { id: workerId, endpointId: queue, status: 'IDLE' } });
    const old = await registerWorkerCredential(t.ctx.db, { workerId, endpointId: queue });
    let fresh = '';
    const ping = (key: string) =>
      t.app.inject({
        method: 'GET',
        url: `/v2/${queue}/ping/${workerId}`,
        headers: { authorization: key },
        remoteAddress: `10.98.0.${++addresses % 250}`,
      });
    await expectBound(
      [
        {
          name: 'worker protocol',
          cached: true,
          call: async () => {
            const r = await ping(old);
            return { status: r.statusCode, headers: new Headers(), body: r.body ? JSON.parse(r.body) : undefined };
          },
          admitted: (r) => r.status === 200,
          refused: (r) => r.status === 401 && r.body?.detail === 'invalid worker credential',
        },
      ],
      async () => {
        // What the platform does when it gives the worker a new credential (activities/worker.ts).
        fresh = await registerWorkerCredential(t.ctx.db, { workerId, endpointId: queue });
      },
    );
    expect((await ping(fresh)).statusCode).toBe(200);
  });

  it('an expired key stops at its expiry, although the record is younger than the bound', async () => {
    const [queue, lb] = [await queueEndpoint(), await lbEndpoint()];
    const issued = await issueApiKey(t.ctx.db, accountId, 'expiring', ['RUN']);
    const expiresAt = Date.now() + 600;
    await t.ctx.db.apiKey.update({ where: { id: issued.id }, data: { expiresAt: new Date(expiresAt) } });
    const key = () => issued.key;
    const probes = [jobApi(queue, key, 401), proxy(lb, key, 401)];
    const primed = Date.now();
    for (const p of probes) expect(p.admitted(await p.call()), `${p.name} before the expiry`).toBe(true);
    const samples = await callUntil(probes, expiresAt + 300, 25);
    // The cached record would be good until primed + BOUND_MS: the expiry ends it first.
    expect(expiresAt + 300).toBeLessThan(primed + BOUND_MS);
    for (const s of samples) {
      if (s.answered < expiresAt) expect(s.p.admitted(s.r), `${s.p.name} before the expiry: ${show(s.r)}`).toBe(true);
      if (s.sent >= expiresAt)
        expect(
          s.p.refused(s.r) && s.r.body?.detail === 'expired bearer token',
          `${s.p.name} after the expiry: ${show(s.r)}`,
        ).toBe(true);
    }
    expect(samples.filter((s) => s.sent >= expiresAt).length).toBeGreaterThan(0);
  });

  it('remembers no failure: a key, an endpoint or a worker credential that did not exist works as soon as it does', async () => {
    const presented = `gntr_test_${randomString(32)}`;
    const queueId = newId();
    const lbId = newId();
    expect((await call('GET', `/v2/${queueId}/health`, presented)).status).toBe(401);
    expect((await call('GET', `/lb/${lbId}/ping`, presented)).status).toBe(401);
    await issueApiKey(t.ctx.db, accountId, 'late', ['RUN'], presented);
    expect((await call('GET', `/v2/${queueId}/health`, presented)).status).toBe(404);
    expect((await call('GET', `/lb/${lbId}/ping`, presented)).status).toBe(404);
    await t.ctx.db.endpoint.create({
      data: { id: queueId, accountId, name: `late-q-${randomString(6)}`, image: 'img:1' },
    });
    await t.ctx.db.endpoint.create({
      data: {
        id: lbId,
        accountId,
        name: `late-lb-${randomString(6)}`,
        image: 'img:1',
        type: 'LOAD_BALANCING',
        workersMax: 0,
      },
    });
    expect(jobApi(queueId, () => presented, 0).admitted(await call('GET', `/v2/${queueId}/health`, presented))).toBe(
      true,
    );
    expect(proxy(lbId, () => presented, 0).admitted(await call('GET', `/lb/${lbId}/ping`, presented))).toBe(true);

    const workerId = `wk${randomString(10)}`;
    const credential = `gntr_wk_${randomString(40)}`;
    await t.ctx.db.worker.create({ data: { id: workerId, endpointId: queueId, status: 'IDLE' } });
    const ping = async () =>
      (
        await t.app.inject({
          method: 'GET',
          url: `/v2/${queueId}/ping/${workerId}`,
          headers: { authorization: credential },
          remoteAddress: '10.97.0.1',
        })
      ).statusCode;
    expect(await ping()).toBe(401);
    await t.ctx.db.worker.update({ where: { id: workerId }, data: { credentialHash: hashKey(credential) } });
    expect(await ping()).toBe(200);
  });
});
