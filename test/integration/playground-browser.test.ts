/**
 * The playground (/playground, /playground/{modelId}) in a real browser (Debian's Chromium, driven
 * by playwright-core) against a real platform with a published image model behind a real worker
 * (test/support/public-models.ts), every request to anything but this machine refused: a user gives
 * the key, picks the model, fills the form, runs it and sees the image and its cost; then the
 * Code panel's curl, Python (`runpod`) and JavaScript (`runpod-sdk`) code for that input is
 * copied and run as a user would, and each must make the same image. With
 * GANTRY_PLAYGROUND_SCREENSHOT=1 the model page after the run is saved as docs/images/playground.png
 * (docs/public-models.md's picture); otherwise into a temporary directory.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isLocal, launchChromium } from '../support/browser.ts';
import { call } from '../support/platform.ts';
import { startPublicModelFixture, type PublicModelFixture } from '../support/public-models.ts';

const REPO_ROOT = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
const ASSETS = [
  'playground.js',
  'dom.js',
  'key.js',
  'code-panel.js',
  'schema-form.js',
  'snippets.js',
  'playground.css',
];
const KEY_ITEM = 'gantry.playground.key';

/** What the page shows a cost as. */
const usd = (n: number): string =>
  new Intl.NumberFormat('en-US', {
    style: 'currency',
    currency: 'USD',
    minimumFractionDigits: 2,
    maximumFractionDigits: 6,
  }).format(n);

/** A program run to its end: its status and what it printed. */
function runProgram(
  cmd: string,
  args: string[],
  opts: { env: Record<string, string>; cwd?: string; stdin?: string; timeoutMs?: number },
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd: opts.cwd, env: opts.env, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 120_000);
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.once('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
    child.stdin.end(opts.stdin ?? '');
  });
}

/** The PNG at a URL: its bytes (checked to be a PNG) and the size its header gives. */
async function fetchPng(url: string): Promise<{ bytes: Buffer; width: number; height: number }> {
  const r = await fetch(url);
  expect(r.status, url).toBe(200);
  const bytes = Buffer.from(await r.arrayBuffer());
  expect(bytes.subarray(0, 8).equals(PNG_SIGNATURE), `${url} is not a PNG`).toBe(true);
  return { bytes, width: bytes.readUInt32BE(16), height: bytes.readUInt32BE(20) };
}

/** An <img> as the page's code sees it (this file compiles without the DOM's types). */
type Img = { complete: boolean; naturalWidth: number; naturalHeight: number; src: string };

const sha256 = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

describe('playground in a browser', () => {
  let f: PublicModelFixture;
  let browser: Browser;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the API's JSON, read as the page reads it
  let model: any;
  const scratch = mkdtempSync(path.join(tmpdir(), 'gantry-playground-'));

  beforeAll(async () => {
    f = await startPublicModelFixture();
    browser = await launchChromium();
    const got = await call(f.url, 'GET', `/v2/public-endpoints/${f.modelId}`, { key: f.callerKey });
    expect(got.status, JSON.stringify(got.body)).toBe(200);
    model = got.body;
  }, 600_000);

  afterAll(async () => {
    await browser?.close();
    await f?.stop();
    rmSync(scratch, { recursive: true, force: true });
  });

  /** A page whose requests may reach this machine only: what it tried elsewhere, what it complained about, every URL it asked for. */
  async function openPage(address: string): Promise<{
    context: BrowserContext;
    page: Page;
    offsite: string[];
    problems: string[];
    requests: { url: string; authorization: string | undefined }[];
  }> {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: new URL(f.url).origin });
    const offsite: string[] = [];
    const requests: { url: string; authorization: string | undefined }[] = [];
    await context.route('**/*', (route) => {
      const url = new URL(route.request().url());
      requests.push({ url: url.href, authorization: route.request().headers().authorization });
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
    return { context, page, offsite, problems, requests };
  }

  async function giveKey(page: Page, key: string): Promise<void> {
    const input = page.getByLabel('API key', { exact: true });
    await input.waitFor();
    expect(await input.getAttribute('type')).toBe('password');
    await input.fill(key);
    await page.getByRole('button', { name: 'Use key' }).click();
  }

  it("runs the model from the browser; the Code panel's curl, Python and JavaScript make the same image", async () => {
    const { context, page, offsite, problems, requests } = await openPage(`${f.url}/playground`);
    try {
      // 1. The key, then the list: the model with its id, kind and price, linking to its page.
      await giveKey(page, f.callerKey);
      const link = page.getByRole('link', { name: model.name, exact: true });
      await link.waitFor({ timeout: 15_000 });
      const card = page.locator('.model-card', { has: link });
      await expect.poll(() => card.innerText()).toContain(f.modelId);
      const cardText = await card.innerText();
      expect(cardText).toContain(model.description);
      expect(cardText).toContain(model.outputKind);
      expect(cardText).toContain(`${usd(model.price.amount)} per ${model.price.unit}`);
      await link.click();
      await page.waitForURL(`${f.url}/playground/${f.modelId}`);
      await page.getByRole('heading', { level: 1, name: model.name }).waitFor();

      // 2. The form: typed as a user types, a ' in the prompt (shell quoting), a size of its own.
      const prompt = "A lighthouse at dusk, Gantry's playground";
      const seed = 31337;
      const promptBox = page.getByRole('textbox', { name: 'Prompt', exact: true });
      expect(await promptBox.getAttribute('required')).not.toBeNull();
      await promptBox.click();
      await page.keyboard.type(prompt);
      for (const [name, value] of [
        ['Seed', seed],
        ['Width', 640],
        ['Height', 384],
      ] as const) {
        const box = page.getByRole('spinbutton', { name, exact: true });
        await box.fill(String(value));
      }
      // Help text reaches assistive technology: the seed's description describes its box.
      const seedHelp = await page
        .getByRole('spinbutton', { name: 'Seed', exact: true })
        .getAttribute('aria-describedby');
      expect(await page.locator(`[id="${seedHelp!.split(' ')[0]}"]`).innerText()).toContain(
        model.inputSchema.properties.seed.description,
      );
      expect(await page.getByRole('combobox', { name: 'Output format' }).inputValue()).not.toBe('');

      // Run, with the keyboard: the live region goes through the job's states to COMPLETED.
      const status = page.locator('#run-status');
      expect(await status.getAttribute('aria-live')).toBe('polite');
      const seen = new Set<string>();
      const watch = setInterval(() => {
        void status
          .locator('.badge')
          .textContent()
          .then((t) => t && seen.add(t))
          .catch(() => {});
      }, 100);
      await page.getByRole('button', { name: 'Run', exact: true }).focus();
      await page.keyboard.press('Enter');
      try {
        await status.locator('.badge', { hasText: /^COMPLETED$/ }).waitFor({ timeout: 90_000 });
      } finally {
        clearInterval(watch);
      }
      expect(
        [...seen].some((s) => s === 'IN_QUEUE' || s === 'IN_PROGRESS' || s === 'SUBMITTING'),
        [...seen].join(),
      ).toBe(true);

      // The image has loaded, from the job's own output URL, with the prompt as its text.
      const img = page.locator('#result img');
      await expect
        .poll(() => img.evaluate((e) => ((e as unknown as Img).complete ? (e as unknown as Img).naturalWidth : 0)), {
          timeout: 15_000,
        })
        .toBe(640);
      expect(await img.evaluate((e) => (e as unknown as Img).naturalHeight)).toBe(384);
      expect(await img.getAttribute('alt')).toBe(prompt);
      const jobId = (await page.locator('#result .job-id code').innerText()).trim();
      const job = await call(f.url, 'GET', `/v2/${f.modelId}/status/${jobId}`, { key: f.callerKey });
      expect(job.body.status).toBe('COMPLETED');
      expect(await img.evaluate((e) => (e as unknown as Img).src)).toBe(job.body.output.image_url);
      expect(job.body.output.seed).toBe(seed);
      // Cost and timings as the job reports them.
      if (model.price.unit === 'call') expect(job.body.output.cost).toBe(model.price.amount);
      expect(await page.locator('#result-cost').innerText()).toBe(usd(job.body.output.cost));
      const stats = await page.locator('#result .stats').innerText();
      expect(stats).toContain(`${job.body.delayTime} ms`);
      expect(stats).toContain(`${job.body.executionTime} ms`);
      const browserImage = await fetchPng(job.body.output.image_url);

      // 3. The Code panel: each tab's code, through the Copy button and the clipboard, run for real.
      const snippets: Record<string, string> = {};
      for (const tab of ['curl', 'Python', 'JavaScript']) {
        await page.getByRole('tab', { name: tab, exact: true }).click();
        const panel = page.getByRole('tabpanel', { name: tab, exact: true });
        await panel.waitFor();
        const shown = await panel.locator('code').textContent();
        expect(shown, tab).toBeTruthy();
        await page.getByRole('button', { name: 'Copy', exact: true }).click();
        await page.locator('.copy-status', { hasText: tab }).waitFor();
        const copied = await page.evaluate<string>('navigator.clipboard.readText()');
        expect(copied, `the ${tab} code on the clipboard`).toBe(shown);
        expect(shown).not.toContain(f.callerKey);
        snippets[tab] = shown!;
      }
      expect(snippets.curl).toContain(`${model.runUrl}/runsync`);
      expect(snippets.Python).toContain(`runpod.Endpoint("${f.modelId}")`);
      expect(snippets.JavaScript).toContain(`runpod.endpoint("${f.modelId}")`);
      const env = {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        HOME: process.env.HOME ?? '/root',
        SERVICE_API_KEY: f.callerKey,
      };

      const curl = await runProgram('bash', ['-c', snippets.curl!], { env });
      expect(curl.code, curl.stderr).toBe(0);
      const curlJob = JSON.parse(curl.stdout);
      expect(curlJob.status, curl.stdout).toBe('COMPLETED');
      expect(curlJob.output.seed).toBe(seed);
      const curlImage = await fetchPng(curlJob.output.image_url);

      const pyFile = path.join(scratch, 'snippet.py');
      writeFileSync(pyFile, snippets.Python!);
      const py = await runProgram(f.python, [pyFile], { env });
      expect(py.code, py.stderr).toBe(0);
      // run_sync answers the output dict; print() shows it as Python writes a dict.
      const pyUrl = /'image_url': '([^']+)'/.exec(py.stdout)?.[1];
      expect(pyUrl, py.stdout).toBeTruthy();
      expect(py.stdout).toMatch(new RegExp(`'seed': ${seed}\\b`));
      const pyImage = await fetchPng(pyUrl!);

      const js = await runProgram(process.execPath, ['--input-type=module'], {
        env,
        cwd: f.nodeModulesDir,
        stdin: snippets.JavaScript,
      });
      expect(js.code, js.stderr).toBe(0);
      // runSync may print progress lines first; the snippet's own line is the last.
      const jsJob = JSON.parse(js.stdout.trim().split('\n').pop()!);
      expect(jsJob.status, js.stdout).toBe('COMPLETED');
      expect(jsJob.output.seed).toBe(seed);
      const jsImage = await fetchPng(jsJob.output.image_url);

      // Exactly the form's input: the same prompt, seed and size give the same picture every way.
      for (const [how, image] of [
        ['curl', curlImage],
        ['Python', pyImage],
        ['JavaScript', jsImage],
      ] as const) {
        expect([image.width, image.height], how).toEqual([640, 384]);
        expect(sha256(image.bytes), `${how}'s image is the browser's`).toBe(sha256(browserImage.bytes));
      }

      // 4. Keyboard: arrow keys, Home and End move between the tabs, and the panel follows.
      await page.getByRole('tab', { name: 'curl', exact: true }).click();
      const selected = (): Promise<string> => page.locator('[role=tab][aria-selected=true]').innerText();
      const focused = (): Promise<string | undefined> =>
        page.evaluate<string | undefined>('document.activeElement?.textContent ?? undefined');
      await page.keyboard.press('ArrowRight');
      expect([await selected(), await focused()]).toEqual(['Python', 'Python']);
      expect(await page.getByRole('tabpanel', { name: 'Python', exact: true }).isVisible()).toBe(true);
      expect(await page.getByRole('tabpanel', { name: 'curl', exact: true }).isVisible()).toBe(false);
      await page.keyboard.press('ArrowRight');
      await page.keyboard.press('ArrowRight');
      expect(await selected()).toBe('curl');
      await page.keyboard.press('ArrowLeft');
      expect(await selected()).toBe('JavaScript');
      await page.keyboard.press('Home');
      expect([await selected(), await focused()]).toEqual(['curl', 'curl']);
      await page.keyboard.press('End');
      expect(await selected()).toBe('JavaScript');
      // One tab stop for the tab list: Tab goes on to the panel.
      await page.keyboard.press('Tab');
      expect(await page.evaluate<string | null>("document.activeElement?.getAttribute('role')")).toBe('tabpanel');
      await page.getByRole('tab', { name: 'curl', exact: true }).click();

      // The key: in this tab's session storage, nowhere else, and only in Authorization headers.
      const storage = await page.evaluate<{ session: string | null; local: string }>(
        `({ session: sessionStorage.getItem(${JSON.stringify(KEY_ITEM)}), local: JSON.stringify({ ...localStorage }) })`,
      );
      expect(storage.session).toBe(f.callerKey);
      expect(storage.local).not.toContain(f.callerKey);
      expect(requests.filter((r) => r.url.includes(f.callerKey))).toEqual([]);
      const apiCalls = requests.filter(
        (r) => new URL(r.url).pathname.startsWith('/v2/') && !new URL(r.url).pathname.startsWith('/v2/outputs/'),
      );
      expect(apiCalls.length).toBeGreaterThan(2);
      for (const r of apiCalls) expect(r.authorization, r.url).toBe(`Bearer ${f.callerKey}`);
      for (const r of requests.filter((r) => !apiCalls.includes(r))) expect(r.authorization, r.url).toBeUndefined();

      // 5. The picture: docs/public-models.md's, when asked for.
      await page.mouse.move(0, 0);
      await page.evaluate('document.activeElement?.blur()');
      const shotDir =
        process.env.GANTRY_PLAYGROUND_SCREENSHOT === '1' ? path.join(REPO_ROOT, 'docs', 'images') : scratch;
      mkdirSync(shotDir, { recursive: true });
      await page.screenshot({ path: path.join(shotDir, 'playground.png'), fullPage: true });

      expect(offsite).toEqual([]);
      expect(problems).toEqual([]);
    } finally {
      await context.close();
    }
  }, 300_000);

  it("asks again for a refused key, shows the API's problem for an input it refuses, and forgets the key", async () => {
    const { context, page, offsite, problems } = await openPage(`${f.url}/playground/${f.modelId}`);
    try {
      await giveKey(page, 'gntr_not_a_real_key_at_all_000000');
      await page.locator('#key-error', { hasText: 'refused' }).waitFor();
      expect(await page.evaluate<string | null>(`sessionStorage.getItem(${JSON.stringify(KEY_ITEM)})`)).toBeNull();
      await giveKey(page, f.callerKey);
      await page.getByRole('heading', { level: 1, name: model.name }).waitFor();

      // The browser's own checks first: an empty prompt is not sent.
      await page.getByRole('button', { name: 'Run', exact: true }).click();
      expect(await page.evaluate<string | null>("document.activeElement?.getAttribute('name')")).toBe('prompt');
      // ... and says why, next to the field and tied to it.
      const promptBox = page.getByRole('textbox', { name: 'Prompt', exact: true });
      expect(await promptBox.getAttribute('aria-invalid')).toBe('true');
      const errorId = (await promptBox.getAttribute('aria-describedby'))!
        .split(' ')
        .find((id) => id.endsWith('-error'));
      expect(await page.locator(`[id="${errorId}"]`).innerText()).not.toBe('');

      // What the server refuses (here a width past the schema's maximum, the form's limit lifted):
      // the problem's detail and the field it names.
      await promptBox.fill('too wide');
      const width = page.getByRole('spinbutton', { name: 'Width', exact: true });
      await width.evaluate((e) => e.removeAttribute('max'));
      await width.fill('4096');
      expect(await page.locator('#code-curl').textContent()).toContain('"width": 4096');
      await page.getByRole('button', { name: 'Run', exact: true }).click();
      const alert = page.locator('#result [role=alert]');
      await alert.waitFor({ timeout: 15_000 });
      expect(await alert.innerText()).toMatch(/\$\.input\.width/);

      await page.getByRole('button', { name: 'Forget key' }).click();
      await page.getByLabel('API key', { exact: true }).waitFor();
      expect(await page.evaluate<number>('sessionStorage.length')).toBe(0);
      expect(await page.locator('#view').innerText()).toBe('');

      expect(offsite).toEqual([]);
      // The refused key's 401 and the refused input's 4xx, as the browser logs them; nothing else.
      expect(problems.filter((m) => !/status of (401|400|422)/.test(m))).toEqual([]);
    } finally {
      await context.close();
    }
  }, 120_000);

  it('serves its pages with a strict CSP, and its assets without a key, gzipped and revalidated', async () => {
    const origin = new URL(f.platform.ctx.publicUrl).origin;
    for (const route of ['/playground', `/playground/${f.modelId}`, '/playground/no-such-model-1']) {
      const r = await fetch(`${f.url}${route}`);
      expect(r.status, route).toBe(200);
      expect(r.headers.get('content-type')).toMatch(/^text\/html/);
      expect(r.headers.get('content-security-policy')).toBe(
        `default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' ${origin} data: blob:; media-src 'self' ${origin} data: blob:; ` +
          "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
      );
      expect(r.headers.get('x-content-type-options')).toBe('nosniff');
      expect(r.headers.get('referrer-policy')).toBe('no-referrer');
      const html = await r.text();
      expect(html).not.toMatch(/https?:\/\//);
      expect(html).not.toMatch(/<script>|<style>| style=| on[a-z]+=/);
      expect(html).toContain('lang="en"');
    }
    // What can't be a model id is no page.
    for (const route of [
      '/playground/Not_A_Model',
      '/playground/nodash',
      '/playground/public-endpoints',
      `/playground/${'a-'.repeat(40)}b`,
      '/playground/assets/nope.js',
    ]) {
      const r = await fetch(`${f.url}${route}`);
      expect(r.status, route).toBe(404);
      expect(r.headers.get('content-type'), route).toMatch(/^application\/problem\+json/);
    }
    for (const name of ASSETS) {
      const r = await fetch(`${f.url}/playground/assets/${name}`);
      expect(r.status, name).toBe(200);
      expect(r.headers.get('content-type')).toMatch(name.endsWith('.css') ? /^text\/css/ : /^text\/javascript/);
      expect(r.headers.get('x-content-type-options')).toBe('nosniff');
      expect(r.headers.get('ratelimit')).toBeNull();
      // The file itself (served from api/playground, `x.js` from `x.browser.js`).
      const file = path.join(
        REPO_ROOT,
        'api/playground',
        name.endsWith('.css') ? name : name.replace(/\.js$/, '.browser.js'),
      );
      expect((await r.arrayBuffer()).byteLength, name).toBe(statSync(file).size);
      const etag = r.headers.get('etag')!;
      expect((await fetch(`${f.url}/playground/assets/${name}`, { headers: { 'if-none-match': etag } })).status).toBe(
        304,
      );
    }
    const raw = await import('node:http').then(
      (http) =>
        new Promise<string | undefined>((resolve, reject) => {
          http
            .get(`${f.url}/playground/assets/playground.js`, { headers: { 'accept-encoding': 'gzip' } }, (res) => {
              res.resume();
              res.on('end', () => resolve(res.headers['content-encoding']));
            })
            .on('error', reject);
        }),
    );
    expect(raw).toBe('gzip');
  });
});
