/** Timings of the orchestration loops; defaults suit production, tests shorten them. */
export interface OrchestrationSettings {
  /** Autoscaler look-ups while an endpoint has workers or jobs, and at rest (a signal wakes it sooner). */
  autoscaleActiveMs: number;
  autoscaleRestMs: number;
  /** Longest wait between placement attempts of a PENDING worker. */
  placementRetryMaxMs: number;
  /** A worker must become ready within this long of its container start. */
  readyTimeoutSec: number;
  readyPollMs: number;
  /** How often a ready worker's container and pings are checked. */
  watchIntervalSec: number;
  /** How often a ready worker's written disk is measured where the runtime cannot cap it (watchdog). */
  diskCheckIntervalSec: number;
  /** A ready worker that has not pinged for this long is replaced. */
  silentAfterSec: number;
  /** A ready load-balancing worker whose health check keeps failing this long is replaced. */
  lbUnhealthySec: number;
  /** RUNPOD_PING_INTERVAL given to workers. */
  pingIntervalMs: number;
  /** SIGTERM-to-SIGKILL grace when a container stops. */
  stopGraceSec: number;
  /** Longest image pull. */
  pullTimeoutSec: number;
  /** A rollout halts after this many new workers failed to become ready... */
  releaseMaxFailures: number;
  /** ...or when none of its new workers became ready within this long. */
  releaseReadyDeadlineSec: number;
  rolloutPollMs: number;
  /** A replacement that waits this long for capacity lets its idle predecessor go first. */
  surgeWaitSec: number;
  hostProbeIntervalSec: number;
  /** Probe interval while a host is unreachable. */
  hostRetryIntervalSec: number;
  /** How long a FLASHBOOT standby stays frozen before it is removed (PRIORITY_FLASHBOOT ones stay). */
  flashbootStandbySec: number;
}

export const DEFAULT_ORCHESTRATION_SETTINGS: OrchestrationSettings = {
  autoscaleActiveMs: 1000,
  autoscaleRestMs: 30_000,
  placementRetryMaxMs: 15_000,
  readyTimeoutSec: 600,
  readyPollMs: 1000,
  watchIntervalSec: 5,
  diskCheckIntervalSec: 30,
  silentAfterSec: 60,
  lbUnhealthySec: 60,
  pingIntervalMs: 10_000,
  stopGraceSec: 10,
  pullTimeoutSec: 1800,
  releaseMaxFailures: 3,
  releaseReadyDeadlineSec: 900,
  rolloutPollMs: 1000,
  surgeWaitSec: 30,
  hostProbeIntervalSec: 60,
  hostRetryIntervalSec: 10,
  flashbootStandbySec: 3600,
};

/** Parses GANTRY_ORCHESTRATION: a JSON object overriding some of the settings. */
export function parseOrchestrationSettings(raw: string | undefined): OrchestrationSettings {
  return parseNumberOverrides(
    'GANTRY_ORCHESTRATION',
    raw,
    DEFAULT_ORCHESTRATION_SETTINGS,
    (v) => v >= 0,
    'a non-negative number',
  );
}

/** A JSON object of numbers over `defaults` (unknown names refused): the shape of GANTRY_ORCHESTRATION and GANTRY_LB_HEALTH. */
export function parseNumberOverrides<T extends object>(
  variable: string,
  raw: string | undefined,
  defaults: T,
  ok: (v: number) => boolean,
  what: string,
): T {
  const out = { ...defaults };
  if (!raw?.trim()) return out;
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch (err) {
    throw new Error(`${variable}: not JSON (${err instanceof Error ? err.message : String(err)})`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
    throw new Error(`${variable}: expected a JSON object`);
  for (const [k, v] of Object.entries(parsed)) {
    if (!(k in out)) throw new Error(`${variable}: unknown setting '${k}'`);
    if (typeof v !== 'number' || !ok(v)) throw new Error(`${variable}: ${k} must be ${what}`);
    (out as Record<string, number>)[k] = v;
  }
  return out;
}
