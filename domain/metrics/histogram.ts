/**
 * The fixed log-spaced histogram of the metrics rollup: durations in milliseconds counted into
 * BUCKETS buckets whose bounds grow ×GROWTH from 1 ms. Every minute of every endpoint uses the same
 * bounds, so the histograms of any set of minutes merge by adding counts, and a percentile of any
 * step is read from the merged counts.
 *
 *   bucket 0            [0, 1 ms)
 *   bucket i (1..74)    [1.25^(i-1), 1.25^i) ms
 *   bucket 75           [1.25^74 ms ≈ 4.2 h, ∞)
 *
 * A percentile is the geometric middle of the bucket that holds its rank: within ±12 % of the true
 * value (sqrt(1.25) - 1 = 11.8 % above, 1 - 1/sqrt(1.25) = 10.6 % below) between 1 ms and 4.2 h;
 * under 1 ms it answers 0.5 ms, past 4.2 h the bucket's lower bound.
 */

export const GROWTH = 1.25;
export const BUCKETS = 76;
const LAST = BUCKETS - 1;
const LN_GROWTH = Math.log(GROWTH);

/** The bucket a duration of `ms` falls in. */
export function bucketOf(ms: number): number {
  if (!(ms >= 1)) return 0;
  return Math.min(LAST, 1 + Math.floor(Math.log(ms) / LN_GROWTH));
}

/** bucketOf in SQL, over a float8 expression of milliseconds that is not null. */
export function bucketSql(ms: string): string {
  return `(CASE WHEN ${ms} < 1 THEN 0 ELSE LEAST(${LAST}, 1 + floor(ln(${ms}) / ln(${GROWTH}))::int) END)`;
}

/** The value a bucket stands for: its geometric middle (0.5 ms for the first, the lower bound for the last). */
export function representative(bucket: number): number {
  if (bucket <= 0) return 0.5;
  if (bucket >= LAST) return GROWTH ** (LAST - 1);
  return GROWTH ** (bucket - 1) * Math.sqrt(GROWTH);
}

/**
 * The q-quantile (0 < q <= 1) of the counts, nearest rank: the representative of the bucket that
 * holds the ceil(q × n)-th smallest value. Null when the histogram counts nothing.
 */
export function quantile(h: readonly number[], q: number): number | null {
  let n = 0;
  for (const c of h) n += c;
  if (n === 0) return null;
  const rank = Math.max(1, Math.ceil(q * n));
  let seen = 0;
  for (let i = 0; i < h.length; i++) {
    seen += h[i] ?? 0;
    if (seen >= rank) return representative(i);
  }
  return representative(h.length - 1);
}
