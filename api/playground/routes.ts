import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply } from 'fastify';
import type { DomainContext } from '../../domain/context.ts';
import { isModelId } from '../../domain/public-models/index.ts';
import { problem, sendProblem } from '../problem.ts';
import { registerStaticAssets } from '../static-assets.ts';

/**
 * The browser playground: `/playground` and `/playground/{modelId}` (docs/public-models.md). Both
 * pages are one static shell; the page's scripts read the model id from the address and call the
 * API with the key the user gives them (kept in the tab's session storage). So answering a page or
 * an asset needs no key and touches neither the database nor the rate-limit counters, like the
 * GraphQL explorer's assets (both served by api/static-assets.ts).
 */

const here = path.dirname(fileURLToPath(import.meta.url));
export const PLAYGROUND_ASSETS_PREFIX = '/playground/assets/';

const JS = 'text/javascript; charset=utf-8';
/** Served name -> file in this directory: a fixed list, nothing else is ever read from disk. */
const ASSETS: Record<string, { file: string; type: string }> = {
  'playground.js': { file: 'playground.browser.js', type: JS },
  'code-panel.js': { file: 'code-panel.browser.js', type: JS },
  'dom.js': { file: 'dom.browser.js', type: JS },
  'schema-form.js': { file: 'schema-form.browser.js', type: JS },
  'snippets.js': { file: 'snippets.browser.js', type: JS },
  'playground.css': { file: 'playground.css', type: 'text/css; charset=utf-8' },
  'flash-login.js': { file: 'flash-login.browser.js', type: JS },
  'key.js': { file: 'key.browser.js', type: JS },
};

// The empty icon (data:,) keeps the browser from asking for /favicon.ico, which would be a 404.
const page = (script: string, title: string, keyUse: string): string => `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light">
<title>${title}</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="${PLAYGROUND_ASSETS_PREFIX}playground.css">
<script type="module" src="${PLAYGROUND_ASSETS_PREFIX}${script}"></script>
</head>
<body>
<a class="skip-link" href="#main">Skip to content</a>
<header class="topbar">
  <a class="brand" href="/playground"><span class="brand-mark" aria-hidden="true"></span>Gantry playground</a>
  <div class="key-state">
    <span id="key-summary" class="key-summary"></span>
    <button type="button" id="forget-key" class="button button-quiet" hidden>Forget key</button>
  </div>
</header>
<main id="main" tabindex="-1">
  <noscript><p class="notice notice-error">The playground runs in your browser: it needs JavaScript.</p></noscript>
  <section id="key-panel" class="card key-panel" aria-labelledby="key-heading" hidden>
    <h1 id="key-heading">Your API key</h1>
    <p>${keyUse} It is kept in this tab's session storage only, and sent to this server alone.</p>
    <form id="key-form" class="key-form" novalidate>
      <label for="key-input">API key</label>
      <div class="key-row">
        <input type="password" id="key-input" name="key" autocomplete="off" spellcheck="false" required aria-describedby="key-error">
        <button type="submit" class="button button-primary">Use key</button>
      </div>
      <p id="key-error" class="field-error" role="alert"></p>
    </form>
  </section>
  <div id="view"></div>
</main>
</body>
</html>
`;
const PAGE = page('playground.js', 'Gantry playground', 'The playground calls the job API with your key.');
/** flash login's approval page (api/playground/flash-login.browser.js; domain/accounts/flash-login.ts). */
const FLASH_LOGIN_PAGE = page(
  'flash-login.js',
  'Sign in flash · Gantry',
  'Approving a flash login takes a key of your account with the write scope.',
);

/**
 * No inline script or style; images and media from this server or the public URL (where signed
 * output URLs point), plus data:/blob:; the API on this origin only. Nothing else loads.
 */
export function playgroundCsp(publicUrl: string): string {
  let origin = '';
  try {
    const o = new URL(publicUrl).origin;
    if (o !== 'null') origin = ` ${o}`;
  } catch {
    // An unparsable public URL: media from this origin only.
  }
  return (
    `default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'${origin} data: blob:; media-src 'self'${origin} data: blob:; ` +
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
  );
}

export const playgroundRoutes: FastifyPluginAsyncTypebox<{ ctx: DomainContext }> = async (app, { ctx }) => {
  const csp = playgroundCsp(ctx.publicUrl);
  const sendPage = (reply: FastifyReply, body = PAGE): FastifyReply =>
    reply
      .type('text/html; charset=utf-8')
      .header('content-security-policy', csp)
      .header('x-content-type-options', 'nosniff')
      .header('x-frame-options', 'DENY')
      .header('referrer-policy', 'no-referrer')
      .header('cache-control', 'no-cache')
      .send(body);

  // Registered by name, before the model route: a static path always wins over `/:modelId`.
  registerStaticAssets(
    app,
    PLAYGROUND_ASSETS_PREFIX,
    Object.fromEntries(
      Object.entries(ASSETS).map(([name, a]) => [name, { file: () => path.join(here, a.file), type: a.type }]),
    ),
  );
  app.get('/playground', { schema: { hide: true } }, async (_request, reply) => sendPage(reply));
  // Where flash sends its user ({RUNPOD_CONSOLE_URL}/flash/login?request=<id>): the page asks the API.
  app.get('/flash/login', { schema: { hide: true } }, async (_request, reply) => sendPage(reply, FLASH_LOGIN_PAGE));
  app.get<{ Params: { modelId: string } }>(
    '/playground/:modelId',
    { schema: { hide: true } },
    async (request, reply) => {
      // Only what could be a model id gets the page; whether the model exists, the page asks the API.
      if (!isModelId(request.params.modelId))
        return sendProblem(
          reply,
          problem(404, 'no such model page: a model id is lowercase letters and digits in groups joined by "-"'),
        );
      return sendPage(reply);
    },
  );
};
