/**
 * The console's Requests and Workers tabs (api/console/src/endpoint-requests.tsx,
 * endpoint-workers.tsx, docs/console.md) in Chromium against a whole platform that runs jobs: an
 * SSH test host in front of this machine's Podman, the orchestration worker image
 * (test/fixtures/orchestration-worker: it echoes its input, and fails on `{fail: true}`), a tenant
 * account's key. Jobs with markup and a `javascript:` URL in their input are shown as text; a
 * queued job is cancelled and a failed one retried from the console, as the job API then says; the
 * Workers tab says why a worker waits (a GPU pool no host has); the finished jobs reach the charts.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { ensureConsoleBuilt } from '../../api/console/build.ts';
import { rollupEndpointMetrics } from '../../domain/metrics/index.ts';
import { loadConfig } from '../../infra/config.ts';
import { consoleAccount, HOSTILE, HOSTILE_URL, openConsoleBrowser, type ConsoleBrowser } from '../support/console.ts';
import { call, type TestPlatform } from '../support/platform.ts';
import {
  ensureOrchestrationWorkerImage,
  ORCHESTRATION_WORKER_IMAGE,
  startOneHostPlatform,
  until,
  type OneHostPlatform,
} from '../support/orchestration.ts';

const MIN = 60_000;
const FINAL = ['COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT'];

let fixture: OneHostPlatform | undefined;
let p: TestPlatform;
let b: ConsoleBrowser | undefined;
let key: string;
/** Runs jobs on the test host's Podman. */
let echo: string;
/** Wants a GPU the (CPU-only) test host does not have: its worker waits, its jobs stay queued. */
let gpu: string;
/** No job ever: no worker. */
let idle: string;
const hostileInput = { prompt: HOSTILE, link: HOSTILE_URL, note: 'ünïcode ✓' };

beforeAll(async () => {
  await ensureConsoleBuilt(loadConfig().cacheDir);
  ensureOrchestrationWorkerImage();
  fixture = await startOneHostPlatform('console-box');
  ({ p } = fixture);
  key = (await consoleAccount(p.ctx.db, 'console-requests')).key;
  b = await openConsoleBrowser(p.url);
  const create = async (body: Record<string, unknown>) => {
    const r = await call(p.url, 'POST', '/v2/serverless', {
      key,
      body: { image: ORCHESTRATION_WORKER_IMAGE, workers: { min: 0, max: 1 }, ...body },
    });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    return r.body.id as string;
  };
  echo = await create({ name: 'echo' });
  gpu = await create({ name: 'wants-a-gpu', gpu: { pools: ['AMPERE_24'] } });
  idle = await create({ name: 'idle' });
}, 600_000);

afterEach(async () => {
  await b?.closeTabs();
});
afterAll(async () => {
  await b?.close();
  await fixture?.stop();
}, 120_000);

async function run(endpointId: string, input: unknown): Promise<string> {
  const r = await call(p.url, 'POST', `/v2/${endpointId}/run`, { key, body: { input } });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body.id as string;
}

const status = async (endpointId: string, jobId: string) =>
  (await call(p.url, 'GET', `/v2/${endpointId}/status/${jobId}`, { key })).body;

const finished = (endpointId: string, jobId: string) =>
  until(
    `job ${jobId} to finish`,
    async () => {
      const s = await status(endpointId, jobId);
      return FINAL.includes(s?.status) ? s : undefined;
    },
    240_000,
    500,
    () => status(endpointId, jobId),
  );

/** A fresh tab at this console address, signed in with the tenant's key. */
async function openSignedIn(address: string): Promise<{ page: Page; csp: string[] }> {
  const tab = await b!.open(address);
  await b!.signIn(tab.page, key);
  return tab;
}

/** Chooses a job's row from the keyboard (its button, focused, Enter) and waits for its panel. */
async function chooseJob(page: Page, jobId: string): Promise<void> {
  const row = page.locator(`tr[data-job-id="${jobId}"]`);
  await row.waitFor({ timeout: 30_000 });
  await row.getByRole('button', { name: `Show job ${jobId}` }).focus();
  await page.keyboard.press('Enter');
  await page.locator(`.job-detail[data-job-id="${jobId}"] [data-status]`).waitFor({ timeout: 30_000 });
}

const pwned = (page: Page) => page.evaluate('window.__pwned');

describe('the console’s Requests and Workers tabs', () => {
  let hostileJob: string;
  let failingJob: string;

  it('lists finished jobs and shows a hostile input and its output as text', async () => {
    hostileJob = await run(echo, hostileInput);
    failingJob = await run(echo, { fail: true, prompt: HOSTILE });
    const done = await finished(echo, hostileJob);
    expect(done.status, JSON.stringify(done)).toBe('COMPLETED');
    expect((await finished(echo, failingJob)).status).toBe('FAILED');

    const { page, csp } = await openSignedIn(`/console/endpoints/${echo}/requests`);
    const row = page.locator(`tr[data-job-id="${hostileJob}"]`);
    await row.waitFor({ timeout: 30_000 });
    expect(await row.getAttribute('data-status')).toBe('COMPLETED');
    // Started and completed times and the durations are filled in for a finished job.
    const cells = await row.locator('td').allInnerTexts();
    expect(cells[1]).toBe('COMPLETED');
    for (const c of cells.slice(2)) expect(c).not.toBe('—');
    expect(await page.locator(`tr[data-job-id="${failingJob}"]`).getAttribute('data-status')).toBe('FAILED');

    await chooseJob(page, hostileJob);
    const panel = page.locator(`.job-detail[data-job-id="${hostileJob}"]`);
    const input = panel.locator('[data-payload="input"] pre.json');
    await input.waitFor();
    expect(JSON.parse(await input.innerText())).toEqual(hostileInput);
    const output = JSON.parse(await panel.locator('[data-payload="output"] pre.json').innerText());
    expect(output.echo).toEqual(hostileInput);
    // Text, never markup: no element the strings name exists, nothing ran, no link to the script URL.
    expect(await panel.locator('img, script').count()).toBe(0);
    expect(await page.locator('a[href^="javascript:"]').count()).toBe(0);
    expect(await panel.getByRole('button', { name: /Cancel job|Retry job/ }).count()).toBe(0);
    expect(await page.getByRole('button', { name: `Show job ${hostileJob}` }).getAttribute('aria-pressed')).toBe(
      'true',
    );
    expect(await pwned(page)).toBeUndefined();

    // The status filter asks the API for failed jobs only.
    await page.getByLabel('Status').selectOption('FAILED');
    await expect
      .poll(
        () => page.locator('tr[data-job-id]').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-job-id'))),
        {
          timeout: 30_000,
        },
      )
      .toEqual([failingJob]);
    expect(await pwned(page)).toBeUndefined();
    expect(csp).toEqual([]);
    expect(await page.evaluate('window.__csp')).toEqual([]);
  }, 300_000);

  it('retries a failed job from the console: it runs again, as the job API says', async () => {
    const { page } = await openSignedIn(`/console/endpoints/${echo}/requests`);
    await chooseJob(page, failingJob);
    const panel = page.locator(`.job-detail[data-job-id="${failingJob}"]`);
    expect(await panel.locator('[data-payload="error"]').innerText()).toContain('failed as told');
    expect(await panel.getByRole('button', { name: 'Cancel job' }).count()).toBe(0);
    await panel.getByRole('button', { name: 'Retry job' }).click();
    await panel.getByText(/^Retried: the job is IN_QUEUE\.$/).waitFor({ timeout: 30_000 });
    // The job went back to the queue under its id and ran again (and failed again, as its input says).
    const again = await until(
      'the retried job to finish again',
      async () => {
        const s = await status(echo, failingJob);
        return s?.retries === 1 && FINAL.includes(s.status) ? s : undefined;
      },
      240_000,
      500,
      () => status(echo, failingJob),
    );
    expect(again).toMatchObject({ status: 'FAILED', retries: 1, error: 'failed as told' });
    expect(await pwned(page)).toBeUndefined();
  }, 300_000);

  it('shows why the worker of an endpoint waits: no host has its GPU pool', async () => {
    const queued = await run(gpu, { n: 1 });
    const problem = await until(
      'the placement problem',
      async () => {
        const w = (await call(p.url, 'GET', `/v2/serverless/${gpu}/workers`, { key })).body;
        return w.workerProblem?.kind === 'placement' ? w.workerProblem : undefined;
      },
      120_000,
      500,
    );
    expect(problem.reason).toMatch(/^cannot be placed: .*AMPERE_24/);

    const { page, csp } = await openSignedIn(`/console/endpoints/${gpu}/workers`);
    const notice = page.locator('[data-worker-problem="placement"]');
    await notice.waitFor({ timeout: 30_000 });
    expect(await notice.locator('.reason').innerText()).toBe(problem.reason);
    expect(await notice.innerText()).toContain('No host can take a worker');
    const waiting = page.locator(`tr[data-worker-id="${problem.workerId}"]`);
    await waiting.waitFor({ timeout: 30_000 });
    expect(await waiting.getAttribute('data-status')).toBe('THROTTLED');
    expect(await waiting.locator('td.reason').innerText()).toMatch(/^cannot be placed: /);
    expect(await status(gpu, queued)).toMatchObject({ status: 'IN_QUEUE', workerProblem: { kind: 'placement' } });
    expect(csp).toEqual([]);

    // An endpoint that never had a job: no workers, and what starts them.
    await page.goto(`${p.url}/console/endpoints/${idle}/workers`);
    await expect
      .poll(() => page.locator('.notice.empty').innerText(), { timeout: 30_000 })
      .toContain('Workers start when jobs arrive (min 0, max 1)');
    expect(await page.locator('[data-worker-problem]').count()).toBe(0);
  }, 300_000);

  it('cancels a queued job from the console: the job API then answers CANCELLED', async () => {
    const queued = await run(gpu, { n: 2, prompt: HOSTILE });
    const { page } = await openSignedIn(`/console/endpoints/${gpu}/requests`);
    await chooseJob(page, queued);
    const panel = page.locator(`.job-detail[data-job-id="${queued}"]`);
    expect(await panel.locator('[data-status]').innerText()).toBe('IN_QUEUE');
    expect(await panel.locator('[data-payload="output"]').innerText()).toContain('No output yet.');
    expect(await panel.getByRole('button', { name: 'Retry job' }).count()).toBe(0);
    const cancel = panel.getByRole('button', { name: 'Cancel job' });
    await cancel.focus();
    await page.keyboard.press('Enter');
    await panel.getByText(/^Cancelled: the job is CANCELLED\.$/).waitFor({ timeout: 30_000 });
    expect((await status(gpu, queued)).status).toBe('CANCELLED');
    // The list follows on its next read: the row says so too.
    await page.locator(`tr[data-job-id="${queued}"][data-status="CANCELLED"]`).waitFor({ timeout: 30_000 });
    expect(await pwned(page)).toBeUndefined();
  }, 300_000);

  it('counts the finished jobs in the endpoint’s charts once rolled up', async () => {
    // Roll every minute up to now as the schedule's activity would two minutes from now.
    await rollupEndpointMetrics(p.ctx, { now: new Date(Date.now() + 2 * MIN) });
    const { page, csp } = await openSignedIn(`/console/endpoints/${echo}`);
    await page.locator('[data-chart="jobs"] canvas').first().waitFor({ timeout: 30_000 });
    // One completed job; the failed one once or, if a scheduled rollup counted its first failure
    // before the retry, twice.
    expect(await page.locator('[data-chart="jobs"] .summary').innerText()).toMatch(
      /^1 completed, [12] failed or timed out$/,
    );
    expect(await page.locator('[data-chart="execution"] .summary').innerText()).toMatch(/highest p50 \d/);
    expect(csp).toEqual([]);
  }, 120_000);
});
