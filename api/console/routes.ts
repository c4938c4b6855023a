import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { problem, sendProblem } from '../problem.ts';
import { bodyFile, loadFile, sendFile, type LoadedFile } from '../static-assets.ts';

/**
 * `/console`: the management console's single-page app (docs/console.md), built by Vite into a
 * per-machine cache (api/console/build.ts) and served from there: index.html for `/console` and any
 * other address under it (the app routes on the client), the hashed files under /console/assets/.
 * Like the playground, answering needs no key and touches neither the database nor the rate-limit
 * counters: the app calls the REST API with the key the user gives it. Without a build, 503.
 */

/**
 * Nothing inline: the scripts and the stylesheet are files of this origin. uPlot sets sizes and
 * positions through element.style (the CSSOM), which `style-src` does not govern.
 */
export const CONSOLE_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
  "base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const TYPES: Record<string, string> = {
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.woff2': 'font/woff2',
};

interface Loaded {
  index: LoadedFile;
  assets: Map<string, LoadedFile>;
}

const attribute = (v: string): string =>
  v.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/**
 * The page's settings from the server, as `<meta>` elements (no inline script under the CSP):
 * the Temporal UI's namespace address, where the console links an endpoint's workflows.
 */
function withSettings(index: LoadedFile, temporalUi: TemporalUi | undefined): LoadedFile {
  if (!temporalUi) return index;
  const href = `${temporalUi.url}/namespaces/${encodeURIComponent(temporalUi.namespace)}`;
  const html = index.body
    .toString('utf8')
    .replace('</head>', `<meta name="gantry-temporal-ui" content="${attribute(href)}">\n</head>`);
  return bodyFile(Buffer.from(html), index.type);
}

interface TemporalUi {
  url: string;
  namespace: string;
}

/** The build's files, read once (a fixed list: the names in its assets folder, nothing else). */
function load(dir: string, temporalUi: TemporalUi | undefined): Loaded {
  const assetsDir = path.join(dir, 'assets');
  const assets = new Map<string, LoadedFile>();
  for (const name of existsSync(assetsDir) ? readdirSync(assetsDir) : []) {
    const type = TYPES[path.extname(name)];
    if (type) assets.set(name, loadFile(path.join(assetsDir, name), type));
  }
  return {
    index: withSettings(loadFile(path.join(dir, 'index.html'), 'text/html; charset=utf-8'), temporalUi),
    assets,
  };
}

/** On every answer of the console: its CSP, and never framed or sent as a referrer. */
const HEADERS = {
  'content-security-policy': CONSOLE_CSP,
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
};

export const consoleRoutes: FastifyPluginAsync<{ dir: string | undefined; temporalUi?: TemporalUi }> = async (
  app,
  { dir, temporalUi },
) => {
  let loaded: Loaded | undefined;
  /** The build, once there is one (a build made after the start is found on the next request). */
  const build = (): Loaded | undefined => {
    if (!loaded && dir && existsSync(path.join(dir, 'index.html'))) loaded = load(dir, temporalUi);
    return loaded;
  };
  const notBuilt = (reply: FastifyReply) =>
    sendProblem(
      reply,
      problem(
        503,
        'the console is not built on this machine: `npm start` builds it before it serves (or run `npm run console:build`, then reload)',
      ),
    );
  const sendIndex = (request: FastifyRequest, reply: FastifyReply) => {
    const b = build();
    return b ? sendFile(request, reply, b.index, { headers: HEADERS }) : notBuilt(reply);
  };
  app.get('/console', { schema: { hide: true } }, sendIndex);
  app.get('/console/*', { schema: { hide: true } }, sendIndex);
  app.get<{ Params: { name: string } }>('/console/assets/:name', { schema: { hide: true } }, async (request, reply) => {
    const b = build();
    if (!b) return notBuilt(reply);
    const asset = b.assets.get(request.params.name);
    if (!asset) return sendProblem(reply, problem(404, 'no such console asset'));
    // The names carry a hash of the content: a new build has new names.
    return sendFile(request, reply, asset, { headers: HEADERS, cacheControl: 'public, max-age=31536000, immutable' });
  });
};
