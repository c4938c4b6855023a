/**
 * The console's Logs tab in a real browser (test/support/console.ts) against a whole platform with
 * one SSH test host in front of this machine's Podman: a worker whose container prints tenant markup
 * and a `javascript:` URL, shown as text (stdout and stderr apart) with no script run and no CSP
 * violation; the stream read with fetch (the key in a header, never in the address); a dropped
 * stream resumed with Last-Event-ID; at most 2,000 lines kept; autoscroll paused and resumed; the
 * stream closed on leaving the tab.
 */
import type { Page, Request } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ensureConsoleBuilt } from '../../api/console/build.ts';
import { liveWorker } from '../../domain/workers/index.ts';
import { loadConfig } from '../../infra/config.ts';
import { HOSTILE, HOSTILE_URL, openConsoleBrowser, type ConsoleBrowser } from '../support/console.ts';
import { call, type TestPlatform } from '../support/platform.ts';
import {
  ensureOrchestrationWorkerImage,
  type OneHostPlatform,
  ORCHESTRATION_WORKER_IMAGE,
  startOneHostPlatform,
  until,
} from '../support/orchestration.ts';

/** What the console keeps (api/console/src/endpoint-logs.tsx MAX_LINES). */
const MAX_LINES = 2000;

describe('console: an endpoint’s logs', () => {
  let fixture: OneHostPlatform | undefined;
  let p: TestPlatform;
  let b: ConsoleBrowser;
  let endpointId: string;
  let workerId: string;

  beforeAll(async () => {
    ensureOrchestrationWorkerImage();
    await ensureConsoleBuilt(loadConfig().cacheDir);
    fixture = await startOneHostPlatform('console-logs-box');
    p = fixture.p;
    b = await openConsoleBrowser(p.url);
    // The tenant's output: markup on stdout, a script URL on stderr, then the usual worker.
    const created = await call(p.url, 'POST', '/v2/serverless', {
      key: p.adminKey,
      body: {
        name: 'console-logs',
        image: ORCHESTRATION_WORKER_IMAGE,
        workers: { min: 1, max: 1 },
        env: { HOSTILE_LINE: HOSTILE, HOSTILE_LINK: HOSTILE_URL },
        args: `node -e "console.log(process.env.HOSTILE_LINE); console.error('see ' + process.env.HOSTILE_LINK); import('/app/index.js')"`,
      },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    endpointId = created.body.id;
    workerId = (
      await until(
        'a ready worker',
        async () =>
          (await p.ctx.db.worker.findMany({ where: { endpointId, ...liveWorker } })).find((w) => w.status === 'IDLE'),
        120_000,
      )
    ).id;
  }, 600_000);
  afterEach(() => b?.closeTabs());
  afterAll(async () => {
    await b?.close();
    await fixture?.stop();
  }, 120_000);

  const logsAddress = () => `/console/endpoints/${endpointId}/logs`;
  const isLogs = (r: Request) => r.url().includes(`/workers/${workerId}/logs`);
  const lines = (page: Page) => page.locator('.logs .log-line');
  const hostileLine = (page: Page) => lines(page).filter({ hasText: '<script>' });

  async function openLogs(): Promise<{ page: Page; csp: string[]; requests: Request[] }> {
    const { page, csp } = await b.open(logsAddress());
    const requests: Request[] = [];
    page.on('request', (r) => isLogs(r) && requests.push(r));
    return { page, csp, requests };
  }

  it('shows the worker’s output as text, stdout and stderr apart, with the key in a header only', async () => {
    const { page, csp, requests } = await openLogs();
    await b.signIn(page, p.adminKey);
    expect(await page.getByLabel('Worker', { exact: true }).inputValue()).toBe(workerId);
    await hostileLine(page).waitFor({ timeout: 60_000 });

    const out = hostileLine(page);
    expect(await out.getAttribute('data-stream')).toBe('stdout');
    expect(await out.locator('.log-text').innerText()).toBe(HOSTILE);
    expect(await out.locator('img, script').count()).toBe(0);
    const err = lines(page).filter({ hasText: HOSTILE_URL });
    expect(await err.getAttribute('data-stream')).toBe('stderr');
    expect(await err.locator('.log-text').innerText()).toBe(`see ${HOSTILE_URL}`);
    expect(await page.locator('.logs a').count()).toBe(0);
    // The worker's own lines follow, each with the runtime's time.
    await lines(page).filter({ hasText: ' up (release' }).waitFor();
    expect(await lines(page).first().locator('.log-time').innerText()).toMatch(/^\d{4}-\d\d-\d\dT/);
    expect(await page.locator('[data-state]').getAttribute('data-state')).toBe('live');

    expect(requests.length).toBeGreaterThanOrEqual(1);
    for (const r of requests) {
      expect(r.url()).not.toContain(p.adminKey);
      expect(await r.headerValue('authorization')).toBe(`Bearer ${p.adminKey}`);
    }
    expect(await page.evaluate('window.__pwned')).toBeUndefined();
    expect(csp).toEqual([]);
    expect(await page.evaluate('window.__csp')).toEqual([]);
  });

  it('resumes a dropped stream with Last-Event-ID and keeps the last 2,000 lines', async () => {
    const { page } = await openLogs();
    // The first answer: 2,100 lines of the year 2000, then the connection drops (no `end`).
    const fakeId = (i: number) => `2000-01-01T00:00:00.${String(i).padStart(9, '0')}Z`;
    let fake = 'retry: 100\n\n';
    for (let i = 0; i < MAX_LINES + 100; i++)
      fake += `id: ${fakeId(i)}\nevent: log\ndata: ${JSON.stringify({ time: fakeId(i), stream: 'stdout', line: `fake line ${i}` })}\n\n`;
    const lastEventIds: Array<string | undefined> = [];
    await page.route('**/v2/serverless/*/workers/*/logs?*', async (route) => {
      lastEventIds.push((await route.request().headerValue('last-event-id')) ?? undefined);
      if (lastEventIds.length === 1)
        return route.fulfill({ status: 200, contentType: 'text/event-stream', body: fake });
      return route.continue();
    });
    await b.signIn(page, p.adminKey);
    // Reconnected after the last line seen: the server sends the lines after the year 2000, all of them.
    await hostileLine(page).waitFor({ timeout: 60_000 });
    expect(lastEventIds).toEqual([undefined, fakeId(MAX_LINES + 99)]);
    await expect.poll(() => lines(page).count()).toBe(MAX_LINES);
    // The oldest lines went: none of the first fake lines is left, the newest ones are.
    expect(
      await page
        .locator('.logs .log-text')
        .filter({ hasText: /^fake line 0$/ })
        .count(),
    ).toBe(0);
    expect(await lines(page).first().locator('.log-text').innerText()).not.toBe('fake line 0');
    expect(
      await page
        .locator('.logs .log-text')
        .filter({ hasText: `fake line ${MAX_LINES + 99}` })
        .count(),
    ).toBe(1);
    // Autoscrolled to the newest line.
    const atBottom = () =>
      page.evaluate(
        `(() => { const l = document.querySelector('.logs'); return l.scrollTop + l.clientHeight >= l.scrollHeight - 4; })()`,
      );
    await expect.poll(atBottom).toBe(true);

    // Paused: new output does not move the view; resumed: it goes to the newest line again.
    const pause = page.getByRole('button', { name: 'Pause autoscroll' });
    await pause.focus();
    await page.keyboard.press('Enter');
    expect(await page.getByRole('button', { name: 'Resume autoscroll' }).getAttribute('aria-pressed')).toBe('true');
    await page.evaluate(`document.querySelector('.logs').scrollTop = 0`);
    const run = await call(p.url, 'POST', `/v2/${endpointId}/run`, { key: p.adminKey, body: { input: { n: 1 } } });
    expect(run.status, JSON.stringify(run.body)).toBe(200);
    await lines(page)
      .filter({ hasText: `finished job ${run.body.id}` })
      .waitFor({ timeout: 60_000 });
    expect(await page.evaluate(`document.querySelector('.logs').scrollTop`)).toBe(0);
    expect(await lines(page).count()).toBe(MAX_LINES);
    await page.getByRole('button', { name: 'Resume autoscroll' }).click();
    await expect.poll(atBottom).toBe(true);
  }, 180_000);

  it('closes the stream on leaving the tab', async () => {
    const { page, requests } = await openLogs();
    await b.signIn(page, p.adminKey);
    await hostileLine(page).waitFor({ timeout: 60_000 });
    const failed = page.waitForEvent('requestfailed', { predicate: isLogs, timeout: 10_000 });
    await page.getByRole('navigation', { name: 'Endpoint' }).getByRole('link', { name: 'Overview' }).click();
    await page.waitForURL(`**/console/endpoints/${endpointId}`);
    expect((await failed).failure()?.errorText).toMatch(/ABORTED/);
    const opened = requests.length;
    await new Promise((r) => setTimeout(r, 3000));
    // No reconnection after leaving.
    expect(requests.length).toBe(opened);
  }, 120_000);
});
