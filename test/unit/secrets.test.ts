import { mkdtempSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { SecretBox } from '../../domain/shared/index.ts';

describe('SecretBox', () => {
  it('seals and opens, and never stores the plain text', () => {
    const box = SecretBox.fromKey('11'.repeat(32));
    const sealed = box.seal('hunter2-password');
    expect(sealed.includes(Buffer.from('hunter2'))).toBe(false);
    expect(box.open(sealed)).toBe('hunter2-password');
    // Fresh IV each time.
    expect(box.seal('x').equals(box.seal('x'))).toBe(false);
  });

  it('refuses tampered data and the wrong key', () => {
    const sealed = SecretBox.fromKey('22'.repeat(32)).seal('secret');
    expect(() => SecretBox.fromKey('33'.repeat(32)).open(sealed)).toThrow();
    const tampered = Buffer.from(sealed);
    tampered[tampered.length - 1] = (tampered[tampered.length - 1] ?? 0) ^ 1;
    expect(() => SecretBox.fromKey('22'.repeat(32)).open(tampered)).toThrow();
  });

  it('generates one key per data dir, readable only by its owner', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'gantry-key-'));
    const a = SecretBox.load(undefined, dir);
    const b = SecretBox.load(undefined, dir);
    expect(b.open(a.seal('same key'))).toBe('same key');
    expect(statSync(path.join(dir, 'secret.key')).mode & 0o777).toBe(0o600);
    expect(readFileSync(path.join(dir, 'secret.key'), 'utf8').trim()).toMatch(/^[0-9a-f]{64}$/);
  });

  it('rejects a key of the wrong size', () => {
    expect(() => SecretBox.fromKey('abcd')).toThrow(/32 bytes/);
  });
});
