/** What the benchmarks read from /proc: CPU seconds and resident memory of a process tree. */
import { readdirSync, readFileSync } from 'node:fs';

/**
 * CPU seconds of a process and all its descendants: their utime+stime, plus cutime+cstime (children
 * that already exited, e.g. PostgreSQL backends of closed connections).
 */
export function cpuSeconds(rootPid: number): number {
  const tick = 100; // USER_HZ on Linux
  const stats = new Map<number, { ppid: number; cpu: number }>();
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const s = readFileSync(`/proc/${d}/stat`, 'utf8');
      const rest = s.slice(s.lastIndexOf(')') + 2).split(' ');
      stats.set(Number(d), {
        ppid: Number(rest[1]),
        cpu: (Number(rest[11]) + Number(rest[12]) + Number(rest[13]) + Number(rest[14])) / tick,
      });
    } catch {
      // gone
    }
  }
  let total = 0;
  const walk = (pid: number): void => {
    const st = stats.get(pid);
    if (st) total += st.cpu;
    for (const [child, s] of stats) if (s.ppid === pid) walk(child);
  };
  walk(rootPid);
  return total;
}

export function rssMb(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : NaN;
  } catch {
    return NaN;
  }
}

export function loadAverage(): string {
  return readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
}
