import type { DomainContext } from '../domain/context.ts';
import type { Db } from '../domain/shared/index.ts';
import { createDeployActivities } from './deploy.ts';
import { createEndpointActivities } from './endpoint.ts';
import { createHostActivities } from './host.ts';
import type { OrchestrationRuntime } from './orchestration-runtime.ts';
import { createPodActivities } from './pod.ts';
import { createRolloutActivities } from './rollout.ts';
import { createWorkerActivities } from './worker.ts';
import { createJobActivities } from './job.ts';
import { createOutputActivities } from './purge-outputs.ts';
import { createImagePrepullActivities } from './image-prepull.ts';
import { createMetricsRollupActivities } from './metrics-rollup.ts';

/** Every activity the Temporal worker registers, bound to its dependencies. */
export function createActivities(deps: { db: Db; ctx: DomainContext }) {
  const rt: OrchestrationRuntime = {
    db: deps.db,
    secrets: deps.ctx.secrets,
    publicUrl: deps.ctx.publicUrl,
    workerUrl: deps.ctx.workerUrl ?? deps.ctx.publicUrl,
    ...(deps.ctx.workerListenerPort !== undefined ? { workerListenerPort: deps.ctx.workerListenerPort } : {}),
    temporal: deps.ctx.temporal,
    // One pool per process (the composition root's): SSH connections to a host are shared by all its activities.
    pool: deps.ctx.ssh,
    settings: deps.ctx.settings.orchestration,
    platform: deps.ctx.settings,
    signingKey: deps.ctx.signingKey,
  };
  return {
    ...createEndpointActivities(rt),
    ...createHostActivities(rt),
    ...createWorkerActivities(rt),
    ...createPodActivities(rt),
    ...createRolloutActivities(deps.db),
    ...createJobActivities(deps.db, deps.ctx.settings),
    ...createDeployActivities(deps.ctx),
    ...createOutputActivities(deps.ctx),
    ...createImagePrepullActivities(rt),
    ...createMetricsRollupActivities(deps.ctx),
  };
}
