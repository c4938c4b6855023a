/**
 * Builds the job runtime of a process that serves the job API (domain/jobs/runtime.ts): two pools
 * for the queue (client calls and sweeps; the worker protocol apart, so that a flood of submissions
 * never queues the takes and results that drain it), one LISTEN session for other processes'
 * wake-ups and key changes (api/job-notify.ts) and the workflow signal coalescer. The composition root
 * (infra/platform.ts) starts it before the API listens and stops it after the API has closed.
 */
import type { DomainContext } from '../domain/context.ts';
import { randomString } from '../domain/shared/index.ts';
import { createJobPool, databaseUrlOf } from '../domain/jobs/index.ts';
import { JobStore } from '../domain/jobs/index.ts';
import { JobRuntime, type Log } from '../domain/jobs/index.ts';
import type { JobSettings } from '../domain/jobs/index.ts';
import { JobNotifier } from '../api/job-notify.ts';

/** Connections of the client-side pool and of the worker protocol's. */
const CLIENT_POOL = 10;
const WORKER_POOL = 6;

export function createJobRuntime(
  ctx: Pick<
    DomainContext,
    'db' | 'temporal' | 'taskQueue' | 'records' | 'settings' | 'blobs' | 'signingKey' | 'publicUrl'
  >,
  log: Log,
  settings: JobSettings = ctx.settings.jobs,
): JobRuntime {
  const databaseUrl = databaseUrlOf(ctx.db);
  // Names this process in NOTIFY payloads: its own commits already woke its waiters.
  const tag = randomString(8);
  return new JobRuntime(ctx, {
    store: new JobStore(createJobPool(databaseUrl, CLIENT_POOL), tag, settings.retention),
    workerStore: new JobStore(createJobPool(databaseUrl, WORKER_POOL), tag, settings.retention),
    wakeups: new JobNotifier(databaseUrl, tag, log, ctx.records),
    settings,
    log,
  });
}
