/** The hand-off registry of runsync jobs to waiting takes (domain/jobs/handoff.ts) on its own. */
import { describe, expect, it } from 'vitest';
import { TakeOffers, type TakenJob } from '../../domain/jobs/index.ts';

const job = (id: string) => ({ id, input: {} }) as unknown as TakenJob;

describe('TakeOffers', () => {
  it('hands to the longest-waiting open take of the endpoint, once', async () => {
    const offers = new TakeOffers();
    const a = offers.offer('ep1', 'wa');
    const b = offers.offer('ep1', 'wb');
    const other = offers.offer('ep2', 'wc');
    expect(offers.waiting).toBe(3);

    const claimed = offers.claim('ep1');
    expect(claimed).toBe(a);
    await a.claimed;
    claimed!.deliver([job('j1')]);
    // Claimed: the take gets what its claimer delivered, and cannot be claimed again.
    expect(await a.withdraw()).toEqual([job('j1')]);
    expect(offers.claim('ep1')).toBe(b);
    expect(offers.claim('ep1')).toBeUndefined();
    expect(offers.waiting).toBe(1);
    expect(other.withdraw()).toBeUndefined();
    expect(offers.waiting).toBe(0);
    expect(offers.claim('ep2')).toBeUndefined();
  });

  it('passes over a take whose worker hung up, and forgets a withdrawn one', () => {
    const offers = new TakeOffers();
    const hangUp = new AbortController();
    offers.offer('ep', 'gone', hangUp.signal);
    const withdrawn = offers.offer('ep', 'left');
    const stays = offers.offer('ep', 'stays');
    hangUp.abort();
    expect(withdrawn.withdraw()).toBeUndefined();
    expect(offers.claim('ep')?.workerId).toBe('stays');
    expect(stays.open).toBe(false);
    expect(offers.waiting).toBe(0);
  });

  it('delivers nothing when the claimer failed, so the take looks again', async () => {
    const offers = new TakeOffers();
    const a = offers.offer('ep', 'w');
    offers.claim('ep')!.deliver([]);
    expect(await a.withdraw()).toEqual([]);
  });
});
