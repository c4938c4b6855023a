/**
 * Every call the console makes: the REST API on this origin with the key from this tab's session
 * storage as `Authorization: Bearer` (never in a URL, never a cookie). A 401 from any call signs
 * out: the key is forgotten and the sign-in form shows why. The answers' types come from the API's
 * OpenAPI document (./generated-api-types.ts; `npm run generate:console-types` writes it again,
 * test/api/cli-api-types.test.ts fails while it is out of date).
 */
import type { Answer } from './generated-api-types.ts';

export type { Answer };

const KEY_ITEM = 'gantry.console.key';

export const storedKey = (): string | null => sessionStorage.getItem(KEY_ITEM);
export const storeKey = (key: string): void => sessionStorage.setItem(KEY_ITEM, key);

let signedOut: (message: string) => void = () => {};
/** The app's handler of a sign-out (one at a time). */
export function onSignOut(handler: (message: string) => void): void {
  signedOut = handler;
}
export function signOut(message = ''): void {
  sessionStorage.removeItem(KEY_ITEM);
  signedOut(message);
}

export class ApiError extends Error {
  readonly status: number;
  /** The problem's `errors`: `$.field.path: message` lines (validation). */
  readonly errors: string[];
  constructor(status: number, message: string, errors: string[] = []) {
    super(message);
    this.status = status;
    this.errors = errors;
  }
}

/**
 * A validation problem's errors by field: `$.workers.max: must be >= 0` becomes
 * `{ 'workers.max': 'must be >= 0' }`; errors without a field path go under `''`.
 */
export function fieldErrors(errors: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const e of errors) {
    const m = /^\$\.?([^:\s]*):\s*(.*)$/s.exec(e);
    const [field, message] = m ? [m[1]!.replace(/\[(\d+)\]/g, '.$1'), m[2]!] : ['', e];
    out[field] = out[field] ? `${out[field]}; ${message}` : message;
  }
  return out;
}

export const REFUSED = 'The API refused the key (401): it is wrong, expired or revoked. Sign in with another key.';

/** GET a JSON answer of the REST API; a problem's detail as the error otherwise. */
export function get<T>(path: string, key: string | null = storedKey()): Promise<T> {
  return send<T>('GET', path, undefined, key);
}

/**
 * One call of the REST API with a JSON body (or none); the JSON answer, undefined for a 204.
 * A problem answer throws an ApiError with its detail and field errors.
 */
export async function send<T>(
  method: 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE',
  path: string,
  body?: unknown,
  key: string | null = storedKey(),
): Promise<T> {
  if (!key) {
    signOut('Sign in with an API key.');
    throw new ApiError(401, 'signed out');
  }
  const headers: Record<string, string> = { authorization: `Bearer ${key}`, accept: 'application/json' };
  if (body !== undefined) headers['content-type'] = 'application/json';
  const r = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: 'omit',
    cache: 'no-store',
  });
  const answer = (await r.json().catch(() => undefined)) as
    { detail?: string; error?: string; errors?: string[] } | undefined;
  if (r.status === 401) {
    signOut(REFUSED);
    throw new ApiError(401, REFUSED);
  }
  if (!r.ok)
    throw new ApiError(
      r.status,
      answer?.detail ?? answer?.error ?? `the API answered ${r.status}`,
      Array.isArray(answer?.errors) ? answer.errors : [],
    );
  return answer as T;
}

/** An error's message for the page. */
export const messageOf = (err: unknown): string => (err instanceof Error ? err.message : String(err));

/** GET /v2/serverless/{id}: an endpoint, as the list and every endpoint page read it. */
export type Endpoint = Answer<'/v2/serverless/{id}', 'get'>;
/** GET /v2/{id}/health (the job API, which the OpenAPI document does not describe). */
export interface Health {
  jobs: { completed: number; failed: number; inProgress: number; inQueue: number; retried: number };
  workers: Record<string, number>;
}
export type Metrics = Answer<'/v2/serverless/{id}/metrics', 'get'>;
export type MetricsPoint = Metrics['points'][number];
