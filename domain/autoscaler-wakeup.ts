/**
 * Wakes an endpoint's autoscaler when a job is queued for an endpoint that has no live worker, so
 * that the first job at zero workers starts one at once instead of at the autoscaler's next look.
 * Never one signal per job: at most one live-worker check in flight per endpoint, at most one
 * check per CHECK_MS, and a signal only when no worker is live. Low-priority jobs never wake it.
 */
import { WorkflowNotFoundError } from '@temporalio/client';
import { queueNonEmpty } from '../workflows/endpoint.ts';
import { endpointWorkflowId } from '../workflows/types.ts';
import type { DomainContext } from './context.ts';
import { onJobQueued } from './jobs.ts';

const CHECK_MS = 500;

export function wakeAutoscalerOnQueuedJobs(ctx: DomainContext, log: (msg: string, err: unknown) => void = () => {}): () => void {
  const checking = new Set<string>();
  const lastCheck = new Map<string, number>();

  const check = async (endpointId: string): Promise<void> => {
    const live = await ctx.db.worker.count({ where: { endpointId, status: { notIn: ['STOPPED', 'FAILED', 'DRAINING'] } } });
    if (live > 0) return;
    try {
      await ctx.temporal.workflow.getHandle(endpointWorkflowId(endpointId)).signal(queueNonEmpty);
    } catch (err) {
      // A deleted endpoint has no workflow; its jobs go nowhere anyway.
      if (!(err instanceof WorkflowNotFoundError)) throw err;
    }
  };

  return onJobQueued((e) => {
    if (e.lowPriority || checking.has(e.endpointId)) return;
    const now = Date.now();
    if (now - (lastCheck.get(e.endpointId) ?? 0) < CHECK_MS) return;
    lastCheck.set(e.endpointId, now);
    if (lastCheck.size > 10_000) lastCheck.clear();
    checking.add(e.endpointId);
    check(e.endpointId)
      .catch((err: unknown) => log(`waking the autoscaler of endpoint ${e.endpointId} failed`, err))
      .finally(() => checking.delete(e.endpointId));
  });
}
