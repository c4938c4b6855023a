import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import type { Static, TSchema } from 'typebox';
import { splitArgs } from './container-args.ts';
import { validationFailed } from './errors.ts';

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
      (shellWords as { errors?: Partial<ErrorObject>[] }).errors = [{ keyword: 'x-shell-words', message: (err as Error).message, params: {} }];
      return false;
    }
  },
});

const cache = new WeakMap<object, ValidateFunction>();

function compiled(schema: TSchema): ValidateFunction {
  let fn = cache.get(schema);
  if (!fn) {
    fn = ajv.compile(schema);
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
    if (e.keyword === 'additionalProperties') out.add(`${at}: additional properties '${String(e.params.additionalProperty)}' not allowed`);
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
