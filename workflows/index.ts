// Every workflow type the Temporal worker registers (bundled from this file).
export { endpointWorkflow } from './endpoint.ts';
