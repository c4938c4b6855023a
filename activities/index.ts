import type { DomainContext } from '../domain/context.ts';
import type { Db } from '../domain/db.ts';
import { createDeployActivities } from './deployments.ts';
import { createEndpointActivities } from './endpoints.ts';
import { createHostActivities, type OrchestrationRuntime } from './hosts.ts';
import { createPodActivities, createWorkerActivities } from './workers.ts';
import { createJobActivities } from './jobs.ts';
import { createOutputActivities } from './outputs.ts';

/** Every activity the Temporal worker registers, bound to its dependencies. */
export function createActivities(deps: { db: Db; ctx: DomainContext }) {
  const rt: OrchestrationRuntime = {
    db: deps.db,
    secrets: deps.ctx.secrets,
    publicUrl: deps.ctx.publicUrl,
    workerUrl: deps.ctx.workerUrl ?? deps.ctx.publicUrl,
    temporal: deps.ctx.temporal,
    // One pool per process (the composition root's): SSH connections to a host are shared by all its activities.
    pool: deps.ctx.ssh,
    settings: deps.ctx.settings.orchestration,
    platform: deps.ctx.settings,
    signingKey: deps.ctx.signingKey,
  };
  return { ...createEndpointActivities(deps.db), ...createHostActivities(rt), ...createWorkerActivities(rt), ...createPodActivities(rt), ...createJobActivities(deps.db, deps.ctx.settings), ...createDeployActivities(deps.ctx), ...createOutputActivities(deps.ctx) };
}
