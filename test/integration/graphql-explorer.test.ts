/**
 * The GraphQL explorer at GET /graphql, in a real browser (Debian's Chromium, driven by
 * playwright-core) with every request to anything but this machine refused: it loads from this
 * server alone and runs a query with a key, given in its headers pane or as ?api_key= on the page's
 * address. Its static assets need no key, count against no quota, and revalidate cheaply.
 * `npm test` installs Chromium (Debian package) when it is missing; CHROMIUM_PATH names another.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isLocal, launchChromium } from '../support/browser.ts';
import { call, startTestPlatform, type TestPlatform } from '../support/platform.ts';

const ASSETS = [
  'react.production.min.js',
  'react-dom.production.min.js',
  'graphiql.min.js',
  'graphiql.min.css',
  'explorer.js',
];

describe('GraphQL explorer', () => {
  let p: TestPlatform;
  let browser: Browser;
  let accountId: string;
  const shots = mkdtempSync(path.join(tmpdir(), 'gantry-explorer-'));

  beforeAll(async () => {
    p = await startTestPlatform();
    browser = await launchChromium();
    const me = await call(p.url, 'POST', '/graphql', { key: p.adminKey, body: { query: '{ myself { id } }' } });
    accountId = me.body.data.myself.id;
  });

  afterAll(async () => {
    await browser?.close();
    await p?.stop();
    rmSync(shots, { recursive: true, force: true });
  });

  /** A page whose requests may reach this machine only; what it tried elsewhere and what it complained about. */
  async function openExplorer(
    address: string,
  ): Promise<{ context: BrowserContext; page: Page; offsite: string[]; problems: string[] }> {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const offsite: string[] = [];
    await context.route('**/*', (route) => {
      const url = new URL(route.request().url());
      if (isLocal(url)) return route.continue();
      offsite.push(url.href);
      return route.abort();
    });
    const page = await context.newPage();
    const problems: string[] = [];
    page.on('console', (m) => {
      if (m.type() === 'error' || m.type() === 'warning') problems.push(`${m.type()}: ${m.text()}`);
    });
    page.on('pageerror', (e) => problems.push(`pageerror: ${String(e)}`));
    const response = await page.goto(address);
    expect(response?.status()).toBe(200);
    await page.locator('.graphiql-container').waitFor({ timeout: 30_000 });
    return { context, page, offsite, problems };
  }

  /** Types into one of GraphiQL's editors as a user pastes: select all, replace. */
  async function replaceText(page: Page, editor: string, text: string): Promise<void> {
    await page.locator(`${editor} .CodeMirror`).first().click();
    await page.keyboard.press('ControlOrMeta+A');
    await page.keyboard.insertText(text);
  }

  async function resultText(page: Page): Promise<string> {
    // The result pane's text as CodeMirror holds it (its DOM shows only the lines in view).
    return page.evaluate<string>("document.querySelector('.result-window .CodeMirror')?.CodeMirror?.getValue() ?? ''");
  }

  async function waitForResult(page: Page, includes: string): Promise<string> {
    const deadline = Date.now() + 20_000;
    let text = '';
    while (Date.now() < deadline) {
      text = await resultText(page);
      if (text.includes(includes)) return text;
      await page.waitForTimeout(100);
    }
    throw new Error(`no result with ${includes}; result pane: ${text}`);
  }

  it('runs { myself { id } } with the key in the headers pane, loading nothing from elsewhere', async () => {
    const { context, page, offsite, problems } = await openExplorer(`${p.url}/graphql`);
    try {
      await replaceText(
        page,
        '.graphiql-editor-tool .graphiql-editor:not(.hidden)',
        JSON.stringify({ Authorization: `Bearer ${p.adminKey}` }, null, 2),
      );
      await replaceText(page, '.graphiql-query-editor', '{ myself { id } }');
      await page.getByRole('button', { name: /Execute query/ }).click();
      const text = await waitForResult(page, '"myself"');
      expect(JSON.parse(text)).toEqual({ data: { myself: { id: accountId } } });
      await page.screenshot({ path: path.join(shots, 'explorer-headers.png') });
      expect(offsite).toEqual([]);
      // Before the key was given, the schema's introspection was refused (401); nothing else went wrong.
      expect(problems.filter((m) => !/status of 401/.test(m))).toEqual([]);
    } finally {
      await context.close();
    }
  });

  it('takes the key as ?api_key= on its address: schema loaded, query run, no errors', async () => {
    const { context, page, offsite, problems } = await openExplorer(
      `${p.url}/graphql?api_key=${encodeURIComponent(p.adminKey)}`,
    );
    try {
      await replaceText(page, '.graphiql-query-editor', '{ myself { id } }');
      await page.keyboard.press('Control+Enter');
      const text = await waitForResult(page, '"myself"');
      expect(JSON.parse(text)).toEqual({ data: { myself: { id: accountId } } });
      // The schema arrived: the documentation explorer lists the root types.
      await page.getByRole('button', { name: /Show Documentation Explorer/ }).click();
      await page.getByText('Query', { exact: true }).first().waitFor({ timeout: 10_000 });
      await page.screenshot({ path: path.join(shots, 'explorer-api-key.png') });
      expect(offsite).toEqual([]);
      expect(problems).toEqual([]);
    } finally {
      await context.close();
    }
  });

  it('serves its page with a strict CSP and its assets without a key, uncounted, gzipped and revalidated', async () => {
    const page = await fetch(`${p.url}/graphql`, { headers: { accept: 'text/html' } });
    expect(page.status).toBe(200);
    expect(page.headers.get('content-security-policy')).toMatch(/default-src 'none'; script-src 'self';/);
    expect(page.headers.get('referrer-policy')).toBe('no-referrer');
    expect(page.headers.get('x-frame-options')).toBe('DENY');
    const html = await page.text();
    expect(html).not.toMatch(/https?:\/\//);
    for (const name of ASSETS) expect(html).toContain(`graphql/explorer/${name}`);

    // A non-browser GET without a query is still Apollo's answer, not the page.
    expect((await fetch(`${p.url}/graphql`, { headers: { accept: 'application/json' } })).status).toBe(400);

    for (let round = 0; round < 6; round++) {
      for (const name of ASSETS) {
        const r = await fetch(`${p.url}/graphql/explorer/${name}`);
        expect(r.status, name).toBe(200);
        expect(r.headers.get('content-type')).toMatch(name.endsWith('.css') ? /^text\/css/ : /^text\/javascript/);
        expect(r.headers.get('x-content-type-options')).toBe('nosniff');
        expect(r.headers.get('ratelimit')).toBeNull();
        expect((await r.arrayBuffer()).byteLength).toBeGreaterThan(500);
        const etag = r.headers.get('etag')!;
        const again = await fetch(`${p.url}/graphql/explorer/${name}`, { headers: { 'if-none-match': etag } });
        expect(again.status).toBe(304);
      }
    }
    // Gzip on request (fetch asks for it and inflates): the big bundle travels at a fraction of its size.
    const raw = await import('node:http').then(
      (http) =>
        new Promise<{ encoding: string | undefined; bytes: number }>((resolve, reject) => {
          http
            .get(`${p.url}/graphql/explorer/graphiql.min.js`, { headers: { 'accept-encoding': 'gzip' } }, (res) => {
              let bytes = 0;
              res.on('data', (d: Buffer) => (bytes += d.length));
              res.on('end', () => resolve({ encoding: res.headers['content-encoding'], bytes }));
            })
            .on('error', reject);
        }),
    );
    expect(raw.encoding).toBe('gzip');
    expect(raw.bytes).toBeLessThan(500_000);
    // A fixed list of files, nothing else from the packages' directories.
    expect((await fetch(`${p.url}/graphql/explorer/%2e%2e%2fpackage.json`)).status).toBe(404);
    expect((await fetch(`${p.url}/graphql/explorer/index.js`)).status).toBe(404);
    // Asset answers count nothing: between two counted requests, only the second one was counted.
    const before = await call(p.url, 'GET', '/v2/serverless', { key: p.adminKey });
    const remaining = (h: Headers): number => Number(/"minute";r=(\d+)/.exec(h.get('ratelimit') ?? '')?.[1]);
    for (const name of ASSETS) await fetch(`${p.url}/graphql/explorer/${name}`);
    const after = await call(p.url, 'GET', '/v2/serverless', { key: p.adminKey });
    expect(remaining(after.headers)).toBe(remaining(before.headers) - 1);
  });
});
