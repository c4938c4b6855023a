/**
 * When a waiting request should stop waiting: its client hung up, or the app is closing (so that a
 * graceful stop answers long-polls and runsync calls as they stand instead of waiting out their hold).
 */
import type { FastifyInstance, FastifyReply } from 'fastify';

/**
 * The waits of one app's requests. Each request gets a signal of its own, kept in a set while the
 * request is open (no listener on a shared signal: thousands of long-polls stay O(1) each), and
 * aborted when the client hangs up or when the app starts closing (its preClose hooks run before
 * the in-flight requests are awaited).
 */
export class RequestWaits {
  private readonly open = new Set<AbortController>();
  private closingNow = false;

  constructor(app: FastifyInstance) {
    app.addHook('preClose', async () => {
      this.closingNow = true;
      for (const ac of this.open) ac.abort();
      this.open.clear();
    });
  }

  /** True once the app has started closing. */
  get closing(): boolean {
    return this.closingNow;
  }

  /** Aborts when the client hangs up before the answer, or when the app starts closing. */
  signal(reply: FastifyReply): AbortSignal {
    const ac = new AbortController();
    if (this.closingNow) {
      ac.abort();
      return ac.signal;
    }
    this.open.add(ac);
    reply.raw.once('close', () => {
      this.open.delete(ac);
      if (!reply.raw.writableFinished) ac.abort();
    });
    return ac.signal;
  }
}
