/**
 * The console's Keys and Hosts pages in a real browser (test/support/console.ts) against a whole
 * platform (its host workflows probe a registered host), and the route the console checks its key
 * with every second, GET /v2/keys/self: its answer, its refusals, and its quota of its own.
 *
 * Keys: a key made with the scopes chosen (a field error first), shown once and listed, revoked
 * after a confirmation; revoking the console's own key signs out. Hosts: the admin's key lists and
 * registers hosts (a field error first; an address that refuses connections, so the probe answers
 * UNREACHABLE at once), and drains and removes one; another key gets a notice and no Hosts link.
 */
import type { Page } from 'playwright-core';
import ssh2 from 'ssh2';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ensureConsoleBuilt } from '../../api/console/build.ts';
import { KEY_CHECK_QUOTAS } from '../../api/rate-limit.ts';
import { issueApiKey } from '../../domain/accounts/index.ts';
import { newId } from '../../domain/shared/index.ts';
import { loadConfig } from '../../infra/config.ts';
import { consoleAccount, HOSTILE, openConsoleBrowser, type ConsoleBrowser } from '../support/console.ts';
import { call, startTestPlatform, type TestPlatform } from '../support/platform.ts';

describe('console: keys, hosts and the key check', () => {
  let p: TestPlatform;
  let b: ConsoleBrowser;

  beforeAll(async () => {
    await ensureConsoleBuilt(loadConfig().cacheDir);
    p = await startTestPlatform();
    b = await openConsoleBrowser(p.url);
  }, 600_000);
  afterEach(() => b?.closeTabs());
  afterAll(async () => {
    await b?.close();
    await p?.stop();
  }, 120_000);

  const account = (name: string, scopes?: Parameters<typeof consoleAccount>[2]) =>
    consoleAccount(p.ctx.db, name, scopes);
  const self = (key?: string) => call(p.url, 'GET', '/v2/keys/self', key ? { key } : {});
  const nav = (page: Page) => page.getByRole('navigation', { name: 'Console' });

  /** Signed in at `address` with `key`, the first key check answered (the nav then knows the key). */
  async function signedIn(key: string, address = '/console/keys') {
    const { page, csp } = await b.open(address);
    const checked = page.waitForResponse((r) => r.url().endsWith('/v2/keys/self') && r.status() === 200);
    await b.signIn(page, key);
    await checked;
    return { page, csp };
  }

  describe('GET /v2/keys/self', () => {
    it('describes the calling key, whatever its scopes; 401 without a key or once it is revoked', async () => {
      const a = await account('self-a', ['RUN']);
      const r = await self(a.key);
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      expect(r.body).toEqual({
        id: a.keyId,
        accountId: a.accountId,
        name: 'self-a',
        prefix: a.key.slice(0, 10),
        scopes: ['RUN'],
        endpointIds: [],
        accountWide: true,
        admin: false,
        createdAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
        expiresAt: null,
      });
      const stored = await p.ctx.db.apiKey.findUniqueOrThrow({ where: { id: a.keyId } });
      expect(r.body.createdAt).toBe(stored.createdAt.toISOString());

      const admin = await self(p.adminKey);
      expect(admin.body).toMatchObject({ admin: true, accountWide: true, scopes: ['READ', 'WRITE', 'RUN', 'ADMIN'] });

      // An admin account's key limited to an endpoint is not the platform admin; an expiry is answered.
      const expires = new Date(Date.now() + 3_600_000);
      const limited = await issueApiKey(
        p.ctx.db,
        admin.body.accountId,
        'limited',
        ['ADMIN'],
        undefined,
        ['e1'],
        expires,
      );
      expect((await self(limited.key)).body).toMatchObject({
        admin: false,
        accountWide: false,
        endpointIds: ['e1'],
        expiresAt: expires.toISOString(),
      });

      expect((await self()).status).toBe(401);
      expect((await self('gntr_not_a_key_at_all_00000')).status).toBe(401);
      const revoked = await call(p.url, 'DELETE', `/v2/keys/${a.keyId}`, { key: p.adminKey });
      expect(revoked.status).toBe(204);
      const after = await self(a.key);
      expect(after.status).toBe(401);
      expect(after.headers.get('content-type')).toMatch(/^application\/problem\+json/);

      const doc = (await call(p.url, 'GET', '/v2/openapi.json')).body;
      expect(doc.paths['/v2/keys/self'].get).toMatchObject({
        operationId: 'getCallingApiKey',
        'x-required-scope': ['READ', 'WRITE', 'RUN'],
      });
    });

    it("spends a quota of its own per key, never the account's", async () => {
      // One console tab checks every second: the quota holds ten of them for a whole day.
      expect(KEY_CHECK_QUOTAS.minute).toBeGreaterThanOrEqual(10 * 60);
      expect(KEY_CHECK_QUOTAS.hour).toBeGreaterThanOrEqual(10 * 3600);
      expect(KEY_CHECK_QUOTAS.day).toBeGreaterThanOrEqual(10 * 86_400);

      // An account whose management quota is three calls a minute.
      const a = await account('self-quota');
      await p.ctx.db.account.update({ where: { id: a.accountId }, data: { rateLimitPerMinute: 3 } });
      for (let i = 0; i < 8; i++) expect((await self(a.key)).status, `check ${i + 1}`).toBe(200);
      // The checks spent none of it: three management calls pass, the fourth is refused...
      for (let i = 0; i < 3; i++) expect((await call(p.url, 'GET', '/v2/keys', { key: a.key })).status).toBe(200);
      const refused = await call(p.url, 'GET', '/v2/keys', { key: a.key });
      expect(refused.status).toBe(429);
      // ...and the check still answers, from its own counter.
      const still = await self(a.key);
      expect(still.status).toBe(200);
      expect(still.headers.get('ratelimit-policy')).toContain(`"minute";q=${KEY_CHECK_QUOTAS.minute}`);
    });
  });

  describe('Keys page', () => {
    it('creates a key with the scopes chosen, shows it once, lists it and revokes it after a confirmation', async () => {
      const a = await account('keys-a');
      const { page, csp } = await signedIn(a.key);
      await page.getByRole('heading', { name: 'API keys' }).waitFor();
      // The console's own key is listed and marked.
      expect(await page.locator(`tr[data-key-id="${a.keyId}"] td.name`).innerText()).toContain('(this console)');

      // From the keyboard: a name, then Enter with no scope chosen is a field error beside the scopes.
      const name = `ci ${HOSTILE}`;
      await page.getByLabel('Name').fill(name);
      await page.getByLabel('Name').press('Enter');
      await expect.poll(() => page.locator('#key-scopes-error').textContent()).toBe('Choose at least one scope.');
      expect(await page.locator('input[name="scope"][value="ADMIN"]').count()).toBe(0);
      await page.getByLabel(/^READ:/).focus();
      await page.keyboard.press('Space');
      await page.getByLabel(/^RUN:/).check();
      await page.getByRole('button', { name: 'Create key' }).click();

      const secret = page.locator('[data-secret]');
      await secret.waitFor();
      const key = (await secret.innerText()).trim();
      expect(key).toMatch(/^gntr_/);
      expect(await page.locator('.notice.secret').innerText()).toMatch(/will not be shown again/);
      const made = await self(key);
      expect(made.body).toMatchObject({ name, scopes: ['READ', 'RUN'], accountId: a.accountId });
      const row = page.locator(`tr[data-key-id="${made.body.id}"]`);
      await row.waitFor();
      expect(await row.locator('td.name').innerText()).toBe(name);
      expect(await row.locator('td.scopes').innerText()).toBe('READ, RUN');
      expect(await page.evaluate('window.__pwned')).toBeUndefined();

      // Copied with the button, then gone from the page for good.
      await page.context().grantPermissions(['clipboard-read', 'clipboard-write']);
      await page.getByRole('button', { name: 'Copy key' }).click();
      await page.getByText('Copied.').waitFor();
      expect(await page.evaluate('navigator.clipboard.readText()')).toBe(key);
      await page.getByRole('button', { name: 'I have copied it' }).click();
      await expect.poll(() => page.content().then((html) => html.includes(key))).toBe(false);
      expect(page.url()).not.toContain(key);

      // Revoke asks first; Cancel (Escape) keeps the key.
      await row.getByRole('button', { name: `Revoke ${name}` }).click();
      await page.keyboard.press('Escape');
      expect((await self(key)).status).toBe(200);
      await row.getByRole('button', { name: `Revoke ${name}` }).click();
      await row.getByRole('button', { name: 'Yes, revoke' }).click();
      await expect.poll(() => row.locator('td.status').innerText()).toMatch(/^revoked /);
      expect((await self(key)).status).toBe(401);
      // Still signed in: that was another key.
      expect(await page.evaluate('sessionStorage.getItem("gantry.console.key")')).toBe(a.key);
      expect(csp).toEqual([]);
      expect(await page.evaluate('window.__csp')).toEqual([]);
    });

    it('signs out when the console revokes its own key', async () => {
      const a = await account('keys-own');
      const { page } = await signedIn(a.key);
      const row = page.locator(`tr[data-key-id="${a.keyId}"]`);
      await row.getByRole('button', { name: 'Revoke keys-own' }).click();
      expect(await row.getByRole('group').getAttribute('aria-label')).toMatch(/will sign out/);
      await row.getByRole('button', { name: 'Yes, revoke' }).click();
      await page.getByLabel('API key').waitFor();
      expect(await page.locator('#sign-in-error').innerText()).toMatch(/revoked the key|refused the key/);
      expect(await page.evaluate('sessionStorage.getItem("gantry.console.key")')).toBeNull();
      expect((await self(a.key)).status).toBe(401);
    });
  });

  describe('Hosts page', () => {
    it('tells another key that hosts are the admin’s, and shows it no Hosts link', async () => {
      const a = await account('hosts-tenant', ['READ', 'WRITE', 'RUN']);
      const { page } = await signedIn(a.key, '/console/hosts');
      await page.getByText("Hosts are managed with the admin's key").waitFor();
      expect(await nav(page).getByRole('link', { name: 'Keys' }).count()).toBe(1);
      expect(await nav(page).getByRole('link', { name: 'Hosts' }).count()).toBe(0);
      expect(await page.locator('table.hosts').count()).toBe(0);
      expect((await call(p.url, 'GET', '/v2/hosts', { key: a.key })).status).toBe(403);
    });

    it('lists, registers (a field error first) and drains and removes hosts with the admin’s key', async () => {
      const { page, csp } = await signedIn(p.adminKey, '/console');
      await nav(page).getByRole('link', { name: 'Hosts' }).click();
      await page.waitForURL('**/console/hosts');
      await page.getByText('No hosts yet: register one').waitFor();

      // Port 1 refuses connections: the probe answers UNREACHABLE at once, never waiting on a timeout.
      const hostName = `console-${newId().slice(-6)} ${HOSTILE}`;
      await page.getByLabel('Address').fill('127.0.0.1');
      await page.getByLabel('SSH port').fill('1');
      await page.getByLabel('Data center').fill('dc-console');
      await page.getByLabel('Name (optional)').fill(hostName);
      await page.getByLabel('Labels (optional)').fill('rack=r1\nzone=a');
      await page.getByLabel('Private key').fill('not a key');
      await page.getByRole('button', { name: 'Register host' }).click();
      const keyError = page.locator('#host-key-error');
      await keyError.waitFor();
      expect(await keyError.innerText()).toMatch(/not a private key/);
      expect(await page.getByLabel('Private key').getAttribute('aria-invalid')).toBe('true');
      // Focus went to the field in error, for a keyboard user.
      await expect.poll(() => page.evaluate('document.activeElement?.id')).toBe('host-key');
      expect(await p.ctx.db.host.count()).toBe(0);

      await page.getByLabel('Private key').fill(ssh2.utils.generateKeyPairSync('ed25519').private);
      await page.getByRole('button', { name: 'Register host' }).click();
      await expect
        .poll(() => page.locator('.done').innerText(), { timeout: 60_000 })
        .toMatch(/^Registered .*: UNREACHABLE \(unreachable: cannot connect to 127\.0\.0\.1:1/);
      const host = await p.ctx.db.host.findFirstOrThrow({ where: { dataCenterId: 'dc-console' } });
      const row = page.locator(`tr[data-host-id="${host.id}"]`);
      await row.waitFor();
      expect(await row.getAttribute('data-status')).toBe('UNREACHABLE');
      expect(await row.locator('td.name').innerText()).toContain(hostName);
      expect(await row.locator('td.name').innerText()).toContain('root@127.0.0.1:1');
      expect(await row.locator('td.status').innerText()).toMatch(/ECONNREFUSED/);
      expect(await row.locator('td.labels').innerText()).toBe('rack=r1\nzone=a');
      expect(await row.locator('td.gpus').innerText()).toBe('none');
      expect(await page.evaluate('window.__pwned')).toBeUndefined();

      // Drain and remove asks first; with no workers the host goes at once.
      await row.getByRole('button', { name: `Drain and remove ${hostName}` }).click();
      await row.getByRole('button', { name: 'Yes, drain and remove' }).click();
      await page.getByText('No hosts yet: register one').waitFor({ timeout: 30_000 });
      expect(await p.ctx.db.host.count({ where: { id: host.id } })).toBe(0);
      expect(csp).toEqual([]);
      expect(await page.evaluate('window.__csp')).toEqual([]);
    }, 120_000);
  });
});
