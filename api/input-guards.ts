import type { FastifyInstance } from 'fastify';
import { validationFailed } from '../domain/errors.ts';
import { unstorableJson } from '../domain/validation.ts';

// The walker lives in the domain: the worker protocol's bodies (parsed there) need it too.
export { MAX_JSON_DEPTH, unstorableJson } from '../domain/validation.ts';

/**
 * Path parameters, query values and JSON bodies that no handler could store: 422 naming the field,
 * before authentication reads an id or a statement fails on it. GraphQL checks its own variables
 * (it answers in GraphQL's error shape).
 */
export function registerInputGuards(app: FastifyInstance): void {
  app.addHook('onRequest', async (request) => {
    for (const [where, values] of [['params', request.params], ['query', request.query]] as const) {
      if (!values || typeof values !== 'object') continue;
      for (const [name, value] of Object.entries(values)) {
        const items: unknown[] = Array.isArray(value) ? value : [value];
        if (name.includes('\0') || items.some((v) => typeof v === 'string' && v.includes('\0'))) throw validationFailed([`$${where}.${name.replace(/\0/g, '\\0')}: must not contain NUL characters`]);
      }
    }
  });
  app.addHook('preValidation', async (request) => {
    // Parsed JSON only: the proxy's and the worker protocol's bodies are streams or raw text.
    const body = request.body;
    if (request.routeOptions.url === '/graphql' || body === null || typeof body !== 'object') return;
    const proto = Object.getPrototypeOf(body) as unknown;
    if (!Array.isArray(body) && proto !== Object.prototype && proto !== null) return;
    const problem = unstorableJson(body);
    if (problem) throw validationFailed([problem]);
  });
}
