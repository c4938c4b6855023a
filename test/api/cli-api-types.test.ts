/**
 * The REST types of the API's own clients, the CLI's (cli/src/generated-api-types.ts) and the web
 * console's (api/console/src/generated-api-types.ts), are generated from the OpenAPI document the
 * API serves (infra/generate-cli-api-types.ts): each committed file must be what the routes give
 * now, and must describe the routes its client calls (cli/src/api.ts; api/console/src).
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import type { OpenAPI3 } from 'openapi-typescript';
import { buildOpenApiDocument, generateApiTypes, TARGETS } from '../../infra/generate-cli-api-types.ts';

let document: OpenAPI3;
beforeAll(async () => {
  // The whole API is imported and built (no servers): slow on a loaded machine.
  document = await buildOpenApiDocument();
}, 180_000);

const CLIENTS = [
  { client: 'CLI', caller: 'cli/src/api.ts', target: TARGETS.cli },
  { client: 'console', caller: 'api/console/src', target: TARGETS.console },
];

for (const { client, caller, target } of CLIENTS)
  describe(`the ${client}'s API types`, () => {
    const file = path.relative(fileURLToPath(new URL('../..', import.meta.url)), target.file);

    it('are committed as generated from the routes as they are now', async () => {
      const fresh = await generateApiTypes(target, document);
      const committed = readFileSync(target.file, 'utf8').split('\n');
      const lines = fresh.split('\n');
      const at = lines.findIndex((line, i) => line !== committed[i]);
      const first = at === -1 && committed.length !== lines.length ? lines.length : at;
      expect(
        first === -1 ? 'up to date' : `line ${first + 1} is now: ${lines[first]?.trim() ?? '(end of file)'}`,
        `${file} differs from the OpenAPI document of the routes: run \`npm run ${target.script}\``,
      ).toBe('up to date');
    }, 120_000);

    it('describe every route the client calls, with the answers it reads', () => {
      // A route renamed or dropped on the server fails here.
      const paths = document.paths ?? {};
      const missing = target.routes.filter(
        ([method, route]) => !(paths[route] as Record<string, unknown> | undefined)?.[method],
      );
      expect(missing, `routes ${caller} calls that the OpenAPI document lacks`).toEqual([]);
      const generated = readFileSync(target.file, 'utf8');
      for (const [, route] of target.routes) expect(generated).toContain(`'${route}': {`);
    });
  });
