import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { registerStaticAssets, type StaticAsset } from '../static-assets.ts';

/**
 * The GraphQL explorer a browser gets at `GET /graphql`: GraphiQL, served from npm packages by this
 * server (like /v2/docs), so that it works offline and loads nothing from elsewhere. GraphiQL 4 is
 * the last release line that ships a prebuilt browser bundle (`graphiql.min.js`, on React 18's
 * browser builds); 5 needs a bundler and Monaco's web workers. The assets are a fixed list of
 * files, read once and kept in memory with a gzip copy: answering them touches neither the database
 * nor the rate-limit counters, and needs no key (they are public code). The key goes with each
 * query: the headers pane (`Authorization: Bearer <key>`), or `?api_key=` on the page's address,
 * which the page passes on to the queries it sends.
 */

const require = createRequire(import.meta.url);
const packageDir = (name: string): string => path.dirname(require.resolve(`${name}/package.json`));
const here = path.dirname(fileURLToPath(import.meta.url));

export const EXPLORER_PREFIX = '/graphql/explorer/';

const ASSETS: Record<string, StaticAsset> = {
  'react.production.min.js': {
    file: () => path.join(packageDir('react'), 'umd', 'react.production.min.js'),
    type: 'text/javascript; charset=utf-8',
  },
  'react-dom.production.min.js': {
    file: () => path.join(packageDir('react-dom'), 'umd', 'react-dom.production.min.js'),
    type: 'text/javascript; charset=utf-8',
  },
  'graphiql.min.js': {
    file: () => path.join(packageDir('graphiql'), 'graphiql.min.js'),
    type: 'text/javascript; charset=utf-8',
  },
  'graphiql.min.css': {
    file: () => path.join(packageDir('graphiql'), 'graphiql.min.css'),
    type: 'text/css; charset=utf-8',
  },
  'explorer.js': { file: () => path.join(here, 'explorer.browser.js'), type: 'text/javascript; charset=utf-8' },
};

/**
 * Only this server's own scripts, styles and API; GraphiQL sets inline styles (and its CSS inlines
 * fonts and images as data: URLs). The page's address may carry `?api_key=`: no Referer leaves it.
 */
export const EXPLORER_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; " +
  "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Gantry GraphQL explorer</title>
<link rel="stylesheet" href="graphql/explorer/graphiql.min.css">
<style>html, body, #graphiql { height: 100%; margin: 0; } body { overflow: hidden; }</style>
</head>
<body>
<div id="graphiql"></div>
<script src="graphql/explorer/react.production.min.js"></script>
<script src="graphql/explorer/react-dom.production.min.js"></script>
<script src="graphql/explorer/graphiql.min.js"></script>
<script src="graphql/explorer/explorer.js"></script>
</body>
</html>
`;

/** Whether a request to /graphql is a browser opening the page (a GET without a query that accepts HTML). */
export function wantsExplorer(request: FastifyRequest): boolean {
  if (request.method !== 'GET') return false;
  const query = request.query as Record<string, unknown> | undefined;
  return typeof query?.query !== 'string' && String(request.headers.accept ?? '').includes('text/html');
}

export function sendExplorerPage(reply: FastifyReply): FastifyReply {
  return reply
    .type('text/html; charset=utf-8')
    .header('content-security-policy', EXPLORER_CSP)
    .header('x-content-type-options', 'nosniff')
    .header('x-frame-options', 'DENY')
    .header('referrer-policy', 'no-referrer')
    .header('cache-control', 'no-store')
    .send(PAGE);
}

/** GET /graphql/explorer/<file> for the files above and nothing else. */
export function registerExplorerAssets(app: FastifyInstance): void {
  registerStaticAssets(app, EXPLORER_PREFIX, ASSETS);
}
