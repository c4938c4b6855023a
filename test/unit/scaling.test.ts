import { describe, expect, it } from 'vitest';
import { decideScaling, nextCheckMs, type ScalingInput, type ScalingWorker } from '../../domain/endpoints/index.ts';

const queue = (q: Partial<ScalingInput['queue']> = {}): ScalingInput['queue'] => ({
  queued: 0,
  queuedLowPriority: 0,
  inProgress: 0,
  oldestQueuedAgeMs: null,
  ...q,
});
const w = (id: string, state: ScalingWorker['state'], idleForMs = 0, releaseVersion = 1): ScalingWorker => ({
  id,
  state,
  idleForMs,
  releaseVersion,
});

function input(extra: Partial<ScalingInput>): ScalingInput {
  return {
    scalerType: 'QUEUE_DELAY',
    scalerValue: 4,
    workersMin: 0,
    workersMax: 5,
    idleTimeoutSec: 5,
    releaseVersion: 1,
    queue: queue(),
    workers: [],
    rolloutActive: false,
    ...extra,
  };
}

describe('decideScaling: QUEUE_DELAY', () => {
  it('starts a worker for the first queued job at zero workers, before any delay', () => {
    const d = decideScaling(input({ queue: queue({ queued: 1, oldestQueuedAgeMs: 10 }) }));
    expect(d).toMatchObject({ desired: 1, start: 1, drain: [] });
    expect(d.reason).toMatch(/queued and no worker is live/);
  });

  it('adds workers while the oldest job waits longer than value seconds, not before', () => {
    const busy = [w('a', 'busy'), w('b', 'busy')];
    expect(decideScaling(input({ workers: busy, queue: queue({ queued: 3, oldestQueuedAgeMs: 3999 }) })).start).toBe(0);
    const d = decideScaling(input({ workers: busy, queue: queue({ queued: 3, oldestQueuedAgeMs: 4001 }) }));
    // At most half the fleet (at least one) per decision.
    expect(d).toMatchObject({ desired: 3, start: 1 });
    const big = Array.from({ length: 6 }, (_, i) => w(`w${i}`, 'busy'));
    expect(
      decideScaling(input({ workersMax: 100, workers: big, queue: queue({ queued: 50, oldestQueuedAgeMs: 9000 }) })),
    ).toMatchObject({ desired: 9, start: 3 });
  });

  it('does not add workers for jobs that starting workers will take', () => {
    const d = decideScaling(
      input({ workers: [w('a', 'busy'), w('s', 'starting')], queue: queue({ queued: 1, oldestQueuedAgeMs: 60_000 }) }),
    );
    expect(d.start).toBe(0);
  });

  it('never exceeds workers.max and keeps workers.min', () => {
    const busy = Array.from({ length: 5 }, (_, i) => w(`w${i}`, 'busy'));
    expect(
      decideScaling(input({ workers: busy, queue: queue({ queued: 9, oldestQueuedAgeMs: 60_000 }) })),
    ).toMatchObject({ desired: 5, start: 0 });
    expect(decideScaling(input({ workersMin: 2 }))).toMatchObject({ desired: 2, start: 2, drain: [] });
    expect(
      decideScaling(input({ workersMin: 0, workersMax: 0, queue: queue({ queued: 4, oldestQueuedAgeMs: 60_000 }) })),
    ).toMatchObject({ desired: 0, start: 0 });
  });

  it('removes only idle workers, only after idleTimeout, down to workers.min, older releases first', () => {
    const workers = [
      w('young', 'idle', 4_000, 2),
      w('busy', 'busy'),
      w('oldRelease', 'idle', 6_000, 1),
      w('long', 'idle', 60_000, 2),
    ];
    const d = decideScaling(input({ releaseVersion: 2, workers }));
    expect(d.drain).toEqual(['oldRelease', 'long']);
    expect(d.start).toBe(0);
    const keepOne = decideScaling(input({ releaseVersion: 2, workersMin: 3, workers }));
    expect(keepOne.drain).toEqual(['oldRelease']);
    // Scale to zero.
    expect(decideScaling(input({ workers: [w('a', 'idle', 5_000)] })).drain).toEqual(['a']);
  });

  it('removes nothing while a rollout runs or while jobs are queued', () => {
    const workers = [w('a', 'idle', 60_000), w('b', 'idle', 60_000)];
    expect(decideScaling(input({ workers, rolloutActive: true })).drain).toEqual([]);
    expect(decideScaling(input({ workers, queue: queue({ queued: 1, oldestQueuedAgeMs: 1 }) })).drain).toEqual([]);
  });

  it('never scales up for low-priority jobs', () => {
    expect(decideScaling(input({ queue: queue({ queuedLowPriority: 100 }) }))).toMatchObject({ desired: 0, start: 0 });
    const d = decideScaling(
      input({ workers: [w('a', 'busy')], queue: queue({ queuedLowPriority: 100, inProgress: 1 }) }),
    );
    expect(d.start).toBe(0);
  });

  it('does not count draining workers as live', () => {
    const d = decideScaling(input({ workersMin: 1, workers: [w('d', 'draining')] }));
    expect(d).toMatchObject({ desired: 1, start: 1 });
  });
});

describe('decideScaling: REQUEST_COUNT', () => {
  const rc = (extra: Partial<ScalingInput>): ScalingInput =>
    input({ scalerType: 'REQUEST_COUNT', scalerValue: 2, ...extra });

  it('wants ceil((queued + in progress) / value) workers', () => {
    expect(decideScaling(rc({ queue: queue({ queued: 5, inProgress: 0, oldestQueuedAgeMs: 1 }) }))).toMatchObject({
      desired: 3,
      start: 3,
    });
    expect(
      decideScaling(
        rc({
          workers: [w('a', 'busy'), w('b', 'busy')],
          queue: queue({ queued: 3, inProgress: 4, oldestQueuedAgeMs: 1 }),
        }),
      ),
    ).toMatchObject({ desired: 4, start: 2 });
    expect(decideScaling(rc({ scalerValue: 0.5, queue: queue({ queued: 1, oldestQueuedAgeMs: 1 }) }))).toMatchObject({
      desired: 2,
      start: 2,
    });
  });

  it('clamps to workers.max and workers.min', () => {
    expect(decideScaling(rc({ workersMax: 2, queue: queue({ queued: 100, oldestQueuedAgeMs: 1 }) }))).toMatchObject({
      desired: 2,
      start: 2,
    });
    expect(decideScaling(rc({ workersMin: 1 }))).toMatchObject({ desired: 1, start: 1 });
  });

  it('scales down idle workers past idleTimeout to the wanted count', () => {
    const workers = [w('a', 'busy'), w('b', 'idle', 10_000), w('c', 'idle', 20_000), w('d', 'idle', 1_000)];
    // One job in progress at two per worker: one worker is enough; only expired idle ones go.
    const d = decideScaling(rc({ workers, queue: queue({ inProgress: 1 }) }));
    expect(d.drain).toEqual(['c', 'b']);
    expect(d.desired).toBe(1);
  });

  it('ignores low-priority queued jobs for scale-up', () => {
    expect(decideScaling(rc({ queue: queue({ queuedLowPriority: 10 }) }))).toMatchObject({ desired: 0, start: 0 });
  });
});

describe('nextCheckMs', () => {
  it('looks again quickly while anything is there, slowly at rest', () => {
    expect(nextCheckMs({ workers: [], queue: queue() }, 1000, 30_000)).toBe(30_000);
    expect(nextCheckMs({ workers: [w('a', 'idle')], queue: queue() }, 1000, 30_000)).toBe(1000);
    expect(nextCheckMs({ workers: [], queue: queue({ queuedLowPriority: 1 }) }, 1000, 30_000)).toBe(1000);
  });
});

describe('FlashBoot standbys in the autoscaler', () => {
  it('are not live: a queued job at zero live workers asks for a start (the endpoint thaws a standby for it)', () => {
    const d = decideScaling(
      input({ queue: queue({ queued: 1, oldestQueuedAgeMs: 10 }), workers: [w('s', 'standby'), w('t', 'standby')] }),
    );
    expect(d).toMatchObject({ desired: 1, start: 1, drain: [] });
  });

  it('are never drained for idleness, nor counted against workers.max', () => {
    const d = decideScaling(
      input({ workersMax: 1, workers: [w('s', 'standby', 999_999), w('a', 'busy')], queue: queue({ inProgress: 1 }) }),
    );
    expect(d.drain).toEqual([]);
    expect(d.start).toBe(0);
  });

  it('leave the autoscaler at rest', () => {
    expect(nextCheckMs({ workers: [w('s', 'standby')], queue: queue() }, 1000, 30_000)).toBe(30_000);
    expect(nextCheckMs({ workers: [w('s', 'standby'), w('a', 'starting')], queue: queue() }, 1000, 30_000)).toBe(1000);
  });
});
