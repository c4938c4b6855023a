// Every workflow type the Temporal worker registers (bundled from this file).
export { endpointWorkflow } from './endpoint.ts';
export { workerWorkflow } from './worker.ts';
export { rolloutWorkflow } from './rollout.ts';
export { hostWorkflow } from './host.ts';
export { jobWorkflow } from './job.ts';
export { podWorkflow } from './pod.ts';
