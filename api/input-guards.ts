import type { FastifyInstance } from 'fastify';
import { validationFailed } from '../domain/errors.ts';
import { unstorableJson } from '../domain/shared/index.ts';

// The walker lives in the domain: the worker protocol's bodies (parsed there) need it too.
export { MAX_JSON_DEPTH, unstorableJson } from '../domain/shared/index.ts';

/**
 * Path parameters and query values that no handler could store: 422 naming the field, before
 * authentication reads an id or a statement fails on it. For the whole app.
 */
export function registerInputGuards(app: FastifyInstance): void {
  app.addHook('onRequest', async (request) => {
    for (const [where, values] of [
      ['params', request.params],
      ['query', request.query],
    ] as const) {
      if (!values || typeof values !== 'object') continue;
      for (const [name, value] of Object.entries(values)) {
        const items: unknown[] = Array.isArray(value) ? value : [value];
        if (name.includes('\0') || items.some((v) => typeof v === 'string' && v.includes('\0')))
          throw validationFailed([`$${where}.${name.replace(/\0/g, '\\0')}: must not contain NUL characters`]);
      }
    }
  });
}

/**
 * JSON bodies that no handler could store (NUL characters, nesting past MAX_JSON_DEPTH): 422 naming
 * the field, before validation. For the scopes whose routes take JSON (management REST, the job
 * API); GraphQL checks its own variables and answers in GraphQL's error shape.
 */
export function refuseUnstorableBodies(scope: FastifyInstance): void {
  scope.addHook('preValidation', async (request) => {
    // Parsed JSON only: bodies that arrive as streams or raw text are their handlers' to check.
    const body = request.body;
    if (body === null || typeof body !== 'object') return;
    const proto = Object.getPrototypeOf(body) as unknown;
    if (!Array.isArray(body) && proto !== Object.prototype && proto !== null) return;
    const problem = unstorableJson(body);
    if (problem) throw validationFailed([problem]);
  });
}
