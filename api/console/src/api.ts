/**
 * Every call the console makes: the REST API on this origin with the key from this tab's session
 * storage as `Authorization: Bearer` (never in a URL, never a cookie). A 401 from any call signs
 * out: the key is forgotten and the sign-in form shows why.
 */
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
  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}

export const REFUSED = 'The API refused the key (401): it is wrong, expired or revoked. Sign in with another key.';

/** GET a JSON answer of the REST API; a problem's detail as the error otherwise. */
export async function get<T>(path: string, key: string | null = storedKey()): Promise<T> {
  if (!key) {
    signOut('Sign in with an API key.');
    throw new ApiError(401, 'signed out');
  }
  const r = await fetch(path, {
    headers: { authorization: `Bearer ${key}`, accept: 'application/json' },
    credentials: 'omit',
    cache: 'no-store',
  });
  const body = (await r.json().catch(() => undefined)) as { detail?: string; error?: string } | undefined;
  if (r.status === 401) {
    signOut(REFUSED);
    throw new ApiError(401, REFUSED);
  }
  if (!r.ok) throw new ApiError(r.status, body?.detail ?? body?.error ?? `the API answered ${r.status}`);
  return body as T;
}

export interface Endpoint {
  id: string;
  name: string;
  type: string;
  image: string;
  workers: { min: number; max: number };
  createdAt: string;
}
export interface Health {
  jobs: { completed: number; failed: number; inProgress: number; inQueue: number; retried: number };
  workers: Record<string, number>;
}
export interface MetricsPoint {
  time: string;
  jobs: { completed: number; failed: number; timedOut: number; cancelled: number };
  executionMs: { p50: number | null; p90: number | null; avg: number | null };
  delayMs: { p50: number | null; p90: number | null; avg: number | null };
  coldStarts: { count: number; avgMs: number | null; maxMs: number | null };
  thaws: number;
  workers: Record<'pending' | 'initializing' | 'idle' | 'running' | 'unhealthy' | 'standby', number>;
}
export interface Metrics {
  endpointId: string;
  window: string;
  step: string;
  from: string;
  to: string;
  points: MetricsPoint[];
}
