/**
 * The resolvers' types (api/graphql/generated-types.ts) are generated from the schema's SDL: a schema
 * change without `npm run generate:graphql-types` leaves the resolvers checked against the old one.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { GENERATED_TYPES, generateGraphqlTypes } from '../../api/graphql/codegen.ts';

describe('GraphQL resolver types', () => {
  it('are what the schema generates now', async () => {
    const fresh = await generateGraphqlTypes();
    expect(
      readFileSync(GENERATED_TYPES, 'utf8'),
      'api/graphql/generated-types.ts is not what the schema generates: run npm run generate:graphql-types',
    ).toBe(fresh);
  });
});
