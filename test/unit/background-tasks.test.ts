/**
 * The background-task runner (infra/background-tasks.ts): timed tasks run on their schedule, never
 * overlap themselves, skip a tick another process holds the lock for, and stop cleanly; listener
 * tasks are subscribed while running. The list itself names every task once.
 */
import { describe, expect, it } from 'vitest';
import {
  backgroundTasks,
  startBackgroundTasks,
  TASK_LOCKS,
  type BackgroundTask,
  type TaskRunner,
} from '../../infra/background-tasks.ts';
import type { JobRuntime } from '../../domain/jobs/index.ts';
import { jobSettings } from '../../domain/jobs/index.ts';

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

function runner(held = new Set<number>()): TaskRunner & { warnings: string[] } {
  const warnings: string[] = [];
  return {
    warnings,
    async exclusively(key, fn) {
      if (held.has(key)) return false;
      held.add(key);
      try {
        await fn();
      } finally {
        held.delete(key);
      }
      return true;
    },
    log: (_level, msg) => void warnings.push(msg),
  };
}

describe('background tasks', () => {
  it('runs timed tasks on their schedule without overlapping a run still under way, and reports failures', async () => {
    let runs = 0;
    let concurrent = 0;
    let most = 0;
    let once = 0;
    const tasks: BackgroundTask[] = [
      {
        kind: 'timed',
        name: 'slow',
        does: 'takes longer than its interval',
        schedule: { everyMs: 20 },
        lock: null,
        run: async () => {
          runs++;
          most = Math.max(most, ++concurrent);
          await sleep(70);
          concurrent--;
        },
      },
      {
        kind: 'timed',
        name: 'once',
        does: 'runs once',
        schedule: { onceAfterMs: 10 },
        lock: null,
        run: async () => void once++,
      },
      {
        kind: 'timed',
        name: 'broken',
        does: 'fails',
        schedule: { onceAfterMs: 10 },
        lock: null,
        run: async () => Promise.reject(new Error('boom')),
      },
    ];
    const r = runner();
    const running = startBackgroundTasks(tasks, r);
    await sleep(300);
    await running.stop();
    expect(runs).toBeGreaterThanOrEqual(2);
    expect(most).toBe(1);
    expect(once).toBe(1);
    expect(r.warnings).toEqual(['background task "broken" failed']);
  });

  it('skips a tick whose lock another process holds, and stop waits for a run under way', async () => {
    const held = new Set([1]);
    let lockedRuns = 0;
    let finished = false;
    const running = startBackgroundTasks(
      [
        {
          kind: 'timed',
          name: 'locked elsewhere',
          does: '',
          schedule: { everyMs: 10 },
          lock: 1,
          run: async () => void lockedRuns++,
        },
        {
          kind: 'timed',
          name: 'long',
          does: '',
          schedule: { onceAfterMs: 5 },
          lock: 2,
          run: async (stop) => {
            while (!stop.aborted) await sleep(5);
            await sleep(30);
            finished = true;
          },
        },
      ],
      runner(held),
    );
    await sleep(100);
    await running.stop();
    expect(lockedRuns).toBe(0);
    expect(finished).toBe(true);
  });

  it('subscribes listener tasks while running and leaves listed ones to their modules', async () => {
    let subscribed = 0;
    const running = startBackgroundTasks(
      [
        {
          kind: 'listener',
          name: 'l',
          does: '',
          on: 'an event',
          subscribe: () => (subscribed++, () => void subscribed--),
        },
        {
          kind: 'listed',
          name: 'elsewhere',
          does: '',
          schedule: 'every minute',
          lock: 'each process',
          where: 'somewhere.ts',
        },
      ],
      runner(),
    );
    expect(subscribed).toBe(1);
    await running.stop();
    expect(subscribed).toBe(0);
  });

  it('lists each task once, the locked ones under their own keys', () => {
    const jobs = { settings: jobSettings({}), onQueued: () => () => {}, log: () => {} } as unknown as JobRuntime;
    const tasks = backgroundTasks({ ctx: {} as never, jobs });
    const names = tasks.map((t) => t.name);
    expect(new Set(names).size).toBe(names.length);
    expect(names).toEqual(
      expect.arrayContaining([
        'expired jobs',
        'overdue running jobs',
        'undelivered webhooks',
        'unsignalled jobs',
        'autoscaler wake-up',
        'load-balancer load rows',
        'rate-limit counters',
      ]),
    );
    const locks = tasks.flatMap((t) => (t.kind === 'timed' && t.lock !== null ? [t.lock] : []));
    expect(new Set(locks)).toEqual(new Set(Object.values(TASK_LOCKS)));
  });

  it('sweeps for unsignalled job states as often as their grace, between 5 s and 60 s', () => {
    const everyMs = (unsignalledGraceMs: number) => {
      const jobs = {
        settings: jobSettings({ unsignalledGraceMs }),
        onQueued: () => () => {},
        log: () => {},
      } as unknown as JobRuntime;
      const task = backgroundTasks({ ctx: {} as never, jobs }).find((t) => t.name === 'unsignalled jobs');
      return task?.kind === 'timed' && 'everyMs' in task.schedule ? task.schedule.everyMs : undefined;
    };
    expect(everyMs(30_000)).toBe(30_000);
    expect(everyMs(1_000)).toBe(5_000);
    expect(everyMs(600_000)).toBe(60_000);
  });
});
