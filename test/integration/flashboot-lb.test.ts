/**
 * FlashBoot on a load-balancing endpoint: an idle worker stands by frozen, and the request that
 * arrives at zero live workers thaws it through the proxy: the same process answers (its request
 * count goes on), without its 3 s start-up again.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call } from '../support/platform.ts';
import { ensureLbWorkerImage, LB_WORKER_IMAGE } from '../support/lb.ts';
import { containerState, startOneHostPlatform, until, type OneHostPlatform } from '../support/orchestration.ts';

describe('FlashBoot on a load-balancing endpoint', () => {
  let f: OneHostPlatform;
  beforeAll(async () => {
    ensureLbWorkerImage();
    process.env.GANTRY_LB_HEALTH = JSON.stringify({ intervalMs: 300 });
    f = await startOneHostPlatform('flashboot-lb-host');
  }, 600_000);
  afterAll(async () => {
    await f?.stop();
  }, 120_000);

  it('thaws the standby for the request that arrives at zero live workers, which the same process answers', async () => {
    const created = await call(f.p.url, 'POST', '/v2/serverless', {
      key: f.p.adminKey,
      body: {
        name: 'fb-lb',
        type: 'LOAD_BALANCING',
        image: LB_WORKER_IMAGE,
        env: { READY_DELAY_MS: '3000' },
        workers: { min: 0, max: 1 },
        scaling: { type: 'REQUEST_COUNT', value: 4, idleTimeout: 1 },
        flashboot: 'FLASHBOOT',
      },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const id = created.body.id as string;
    const base = created.body.requestUrls.base as string;
    const post = async () => {
      const t = Date.now();
      const r = await call(base, 'POST', '/process', { key: f.p.adminKey, body: { prompt: 'hi' } });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      return { body: r.body as { worker: string }, ms: Date.now() - t };
    };
    /** Requests its process has served (this one included). */
    const served = async () => (await call(base, 'GET', '/stats', { key: f.p.adminKey })).body.served as number;
    const cold = await post();
    expect(cold.ms).toBeGreaterThan(3000);
    const before = await served();
    const w = await until(
      'the worker standing by, its container paused',
      async () => {
        const rows = await f.p.ctx.db.worker.findMany({ where: { endpointId: id, status: 'STANDBY' } });
        return rows[0] && containerState(rows[0].id) === 'paused' ? rows[0] : undefined;
      },
      60_000,
      300,
    );
    expect(cold.body.worker).toBe(w.id);
    const warm = await post();
    expect(warm.body.worker).toBe(w.id);
    // Its start-up (3 s) is not paid again: the same process answers (its count goes on).
    expect(await served()).toBe(before + 2);
    expect(warm.ms).toBeLessThan(cold.ms);
    expect(containerState(w.id)).toBe('running');
  }, 300_000);
});
