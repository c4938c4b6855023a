import type { DomainContext } from '../domain/context.ts';
import { rollupEndpointMetrics } from '../domain/metrics/index.ts';
import type { RollupEndpointMetricsResult } from '../contracts/workflows.ts';

/** The rollup-endpoint-metrics workflow's activity: the rollup's statements, in one transaction. */
export function createMetricsRollupActivities(ctx: Pick<DomainContext, 'db'>) {
  return {
    /** Rolls up the minutes due, samples worker states, deletes minutes past 7 days. */
    async rollupEndpointMetrics(): Promise<RollupEndpointMetricsResult> {
      return rollupEndpointMetrics(ctx);
    },
  };
}

export type MetricsRollupActivities = ReturnType<typeof createMetricsRollupActivities>;
