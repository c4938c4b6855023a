/**
 * The console (/console, api/console/, docs/console.md) in a real browser (Debian's Chromium, driven
 * by playwright-core) against the API on a socket of its own, every request to anything but this
 * machine refused: signing in with a key, the endpoints of the key's account only (a tenant's
 * name shown as text, never markup), an endpoint's charts from rolled-up jobs, a wrong key's
 * error, a revoked key signing the console out, and the page's CSP. On a failure, the page is
 * saved as a screenshot in a temporary directory (its path in the failure).
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { CONSOLE_CSP } from '../../api/console/routes.ts';
import { issueApiKey } from '../../domain/accounts/index.ts';
import { rollupEndpointMetrics } from '../../domain/metrics/index.ts';
import { newId } from '../../domain/shared/index.ts';
import { HOSTILE, startConsoleHarness, type ConsoleHarness } from '../support/console.ts';
import { call } from '../support/platform.ts';

const MIN = 60_000;

describe('console in a browser', () => {
  let h: ConsoleHarness;
  let t: ConsoleHarness['t'];
  let url: string;
  let keyA: { keyId: string; key: string };
  let keyB: string;
  let endpointId: string;

  beforeAll(async () => {
    h = await startConsoleHarness();
    ({ t, url } = h);
    const a = await h.account('console-a');
    keyA = a;
    keyB = (await h.account('console-b')).key;
    const created = await call(url, 'POST', '/v2/serverless', {
      key: keyA.key,
      body: { name: HOSTILE, image: 'localhost/app:1', gpu: { pools: ['AMPERE_24'] } },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    endpointId = created.body.id;
    // Finished jobs in the minute before last, rolled up as the schedule's activity does.
    const m = Math.floor(Date.now() / MIN) * MIN - 2 * MIN;
    const job = (status: 'COMPLETED' | 'FAILED', i: number) =>
      t.ctx.db.job.create({
        data: {
          id: newId(),
          endpointId,
          accountId: a.accountId,
          status,
          input: {},
          createdAt: new Date(m + i * 1000),
          startedAt: new Date(m + i * 1000 + 200),
          completedAt: new Date(m + i * 1000 + 1200),
          expiresAt: new Date(m + 3_600_000),
        },
      });
    for (let i = 0; i < 3; i++) await job('COMPLETED', i);
    await job('FAILED', 5);
    await rollupEndpointMetrics(t.ctx, { now: new Date(m + 2 * MIN) });
  }, 240_000);

  afterEach(() => h.closeTabs());
  afterAll(() => h?.stop());

  const open = (address?: string) => h.open(address);
  const signIn = (page: Parameters<ConsoleHarness['signIn']>[0], key: string) => h.signIn(page, key);

  it('serves index.html with the CSP and no inline script, under /console only; assets by name', async () => {
    for (const route of ['/console', '/console/endpoints/anything', '/console/some/deep/path']) {
      const r = await fetch(url + route);
      expect(r.status, route).toBe(200);
      expect(r.headers.get('content-security-policy')).toBe(CONSOLE_CSP);
      const html = await r.text();
      expect(html).toContain('<div id="app">');
      for (const tag of html.match(/<script\b[^>]*>/g) ?? []) expect(tag).toMatch(/\bsrc="\/console\/assets\//);
      expect(html).not.toMatch(/<script\b[^>]*>\s*[^<\s]/);
      expect(html).not.toMatch(/<style\b|\sstyle=/);
    }
    expect((await fetch(`${url}/consolex`)).status).toBe(404);
    // An API without a build: a problem saying how to build it.
    const bare = await t.another({});
    const missing = await bare.call('GET', '/console/endpoints');
    expect(missing.status).toBe(503);
    expect(missing.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(missing.body.detail).toMatch(/npm run console:build/);
    await bare.close();
    expect((await fetch(`${url}/console/assets/nope.js`)).status).toBe(404);
  });

  it('signs in with a key, lists the account’s endpoint with its name as text, and charts its metrics', async () => {
    const { page, csp } = await open();
    await signIn(page, keyA.key);
    const row = page.locator(`tr[data-endpoint-id="${endpointId}"]`);
    await row.waitFor();
    expect(await row.locator('td.name').innerText()).toBe(HOSTILE);
    expect(await page.evaluate('window.__pwned')).toBeUndefined();
    expect(await page.evaluate('sessionStorage.getItem("gantry.console.key")')).toBe(keyA.key);
    expect(page.url()).not.toContain(keyA.key);

    await row.getByRole('link').click();
    await page.waitForURL(`**/console/endpoints/${endpointId}`);
    await page.locator('[data-chart="jobs"] canvas').first().waitFor();
    expect(await page.locator('.charts canvas').count()).toBeGreaterThanOrEqual(5);
    expect(await page.locator('[data-chart="jobs"] .summary').innerText()).toBe('3 completed, 1 failed or timed out');
    expect(await page.locator('[data-chart="execution"] .summary').innerText()).toMatch(/highest p50 \d/);
    expect(await page.getByRole('heading', { level: 1 }).innerText()).toBe(HOSTILE);
    // Another window, from the keyboard: the 6 h window of 5 min steps.
    await page.getByRole('button', { name: '6h' }).focus();
    await page.keyboard.press('Enter');
    await page.locator('.charts[data-window="6h"][data-step="5m"] canvas').first().waitFor();
    expect(await page.locator('[data-chart="jobs"] .summary').innerText()).toBe('3 completed, 1 failed or timed out');
    expect(await page.evaluate('window.__pwned')).toBeUndefined();
    expect(csp).toEqual([]);
    expect(await page.evaluate('window.__csp')).toEqual([]);
  });

  it('shows the sign-in error for a wrong key; another account’s key sees none of these endpoints', async () => {
    const { page } = await open();
    await signIn(page, 'gntr_wrong_key');
    await expect.poll(() => page.locator('#sign-in-error').innerText()).toMatch(/refused the key \(401\)/);
    expect(await page.evaluate('sessionStorage.getItem("gantry.console.key")')).toBeNull();

    await signIn(page, keyB);
    await page.getByText('No endpoints yet').waitFor();
    expect(await page.locator('.notice.empty').innerText()).toContain('POST /v2/serverless');
    expect(await page.locator(`tr[data-endpoint-id="${endpointId}"]`).count()).toBe(0);
    expect(await page.content()).not.toContain(endpointId);
  });

  it('signs an idle page out within 1 s of its key’s revocation', async () => {
    // A page that makes no calls of its own (no such page): only the key check can see the revocation.
    const { page } = await open('/console/idle');
    const revocable = await issueApiKey(
      t.ctx.db,
      (await t.ctx.db.apiKey.findUniqueOrThrow({ where: { id: keyA.keyId } })).accountId,
      'revocable',
      ['READ', 'RUN'],
    );
    const refused: string[] = [];
    page.on('response', (r) => r.status() === 401 && refused.push(new URL(r.url()).pathname));
    const checked = page.waitForResponse((r) => r.url().endsWith('/v2/keys/self') && r.status() === 200);
    await signIn(page, revocable.key);
    await page.getByText('No such page').waitFor();
    await checked;
    // The moment the sign-in form appears, on the page's clock (this machine's, as Date.now() here).
    await page.evaluate(`new MutationObserver((_, o) => {
      if (document.getElementById('key-input')) { window.__signedOutAt = Date.now(); o.disconnect(); }
    }).observe(document.body, { childList: true, subtree: true })`);
    const revoked = await call(url, 'DELETE', `/v2/keys/${revocable.id}`, { key: t.adminKey });
    const answeredAt = Date.now();
    expect(revoked.status, JSON.stringify(revoked.body)).toBe(204);
    await page.getByLabel('API key').waitFor({ timeout: 5000 });
    const took = ((await page.evaluate('window.__signedOutAt')) as number) - answeredAt;
    // The check runs every 1 s, so the next one starts at most 1 s after the revocation; the rest is
    // that call's round trip (the revocation reaches the record cache at commit, within the 100 ms
    // bound at worst) and a render, for which 500 ms leaves room on a loaded two-core machine.
    expect(took).toBeLessThan(1500);
    expect(refused).toEqual(['/v2/keys/self']);
    expect(await page.locator('#sign-in-error').innerText()).toMatch(/refused the key \(401\)/);
    expect(await page.evaluate('sessionStorage.getItem("gantry.console.key")')).toBeNull();
  });
});
