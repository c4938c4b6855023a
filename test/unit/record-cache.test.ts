/**
 * The record cache of the hot request paths (domain/shared/record-cache.ts) on its own: what it remembers,
 * for how long, and what it never remembers. test/security/revocation-bound.test.ts shows the same
 * bound on every request path of the API.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { RECORD_CACHE_MAX, RecordCache, RecordCaches, REVOCATION_BOUND_MS } from '../../domain/shared/index.ts';

describe('RecordCache', () => {
  it('remembers a found record for the bound, counted from before its read, however long the read took', async () => {
    const cache = new RecordCache<{ v: number }>(500);
    let reads = 0;
    const load = async (): Promise<{ v: number }> => {
      reads++;
      await sleep(300);
      return { v: reads };
    };
    const started = performance.now();
    expect(await cache.get('a', load)).toEqual({ v: 1 });
    expect(await cache.get('a', load)).toEqual({ v: 1 });
    expect(reads).toBe(1);
    // 500 ms after the read began, not after it ended (800 ms): by then the record is read again.
    await sleep(Math.max(0, started + 510 - performance.now()));
    expect(await cache.get('a', load)).toEqual({ v: 2 });
    expect(reads).toBe(2);
  });

  it('never remembers a miss or a failure', async () => {
    const cache = new RecordCache<{ v: number }>(60_000);
    let reads = 0;
    expect(
      await cache.get('k', async () => {
        reads++;
        return undefined;
      }),
    ).toBeUndefined();
    await expect(
      cache.get('k', async () => {
        reads++;
        throw new Error('invalid');
      }),
    ).rejects.toThrow('invalid');
    expect(
      await cache.get('k', async () => {
        reads++;
        return { v: 3 };
      }),
    ).toEqual({ v: 3 });
    expect(reads).toBe(3);
    expect(cache.size).toBe(1);
  });

  it('forgets on demand, and does not store a read that began before the forgetting', async () => {
    const cache = new RecordCache<{ worker: string }>(60_000);
    await cache.get('k1', async () => ({ worker: 'w1' }));
    await cache.get('k2', async () => ({ worker: 'w2' }));
    cache.forget((r) => r.worker === 'w1');
    expect(cache.size).toBe(1);

    let release!: () => void;
    const pending = cache.get('k3', () => new Promise((resolve) => (release = () => resolve({ worker: 'w3' }))));
    cache.forget((r) => r.worker === 'w3');
    release();
    expect(await pending).toEqual({ worker: 'w3' });
    let reads = 0;
    await cache.get('k3', async () => (reads++, { worker: 'w3' }));
    expect(reads).toBe(1);

    cache.clear();
    expect(cache.size).toBe(0);
  });

  it('holds at most its size bound, dropping the least recently used', async () => {
    const cache = new RecordCache<{ n: number }>(60_000, 3);
    for (const n of [1, 2, 3]) await cache.get(`k${n}`, async () => ({ n }));
    await cache.get('k1', async () => ({ n: -1 })); // used: k2 is now the least recent
    await cache.get('k4', async () => ({ n: 4 }));
    expect(cache.size).toBe(3);
    let reads = 0;
    expect(await cache.get('k1', async () => (reads++, { n: -1 }))).toEqual({ n: 1 });
    expect(await cache.get('k2', async () => (reads++, { n: 22 }))).toEqual({ n: 22 });
    expect(reads).toBe(1);
  });

  it('gives every kind of record the one bound and the one size bound', () => {
    const caches = new RecordCaches();
    expect(caches.boundMs).toBe(REVOCATION_BOUND_MS);
    expect([caches.keys.ttlMs, caches.workers.ttlMs, caches.endpoints.ttlMs]).toEqual([
      REVOCATION_BOUND_MS,
      REVOCATION_BOUND_MS,
      REVOCATION_BOUND_MS,
    ]);
    expect(RECORD_CACHE_MAX).toBe(10_000);
  });

  it("forgets a key, or every key of an account, on the key-change channel's notice; and all of them when the channel comes or goes", async () => {
    const caches = new RecordCaches();
    const key = (accountId: string) => async () => ({
      principal: { accountId, keyId: accountId, scopes: new Set<never>(), endpointIds: [], isAdmin: false },
      expiresAt: null,
    });
    for (const [hash, account] of [
      ['h1', 'a1'],
      ['h2', 'a1'],
      ['h3', 'a2'],
      ['h4', 'a3'],
    ] as const)
      await caches.keys.get(hash, key(account));
    expect(caches.followsChanges).toBe(false);
    caches.recordChanged('key:h4');
    caches.recordChanged('account:a1');
    caches.recordChanged('nonsense');
    let reads = 0;
    const reread = async () => (reads++, undefined);
    for (const hash of ['h1', 'h2', 'h3', 'h4']) await caches.keys.get(hash, reread);
    expect(reads).toBe(3); // only h3 (account a2) was kept
    caches.changeFeed(true);
    expect(caches.followsChanges).toBe(true);
    expect(caches.keys.size).toBe(0);
    await caches.keys.get('h5', key('a5'));
    caches.changeFeed(false);
    expect([caches.followsChanges, caches.keys.size]).toEqual([false, 0]);
  });
});
