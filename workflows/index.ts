// Every workflow type the Temporal worker registers (bundled from this file).
export { endpointWorkflow } from './endpoint.ts';
export { workerWorkflow } from './worker.ts';
export { rolloutWorkflow } from './rollout.ts';
export { hostWorkflow } from './host.ts';
export { jobWorkflow } from './job.ts';
export { podWorkflow } from './pod.ts';
export { deployWorkflow } from './deploy.ts';
export { purgeExpiredOutputsWorkflow } from './purge-outputs.ts';
export { imagePrepullWorkflow } from './prepull.ts';
export { rollupEndpointMetricsWorkflow } from './metrics-rollup.ts';

import type {
  DeployWorkflow,
  EndpointWorkflow,
  HostWorkflow,
  ImagePrepullWorkflow,
  JobWorkflow,
  PodWorkflow,
  PurgeOutputsWorkflow,
  RollupEndpointMetricsWorkflow,
} from '../contracts/workflows.ts';
import type { deployWorkflow } from './deploy.ts';
import type { endpointWorkflow } from './endpoint.ts';
import type { hostWorkflow } from './host.ts';
import type { jobWorkflow } from './job.ts';
import type { podWorkflow } from './pod.ts';
import type { purgeExpiredOutputsWorkflow } from './purge-outputs.ts';
import type { imagePrepullWorkflow } from './prepull.ts';
import type { rollupEndpointMetricsWorkflow } from './metrics-rollup.ts';

type Holds<T extends true> = T;
/** The starters' types of these workflows (contracts.ts) stay true to them: otherwise a type error here. */
export type StartersMatchWorkflows = [
  Holds<typeof endpointWorkflow extends EndpointWorkflow ? true : false>,
  Holds<typeof hostWorkflow extends HostWorkflow ? true : false>,
  Holds<typeof podWorkflow extends PodWorkflow ? true : false>,
  Holds<typeof jobWorkflow extends JobWorkflow ? true : false>,
  Holds<typeof deployWorkflow extends DeployWorkflow ? true : false>,
  Holds<typeof purgeExpiredOutputsWorkflow extends PurgeOutputsWorkflow ? true : false>,
  Holds<typeof imagePrepullWorkflow extends ImagePrepullWorkflow ? true : false>,
  Holds<typeof rollupEndpointMetricsWorkflow extends RollupEndpointMetricsWorkflow ? true : false>,
];
