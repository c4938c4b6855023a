/** Plain data shared by workflows, activities and the domain layer (no runtime imports). */

/** What the endpoint workflow needs to autoscale and release: the desired state of one endpoint. */
export interface EndpointSpec {
  endpointId: string;
  workersMin: number;
  workersMax: number;
  scalerType: 'QUEUE_DELAY' | 'REQUEST_COUNT';
  scalerValue: number;
  idleTimeout: number;
  timeoutMs: number;
  releaseVersion: number;
}

/** The settings that reach the running autoscaler through the `updateSpec` Update. */
export type EndpointSpecPatch = Partial<Omit<EndpointSpec, 'endpointId'>>;

export interface EndpointWorkflowInput {
  endpointId: string;
  /** Carried across continue-as-new; absent on first start (then read from the database). */
  spec?: EndpointSpec;
}

export const endpointWorkflowId = (endpointId: string): string => `endpoint:${endpointId}`;

/** Rules the Update validator and the domain both enforce. */
export function specProblems(spec: EndpointSpec): string[] {
  const problems: string[] = [];
  if (!Number.isInteger(spec.workersMin) || spec.workersMin < 0) problems.push('workers.min must be an integer >= 0');
  if (!Number.isInteger(spec.workersMax) || spec.workersMax < 0) problems.push('workers.max must be an integer >= 0');
  if (spec.workersMin > spec.workersMax) problems.push('workers.min must not exceed workers.max');
  if (!(spec.scalerValue >= 0.5)) problems.push('scaling.value must be >= 0.5');
  if (!Number.isInteger(spec.idleTimeout) || spec.idleTimeout < 0) problems.push('scaling.idleTimeout must be an integer >= 0');
  if (!Number.isInteger(spec.timeoutMs) || spec.timeoutMs < 1) problems.push('timeout must be a positive integer');
  return problems;
}
