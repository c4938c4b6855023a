/**
 * ensureSchedules (infra/schedules.ts) tries again when a just-started Temporal server lets a
 * schedule call pass its deadline, and gives up at once on anything else. A stand-in for the
 * client's schedule calls: this is about the retry rule alone (the schedule itself is made against
 * a real server by every platform the suite starts).
 */
import type { Client } from '@temporalio/client';
import { describe, expect, it } from 'vitest';
import { ensureSchedules } from '../../infra/schedules.ts';

const grpcError = (code: number) => Object.assign(new Error('Failed to create schedule'), { cause: { code } });

function client(failures: unknown[]): { temporal: Client; calls: () => number } {
  let calls = 0;
  const temporal = {
    schedule: {
      create: async () => {
        calls++;
        const failure = failures.shift();
        if (failure) throw failure;
      },
    },
  } as unknown as Client;
  return { temporal, calls: () => calls };
}

const INTERVALS = { purgeOutputsMs: 60_000, metricsRollupMs: 60_000 };

describe('ensureSchedules', () => {
  it('tries again after a deadline passed or the server was unavailable', async () => {
    const c = client([grpcError(4), grpcError(14)]);
    await ensureSchedules(c.temporal, 'q', INTERVALS);
    // Three tries of the first schedule, one of the second (the rollup's).
    expect(c.calls()).toBe(4);
  });

  it('gives up at once on other errors, and on transient ones past its time', async () => {
    const refused = client([grpcError(7)]);
    await expect(ensureSchedules(refused.temporal, 'q', INTERVALS)).rejects.toThrow('Failed to create schedule');
    expect(refused.calls()).toBe(1);
    const slow = client([grpcError(4), grpcError(4), grpcError(4)]);
    await expect(ensureSchedules(slow.temporal, 'q', INTERVALS, 0)).rejects.toThrow('Failed to create schedule');
    expect(slow.calls()).toBe(1);
  });
});
