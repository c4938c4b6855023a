/** The health of a load-balancing worker: its settings and the probe of its health path. */
import { parseNumberOverrides } from '../shared/orchestration-settings.ts';
import { originOf } from './shared.ts';

/** The health path of a load-balancing worker (docs/load-balancing.md): 200 ready, 204 still initializing. */
export interface LbHealthSettings {
  /** Between two probes of one worker. */
  intervalMs: number;
  /** Failed probes in a row that take a worker out of rotation. */
  failuresToRemove: number;
  timeoutMs: number;
}

export const DEFAULT_LB_HEALTH: LbHealthSettings = { intervalMs: 2_000, failuresToRemove: 2, timeoutMs: 2_000 };

/** Parses GANTRY_LB_HEALTH: a JSON object overriding some of the settings, e.g. `{"intervalMs": 500}`. */
export function parseLbHealthSettings(raw: string | undefined): LbHealthSettings {
  return parseNumberOverrides('GANTRY_LB_HEALTH', raw, DEFAULT_LB_HEALTH, (v) => v > 0, 'a positive number');
}

export const LB_HEALTH_PATH = '/ping';

export type ProbeResult = { state: 'healthy' } | { state: 'initializing' } | { state: 'unhealthy'; reason: string };

/**
 * One health check: `GET http://<host>:<PORT_HEALTH>/ping`. 200 is healthy, 204 still initializing
 * (the convention of load-balancing worker images), anything else or no answer in time unhealthy.
 */
export async function probeLbWorker(
  host: string,
  port: number,
  options: { path?: string; timeoutMs?: number } = {},
): Promise<ProbeResult> {
  const timeoutMs = options.timeoutMs ?? 2_000;
  try {
    const r = await fetch(`${originOf(host, port)}${options.path ?? LB_HEALTH_PATH}`, {
      signal: AbortSignal.timeout(timeoutMs),
    });
    await r.body?.cancel();
    if (r.status === 200) return { state: 'healthy' };
    if (r.status === 204) return { state: 'initializing' };
    return { state: 'unhealthy', reason: `the health check answered ${r.status}` };
  } catch (err) {
    const e = err as { cause?: { code?: string }; name?: string; message?: string };
    const why =
      e.name === 'TimeoutError' ? `no answer within ${timeoutMs} ms` : (e.cause?.code ?? e.message ?? String(err));
    return { state: 'unhealthy', reason: `the health check failed: ${why}` };
  }
}
