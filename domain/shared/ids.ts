import { createHash, randomBytes } from 'node:crypto';

const LOWER_ALNUM = 'abcdefghijklmnopqrstuvwxyz0123456789';
const BASE62 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

/** Uniformly random string over `alphabet` (rejection sampling keeps it unbiased). */
export function randomString(length: number, alphabet = LOWER_ALNUM): string {
  const limit = 256 - (256 % alphabet.length);
  let out = '';
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte < limit) out += alphabet[byte % alphabet.length];
      if (out.length === length) break;
    }
  }
  return out;
}

/** Resource ids: short, lowercase, URL- and DNS-safe (endpoint ids become host names). */
export const newId = (): string => randomString(14);

/**
 * A secret that names something (a flash login request): 43 base62 characters, about 256 bits.
 * Letters and digits only, so it is one word anywhere (a URL, a command line: never an option's `-`).
 */
export const newSecretId = (): string => randomString(43, BASE62);

/** API keys: 40 base62 characters behind a recognisable prefix. */
export const newApiKey = (): string => `gntr_${randomString(40, BASE62)}`;

/**
 * An id that the same inputs always give (a retried step makes the same record, never a second
 * one), in the shape of newId. Ids are not credentials: knowing one reaches nothing without a key.
 */
export function stableId(...parts: string[]): string {
  const digest = createHash('sha256').update(parts.join('\0')).digest();
  let out = '';
  for (let i = 0; out.length < 14; i++) out += LOWER_ALNUM[digest[i]! % LOWER_ALNUM.length];
  return out;
}
