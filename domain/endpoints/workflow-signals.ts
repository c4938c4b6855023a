/**
 * How the endpoint rows reach their workflows (`endpoint:<id>`).
 *
 * The row is the one truth about an endpoint's settings; its workflow (workflows/endpoint.ts) is
 * their executor. Every change is committed first (endpoints.ts), then the workflow is told "your row
 * changed, read it again" with signal-with-start (`endpointChanged`, which carries nothing), which
 * also starts the workflow when it is missing. The signal is durable once Temporal has answered,
 * and the workflow reads the row after it: changes that race (several requests, several API
 * processes) all end in a read of the newest row, with nothing to order or compare here.
 */
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import type { Endpoint } from '../../generated/prisma/client.ts';
import {
  deleteEndpoint as deleteEndpointSignal,
  endpointChanged,
  endpointWorkflowId,
  type EndpointWorkflow,
} from '../../contracts/workflows.ts';
import { gantryMemo, gantrySearchAttributes } from '../../contracts/search-attributes.ts';
import type { DomainContext } from '../context.ts';

/** How long a request waits for Temporal before it answers 503 (the row stays the truth). */
export const WORKFLOW_CALL_BUDGET_MS = 8_000;

type EndpointLabels = Pick<Endpoint, 'id' | 'accountId' | 'name'>;

/**
 * The search attributes and memo an endpoint's workflow starts with (contracts/search-attributes.ts);
 * the workers and rollouts it starts inherit the account and name from them.
 */
function endpointWorkflowLabels(e: EndpointLabels): {
  typedSearchAttributes: ReturnType<typeof gantrySearchAttributes>;
  memo: Record<string, string>;
} {
  return {
    typedSearchAttributes: gantrySearchAttributes('endpoint', { endpointId: e.id, accountId: e.accountId }),
    memo: gantryMemo({ endpointName: e.name }),
  };
}

/**
 * Signals the endpoint's workflow (`signal`, no arguments), starting it if it is not running.
 * Answers false when a finished run holds the id: the endpoint was deleted, nobody is left to tell.
 */
async function signalEndpointWorkflow(
  ctx: DomainContext,
  e: EndpointLabels,
  signal: typeof endpointChanged | typeof deleteEndpointSignal,
  deadline: number,
): Promise<boolean> {
  try {
    await ctx.temporal.withDeadline(deadline, () =>
      ctx.temporal.workflow.signalWithStart<EndpointWorkflow, []>('endpointWorkflow', {
        workflowId: endpointWorkflowId(e.id),
        taskQueue: ctx.taskQueue,
        args: [{ endpointId: e.id }],
        ...endpointWorkflowLabels(e),
        signal,
        signalArgs: [],
        // A finished run means a deleted endpoint: never start another under its id.
        workflowIdReusePolicy: 'REJECT_DUPLICATE',
      }),
    );
    return true;
  } catch (err) {
    if (err instanceof WorkflowExecutionAlreadyStartedError) return false;
    throw err;
  }
}

/** Tells the endpoint's workflow that its row changed (starting the workflow if need be). */
export function tellEndpointWorkflow(
  ctx: DomainContext,
  e: EndpointLabels,
  deadline = Date.now() + WORKFLOW_CALL_BUDGET_MS,
): Promise<boolean> {
  return signalEndpointWorkflow(ctx, e, endpointChanged, deadline);
}

/**
 * Run at process start: every live endpoint's workflow is made sure to exist and told to read its
 * row (a change committed while Temporal could not be reached, or a crash between a commit and the
 * workflow start, is mended so), and endpoints being deleted get their deletion again. One Temporal
 * call per endpoint and no worker needed; idempotent, so several processes may run it at once.
 * The first failure (Temporal unreachable) ends it with that error.
 */
export async function reconcileEndpointWorkflows(ctx: DomainContext): Promise<number> {
  const live = await ctx.db.endpoint.findMany({
    where: { deletingAt: null },
    select: { id: true, accountId: true, name: true },
  });
  await inBatches(live, 8, async (e) => {
    await tellEndpointWorkflow(ctx, e);
  });
  const deleting = await ctx.db.endpoint.findMany({
    where: { deletingAt: { not: null } },
    select: { id: true, accountId: true, name: true },
  });
  await inBatches(deleting, 8, (e) => signalDeletion(ctx, e, Date.now() + WORKFLOW_CALL_BUDGET_MS));
  return live.length;
}

async function inBatches<T>(items: readonly T[], size: number, fn: (item: T) => Promise<void>): Promise<void> {
  for (let i = 0; i < items.length; i += size) await Promise.all(items.slice(i, i + size).map(fn));
}

/**
 * Asks the endpoint's workflow to drain and remove the endpoint, starting the workflow if it is not
 * running (its first act is then the deletion). A workflow that has already finished cannot do it:
 * its endpoint has nothing left to drain, so the row is removed here.
 */
export async function signalDeletion(ctx: DomainContext, e: EndpointLabels, deadline: number): Promise<void> {
  if (!(await signalEndpointWorkflow(ctx, e, deleteEndpointSignal, deadline))) {
    await ctx.db.endpoint.deleteMany({ where: { id: e.id, deletingAt: { not: null } } });
  }
}
