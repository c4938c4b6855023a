/**
 * The console's link to an endpoint's workflows in the Temporal UI: the server names the UI in a
 * `<meta>` of index.html (no inline script), escaped; the endpoint page links the workflows with
 * the endpoint's GantryEndpointId; without a UI there is no meta and no link.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startConsoleHarness, type ConsoleHarness } from '../support/console.ts';
import { call } from '../support/platform.ts';

describe('console link to the Temporal UI', () => {
  let h: ConsoleHarness;
  let key: string;
  let endpointId: string;

  beforeAll(async () => {
    h = await startConsoleHarness({ temporalUi: { url: 'http://127.0.0.1:8233', namespace: 'team "a"' } });
    key = (await h.account('temporal-link')).key;
    const created = await call(h.url, 'POST', '/v2/serverless', {
      key,
      body: { name: 'linked', image: 'localhost/app:1', gpu: { pools: ['AMPERE_24'] } },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    endpointId = created.body.id;
  }, 240_000);
  afterEach(() => h.closeTabs());
  afterAll(() => h?.stop());

  it('names the UI in a meta element, its namespace escaped', async () => {
    const html = await (await fetch(`${h.url}/console`)).text();
    expect(html).toContain(
      '<meta name="gantry-temporal-ui" content="http://127.0.0.1:8233/namespaces/team%20%22a%22">',
    );
  });

  it("links the endpoint's workflows by its search attribute, in a new tab without a referrer", async () => {
    const { page } = await h.open(`/console/endpoints/${endpointId}`);
    await h.signIn(page, key);
    const link = page.getByRole('link', { name: 'Workflows in the Temporal UI' });
    await link.waitFor();
    const href = await link.getAttribute('href');
    expect(href).toBe(
      `http://127.0.0.1:8233/namespaces/team%20%22a%22/workflows?query=${encodeURIComponent(`GantryEndpointId="${endpointId}"`)}`,
    );
    expect(await link.getAttribute('rel')).toBe('noopener noreferrer');
  });

  it('has neither without a Temporal UI', async () => {
    const bare = await h.t.another({ consoleDir: h.consoleDir });
    const r = await bare.call('GET', '/console');
    expect(r.status).toBe(200);
    expect(String(r.body)).not.toContain('gantry-temporal-ui');
    await bare.close();
  });
});
