/**
 * Idempotent submits (docs/jobs.md): the `Idempotency-Key` request header of `/run` and `/runsync`
 * (IETF draft "The Idempotency-Key HTTP Header Field"), read and checked here, and the fingerprint
 * that tells a repeat of a request from another request under the same key.
 */
import { createHash } from 'node:crypto';
import { DomainError } from '../errors.ts';

/** The request header (as Node names it: lower case), and the answer's header on a repeat. */
export const IDEMPOTENCY_KEY_HEADER = 'idempotency-key';
export const IDEMPOTENT_REPLAYED_HEADER = 'Idempotent-Replayed';

export const MAX_IDEMPOTENCY_KEY_LENGTH = 255;

/** Printable ASCII (space to tilde): what an HTTP field value can carry unchanged. */
const PRINTABLE = /^[\x20-\x7e]+$/;

const badKey = (why: string): DomainError =>
  new DomainError(
    'bad_request',
    `the Idempotency-Key header ${why}: it must be 1 to ${MAX_IDEMPOTENCY_KEY_LENGTH} printable ASCII characters`,
  );

/**
 * The request's `Idempotency-Key` field lines as they came (`rawHeaders`: name, value, name, ...):
 * one value, or every value when the header is given more than once. Node joins repeated lines
 * into one value (`a, b`), which would read as one key.
 */
export function idempotencyHeaderOf(rawHeaders: readonly string[]): string | string[] | undefined {
  const values: string[] = [];
  for (let i = 0; i + 1 < rawHeaders.length; i += 2)
    if (rawHeaders[i]!.toLowerCase() === IDEMPOTENCY_KEY_HEADER) values.push(rawHeaders[i + 1]!);
  return values.length === 0 ? undefined : values.length === 1 ? values[0] : values;
}

/**
 * The key a request carries (undefined: none). The draft writes it as a Structured Field string
 * (`"8e03978e-..."`); clients of other services send it bare. Both are read, and name the same key.
 * A bare key holds no comma: `a, b` is what two headers become when a proxy joins them (a quoted
 * key may hold one). The value is never echoed: a key may be as guessable as the client made it,
 * but it is the client's.
 */
export function idempotencyKeyOf(header: string | string[] | undefined): string | undefined {
  if (header === undefined) return undefined;
  if (Array.isArray(header)) {
    if (header.length !== 1) throw badKey('is given more than once');
    header = header[0]!;
  }
  let key = header;
  if (key.length >= 2 && key.startsWith('"') && key.endsWith('"')) {
    const inner = unquoted(key);
    if (inner === undefined) throw badKey('is not a valid quoted string');
    key = inner;
  } else if (key.includes(',')) {
    throw badKey('is given more than once (a bare key holds no comma; quote a key that has one)');
  }
  if (key.length === 0) throw badKey('is empty');
  if (key.length > MAX_IDEMPOTENCY_KEY_LENGTH) throw badKey('is too long');
  if (!PRINTABLE.test(key)) throw badKey('holds characters other than printable ASCII');
  return key;
}

/** The content of a Structured Field string (`"..."`, whose only escapes are `\"` and `\\`); undefined if malformed. */
function unquoted(s: string): string | undefined {
  let out = '';
  for (let i = 1; i < s.length - 1; i++) {
    let c = s[i];
    if (c === '"') return undefined;
    if (c === '\\') {
      c = s[++i];
      if (i >= s.length - 1 || (c !== '"' && c !== '\\')) return undefined;
    }
    out += c;
  }
  return out;
}

/** JSON with object keys in sorted order: the same request body gives the same text however it was written. */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/**
 * SHA-256 of what a submit asks for: the call (`run` or `runsync`), the endpoint or model its path
 * names, and its body in canonical JSON. Query parameters (runsync's `wait`) are not part of it:
 * they change how long the answer waits, not the job.
 */
export function requestFingerprint(call: 'run' | 'runsync', target: string, body: unknown): Buffer {
  return createHash('sha256')
    .update(`${call}\n${target}\n${canonicalJson(body)}`)
    .digest();
}
