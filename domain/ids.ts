import { randomBytes } from 'node:crypto';

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

/** API keys: 40 base62 characters behind a recognisable prefix. */
export const newApiKey = (): string => `gntr_${randomString(40, BASE62)}`;
