/**
 * A fast job as Temporal sees it, for the ceiling benchmarks: one signal-with-start of `jobWorkflow`
 * carrying the job's finished snapshot. A module of its own, light to import: temporal-ceiling.ts
 * forks itself as a worker process.
 */
import type { Client } from '@temporalio/client';
import type { SearchAttributePair } from '@temporalio/common';
import { jobChanged, jobWorkflowId, type JobSnapshot } from '../contracts/workflows.ts';

/** The snapshot of a job that finished at `now`. */
export function finishedJobSnapshot(now = Date.now()): JobSnapshot {
  return {
    seq: 3,
    status: 'COMPLETED',
    ttlDeadline: now + 86_400_000,
    startedAt: now,
    livenessDeadline: null,
    executionDeadline: null,
    webhookPending: false,
  };
}

/**
 * Starts the job's workflow with its finished snapshot as the signal: the whole Temporal cost of a
 * fast job. `searchAttributes`: those the platform starts job workflows with, to price them.
 */
export async function signalFinishedJob(
  client: Client,
  taskQueue: string,
  jobId: string,
  snapshot: JobSnapshot,
  searchAttributes?: SearchAttributePair[],
): Promise<void> {
  await client.workflow.signalWithStart('jobWorkflow', {
    workflowId: jobWorkflowId(jobId),
    taskQueue,
    ...(searchAttributes ? { typedSearchAttributes: searchAttributes } : {}),
    args: [{ jobId, lostAfterMs: 60_000 }],
    signal: jobChanged,
    signalArgs: [snapshot],
  });
}
