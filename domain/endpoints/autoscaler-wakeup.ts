/**
 * Wakes an endpoint's autoscaler when a job is queued for an endpoint that has no live worker, so
 * that the first job at zero workers starts one at once instead of at the autoscaler's next look.
 * Never one signal per job: at most one worker check in flight per endpoint, at most one check per
 * CHECK_MS, and a signal only when no worker serves (live and not draining, domain/workers/status.ts).
 * Low-priority jobs never wake it. The load-balancing proxy wakes it through wakeAutoscaler too.
 * Subscribed to the job runtime's queued jobs by the background-task registry (infra/background-tasks.ts).
 */
import { WorkflowNotFoundError } from '@temporalio/client';
import { endpointWorkflowId, queueNonEmpty } from '../../contracts/workflows.ts';
import type { DomainContext } from '../context.ts';
import type { JobQueuedEvent } from '../jobs/runtime.ts';
import { servingWorker } from '../workers/status.ts';

const CHECK_MS = 500;

/**
 * Tells the endpoint's autoscaler that work waits (its `queueNonEmpty` signal), so that it looks now
 * rather than at its next scheduled look. An endpoint without a workflow (deleted) is no error:
 * nothing would serve its work anyway.
 */
export async function wakeAutoscaler(ctx: Pick<DomainContext, 'temporal'>, endpointId: string): Promise<void> {
  try {
    await ctx.temporal.workflow.getHandle(endpointWorkflowId(endpointId)).signal(queueNonEmpty);
  } catch (err) {
    if (!(err instanceof WorkflowNotFoundError)) throw err;
  }
}

/** The listener for JobRuntime.onQueued; its throttling state is its own (one per subscription). */
export function autoscalerWakeup(
  ctx: Pick<DomainContext, 'db' | 'temporal'>,
  log: (msg: string, err: unknown) => void = () => {},
): (e: JobQueuedEvent) => void {
  const checking = new Set<string>();
  const lastCheck = new Map<string, number>();

  const check = async (endpointId: string): Promise<void> => {
    const serving = await ctx.db.worker.count({ where: { endpointId, ...servingWorker } });
    if (serving > 0) return;
    await wakeAutoscaler(ctx, endpointId);
  };

  return (e) => {
    if (e.lowPriority || checking.has(e.endpointId)) return;
    const now = Date.now();
    if (now - (lastCheck.get(e.endpointId) ?? 0) < CHECK_MS) return;
    lastCheck.set(e.endpointId, now);
    if (lastCheck.size > 10_000) lastCheck.clear();
    checking.add(e.endpointId);
    check(e.endpointId)
      .catch((err: unknown) => log(`waking the autoscaler of endpoint ${e.endpointId} failed`, err))
      .finally(() => checking.delete(e.endpointId));
  };
}
