/**
 * The CLI's REST types (cli/src/generated-api-types.ts) are generated from the OpenAPI document the
 * API serves (infra/generate-cli-api-types.ts): the committed file must be what the routes give now,
 * and must describe the routes the CLI calls (cli/src/api.ts).
 */
import { readFileSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import type { OpenAPI3 } from 'openapi-typescript';
import {
  buildOpenApiDocument,
  CLI_ROUTES,
  GENERATED_CLI_TYPES,
  generateCliApiTypes,
} from '../../infra/generate-cli-api-types.ts';

describe("the CLI's API types", () => {
  let document: OpenAPI3;
  beforeAll(async () => {
    // The whole API is imported and built (no servers): slow on a loaded machine.
    document = await buildOpenApiDocument();
  }, 180_000);

  it('are committed as generated from the routes as they are now', async () => {
    const fresh = await generateCliApiTypes(document);
    const committed = readFileSync(GENERATED_CLI_TYPES, 'utf8').split('\n');
    const lines = fresh.split('\n');
    const at = lines.findIndex((line, i) => line !== committed[i]);
    const first = at === -1 && committed.length !== lines.length ? lines.length : at;
    expect(
      first === -1 ? 'up to date' : `line ${first + 1} is now: ${lines[first]?.trim() ?? '(end of file)'}`,
      'cli/src/generated-api-types.ts differs from the OpenAPI document of the routes: run `npm run generate:cli-types`',
    ).toBe('up to date');
  }, 120_000);

  it('describe every route the CLI calls, with the answers it reads', () => {
    // PlatformClient's calls (cli/src/api.ts); a route renamed or dropped on the server fails here.
    const paths = document.paths ?? {};
    const missing = CLI_ROUTES.filter(
      ([method, path]) => !(paths[path] as Record<string, unknown> | undefined)?.[method],
    );
    expect(missing, 'routes cli/src/api.ts calls that the OpenAPI document lacks').toEqual([]);
    const generated = readFileSync(GENERATED_CLI_TYPES, 'utf8');
    for (const [, path] of CLI_ROUTES) expect(generated).toContain(`'${path}': {`);
  });
});
