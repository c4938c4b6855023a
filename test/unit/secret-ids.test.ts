/**
 * Secret ids (domain/shared/ids.ts newSecretId, the flash login request ids): letters and digits
 * only, so that one is a single word on any command line; one that began with `-` was read as an
 * option by `gantry flash deny <id>`.
 */
import { expect, it } from 'vitest';
import { newSecretId } from '../../domain/shared/index.ts';

it('are 43 letters and digits, all different', () => {
  const ids = Array.from({ length: 2000 }, () => newSecretId());
  for (const id of ids) expect(id).toMatch(/^[A-Za-z0-9]{43}$/);
  expect(new Set(ids).size).toBe(ids.length);
  // Every letter and digit turns up: the alphabet is the whole of base62.
  expect(new Set(ids.join('')).size).toBe(62);
});
