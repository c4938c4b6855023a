/** Latency summaries and number formatting, shared by the bench's platform and load processes. */

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] as number;
}
export function summary(xs: number[]): { n: number; p50: number; p90: number; p99: number; max: number; mean: number } {
  const s = [...xs].sort((a, b) => a - b);
  const mean = s.reduce((a, b) => a + b, 0) / Math.max(1, s.length);
  return {
    n: s.length,
    p50: percentile(s, 50),
    p90: percentile(s, 90),
    p99: percentile(s, 99),
    max: s[s.length - 1] ?? NaN,
    mean,
  };
}
export const f1 = (x: number): string => (Number.isFinite(x) ? x.toFixed(1) : '-');
