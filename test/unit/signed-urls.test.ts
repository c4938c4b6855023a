/**
 * Signed URLs (domain/blobs/signed-urls.ts): a URL verifies for its own path, purpose and expiry only,
 * and an expired one is told apart from a forged one only when it was really signed.
 */
import { describe, expect, it } from 'vitest';
import { signUrl, verifySignedUrl } from '../../domain/blobs/index.ts';

const secret = Buffer.alloc(32, 7);
const now = new Date('2026-01-01T00:00:00Z');
const inAnHour = new Date(now.getTime() + 3600_000);
const PATH = '/v2/artifacts/art_123/upload';

/** The request path and query a server would see for a signed URL. */
function request(url: string): { path: string; query: URLSearchParams } {
  const u = new URL(url);
  return { path: u.pathname, query: u.searchParams };
}

describe('signed URLs', () => {
  it('verifies a URL it signed, until it expires', () => {
    const url = signUrl('https://gantry.example/', PATH, secret, inAnHour, 'artifact-upload');
    expect(url.startsWith(`https://gantry.example${PATH}?expires=${inAnHour.getTime() / 1000}&sig=`)).toBe(true);
    const { path, query } = request(url);
    expect(verifySignedUrl(path, query, secret, 'artifact-upload', now)).toBe('ok');
    // A plain object query (as Fastify parses one) is read the same way.
    expect(verifySignedUrl(path, Object.fromEntries(query), secret, 'artifact-upload', now)).toBe('ok');
    expect(verifySignedUrl(path, query, secret, 'artifact-upload', new Date(inAnHour.getTime() - 1))).toBe('ok');
  });

  it('says expired once the moment has come', () => {
    const { path, query } = request(signUrl('http://h', PATH, secret, inAnHour, 'artifact-upload'));
    expect(verifySignedUrl(path, query, secret, 'artifact-upload', inAnHour)).toBe('expired');
    expect(verifySignedUrl(path, query, secret, 'artifact-upload', new Date(inAnHour.getTime() + 86_400_000))).toBe(
      'expired',
    );
  });

  it('refuses a changed path', () => {
    const { path, query } = request(signUrl('http://h', PATH, secret, inAnHour, 'artifact-upload'));
    expect(verifySignedUrl(path.replace('art_123', 'art_124'), query, secret, 'artifact-upload', now)).toBe('invalid');
    expect(verifySignedUrl(`${path}/`, query, secret, 'artifact-upload', now)).toBe('invalid');
  });

  it('refuses a changed expiry, even one that has passed (never "expired" for a forgery)', () => {
    const { path, query } = request(signUrl('http://h', PATH, secret, inAnHour, 'artifact-upload'));
    const later = new URLSearchParams(query);
    later.set('expires', String(Number(query.get('expires')) + 3600));
    expect(verifySignedUrl(path, later, secret, 'artifact-upload', now)).toBe('invalid');
    const earlier = new URLSearchParams(query);
    earlier.set('expires', '1000');
    expect(verifySignedUrl(path, earlier, secret, 'artifact-upload', now)).toBe('invalid');
  });

  it('refuses another purpose, another secret, and a tampered or missing signature', () => {
    const { path, query } = request(signUrl('http://h', PATH, secret, inAnHour, 'artifact-upload'));
    expect(verifySignedUrl(path, query, secret, 'artifact-download', now)).toBe('invalid');
    expect(verifySignedUrl(path, query, Buffer.alloc(32, 8), 'artifact-upload', now)).toBe('invalid');
    const sig = query.get('sig')!;
    const flipped = new URLSearchParams(query);
    flipped.set('sig', (sig[0] === 'A' ? 'B' : 'A') + sig.slice(1));
    expect(verifySignedUrl(path, flipped, secret, 'artifact-upload', now)).toBe('invalid');
    const noSig = new URLSearchParams(query);
    noSig.delete('sig');
    expect(verifySignedUrl(path, noSig, secret, 'artifact-upload', now)).toBe('invalid');
    const twice = new URLSearchParams(query);
    twice.append('expires', query.get('expires')!);
    expect(verifySignedUrl(path, twice, secret, 'artifact-upload', now)).toBe('invalid');
    expect(verifySignedUrl(path, { expires: query.get('expires'), sig: [sig] }, secret, 'artifact-upload', now)).toBe(
      'invalid',
    );
  });

  it('refuses a non-canonical spelling of the signature', () => {
    const { path, query } = request(signUrl('http://h', PATH, secret, inAnHour, 'artifact-upload'));
    const sig = query.get('sig')!;
    // 32 bytes in 43 base64url characters leave the last character's low 2 bits unused: flipping
    // one decodes to the same bytes, but it is not the signature that was issued.
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    const last = alphabet.indexOf(sig.at(-1)!);
    const variant = sig.slice(0, -1) + alphabet[last ^ 1];
    expect(Buffer.from(variant, 'base64url')).toEqual(Buffer.from(sig, 'base64url'));
    const q = new URLSearchParams(query);
    q.set('sig', variant);
    expect(verifySignedUrl(path, q, secret, 'artifact-upload', now)).toBe('invalid');
  });

  it("keeps a base URL's own path and refuses to sign what it could not verify", () => {
    expect(
      signUrl('https://example.com/gantry/', '/x', secret, inAnHour, 'p').startsWith(
        'https://example.com/gantry/x?expires=',
      ),
    ).toBe(true);
    expect(() => signUrl('http://h', 'x', secret, inAnHour, 'p')).toThrow(/start with/);
    expect(() => signUrl('http://h', '/x', Buffer.alloc(0), inAnHour, 'p')).toThrow(/secret/);
    expect(() => signUrl('http://h', '/x', secret, new Date(Number.NaN), 'p')).toThrow(/expiry/);
    expect(() => signUrl('http://h', '/x', secret, inAnHour, '')).toThrow();
  });
});
