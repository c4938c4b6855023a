/**
 * Health of load-balancing workers as the proxy sees it. A worker is ready when the orchestration
 * has seen its health path answer 200 (it is then IDLE); from then on every API process probes the
 * workers it routes to and takes a worker out of its rotation when the probe fails (or a request
 * could not reach it), and back in once a probe passes again.
 */
import { probeLbWorker, type LbHealthSettings, type ProbeResult } from '../domain/load-balancing/index.ts';

interface Watched {
  host: string;
  port: number;
  inRotation: boolean;
  failures: number;
  lastReason: string | undefined;
  probing: boolean;
  nextProbeAt: number;
}

export interface RotationChange {
  workerId: string;
  inRotation: boolean;
  reason?: string;
}

/**
 * Probes the workers it is told about (`watch`) every `intervalMs`, and keeps which of them are in
 * rotation. Workers start in rotation (their readiness check just passed). `onChange` hears every
 * change, so that waiting requests can look again.
 */
export class LbHealthMonitor {
  private readonly workers = new Map<string, Watched>();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly settings: LbHealthSettings,
    private readonly onChange: (change: RotationChange) => void,
    private readonly probe: typeof probeLbWorker = probeLbWorker,
  ) {}

  start(): void {
    this.timer ??= setInterval(() => this.tick(), Math.max(50, Math.min(this.settings.intervalMs / 4, 500)));
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** The workers to watch from now on; others are forgotten. */
  watch(workers: ReadonlyArray<{ id: string; host: string; port: number }>): void {
    const keep = new Set<string>();
    const now = Date.now();
    for (const w of workers) {
      keep.add(w.id);
      const known = this.workers.get(w.id);
      if (known && known.host === w.host && known.port === w.port) continue;
      this.workers.set(w.id, {
        host: w.host,
        port: w.port,
        inRotation: true,
        failures: 0,
        lastReason: undefined,
        probing: false,
        nextProbeAt: now + this.settings.intervalMs,
      });
    }
    for (const id of this.workers.keys()) if (!keep.has(id)) this.workers.delete(id);
  }

  inRotation(workerId: string): boolean {
    return this.workers.get(workerId)?.inRotation ?? true;
  }

  /** Why a worker is out of rotation, if it is. */
  reason(workerId: string): string | undefined {
    const w = this.workers.get(workerId);
    return w && !w.inRotation ? w.lastReason : undefined;
  }

  /** A request could not reach the worker: out of rotation at once, probed again soon. */
  reportUnreachable(workerId: string, reason: string): void {
    const w = this.workers.get(workerId);
    if (!w) return;
    w.failures = Math.max(w.failures, this.settings.failuresToRemove);
    w.lastReason = reason;
    w.nextProbeAt = Math.min(w.nextProbeAt, Date.now() + Math.min(this.settings.intervalMs, 250));
    if (w.inRotation) {
      w.inRotation = false;
      this.onChange({ workerId, inRotation: false, reason });
    }
  }

  private tick(): void {
    const now = Date.now();
    for (const [id, w] of this.workers) {
      if (w.probing || w.nextProbeAt > now) continue;
      w.probing = true;
      void this.probe(w.host, w.port, { timeoutMs: this.settings.timeoutMs }).then((r) => {
        w.probing = false;
        w.nextProbeAt = Date.now() + this.settings.intervalMs;
        if (this.workers.get(id) !== w) return; // forgotten meanwhile
        this.apply(id, w, r);
      });
    }
  }

  private apply(id: string, w: Watched, r: ProbeResult): void {
    if (r.state === 'healthy') {
      w.failures = 0;
      w.lastReason = undefined;
      if (!w.inRotation) {
        w.inRotation = true;
        this.onChange({ workerId: id, inRotation: true });
      }
      return;
    }
    // Initializing again (a restart inside the container) leaves rotation at once.
    w.failures = r.state === 'initializing' ? this.settings.failuresToRemove : w.failures + 1;
    w.lastReason = r.state === 'initializing' ? 'the health check answered 204 (initializing)' : r.reason;
    if (w.inRotation && w.failures >= this.settings.failuresToRemove) {
      w.inRotation = false;
      this.onChange({ workerId: id, inRotation: false, reason: w.lastReason });
    }
  }
}
