/**
 * The console's account pages in a real browser (test/support/console.ts): the endpoints list's
 * status and last-hour figures, registries, templates, network volumes, public models and usage,
 * each listed, created through its form (field errors beside their fields first) and deleted after
 * a confirmation; tenant text (markup, a `javascript:` URL) shown as text with no CSP violation; and
 * another account's console showing nothing of these on any page, its endpoint's address included.
 */
import type { Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { rollupEndpointMetrics } from '../../domain/metrics/index.ts';
import { newId } from '../../domain/shared/index.ts';
import { HOSTILE, HOSTILE_URL, startConsoleHarness, type ConsoleHarness } from '../support/console.ts';
import { call } from '../support/platform.ts';

const MIN = 60_000;
const HOUR = 60 * MIN;
const H100 = 'NVIDIA H100 80GB HBM3';
const MODEL = 'console-echo-1';

describe('console account pages', () => {
  let h: ConsoleHarness;
  let url: string;
  const sfx = newId().slice(-8).toLowerCase();
  const dataCenter = `US-CONSOLE-${sfx.replace(/[^a-z0-9]/g, '').toUpperCase()}`;
  let a: { accountId: string; key: string };
  let b: { accountId: string; key: string };
  /** Account A's resources made through the API; B's console must show none of them. */
  const mine = {
    endpointName: `alpha-endpoint-${sfx}`,
    registryName: `alpha-registry-${sfx}`,
    templateName: `alpha-template-${sfx}`,
    envValue: `alpha-env-${sfx}`,
    volumeName: `alpha-volume-${sfx}`,
    endpointId: '',
    registryId: '',
    templateId: '',
    volumeId: '',
    queuedJobId: '',
  };

  const api = async (key: string, method: string, route: string, body?: unknown, status = 201) => {
    const r = await call(url, method, route, { key, body });
    expect(r.status, `${method} ${route}: ${JSON.stringify(r.body)}`).toBe(status);
    return r.body;
  };

  beforeAll(async () => {
    h = await startConsoleHarness();
    url = h.url;
    const db = h.t.ctx.db;
    a = await h.account('console-account-a');
    b = await h.account('console-account-b');
    // One host in a data center of its own: a volume there lives on that host (no shared storage needed).
    await db.host.create({
      data: {
        id: newId(),
        name: `console-host-${sfx}`,
        address: '127.0.0.1',
        user: 'root',
        dataCenterId: dataCenter,
        status: 'READY',
      },
    });
    mine.endpointId = (
      await api(a.key, 'POST', '/v2/serverless', { name: mine.endpointName, image: 'localhost/app:1' })
    ).id;
    mine.registryId = (
      await api(a.key, 'POST', '/v2/registries', { name: mine.registryName, username: 'u', password: 'p' })
    ).id;
    mine.templateId = (
      await api(a.key, 'POST', '/v2/templates', {
        name: mine.templateName,
        image: 'localhost/app:1',
        env: { ALPHA: mine.envValue },
      })
    ).id;
    mine.volumeId = (
      await api(a.key, 'POST', '/v2/network-volumes', { name: mine.volumeName, size: 10, dataCenter })
    ).id;

    // Four jobs that ended a second after starting, in the minute before last, rolled up as the
    // schedule's activity does; and one still queued.
    const m = Math.floor(Date.now() / MIN) * MIN - 2 * MIN;
    const job = (status: 'COMPLETED' | 'FAILED' | 'IN_QUEUE', i: number) =>
      db.job.create({
        data: {
          id: newId(),
          endpointId: mine.endpointId,
          accountId: a.accountId,
          status,
          input: {},
          createdAt: new Date(m + i * 1000),
          ...(status === 'IN_QUEUE'
            ? {}
            : { startedAt: new Date(m + i * 1000 + 200), completedAt: new Date(m + i * 1000 + 1200) }),
          expiresAt: new Date(Date.now() + HOUR),
        },
      });
    for (let i = 0; i < 3; i++) await job('COMPLETED', i);
    await job('FAILED', 5);
    mine.queuedJobId = (await job('IN_QUEUE', 6)).id;
    await rollupEndpointMetrics(h.t.ctx, { now: new Date(m + 2 * MIN) });
    // An hour of one H100 worker of A's endpoint, ended an hour ago: billed in every period offered.
    await db.usageRecord.create({
      data: {
        id: newId(),
        accountId: a.accountId,
        endpointId: mine.endpointId,
        workerId: newId(),
        gpuTypeId: H100,
        gpuCount: 1,
        startedAt: new Date(Date.now() - 2 * HOUR),
        endedAt: new Date(Date.now() - HOUR),
        seconds: 3600,
      },
    });
    // A public model of the operator's, its name and description tenant-like text.
    const backend = await api(h.t.adminKey, 'POST', '/v2/serverless', {
      name: 'model-backend',
      image: 'localhost/m:1',
    });
    await api(h.t.adminKey, 'POST', '/v2/public-endpoints', {
      id: MODEL,
      endpointId: backend.id,
      name: HOSTILE,
      description: HOSTILE_URL,
      outputKind: 'json',
      inputSchema: {
        type: 'object',
        required: ['prompt'],
        properties: { prompt: { type: 'string' }, seed: { type: 'integer', default: 7 } },
      },
      price: { amount: 0.002, unit: 'call' },
    });
  }, 240_000);

  afterEach(() => h.closeTabs());
  afterAll(() => h?.stop());

  /** A tab signed in with this key at this console address. */
  const signedIn = async (key: string, address: string) => {
    const tab = await h.open(address);
    await h.signIn(tab.page, key);
    return tab;
  };
  /** Nothing ran from tenant text, no link has a script URL, and the CSP saw no violation. */
  const clean = async ({ page, csp }: { page: Page; csp: string[] }) => {
    expect(await page.evaluate('window.__pwned')).toBeUndefined();
    expect(await page.locator('a[href^="javascript:" i]').count()).toBe(0);
    expect(csp).toEqual([]);
    expect(await page.evaluate('window.__csp')).toEqual([]);
  };
  const nav = (page: Page, name: string) =>
    page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name, exact: true }).click();
  // Strings, not functions: the test's types have no DOM.
  const focusedId = (page: Page) => page.evaluate<string>('document.activeElement?.id ?? ""');
  const focusedText = (page: Page) => page.evaluate<string>('document.activeElement?.innerText ?? ""');

  it('lists endpoints with their status, jobs a minute and p50 of the last hour, refreshed', async () => {
    const tab = await signedIn(a.key, '/console');
    const { page } = tab;
    const row = page.locator(`tr[data-endpoint-id="${mine.endpointId}"]`);
    await row.waitFor();
    expect(await row.locator('td.name').innerText()).toBe(mine.endpointName);
    // No worker and a job queued: waiting.
    expect(await row.locator('td.status').getAttribute('data-status')).toBe('waiting');
    // Four jobs ended in the last hour: 4 / 60 a minute; each ran 1 s (the histogram's p50, ±12 %).
    await expect.poll(() => row.locator('td.jobs-per-minute').innerText(), { timeout: 20_000 }).toBe('0.07');
    expect(await row.locator('td.p50').innerText()).toMatch(/^(9\d\d ms|1\.\d s)$/);
    expect(await page.getByRole('link', { name: 'Create endpoint' }).getAttribute('href')).toBe(
      '/console/endpoints/new',
    );
    // Read again every few seconds: a second queued job shows without a reload.
    await h.t.ctx.db.job.create({
      data: {
        id: newId(),
        endpointId: mine.endpointId,
        accountId: a.accountId,
        status: 'IN_QUEUE',
        input: {},
        expiresAt: new Date(Date.now() + HOUR),
      },
    });
    await expect.poll(() => row.locator('td').nth(5).innerText(), { timeout: 20_000 }).toBe('2');
    await clean(tab);

    const empty = await signedIn(b.key, '/console');
    await empty.page.getByText('No endpoints yet').waitFor();
    const notice = empty.page.locator('.notice.empty');
    expect(await notice.innerText()).toContain('POST /v2/serverless');
    expect(await notice.getByRole('link', { name: 'create one' }).getAttribute('href')).toBe('/console/endpoints/new');
  }, 120_000);

  it('adds a registry credential after a field error, never shows its password, deletes it after asking', async () => {
    const tab = await signedIn(a.key, '/console/registries');
    const { page } = tab;
    await page.locator(`tr[data-registry-id="${mine.registryId}"]`).waitFor();
    const secret = `pw-${newId()}`;
    await page.getByLabel('Name', { exact: true }).fill(HOSTILE);
    await page.getByLabel('User name').fill('robot');
    await page.getByRole('button', { name: 'Add credential' }).click();
    // The API's `$.password: ...` beside the password, which takes the focus.
    const error = page.locator('#registry-password-error');
    await error.waitFor();
    expect(await error.innerText()).toMatch(/fewer than 1 character/);
    const password = page.getByLabel('Password or token');
    expect(await password.getAttribute('aria-invalid')).toBe('true');
    expect(await password.getAttribute('aria-describedby')).toContain('registry-password-error');
    await expect.poll(() => focusedId(page)).toBe('registry-password');
    expect(await page.getByLabel('Name', { exact: true }).getAttribute('aria-invalid')).toBeNull();

    await password.fill(secret);
    await page.keyboard.press('Enter');
    await page.locator('.done').getByText('Added').waitFor();
    expect(await page.locator('#registry-password-error').count()).toBe(0);
    const made = (await api(a.key, 'GET', '/v2/registries', undefined, 200)).registries.find(
      (r: { name: string }) => r.name === HOSTILE,
    );
    expect(made?.registry).toBe('docker.io');
    const row = page.locator(`tr[data-registry-id="${made.id}"]`);
    await row.waitFor();
    expect(await row.locator('td.name').innerText()).toBe(HOSTILE);
    expect(await password.inputValue()).toBe('');
    expect(await page.content()).not.toContain(secret);
    await clean(tab);

    // Delete asks first; the question takes the focus and Enter answers it.
    await row.getByRole('button', { name: `Delete ${HOSTILE}` }).click();
    await expect.poll(() => focusedText(page)).toBe('Yes, delete');
    await page.keyboard.press('Enter');
    await row.waitFor({ state: 'detached' });
    const left = (await api(a.key, 'GET', '/v2/registries', undefined, 200)).registries;
    expect(left.map((r: { id: string }) => r.id)).toEqual([mine.registryId]);
    await clean(tab);
  }, 120_000);

  it('creates a template with its environment as text, after errors beside their fields; deletes it', async () => {
    const tab = await signedIn(a.key, '/console/templates');
    const { page } = tab;
    const kept = page.locator(`tr[data-template-id="${mine.templateId}"]`);
    await kept.waitFor();
    expect(await kept.locator('td.env').innerText()).toBe(`ALPHA=${mine.envValue}`);
    await page.getByLabel('Name', { exact: true }).fill(HOSTILE);
    await page.getByLabel('Image').fill('localhost/app:2');
    await page.getByLabel('Ports (optional)').fill('8000');
    await page.getByLabel('Environment (optional)').fill('not a line');
    await page.getByRole('button', { name: 'Create template' }).click();
    // The page's own check of the environment.
    await page.locator('#template-env-error').waitFor();
    expect(await page.locator('#template-env-error').innerText()).toBe('line 1: write KEY=value');
    await expect.poll(() => focusedId(page)).toBe('template-env');
    await page.getByLabel('Environment (optional)').fill(`GREETING=${HOSTILE}\nLINK=${HOSTILE_URL}`);
    await page.getByRole('button', { name: 'Create template' }).click();
    // The API's `$.ports[0]: ...` beside the ports.
    await page.locator('#template-ports-error').waitFor();
    expect(await page.locator('#template-ports-error').innerText()).toMatch(/must match pattern/);
    expect(await page.locator('#template-env-error').count()).toBe(0);
    expect(await page.getByLabel('Ports (optional)').getAttribute('aria-invalid')).toBe('true');
    await page.getByLabel('Ports (optional)').fill('8000/http');
    await page.getByRole('button', { name: 'Create template' }).click();
    await page.locator('.done').getByText('Created template').waitFor();

    const made = (await api(a.key, 'GET', '/v2/templates', undefined, 200)).templates.find(
      (t: { name: string }) => t.name === HOSTILE,
    );
    expect(made.env).toEqual({ GREETING: HOSTILE, LINK: HOSTILE_URL });
    expect(made.ports).toEqual(['8000/http']);
    const row = page.locator(`tr[data-template-id="${made.id}"]`);
    await row.waitFor();
    expect(await row.locator('td.name').innerText()).toBe(HOSTILE);
    expect(await row.locator('td.env').innerText()).toBe(`GREETING=${HOSTILE}\nLINK=${HOSTILE_URL}`);
    await clean(tab);

    // Escape takes the question back (focus returns to Delete); then deleted.
    const del = row.getByRole('button', { name: `Delete ${HOSTILE}` });
    await del.click();
    await page.keyboard.press('Escape');
    await expect.poll(() => focusedText(page)).toBe('Delete');
    expect(await row.getByRole('button', { name: 'Yes, delete' }).count()).toBe(0);
    await del.click();
    await row.getByRole('button', { name: 'Yes, delete' }).click();
    await row.waitFor({ state: 'detached' });
    expect((await call(url, 'GET', `/v2/templates/${made.id}`, { key: a.key })).status).toBe(404);
    await clean(tab);
  }, 120_000);

  it('creates a network volume in the data center with a host, grows it, refuses to shrink it, deletes it', async () => {
    const tab = await signedIn(a.key, '/console/volumes');
    const { page } = tab;
    await page.locator(`tr[data-volume-id="${mine.volumeId}"]`).waitFor();
    const name = `ui-volume-${sfx}`;
    await page.getByLabel('Name', { exact: true }).fill(name);
    await page.getByLabel('Size, GB').fill('0');
    await page.getByLabel('Data center').selectOption(dataCenter);
    await page.getByRole('button', { name: 'Create volume' }).click();
    await page.locator('#volume-size-error').waitFor();
    expect(await page.locator('#volume-size-error').innerText()).toMatch(/>= 1/);
    await page.getByLabel('Size, GB').fill('10');
    await page.keyboard.press('Enter');
    await page.locator('.done').getByText('Created').waitFor();
    const made = (await api(a.key, 'GET', '/v2/network-volumes', undefined, 200)).networkVolumes.find(
      (v: { name: string }) => v.name === name,
    );
    expect(made).toMatchObject({ size: 10, dataCenter });
    const row = page.locator(`tr[data-volume-id="${made.id}"]`);
    await row.waitFor();

    await row.getByRole('button', { name: `Resize ${name}` }).click();
    const size = page.getByLabel(`New size of ${name}, GB`);
    await expect.poll(() => focusedId(page)).toBe(`resize-${made.id}`);
    await size.fill('5');
    await page.keyboard.press('Enter');
    await row
      .getByRole('alert')
      .getByText(/cannot shrink/)
      .waitFor();
    await size.fill('20');
    await page.keyboard.press('Enter');
    await expect.poll(() => row.locator('td.size').innerText()).toMatch(/^20 GB/);
    expect((await api(a.key, 'GET', `/v2/network-volumes/${made.id}`, undefined, 200)).size).toBe(20);

    await row.getByRole('button', { name: `Delete ${name}` }).click();
    await row.getByRole('button', { name: 'Yes, delete' }).click();
    await row.waitFor({ state: 'detached' });
    expect((await call(url, 'GET', `/v2/network-volumes/${made.id}`, { key: a.key })).status).toBe(404);
    await clean(tab);
  }, 120_000);

  it('lists the public models with how to call them, their text as text', async () => {
    const tab = await signedIn(a.key, '/console/public-models');
    const { page } = tab;
    const model = page.locator(`li.model[data-model-id="${MODEL}"]`);
    await model.waitFor();
    expect(await model.locator('.name').innerText()).toBe(HOSTILE);
    expect(await model.locator('.description').innerText()).toBe(HOSTILE_URL);
    expect(await model.getByRole('link', { name: 'Try it in the playground' }).getAttribute('href')).toBe(
      `/playground/${MODEL}`,
    );
    await model.getByText('How to call it').click();
    const curl = await model.locator('pre').first().innerText();
    expect(curl).toContain(`/v2/${MODEL}/runsync`);
    expect(curl).toContain('{"input":{"prompt":"","seed":7}}');
    expect(curl).toContain('$GANTRY_API_KEY');
    expect(await page.content()).not.toContain(a.key);
    await clean(tab);
  }, 120_000);

  it('shows usage per endpoint over the chosen period, with a chart of spend', async () => {
    const tab = await signedIn(a.key, '/console/usage');
    const { page } = tab;
    const row = page.locator(`table.by-endpoint tr[data-endpoint-id="${mine.endpointId}"]`);
    await row.waitFor();
    const billed = await api(a.key, 'GET', '/v2/billing/serverless?bucketSize=day&lastN=30', undefined, 200);
    const total = billed.metadata.totals.totalAmount as number;
    expect(total).toBeGreaterThan(0.01);
    expect(await row.locator('td.name').innerText()).toContain(mine.endpointName);
    expect(await row.locator('td.total').innerText()).toBe(`$${total.toFixed(2)}`);
    await page.locator('[data-chart="spend"] canvas').first().waitFor();
    // Another period, from the keyboard: the last 24 hours by hour.
    await page.getByRole('button', { name: '24 hours' }).focus();
    await page.keyboard.press('Enter');
    await page.locator('.usage[data-bucket="hour"]').waitFor();
    await row.waitFor();
    expect(await row.locator('td.total').innerText()).toBe(`$${total.toFixed(2)}`);
    await clean(tab);

    const none = await signedIn(b.key, '/console/usage');
    await none.page.locator('.usage').waitFor();
    expect(await none.page.locator('.usage .notice.empty').innerText()).toMatch(/^No spend in this period/);
    expect(await none.page.locator('[data-chart="spend"]').count()).toBe(0);
  }, 120_000);

  it('shows another account nothing of these on any page, the endpoint’s own address included', async () => {
    const forbidden = [
      mine.endpointName,
      mine.registryId,
      mine.registryName,
      mine.templateId,
      mine.templateName,
      mine.envValue,
      mine.volumeId,
      mine.volumeName,
      mine.queuedJobId,
      a.accountId,
      '__pwned',
    ];
    // The same look finds them in A's own console: an absence below means something.
    const own = await signedIn(a.key, '/console/registries');
    for (const [link, shown] of [
      ['Registries', [mine.registryId, mine.registryName]],
      ['Templates', [mine.templateId, mine.templateName, mine.envValue]],
      ['Volumes', [mine.volumeId, mine.volumeName]],
      ['Usage', [mine.endpointId, mine.endpointName]],
      ['Endpoints', [mine.endpointId, mine.endpointName]],
    ] as const) {
      await nav(own.page, link);
      await expect.poll(() => own.page.content()).toContain(shown[0]);
      for (const s of shown) expect(await own.page.content(), `${link} of A`).toContain(s);
    }

    const tab = await signedIn(b.key, '/console');
    const { page } = tab;
    const check = async (where: string, also: string[] = []) => {
      const html = await page.content();
      for (const s of [...forbidden, ...also]) expect(html, `${where} shows ${s}`).not.toContain(s);
    };
    await page.getByText('No endpoints yet').waitFor();
    await check('endpoints', [mine.endpointId]);
    for (const [link, heading] of [
      ['Registries', 'No registry credentials yet'],
      ['Templates', 'No templates yet'],
      ['Volumes', 'No network volumes yet'],
    ] as const) {
      await nav(page, link);
      await page.locator('.notice.empty').getByText(heading).waitFor();
      await check(link, [mine.endpointId]);
    }
    await nav(page, 'Usage');
    await page.locator('.usage .notice.empty').waitFor();
    await check('usage', [mine.endpointId]);

    // A's endpoint at its address and each tab's: not found, no tabs, nothing of it. Its id is in
    // the address B typed, so only A's other data is looked for there.
    for (const t of ['', '/workers', '/requests', '/releases', '/logs', '/settings']) {
      await page.goto(`${url}/console/endpoints/${mine.endpointId}${t}`);
      await page
        .locator('.notice.error')
        .getByText(/not found/i)
        .first()
        .waitFor();
      expect(await page.getByRole('heading', { level: 1 }).innerText()).toBe('Endpoint');
      expect(await page.locator('.tab').count()).toBe(0);
      await check(`endpoint ${t || 'overview'}`);
    }
    await clean(tab);
  }, 180_000);
});
