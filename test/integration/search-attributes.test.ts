/**
 * Gantry's Temporal search attributes (contracts/search-attributes.ts) against the suite's real dev
 * server: what the starters set, what the job workflow keeps current, and the visibility queries an
 * operator types in the Temporal UI. Registration on a namespace that lacks them (a cluster, or a
 * dev server database older than the attributes) goes through the operator service.
 */
import { Connection, type WorkflowExecutionInfo } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { msToTs } from '@temporalio/common/lib/time.js';
import { randomString } from '../../domain/shared/index.ts';
import { ensureSearchAttributes } from '../../infra/temporal.ts';
import {
  GANTRY_SEARCH_ATTRIBUTES,
  GantryAccountId,
  GantryJobStatus,
  GantryKind,
} from '../../contracts/search-attributes.ts';
import { call, startTestPlatform, type TestPlatform } from '../support/platform.ts';
import { createQueueEndpoint, createWorker, eventually, workerCall, type TestWorker } from '../support/jobs.ts';
import { endpointWorkflowId, jobWorkflowId } from '../../contracts/workflows.ts';

let p: TestPlatform;

beforeAll(async () => {
  process.env.GANTRY_JOB_TAKE_HOLD_MS = '1000';
  p = await startTestPlatform();
});
afterAll(async () => {
  await p?.stop();
});

/** The workflow ids a visibility query finds (the dev server's visibility lags a little). */
async function list(query: string): Promise<WorkflowExecutionInfo[]> {
  const found: WorkflowExecutionInfo[] = [];
  for await (const wf of p.ctx.temporal.workflow.list({ query })) found.push(wf);
  return found;
}
async function listEventually(
  query: string,
  expectedIds: string[],
  timeoutMs = 20_000,
): Promise<WorkflowExecutionInfo[]> {
  const want = [...expectedIds].sort();
  let last: string[] = [];
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const found = await list(query);
    last = found.map((w) => w.workflowId).sort();
    if (JSON.stringify(last) === JSON.stringify(want)) return found;
    if (Date.now() > deadline)
      throw new Error(`query ${query} found ${JSON.stringify(last)}, expected ${JSON.stringify(want)}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

describe('search attributes on Gantry workflows', () => {
  let ep: string;
  let other: string;
  let accountId: string;
  let w: TestWorker;
  const name = `sa-${randomString(6)}`;

  const run = (endpointId: string, input: unknown, policy?: unknown) =>
    call(p.url, 'POST', `/v2/${endpointId}/run`, { key: p.adminKey, body: { input, ...(policy ? { policy } : {}) } });
  const cancel = (endpointId: string, id: string) =>
    call(p.url, 'POST', `/v2/${endpointId}/cancel/${id}`, { key: p.adminKey });
  const take = () => workerCall(p.url, 'GET', `/v2/${ep}/job-take/${w.id}?gpu=X&job_in_progress=0`, w.key);
  const done = (jobId: string, body: unknown) =>
    workerCall(p.url, 'POST', `/v2/${ep}/job-done/${w.id}/${jobId}?gpu=X&isStream=false`, w.key, body);
  const statusAttr = async (jobId: string) =>
    (await p.ctx.temporal.workflow.getHandle(jobWorkflowId(jobId)).describe()).typedSearchAttributes.get(
      GantryJobStatus,
    );

  /** Submits a job and waits until its workflow runs with the IN_QUEUE it started with. */
  async function queued(endpointId: string, policy?: unknown): Promise<string> {
    const r = await run(endpointId, { n: 1 }, policy);
    expect(r.status).toBe(200);
    const id = r.body.id as string;
    await eventually(
      async () => (await statusAttr(id)) === 'IN_QUEUE',
      20_000,
      `job:${id} started with GantryJobStatus IN_QUEUE`,
    );
    return id;
  }

  /** Takes the next job, which must be `id`. */
  async function takeJob(id: string): Promise<void> {
    const t = await take();
    expect(t.status).toBe(200);
    expect(t.body.id).toBe(id);
  }

  beforeAll(async () => {
    ep = await createQueueEndpoint(p, name);
    other = await createQueueEndpoint(p);
    accountId = (await p.ctx.db.endpoint.findUniqueOrThrow({ where: { id: ep } })).accountId;
    w = await createWorker(p, ep);
  });

  it('starts the endpoint workflow with its id, account and kind, and its name in the memo', async () => {
    const [found] = await listEventually(`GantryEndpointId = '${ep}' AND GantryKind = 'endpoint'`, [
      endpointWorkflowId(ep),
    ]);
    expect(found!.memo).toEqual({ endpointName: name });
    expect(found!.typedSearchAttributes.get(GantryAccountId)).toBe(accountId);
    expect(found!.typedSearchAttributes.get(GantryKind)).toBe('endpoint');
  });

  it('keeps each job workflow current: completed, failed, cancelled and expired jobs are found by endpoint and status', async () => {
    // Expires while queued (the shortest TTL): its row goes, its workflow ends GONE.
    const expired = await queued(other, { ttl: 10_000 });
    // Each job's workflow exists (IN_QUEUE) before it changes: the changes arrive as upserts.
    const completed = await queued(ep);
    await takeJob(completed);
    await eventually(async () => (await statusAttr(completed)) === 'IN_PROGRESS', 20_000, 'IN_PROGRESS upserted');
    expect((await done(completed, { output: { ok: true } })).status).toBe(200);

    const failed = await queued(ep);
    await takeJob(failed);
    expect((await done(failed, { error: 'boom' })).status).toBe(200);

    const cancelled = await queued(ep);
    expect((await cancel(ep, cancelled)).body).toMatchObject({ id: cancelled, status: 'CANCELLED' });
    // A cancelled job of another endpoint is not one of this endpoint's.
    const elsewhere = await queued(other);
    await cancel(other, elsewhere);
    // One still queued.
    const waiting = await queued(ep);

    await listEventually(`GantryEndpointId = '${ep}' AND GantryJobStatus = 'CANCELLED'`, [jobWorkflowId(cancelled)]);
    await listEventually(`GantryEndpointId = '${ep}' AND GantryJobStatus = 'FAILED'`, [jobWorkflowId(failed)]);
    await listEventually(`GantryEndpointId = '${ep}' AND GantryJobStatus = 'COMPLETED'`, [jobWorkflowId(completed)]);
    await listEventually(`GantryEndpointId = '${ep}' AND GantryJobStatus = 'IN_QUEUE'`, [jobWorkflowId(waiting)]);
    await listEventually(`GantryEndpointId = '${other}' AND GantryJobStatus = 'CANCELLED'`, [jobWorkflowId(elsewhere)]);
    // Every job of the endpoint, and nothing but jobs, by kind; the account is on each.
    const jobs = await listEventually(
      `GantryEndpointId = '${ep}' AND GantryKind = 'job'`,
      [completed, failed, cancelled, waiting].map((id) => jobWorkflowId(id)),
    );
    for (const j of jobs) expect(j.typedSearchAttributes.get(GantryAccountId)).toBe(accountId);
    await listEventually(
      `GantryAccountId = '${accountId}' AND GantryEndpointId IN ('${ep}', '${other}') AND GantryJobStatus = 'CANCELLED'`,
      [jobWorkflowId(cancelled), jobWorkflowId(elsewhere)],
    );
    // Finished jobs' workflows are closed; their status stays searchable.
    expect((await p.ctx.temporal.workflow.getHandle(jobWorkflowId(failed)).describe()).status.name).toBe('COMPLETED');
    await cancel(ep, waiting);
    await listEventually(
      `GantryEndpointId = '${other}' AND GantryJobStatus = 'GONE'`,
      [jobWorkflowId(expired)],
      30_000,
    );
  });
});

describe('registration of the search attributes', () => {
  it('adds the missing ones to a namespace through the operator service, once', async () => {
    const connection = await Connection.connect({ address: inject('temporalAddress') });
    try {
      // A namespace registered after the server started has none of them (as on a fresh cluster).
      const namespace = `sa-${randomString(8).toLowerCase()}`;
      await connection.workflowService.registerNamespace({
        namespace,
        workflowExecutionRetentionPeriod: msToTs('1 day'),
      });
      const logs: string[] = [];
      const added = await eventually(
        async () => {
          const r = await ensureSearchAttributes(connection, namespace, (m) => logs.push(m));
          return r.length > 0 ? r : undefined;
        },
        30_000,
        'registration on the new namespace',
      );
      expect(added.sort()).toEqual(GANTRY_SEARCH_ATTRIBUTES.map((k) => k.name).sort());
      const listed = await connection.operatorService.listSearchAttributes({ namespace });
      for (const k of GANTRY_SEARCH_ATTRIBUTES) expect(Object.keys(listed.customAttributes ?? {})).toContain(k.name);
      // Already there: nothing to do, nothing logged.
      logs.length = 0;
      expect(await ensureSearchAttributes(connection, namespace, (m) => logs.push(m))).toEqual([]);
      expect(logs).toEqual([]);
    } finally {
      await connection.close();
    }
  });

  it('logs the commands an operator must run where it cannot register them', async () => {
    const connection = await Connection.connect({ address: inject('temporalAddress') });
    try {
      const logs: string[] = [];
      expect(
        await ensureSearchAttributes(connection, `no-such-namespace-${randomString(6).toLowerCase()}`, (m) =>
          logs.push(m),
        ),
      ).toEqual([]);
      expect(logs.join('\n')).toMatch(
        /temporal operator search-attribute create --namespace no-such-namespace-\S+ --name GantryKind --name GantryEndpointId .* --type Keyword/,
      );
      expect(logs.join('\n')).toMatch(/--name GantryReleaseVersion --type Int/);
    } finally {
      await connection.close();
    }
  });
});
