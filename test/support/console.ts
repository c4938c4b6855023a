/**
 * The console's browser harness (test/integration/console-*.test.ts): Debian's Chromium driven by
 * playwright-core against an API listening on a socket of its own, every request to anything but
 * this machine refused, CSP violations collected, and a screenshot of the page saved when a test
 * fails (its path printed).
 */
import { mkdtempSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { onTestFailed } from 'vitest';
import { ensureConsoleBuilt } from '../../api/console/build.ts';
import { issueApiKey } from '../../domain/accounts/index.ts';
import type { Scope } from '../../domain/accounts/index.ts';
import { newId } from '../../domain/shared/index.ts';
import { loadConfig } from '../../infra/config.ts';
import type { DomainContext } from '../../domain/context.ts';
import { startTestApp, type TestApp } from './app.ts';
import { isLocal, launchChromium } from './browser.ts';

/** Markup and a script URL as tenant text: shown as text, it runs nothing and sets no `__pwned`. */
export const HOSTILE = '<img src=x onerror=window.__pwned=1><script>window.__pwned=1</script>';
export const HOSTILE_URL = 'javascript:window.__pwned=1';

export interface ConsoleBrowser {
  browser: Browser;
  /** A fresh tab (its own session storage) at this console address, e.g. `/console`. */
  open(address?: string): Promise<{ page: Page; csp: string[] }>;
  signIn(page: Page, key: string): Promise<void>;
  /** Closes the tabs opened since the last call (afterEach). */
  closeTabs(): Promise<void>;
  close(): Promise<void>;
}

/** Chromium against the console of the API at `url` (a listening platform or test app). */
export async function openConsoleBrowser(url: string): Promise<ConsoleBrowser> {
  const browser = await launchChromium();
  const shots = mkdtempSync(path.join(tmpdir(), 'gantry-console-'));
  const pages: Page[] = [];
  return {
    browser,
    async open(address = '/console') {
      const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
      await context.route('**/*', (route) =>
        isLocal(new URL(route.request().url())) ? route.continue() : route.abort('blockedbyclient'),
      );
      // Every CSP violation, whatever the console prints (an init script runs outside the page's CSP).
      await context.addInitScript(
        'window.__csp = []; document.addEventListener("securitypolicyviolation", (e) => window.__csp.push(`${e.violatedDirective} ${e.blockedURI}`));',
      );
      const page = await context.newPage();
      pages.push(page);
      onTestFailed(async () => {
        const file = path.join(shots, `${newId()}.png`);
        await page.screenshot({ path: file, fullPage: true }).catch(() => {});
        console.error(`console test failed: screenshot ${file}`);
      });
      const csp: string[] = [];
      page.on('console', (m) => {
        if (/Content Security Policy/i.test(m.text())) csp.push(m.text());
      });
      await page.goto(url + address);
      return { page, csp };
    },
    async signIn(page, key) {
      await page.getByLabel('API key').fill(key);
      await page.keyboard.press('Enter');
    },
    async closeTabs() {
      for (const p of pages.splice(0)) await p.context().close();
    },
    async close() {
      await browser.close();
    },
  };
}

/** A new account and a key of it with these scopes (all three by default). */
export async function consoleAccount(
  db: DomainContext['db'],
  name: string,
  scopes: Scope[] = ['READ', 'WRITE', 'RUN'],
): Promise<{ accountId: string; keyId: string; key: string }> {
  const accountId = (await db.account.create({ data: { id: newId(), email: `${newId()}@example.test`, name } })).id;
  const k = await issueApiKey(db, accountId, name, scopes);
  return { accountId, keyId: k.id, key: k.key };
}

export interface ConsoleHarness extends ConsoleBrowser {
  /** The API alone (no Temporal worker: workflows that routes start stay queued). */
  t: TestApp;
  /** http://127.0.0.1:<port> */
  url: string;
  /** The console build it serves. */
  consoleDir: string;
  account(name: string, scopes?: Scope[]): ReturnType<typeof consoleAccount>;
  stop(): Promise<void>;
}

/** The API alone (test/support/app.ts startTestApp) on a socket, its console built, and Chromium. */
export async function startConsoleHarness(options: Parameters<typeof startTestApp>[0] = {}): Promise<ConsoleHarness> {
  const dir = await ensureConsoleBuilt(loadConfig().cacheDir);
  // Revocation seen within 100 ms (the record caches' bound) unless the test says otherwise.
  const t = await startTestApp({ consoleDir: dir, revocationBoundMs: 100, ...options });
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  const url = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
  const b = await openConsoleBrowser(url);
  return {
    ...b,
    t,
    url,
    consoleDir: dir,
    account: (name, scopes) => consoleAccount(t.ctx.db, name, scopes),
    async stop() {
      await b.close();
      await t.stop();
    },
  };
}
