/**
 * Signed URLs: a link that carries its own permission, for clients that cannot send an API key
 * (an upload from a build context, a download handed to a browser). The signature binds the
 * purpose, the path and the expiry, so a URL signed for one route, object or moment is worth
 * nothing for another. The server verifies with the same secret; nothing is stored.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

export type SignedUrlCheck = 'ok' | 'expired' | 'invalid';

/**
 * The HMAC input. NUL separates the fields and appears in none of them (signUrl refuses it,
 * verifySignedUrl answers invalid), so no two (purpose, path, expiry) triples share an input; the
 * version tag keeps these MACs apart from any other use of the same secret.
 */
function mac(secret: Buffer, purpose: string, path: string, expires: string): Buffer {
  return createHmac('sha256', secret).update(`gantry-signed-url-v1\0${purpose}\0${path}\0${expires}`).digest();
}

/**
 * `base` + `path` with `expires` (Unix seconds) and `sig` query parameters added. `path` is what the
 * verifying server sees as its request path (starting with `/`, any query of its own is not
 * covered by the signature); `purpose` names the route, e.g. `artifact-upload`.
 */
export function signUrl(base: string, path: string, secret: Buffer, expiresAt: Date, purpose: string): string {
  if (secret.length === 0) throw new Error('signUrl: empty secret');
  if (!path.startsWith('/')) throw new Error(`signUrl: path must start with "/", got "${path}"`);
  if (path.includes('\0') || purpose.includes('\0') || purpose === '') throw new Error('signUrl: bad path or purpose');
  const time = expiresAt.getTime();
  if (!Number.isFinite(time)) throw new Error('signUrl: invalid expiry');
  // Rounded up: a URL never expires before the moment it was signed for.
  const expires = String(Math.ceil(time / 1000));
  const sig = mac(secret, purpose, path, expires).toString('base64url');
  const separator = path.includes('?') ? '&' : '?';
  return `${base.replace(/\/+$/, '')}${path}${separator}expires=${expires}&sig=${sig}`;
}

type Query = URLSearchParams | Record<string, unknown>;

/** One value of a query parameter; a parameter given twice is not one value. */
function single(query: Query, name: string): string | undefined {
  if (query instanceof URLSearchParams) {
    const all = query.getAll(name);
    return all.length === 1 ? all[0] : undefined;
  }
  const value = query[name];
  return typeof value === 'string' ? value : undefined;
}

/**
 * Checks a request against the signature its query carries. The signature is checked first, in
 * constant time: 'expired' is only ever said of a URL this secret did sign for this path and
 * purpose, and a changed expiry is 'invalid'.
 */
export function verifySignedUrl(
  path: string,
  query: Query,
  secret: Buffer,
  purpose: string,
  now: Date,
): SignedUrlCheck {
  const expires = single(query, 'expires');
  const sig = single(query, 'sig');
  if (secret.length === 0 || expires === undefined || sig === undefined) return 'invalid';
  if (!/^[0-9]{1,12}$/.test(expires) || !/^[A-Za-z0-9_-]{43}$/.test(sig)) return 'invalid';
  if (path.includes('\0') || purpose.includes('\0')) return 'invalid';
  // Compared as text: base64url has several spellings of one byte string (the last character's
  // unused bits), and only the canonical one is the signature.
  const given = Buffer.from(sig, 'latin1');
  const expected = Buffer.from(mac(secret, purpose, path, expires).toString('base64url'), 'latin1');
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return 'invalid';
  return now.getTime() >= Number(expires) * 1000 ? 'expired' : 'ok';
}
