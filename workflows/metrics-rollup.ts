import { proxyActivities } from '@temporalio/workflow';
import type { MetricsRollupActivities } from '../activities/metrics-rollup.ts';
import type { RollupEndpointMetricsResult } from '../contracts/workflows.ts';

const { rollupEndpointMetrics } = proxyActivities<MetricsRollupActivities>({
  startToCloseTimeout: '5 minutes',
  retry: { initialInterval: '1 second', maximumInterval: '30 seconds', maximumAttempts: 5 },
});

/**
 * Started by the `rollup-endpoint-metrics` schedule (GANTRY_METRICS_ROLLUP_INTERVAL_MS, default every
 * minute): one run of the per-endpoint, per-minute metrics rollup (domain/metrics/rollup.ts), an
 * activity. A run that fails for good leaves its minutes to the next one (the watermark did not move).
 */
export async function rollupEndpointMetricsWorkflow(): Promise<RollupEndpointMetricsResult> {
  return rollupEndpointMetrics();
}
