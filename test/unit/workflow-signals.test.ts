/**
 * The job workflow signal coalescer (domain/jobs/workflow-signals.ts) on its own, with a stand-in
 * for the Temporal client that records each signal-with-start and holds it until released: how long
 * a state that is not final waits for its successor, when Temporal keeps up and when it is behind.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import type { DomainContext } from '../../domain/context.ts';
import type { JobRow } from '../../domain/jobs/index.ts';
import { jobSettings } from '../../domain/jobs/index.ts';
import { WorkflowSignals } from '../../domain/jobs/index.ts';

interface Sent {
  workflowId: string;
  status: string;
  release: () => void;
}

function standInTemporal(hold: boolean): { ctx: Pick<DomainContext, 'temporal' | 'taskQueue'>; sent: Sent[] } {
  const sent: Sent[] = [];
  const temporal = {
    withAbortSignal: <T>(_signal: AbortSignal, fn: () => Promise<T>) => fn(),
    workflow: {
      signalWithStart: (_type: string, opts: { workflowId: string; signalArgs?: Array<{ status: string }> }) =>
        new Promise<void>((resolve) => {
          sent.push({
            workflowId: opts.workflowId,
            status: opts.signalArgs?.[0]?.status ?? 'recheck',
            release: resolve,
          });
          if (!hold) resolve();
        }),
    },
  };
  return { ctx: { temporal: temporal as unknown as DomainContext['temporal'], taskQueue: 'unit' }, sent };
}

const row = (id: string, status: JobRow['status'], seq: number): JobRow => ({
  id,
  endpointId: 'ep',
  accountId: 'acct',
  status,
  output: null,
  error: null,
  webhook: null,
  executionTimeoutMs: 600_000,
  ttlMs: 86_400_000,
  lowPriority: false,
  sync: false,
  workerId: status === 'IN_QUEUE' ? null : 'w1',
  retries: 0,
  seq,
  createdAt: new Date(),
  startedAt: status === 'IN_QUEUE' ? null : new Date(),
  lastSeenAt: null,
  completedAt: status === 'COMPLETED' ? new Date() : null,
  expiresAt: new Date(Date.now() + 86_400_000),
  webhookDeliveredAt: null,
  webhookAttempts: 0,
  modelId: null,
});

describe('WorkflowSignals', () => {
  it('sends a state that is not final after the coalescing window when Temporal keeps up, and a final one at once', async () => {
    const { ctx, sent } = standInTemporal(false);
    const signals = new WorkflowSignals(ctx, jobSettings({ signalDelayMs: 100 }), () => {});
    signals.state(row('a', 'IN_QUEUE', 1));
    await sleep(30);
    expect(sent).toHaveLength(0);
    await sleep(250);
    expect(sent.map((s) => [s.workflowId, s.status])).toEqual([['job:a', 'IN_QUEUE']]);
    // queued -> done within the window: one signal, the final state.
    signals.state(row('b', 'IN_QUEUE', 1));
    signals.state(row('b', 'COMPLETED', 3));
    await signals.drained(1_000);
    expect(sent.map((s) => [s.workflowId, s.status])).toEqual([
      ['job:a', 'IN_QUEUE'],
      ['job:b', 'COMPLETED'],
    ]);
    await signals.close(1_000);
  });

  it('holds states that are not final while Temporal is behind, so a job finishing meanwhile costs one signal', async () => {
    const { ctx, sent } = standInTemporal(true);
    const signals = new WorkflowSignals(ctx, jobSettings({ signalDelayMs: 100 }), () => {});
    // Temporal is slow: every send hangs until released. Fill the sends in flight, then the queue behind them.
    const n = WorkflowSignals.MAX_IN_FLIGHT * 2 + 10;
    for (let i = 0; i < n; i++) signals.state(row(`fill-${i}`, 'COMPLETED', 3));
    await sleep(20);
    expect(sent).toHaveLength(WorkflowSignals.MAX_IN_FLIGHT);
    expect(signals.size).toBeGreaterThan(WorkflowSignals.MAX_IN_FLIGHT);

    signals.state(row('held', 'IN_QUEUE', 1));
    // Temporal catches up: everything before it goes, but the queued state waits for its successor.
    for (let i = 0; i < 5 && sent.length < n; i++) {
      for (const s of sent) s.release();
      await sleep(50);
    }
    for (const s of sent) s.release();
    await sleep(300);
    expect(sent.filter((s) => !s.workflowId.startsWith('job:fill-'))).toEqual([]);
    expect(sent).toHaveLength(n);
    signals.state(row('held', 'COMPLETED', 3));
    await sleep(50);
    expect(sent.filter((s) => s.workflowId === 'job:held').map((s) => s.status)).toEqual(['COMPLETED']);
    for (const s of sent) s.release();
    await signals.close(1_000);
  });

  it('sends what it holds at close', async () => {
    const { ctx, sent } = standInTemporal(true);
    const signals = new WorkflowSignals(ctx, jobSettings({ signalDelayMs: 100 }), () => {});
    for (let i = 0; i < WorkflowSignals.MAX_IN_FLIGHT * 2 + 1; i++) signals.state(row(`fill-${i}`, 'COMPLETED', 3));
    await sleep(20);
    signals.state(row('held', 'IN_PROGRESS', 2));
    for (const s of sent) s.release();
    await sleep(100);
    for (const s of sent) s.release();
    await sleep(100);
    expect(sent.some((s) => s.workflowId === 'job:held')).toBe(false);
    // close sends what is held at once.
    const closing = signals.close(2_000);
    await sleep(50);
    expect(sent.filter((s) => s.workflowId === 'job:held').map((s) => s.status)).toEqual(['IN_PROGRESS']);
    for (const s of sent) s.release();
    await closing;
  });
});
