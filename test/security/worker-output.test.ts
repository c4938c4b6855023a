/**
 * Finding 8 on the worker protocol: a tenant's worker posting output that PostgreSQL cannot store
 * (NUL) or that is nested past what can be serialized gets a 4xx naming where, never a 500, and
 * the job stays its to finish properly.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createQueueEndpoint, createWorker, workerCall } from '../support/jobs.ts';
import { call, startTestPlatform, type TestPlatform } from '../support/platform.ts';

let p: TestPlatform;
beforeAll(async () => {
  p = await startTestPlatform();
});
afterAll(async () => {
  await p?.stop();
});

it('job-done with NUL or 100,000-deep output is a 422, and the job can still complete', async () => {
  const ep = await createQueueEndpoint(p);
  const w = await createWorker(p, ep);
  const job = (await call(p.url, 'POST', `/v2/${ep}/run`, { key: p.adminKey, body: { input: { n: 1 } } })).body
    .id as string;
  const taken = await workerCall(p.url, 'GET', `/v2/${ep}/job-take/${w.id}?gpu=X&job_in_progress=0`, w.key);
  expect(taken.status).toBe(200);
  expect(taken.body.id).toBe(job);

  const nul = await workerCall(p.url, 'POST', `/v2/${ep}/job-done/${w.id}/${job}`, w.key, {
    output: { text: 'a\u0000b' },
  });
  expect(nul.status).toBe(422);
  expect(nul.body.errors).toEqual(['$.output.text: must not contain NUL characters']);
  const deep = await workerCall(
    p.url,
    'POST',
    `/v2/${ep}/job-done/${w.id}/${job}`,
    w.key,
    `{"output":${'['.repeat(100_000)}${']'.repeat(100_000)}}`,
  );
  expect(deep.status).toBe(422);
  expect(deep.body.errors[0]).toMatch(/^\$\.output(\[0\])+: nested deeper than 64 levels$/);
  const stream = await workerCall(p.url, 'POST', `/v2/${ep}/job-stream/${w.id}/${job}`, w.key, { output: 'x\u0000' });
  expect(stream.status).toBe(422);

  expect((await p.ctx.db.job.findUniqueOrThrow({ where: { id: job } })).status).toBe('IN_PROGRESS');
  expect(
    (await workerCall(p.url, 'POST', `/v2/${ep}/job-done/${w.id}/${job}`, w.key, { output: { text: 'ab' } })).status,
  ).toBe(200);
  expect((await call(p.url, 'GET', `/v2/${ep}/status/${job}`, { key: p.adminKey })).body).toMatchObject({
    status: 'COMPLETED',
    output: { text: 'ab' },
  });
});
