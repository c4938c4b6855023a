/**
 * Templates: named container configurations that endpoints and pods start from, with REST and
 * GraphQL skins over one set of rules. Owns the Template rows.
 */
export * from './schemas.ts';
export * from './templates.ts';
