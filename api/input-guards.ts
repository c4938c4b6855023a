import type { FastifyInstance } from 'fastify';
import { validationFailed } from '../domain/errors.ts';

/** Deeper JSON than any Gantry shape or sensible job input; refused before anything walks it recursively. */
export const MAX_JSON_DEPTH = 64;

/**
 * The first thing in a parsed JSON value that PostgreSQL cannot store or that is nested past
 * `maxDepth`: a NUL character in a string or a key (text and jsonb refuse it). Iterative, so a
 * 100,000-deep array costs a loop, not a stack overflow. Returns `$.path: reason`, or undefined.
 */
export function unstorableJson(value: unknown, root = '$', maxDepth = MAX_JSON_DEPTH): string | undefined {
  const stack: Array<{ v: unknown; path: string; depth: number }> = [{ v: value, path: root, depth: 0 }];
  while (stack.length > 0) {
    const { v, path, depth } = stack.pop()!;
    if (typeof v === 'string') {
      if (v.includes('\0')) return `${path}: must not contain NUL characters`;
      continue;
    }
    if (!v || typeof v !== 'object') continue;
    if (depth >= maxDepth) return `${path}: nested deeper than ${maxDepth} levels`;
    if (Array.isArray(v)) {
      for (let i = 0; i < v.length; i++) stack.push({ v: v[i], path: `${path}[${i}]`, depth: depth + 1 });
    } else {
      for (const [k, item] of Object.entries(v)) {
        if (k.includes('\0')) return `${path}: a key must not contain NUL characters`;
        stack.push({ v: item, path: /^[A-Za-z_][A-Za-z0-9_]*$/.test(k) ? `${path}.${k}` : `${path}['${k}']`, depth: depth + 1 });
      }
    }
  }
  return undefined;
}

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
