/**
 * Hand-off of runsync jobs to takes that wait in this process. A worker's long-poll that found its
 * queue empty leaves an offer here while it waits; a runsync submission to that endpoint claims the
 * longest-waiting offer and inserts its job already taken by that worker (JobStore.insertTaken), so
 * the job never sits in the queue: one statement instead of an insert, a wake-up and a take. The
 * client is still answered only with the result, whose commit is durable.
 *
 * An offer is only a hint of a waiting take, like a wake-up: a take that ends meanwhile (the worker
 * hung up) gets the job all the same and its route puts it back in the queue (untakeJobs).
 */
import type { TakenJob } from './rows.ts';

export class TakeOffer {
  private state: 'open' | 'claimed' | 'withdrawn' = 'open';
  private markClaimed!: () => void;
  /** Resolves when a submission claims the offer (never, when it is withdrawn first). */
  readonly claimed = new Promise<void>((resolve) => (this.markClaimed = resolve));
  private deliverTo!: (jobs: TakenJob[]) => void;
  private readonly delivery = new Promise<TakenJob[]>((resolve) => (this.deliverTo = resolve));

  constructor(
    private readonly owner: TakeOffers,
    readonly endpointId: string,
    readonly workerId: string,
    /** The take's abort signal: an offer whose worker already hung up is passed over. */
    readonly abort: AbortSignal | undefined,
  ) {}

  get open(): boolean {
    return this.state === 'open' && !this.abort?.aborted;
  }

  /** Called by TakeOffers.claim only. */
  claim(): void {
    this.state = 'claimed';
    this.markClaimed();
  }

  /** The claimer's result: the job it inserted for this worker, or none when its insert failed. */
  deliver(jobs: TakenJob[]): void {
    this.deliverTo(jobs);
  }

  /**
   * The take stops waiting: an open offer is withdrawn (undefined), a claimed one yields what its
   * claimer delivers, which the take must return (the job is already this worker's).
   */
  withdraw(): Promise<TakenJob[]> | undefined {
    if (this.state === 'claimed') return this.delivery;
    this.state = 'withdrawn';
    this.owner.remove(this);
    return undefined;
  }
}

export class TakeOffers {
  /** Per endpoint, in the order the takes began waiting. */
  private readonly byEndpoint = new Map<string, Set<TakeOffer>>();

  /** Registers a waiting take of `workerId`; the take withdraws it when it stops waiting. */
  offer(endpointId: string, workerId: string, abort?: AbortSignal): TakeOffer {
    const offer = new TakeOffer(this, endpointId, workerId, abort);
    let set = this.byEndpoint.get(endpointId);
    if (!set) this.byEndpoint.set(endpointId, (set = new Set()));
    set.add(offer);
    return offer;
  }

  /** The longest-waiting open take of the endpoint, now claimed (the caller must deliver to it). */
  claim(endpointId: string): TakeOffer | undefined {
    const set = this.byEndpoint.get(endpointId);
    if (!set) return undefined;
    for (const offer of set) {
      set.delete(offer);
      if (!offer.open) continue;
      if (set.size === 0) this.byEndpoint.delete(endpointId);
      offer.claim();
      return offer;
    }
    this.byEndpoint.delete(endpointId);
    return undefined;
  }

  remove(offer: TakeOffer): void {
    const set = this.byEndpoint.get(offer.endpointId);
    if (!set) return;
    set.delete(offer);
    if (set.size === 0) this.byEndpoint.delete(offer.endpointId);
  }

  /** Takes waiting here, for tests. */
  get waiting(): number {
    let n = 0;
    for (const set of this.byEndpoint.values()) n += set.size;
    return n;
  }
}
