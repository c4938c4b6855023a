import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import type { Static, TSchema } from 'typebox';
import { splitArgs } from '../containers/args.ts';
import { validationFailed } from '../errors.ts';

/**
 * One JSON Schema validator for every surface: Fastify routes use it as their validator compiler and
 * the domain calls it directly, so REST, GraphQL and the CLI see the same rules and the same messages.
 */
export const ajv = new Ajv({ allErrors: true, useDefaults: true, coerceTypes: false, strict: false });
addFormats.default(ajv);

/**
 * `{"x-shell-words": true}` on a string: it must split into words as a POSIX shell would (container
 * `args`), so a stray quote is refused when it is written, not when a worker's container fails to start.
 */
export const SHELL_WORDS = { 'x-shell-words': true } as const;
ajv.addKeyword({
  keyword: 'x-shell-words',
  type: 'string',
  errors: true,
  validate: function shellWords(this: unknown, _schema: unknown, data: string): boolean {
    try {
      splitArgs(data);
      return true;
    } catch (err) {
      (shellWords as { errors?: Partial<ErrorObject>[] }).errors = [
        { keyword: 'x-shell-words', message: (err as Error).message, params: {} },
      ];
      return false;
    }
  },
});

/** PostgreSQL's `integer`, which every stored whole number is. */
export const INT32_MAX = 2_147_483_647;

/**
 * A copy of `schema` in which every integer is bounded to PostgreSQL's `integer` range: a
 * larger value is the client's mistake (422 naming the field), not a statement the database refuses.
 */
export function withInt32Bounds(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(withInt32Bounds);
  if (!schema || typeof schema !== 'object') return schema;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(schema)) out[k] = withInt32Bounds(v);
  const type = out.type;
  if (type === 'integer' || (Array.isArray(type) && type.includes('integer'))) {
    if (typeof out.maximum !== 'number' || out.maximum > INT32_MAX) out.maximum = INT32_MAX;
    if (typeof out.minimum !== 'number' || out.minimum < -INT32_MAX - 1) out.minimum = -INT32_MAX - 1;
  }
  return out;
}

/**
 * `{"x-env-total": n}` on environment variables (an object, or GraphQL's `[{key, value}]` list):
 * names and values together stay within n bytes, so no tenant writes megabytes of environment.
 */
ajv.addKeyword({
  keyword: 'x-env-total',
  errors: true,
  validate: function envTotal(this: unknown, max: number, data: unknown): boolean {
    const pairs = Array.isArray(data)
      ? data.map((e) => [String((e as { key?: unknown })?.key ?? ''), String((e as { value?: unknown })?.value ?? '')])
      : data && typeof data === 'object'
        ? Object.entries(data).map(([k, v]) => [k, String(v)])
        : [];
    const total = pairs.reduce((n, [k, v]) => n + Buffer.byteLength(k!) + Buffer.byteLength(v!), 0);
    if (total <= max) return true;
    (envTotal as { errors?: Partial<ErrorObject>[] }).errors = [
      {
        keyword: 'x-env-total',
        message: `must hold at most ${max} bytes of names and values (has ${total})`,
        params: {},
      },
    ];
    return false;
  },
});

const cache = new WeakMap<object, ValidateFunction>();

/** Compiles a request schema (routes and domain alike) with the int32 bounds. */
export function compileSchema(schema: object): ValidateFunction {
  let fn = cache.get(schema);
  if (!fn) {
    fn = ajv.compile(withInt32Bounds(schema) as object);
    cache.set(schema, fn);
  }
  return fn;
}

function compiled(schema: TSchema): ValidateFunction {
  let fn = cache.get(schema);
  if (!fn) {
    fn = compileSchema(schema);
    cache.set(schema, fn);
  }
  return fn;
}

/** `/workers/min` becomes `$.workers.min`; `/ports/0` becomes `$.ports[0]`. */
function jsonPath(instancePath: string): string {
  return (
    '$' +
    instancePath
      .split('/')
      .slice(1)
      .map((seg) => seg.replace(/~1/g, '/').replace(/~0/g, '~'))
      .map((seg) => (/^\d+$/.test(seg) ? `[${seg}]` : /^[A-Za-z_][A-Za-z0-9_]*$/.test(seg) ? `.${seg}` : `['${seg}']`))
      .join('')
  );
}

export function formatErrors(errors: readonly ErrorObject[] | null | undefined): string[] {
  const out = new Set<string>();
  for (const e of errors ?? []) {
    const at = jsonPath(e.instancePath);
    if (e.keyword === 'additionalProperties')
      out.add(`${at}: additional properties '${String(e.params.additionalProperty)}' not allowed`);
    else if (e.keyword === 'required') out.add(`${at}: missing property '${String(e.params.missingProperty)}'`);
    else out.add(`${at}: ${e.message ?? 'is invalid'}`);
  }
  return [...out];
}

/** Validates (and fills defaults into) `value`; throws a `validation` DomainError listing every failure. */
export function validate<S extends TSchema>(schema: S, value: unknown): Static<S> {
  const fn = compiled(schema);
  if (!fn(value)) throw validationFailed(formatErrors(fn.errors));
  return value as Static<S>;
}

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
        stack.push({
          v: item,
          path: /^[A-Za-z_][A-Za-z0-9_]*$/.test(k) ? `${path}.${k}` : `${path}['${k}']`,
          depth: depth + 1,
        });
      }
    }
  }
  return undefined;
}
