/**
 * The console's endpoint forms in a real browser (test/support/console.ts: Debian's Chromium against
 * the API alone, no Temporal worker, so the rows are the truth and rollouts stay where they start):
 * creating an endpoint from the form, partly from the keyboard, and finding it through the API; the
 * API's validation errors beside their fields with nothing saved; the settings tab's PATCH of only
 * what changed and a rule's error beside its field; deletion behind its confirmation; the releases
 * tab's diff (tenant text shown as text) and a rollback; another account's key seeing nothing.
 */
import type { Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../../domain/shared/index.ts';
import { HOSTILE, startConsoleHarness, type ConsoleHarness } from '../support/console.ts';
import { call } from '../support/platform.ts';

describe('console: create, settings and releases of an endpoint', () => {
  let h: ConsoleHarness;
  let url: string;
  let keyA: string;
  let keyB: string;
  let volumeId: string;

  const api = (method: string, path: string, body?: unknown, key = keyA) => call(url, method, path, { key, body });
  /** An endpoint of account A made through the API. */
  async function endpoint(name: string, image: string): Promise<string> {
    const made = await api('POST', '/v2/serverless', { name, image, gpu: { pools: ['AMPERE_24'] } });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    return made.body.id as string;
  }
  async function openAs(address: string, key: string): Promise<Page> {
    const { page, csp } = await h.open(address);
    pageCsp.set(page, csp);
    await h.signIn(page, key);
    return page;
  }
  /** The CSP violations each tab reported (the forms submit through fetch: `form-action 'none'` holds). */
  const pageCsp = new WeakMap<Page, string[]>();
  const noViolations = async (page: Page) => {
    expect(pageCsp.get(page)).toEqual([]);
    expect(await page.evaluate('window.__csp')).toEqual([]);
  };
  const names = async (): Promise<string[]> =>
    (await api('GET', '/v2/serverless')).body.endpoints.map((e: { name: string }) => e.name);

  beforeAll(async () => {
    h = await startConsoleHarness();
    url = h.url;
    const a = await h.account('forms-a');
    keyA = a.key;
    keyB = (await h.account('forms-b')).key;
    // A volume to pick (POST /v2/network-volumes wants a registered host's data center; the form only lists it).
    volumeId = (
      await h.t.ctx.db.networkVolume.create({
        data: { id: newId(), accountId: a.accountId, name: 'forms-volume', size: 10, dataCenterId: 'dc-forms' },
      })
    ).id;
  }, 240_000);

  afterEach(() => h.closeTabs());
  afterAll(() => h?.stop());

  it('creates an endpoint from the form, partly from the keyboard, with every field set', async () => {
    const page = await openAs('/console/endpoints/new', keyA);
    await page.getByRole('heading', { name: 'Create an endpoint' }).waitFor();
    // The GPU catalog is read before the pools can be chosen.
    await page.locator('input[type="checkbox"][value="AMPERE_24"]').waitFor();

    await page.getByLabel('Name', { exact: true }).focus();
    await page.keyboard.type('forms-made');
    // Tab reaches the type's radio group, an arrow chooses load-balancing, Tab goes on to the image.
    await page.keyboard.press('Tab');
    expect(await page.evaluate('document.activeElement.value')).toBe('QUEUE_BASED');
    await page.keyboard.press('ArrowRight');
    await page.keyboard.press('Tab');
    expect(await page.evaluate('document.activeElement.id')).toBe('ep-image');
    await page.keyboard.type('localhost/forms:1');

    await page.getByLabel('Ports').fill('8000/http');
    await page.getByRole('button', { name: 'Add variable' }).focus();
    await page.keyboard.press('Enter');
    await page.getByLabel('Name 1').fill('MODE');
    await page.getByLabel('Value 1').fill('fast');
    await page.locator('input[type="checkbox"][value="AMPERE_24"]').focus();
    await page.keyboard.press('Space');
    await page.getByLabel('GPUs per worker').fill('2');
    await page.getByLabel('Workers, maximum').fill('4');
    await page.getByLabel('Scaler', { exact: true }).selectOption('REQUEST_COUNT');
    await page.getByLabel('Scaler value').fill('2');
    await page.getByLabel('Idle timeout (s)').fill('30');
    await page.getByLabel('FlashBoot').selectOption('FLASHBOOT');
    await page.getByLabel('Execution timeout (ms)').fill('120000');
    await page.locator(`input[type="checkbox"][value="${volumeId}"]`).check();

    // Enter in a text box submits the form.
    await page.getByLabel('Image').focus();
    await page.keyboard.press('Enter');
    await page.waitForURL(/\/console\/endpoints\/(?!new)[^/]+$/);
    const id = decodeURIComponent(new URL(page.url()).pathname.split('/').pop()!);
    await page.getByRole('heading', { level: 1, name: 'forms-made' }).waitFor();

    const made = await api('GET', `/v2/serverless/${id}`);
    expect(made.status).toBe(200);
    expect(made.body).toMatchObject({
      name: 'forms-made',
      type: 'LOAD_BALANCING',
      image: 'localhost/forms:1',
      ports: ['8000/http'],
      env: { MODE: 'fast' },
      gpu: { pools: ['AMPERE_24'], count: 2 },
      cpu: null,
      workers: { min: 0, max: 4 },
      scaling: { type: 'REQUEST_COUNT', value: 2, idleTimeout: 30 },
      flashboot: 'FLASHBOOT',
      timeout: 120_000,
      networkVolumes: [volumeId],
      disk: 10,
    });
    await noViolations(page);
  });

  it('shows the API’s errors beside their fields, and saves nothing', async () => {
    const page = await openAs('/console/endpoints/new', keyA);
    await page.locator('input[type="checkbox"][value="AMPERE_24"]').check();
    await page.getByLabel('Name', { exact: true }).fill('forms-refused');
    await page.getByLabel('Image').fill('localhost/forms:1');
    await page.getByRole('button', { name: 'Add variable' }).click();
    await page.getByLabel('Name 1').fill('1BAD');
    await page.getByLabel('Value 1').fill('x');
    await page.getByRole('button', { name: 'Create endpoint' }).click();

    // The schema refuses the variable's name: beside the variables, linked from the name's box.
    const envError = page.locator('#ep-env-error');
    await envError.waitFor();
    expect(await envError.innerText()).toMatch(/pattern/);
    const nameBox = page.getByLabel('Name 1');
    expect(await nameBox.getAttribute('aria-invalid')).toBe('true');
    expect(await nameBox.getAttribute('aria-describedby')).toContain('ep-env-error');
    expect(await page.getByLabel('Image').getAttribute('aria-invalid')).toBeNull();
    expect(page.url()).toMatch(/\/console\/endpoints\/new$/);

    // Fixed, with more workers at least than at most: the domain's rule, beside the minimum.
    await page.getByRole('button', { name: /^Remove variable 1/ }).click();
    await page.getByLabel('Workers, minimum').fill('3');
    await page.getByLabel('Workers, maximum').fill('1');
    await page.getByRole('button', { name: 'Create endpoint' }).click();
    const workersError = page.locator('#ep-workers-min-error');
    await workersError.waitFor();
    expect(await workersError.innerText()).toBe('workers.min must not exceed workers.max');
    expect(await page.locator('#ep-env-error').count()).toBe(0);
    expect(await page.getByLabel('Workers, minimum').getAttribute('aria-describedby')).toContain(
      'ep-workers-min-error',
    );
    expect(await names()).not.toContain('forms-refused');

    // A refusal that names no field (a name in use, 409) is the notice at the top.
    await endpoint('forms-taken', 'localhost/forms:1');
    await page.getByLabel('Workers, minimum').fill('0');
    await page.getByLabel('Name', { exact: true }).fill('forms-taken');
    await page.getByRole('button', { name: 'Create endpoint' }).click();
    await expect.poll(() => page.locator('.notice.error').first().innerText()).toMatch(/already exists/);
    expect(await page.locator('.field-error').count()).toBe(0);
    expect((await names()).filter((n) => n === 'forms-taken')).toHaveLength(1);
  });

  it('saves only the changed settings with PATCH, and shows a rule’s error beside its field', async () => {
    const id = await endpoint('forms-settings', 'localhost/settings:1');
    const page = await openAs(`/console/endpoints/${id}/settings`, keyA);
    const max = page.getByLabel('Workers, maximum');
    await max.waitFor();
    expect(await max.inputValue()).toBe('3');

    await max.fill('6');
    await page.getByLabel('FlashBoot').selectOption('PRIORITY_FLASHBOOT');
    const patch = page.waitForRequest((r) => r.method() === 'PATCH');
    await page.getByRole('button', { name: 'Save changes' }).click();
    expect((await patch).postDataJSON()).toEqual({ workers: { max: 6 }, flashboot: 'PRIORITY_FLASHBOOT' });
    await expect.poll(() => page.getByRole('status').first().innerText()).toBe('Saved: workers, flashboot.');
    const after = await api('GET', `/v2/serverless/${id}`);
    expect(after.body).toMatchObject({
      workers: { min: 0, max: 6 },
      flashboot: 'PRIORITY_FLASHBOOT',
      image: 'localhost/settings:1',
    });

    await page.getByLabel('Workers, minimum').fill('9');
    await page.getByRole('button', { name: 'Save changes' }).click();
    const err = page.locator('#ep-workers-min-error');
    await err.waitFor();
    expect(await err.innerText()).toMatch(/must not exceed workers\.max/);
    expect(await page.getByLabel('Workers, minimum').getAttribute('aria-invalid')).toBe('true');
    expect((await api('GET', `/v2/serverless/${id}`)).body.workers).toEqual({ min: 0, max: 6 });
    await noViolations(page);
  });

  it('deletes an endpoint only once its name is typed', async () => {
    const id = await endpoint('forms-doomed', 'localhost/doomed:1');
    const page = await openAs(`/console/endpoints/${id}/settings`, keyA);
    const del = page.getByRole('button', { name: 'Delete endpoint' });
    await del.waitFor();
    expect(await del.isDisabled()).toBe(true);
    const confirm = page.getByLabel("Type the endpoint's name to confirm");
    await confirm.fill('forms-doome');
    expect(await del.isDisabled()).toBe(true);
    expect((await api('GET', `/v2/serverless/${id}`)).status).toBe(200);
    await confirm.fill('forms-doomed');
    await confirm.press('Enter');
    await page.waitForURL(/\/console$/);
    expect((await api('GET', `/v2/serverless/${id}`)).status).toBe(404);
  });

  it('shows a release’s diff as text and rolls back to an older release', async () => {
    const id = await endpoint('forms-releases', 'localhost/rel:1');
    const patched = await api('PATCH', `/v2/serverless/${id}`, { image: 'localhost/rel:2', env: { NOTE: HOSTILE } });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);

    const page = await openAs(`/console/endpoints/${id}/releases`, keyA);
    const second = page.locator('article.release[data-version="2"]');
    await second.waitFor();
    expect(await second.locator('h3').innerText()).toBe('Release 2 (current)');
    expect(await second.locator('.status').innerText()).toBe('ROLLING_OUT');
    const image = second.locator('tr[data-field="image"]');
    expect(await image.locator('td.old').innerText()).toBe('localhost/rel:1');
    expect(await image.locator('td.new').innerText()).toBe('localhost/rel:2');
    const env = second.locator('tr[data-field="env"]');
    expect(await env.locator('td.old').innerText()).toBe('(none)');
    expect(await env.locator('td.new').innerText()).toBe(`NOTE=${HOSTILE}`);
    expect(await page.locator('.release img, .release script').count()).toBe(0);
    expect(await page.evaluate('window.__pwned')).toBeUndefined();
    expect(await page.locator('#rollout-text').innerText()).toMatch(/^No workers\. Release 2 is current/);
    // The current release offers no rollback.
    expect(await second.getByRole('button').count()).toBe(0);

    // Rollback: a first button asks, the confirmation (focused) makes the release.
    await page
      .locator('article.release[data-version="1"]')
      .getByRole('button', { name: /Roll back to release 1/ })
      .click();
    const confirm = page.getByRole('button', { name: 'Confirm rollback to release 1' });
    await confirm.waitFor();
    expect(await page.evaluate('document.activeElement.textContent')).toBe('Confirm rollback to release 1');
    expect((await api('GET', `/v2/serverless/${id}/releases`)).body.endpointVersion).toBe(2);
    await page.keyboard.press('Enter');
    const third = page.locator('article.release[data-version="3"]');
    await third.waitFor();
    expect(await third.locator('tr[data-field="image"] td.new').innerText()).toBe('localhost/rel:1');
    await expect.poll(() => page.getByRole('status').first().innerText()).toMatch(/^Release 3 made/);

    const after = await api('GET', `/v2/serverless/${id}`);
    expect(after.body).toMatchObject({ image: 'localhost/rel:1', env: {} });
    const listed = await api('GET', `/v2/serverless/${id}/releases`);
    expect(listed.body.releases[0]).toMatchObject({ version: 3, status: 'ROLLING_OUT' });
    expect(listed.body.releases[0].diff).toContainEqual({
      field: 'image',
      old: 'localhost/rel:2',
      new: 'localhost/rel:1',
    });
    expect(await page.evaluate('window.__pwned')).toBeUndefined();
    await noViolations(page);
  });

  it('shows another account’s key a not-found notice and nothing of the endpoint', async () => {
    const id = await endpoint('forms-private-a', 'localhost/private-a:1');
    for (const tab of ['', '/settings', '/releases']) {
      const page = await openAs(`/console/endpoints/${id}${tab}`, keyB);
      await expect
        .poll(() => page.locator('.notice.error').allInnerTexts(), { timeout: 30_000 })
        .toContainEqual(expect.stringMatching(/not found/));
      const html = await page.content();
      expect(html, tab).not.toContain('forms-private-a');
      expect(html, tab).not.toContain('localhost/private-a');
      expect(await page.locator('form.endpoint-form, article.release').count(), tab).toBe(0);
    }
  });
});
