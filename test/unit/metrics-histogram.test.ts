/**
 * The metrics rollup's histogram (domain/metrics/histogram.ts): its buckets, the ±12 % bound of a
 * percentile read from it, merging, and the spreading of a worker-state sample over minutes.
 */
import { describe, expect, it } from 'vitest';
import {
  BUCKETS,
  bucketOf,
  parseMetricsQuery,
  quantile,
  representative,
  spreadOverMinutes,
} from '../../domain/metrics/index.ts';

/** The q-quantile by nearest rank, exactly. */
function exact(values: number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.max(1, Math.ceil(q * sorted.length)) - 1]!;
}

function histogramOf(values: number[]): number[] {
  const h = new Array<number>(BUCKETS).fill(0);
  for (const v of values) h[bucketOf(v)]!++;
  return h;
}

describe('the metrics histogram', () => {
  it('has log-spaced buckets ×1.25 from 1 ms to about 4.2 h', () => {
    expect(bucketOf(0)).toBe(0);
    expect(bucketOf(0.99)).toBe(0);
    expect(bucketOf(1)).toBe(1);
    expect(bucketOf(1.2)).toBe(1);
    expect(bucketOf(1.3)).toBe(2);
    expect(bucketOf(1000)).toBe(1 + Math.floor(Math.log(1000) / Math.log(1.25)));
    expect(bucketOf(4 * 3_600_000)).toBe(BUCKETS - 2);
    expect(bucketOf(5 * 3_600_000)).toBe(BUCKETS - 1);
    expect(bucketOf(1e12)).toBe(BUCKETS - 1);
    // Every value in 1 ms .. 4.2 h is within 12 % of its bucket's representative.
    for (let v = 1; v < 1.25 ** 74; v *= 1.0137) {
      const r = representative(bucketOf(v));
      expect(Math.abs(r - v) / v).toBeLessThanOrEqual(0.1181);
    }
  });

  it('reads percentiles within 12 % of the exact ones, and nothing from an empty histogram', () => {
    let seed = 7;
    const random = () => (seed = (seed * 16807) % 2147483647) / 2147483647;
    for (let round = 0; round < 20; round++) {
      // Log-normal-ish durations from about 5 ms to a minute.
      const values = Array.from({ length: 200 + round * 50 }, () => Math.exp(1.5 + random() * 9.5));
      const h = histogramOf(values);
      for (const q of [0.5, 0.9]) {
        const want = exact(values, q);
        expect(Math.abs(quantile(h, q)! - want) / want).toBeLessThanOrEqual(0.12);
      }
    }
    expect(quantile(new Array(BUCKETS).fill(0), 0.5)).toBeNull();
    expect(quantile([], 0.9)).toBeNull();
  });

  it('merges minutes by adding counts: the merged percentile is the one of all values', () => {
    const a = [10, 20, 30, 40];
    const b = [1000, 2000, 3000, 4000, 5000, 6000];
    // As the read adds them in SQL (domain/metrics/read.ts histSums): bucket by bucket.
    const hb = histogramOf(b);
    const merged = histogramOf(a).map((n, i) => n + hb[i]!);
    expect(merged).toEqual(histogramOf([...a, ...b]));
    const p50 = quantile(merged, 0.5)!;
    expect(Math.abs(p50 - 1000) / 1000).toBeLessThanOrEqual(0.12);
  });

  it('spreads a sample over the minutes its seconds fall in', () => {
    const m = 60_000 * 1_000_000;
    expect(spreadOverMinutes(m + 45_000, m + 75_000)).toEqual([
      [m, 15],
      [m + 60_000, 15],
    ]);
    expect(spreadOverMinutes(m, m + 60_000)).toEqual([[m, 60]]);
    expect(spreadOverMinutes(m + 10_000, m + 10_000)).toEqual([]);
  });

  it('takes the windows and steps it knows, at most 1440 points', () => {
    expect(parseMetricsQuery({})).toEqual({ window: '1h', step: '1m' });
    expect(parseMetricsQuery({ window: '24h', step: '1m' })).toEqual({ window: '24h', step: '1m' });
    expect(parseMetricsQuery({ window: '7d', step: '15m' })).toEqual({ window: '7d', step: '15m' });
    expect(() => parseMetricsQuery({ window: '7d', step: '5m' })).toThrow(/2016 points; at most 1440/);
    expect(() => parseMetricsQuery({ window: '2d' })).toThrow(/window must be one of 1h, 6h, 24h, 7d/);
    expect(() => parseMetricsQuery({ step: 'toString' })).toThrow(/step must be one of/);
  });
});
