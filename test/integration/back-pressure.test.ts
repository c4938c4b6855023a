/**
 * Back-pressure: an API process that holds more job workflow signals than GANTRY_JOB_WORKFLOW_BACKLOG
 * (Temporal behind the queue) answers new submissions 429 with Retry-After, keeps every job it had
 * accepted, and takes jobs again once its workflows caught up. Here the backlog is made by holding
 * states for a while (GANTRY_JOB_SIGNAL_DELAY_MS), as a slow Temporal would.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, startTestPlatform, type TestPlatform } from '../support/platform.ts';
import { createQueueEndpoint, eventually } from '../support/jobs.ts';

const LIMIT = 20;
const HOLD_MS = 4_000;

describe('back-pressure on the job API', () => {
  let p: TestPlatform;
  beforeAll(async () => {
    p = await startTestPlatform({
      GANTRY_JOB_WORKFLOW_BACKLOG: String(LIMIT),
      GANTRY_JOB_SIGNAL_DELAY_MS: String(HOLD_MS),
    });
  }, 120_000);
  afterAll(async () => {
    await p?.stop();
  }, 60_000);

  it('answers 429 with Retry-After past the backlog limit, loses nothing, and takes jobs again once caught up', async () => {
    const ep = await createQueueEndpoint(p);
    const answers = [];
    for (let i = 0; i < LIMIT + 5; i++)
      answers.push(await call(p.url, 'POST', `/v2/${ep}/run`, { key: p.adminKey, body: { input: { i } } }));
    expect(answers.slice(0, LIMIT).map((a) => a.status)).toEqual(Array(LIMIT).fill(200));
    for (const refused of answers.slice(LIMIT)) {
      expect(refused.status).toBe(429);
      expect(refused.headers.get('content-type')).toMatch(/application\/problem\+json/);
      expect(refused.body.detail).toMatch(/GANTRY_JOB_WORKFLOW_BACKLOG/);
      const retryAfter = Number(refused.headers.get('retry-after'));
      expect(retryAfter).toBeGreaterThanOrEqual(1);
      expect(retryAfter).toBeLessThanOrEqual(60);
    }
    const sync = await call(p.url, 'POST', `/v2/${ep}/runsync?wait=1000`, { key: p.adminKey, body: { input: {} } });
    expect(sync.status).toBe(429);
    // Every acknowledged job is there, and only those.
    const stored = await p.ctx.db.job.findMany({ where: { endpointId: ep }, select: { id: true } });
    expect(stored.map((j) => j.id).sort()).toEqual(
      answers
        .slice(0, LIMIT)
        .map((a) => a.body.id as string)
        .sort(),
    );

    // The held states are sent; the backlog drains and the next job is taken.
    await sleep(HOLD_MS);
    const again = await eventually(
      async () => {
        const r = await call(p.url, 'POST', `/v2/${ep}/run`, { key: p.adminKey, body: { input: { again: true } } });
        return r.status === 200 ? r : undefined;
      },
      20_000,
      'a submission accepted once the backlog drained',
    );
    expect(again.body.status).toBe('IN_QUEUE');
    // The accepted jobs got their workflows.
    for (const a of answers.slice(0, 3)) await p.ctx.temporal.workflow.getHandle(`job:${a.body.id}`).describe();
  });
});
