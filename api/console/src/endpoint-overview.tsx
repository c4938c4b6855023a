import { useMemo, useState } from 'preact/hooks';
import { get, type Metrics, type MetricsPoint } from './api.ts';
import { Chart, type Series } from './chart.tsx';
import { usePolled } from './poll.ts';

/** Each window with the step that keeps it to 60-168 points (the metrics route's limit is higher). */
const WINDOWS = [
  { window: '1h', step: '1m' },
  { window: '6h', step: '5m' },
  { window: '24h', step: '15m' },
  { window: '7d', step: '1h' },
] as const;

const sum = (xs: (number | null)[]): number => xs.reduce<number>((a, x) => a + (x ?? 0), 0);
const max = (xs: (number | null)[]): number | null =>
  xs.reduce<number | null>((a, x) => (x === null ? a : a === null ? x : Math.max(a, x)), null);
const ms = (x: number | null): string =>
  x === null ? '—' : x >= 1000 ? `${(x / 1000).toFixed(1)} s` : `${Math.round(x)} ms`;

function charts(points: MetricsPoint[]) {
  const col = <T,>(f: (p: MetricsPoint) => T) => points.map(f);
  const completed = col((p) => p.jobs.completed);
  const failed = col((p) => p.jobs.failed + p.jobs.timedOut);
  const states = ['pending', 'initializing', 'idle', 'running', 'unhealthy', 'standby'] as const;
  const colors = ['#8a8a8a', '#c08a00', '#2a7ab0', '#2e8b57', '#c0392b', '#7d5ba6'];
  const exec: Series[] = [
    { label: 'p50', color: '#2a7ab0', values: col((p) => p.executionMs.p50) },
    { label: 'p90', color: '#c0392b', values: col((p) => p.executionMs.p90) },
  ];
  const delay: Series[] = [
    { label: 'p50', color: '#2a7ab0', values: col((p) => p.delayMs.p50) },
    { label: 'p90', color: '#c0392b', values: col((p) => p.delayMs.p90) },
  ];
  return [
    {
      id: 'jobs',
      title: 'Jobs per step',
      series: [
        { label: 'completed', color: '#2e8b57', values: completed },
        { label: 'failed or timed out', color: '#c0392b', values: failed },
      ],
      summary: `${sum(completed)} completed, ${sum(failed)} failed or timed out`,
    },
    {
      id: 'execution',
      title: 'Execution time (ms)',
      series: exec,
      summary: `highest p50 ${ms(max(exec[0]!.values))}, highest p90 ${ms(max(exec[1]!.values))}`,
    },
    {
      id: 'delay',
      title: 'Delay time (ms)',
      series: delay,
      summary: `highest p50 ${ms(max(delay[0]!.values))}, highest p90 ${ms(max(delay[1]!.values))}`,
    },
    {
      id: 'cold-starts',
      title: 'Cold starts',
      series: [{ label: 'cold starts', color: '#7d5ba6', values: col((p) => p.coldStarts.count) }],
      summary: `${sum(col((p) => p.coldStarts.count))} cold starts`,
    },
    {
      id: 'workers',
      title: 'Workers by state (average per step)',
      series: states.map((s, i) => ({ label: s, color: colors[i]!, values: col((p) => p.workers[s]) })),
      summary: states.map((s) => `${s} up to ${max(col((p) => p.workers[s])) ?? 0}`).join(', '),
    },
  ];
}

/** An endpoint's overview: its metrics (GET /v2/serverless/{id}/metrics) as charts over a chosen window. */
export function OverviewTab({ id }: { id: string }) {
  const [choice, setChoice] = useState<(typeof WINDOWS)[number]>(WINDOWS[0]);
  const base = `/v2/serverless/${encodeURIComponent(id)}`;
  const { data: metrics, error } = usePolled(
    () => get<Metrics>(`${base}/metrics?window=${choice.window}&step=${choice.step}`),
    [base, choice],
    60_000,
  );
  const times = useMemo(() => (metrics ? metrics.points.map((p) => Date.parse(p.time) / 1000) : []), [metrics]);
  const shown = useMemo(() => (metrics ? charts(metrics.points) : []), [metrics]);
  return (
    <>
      {error && (
        <p class="notice error" role="alert">
          {error}
        </p>
      )}
      <div class="windows" role="group" aria-label="Window">
        {WINDOWS.map((w) => (
          <button type="button" key={w.window} aria-pressed={w === choice} onClick={() => setChoice(w)}>
            {w.window}
          </button>
        ))}
      </div>
      {metrics === null ? (
        !error && <p aria-busy="true">Loading metrics…</p>
      ) : (
        <div class="charts" data-window={metrics.window} data-step={metrics.step}>
          <p class="meta">
            {metrics.points.length} points of {metrics.step}, up to {new Date(metrics.to).toLocaleString()}
          </p>
          {shown.map((c) => (
            <div key={`${metrics.window}-${c.id}`} data-chart={c.id}>
              <Chart title={c.title} times={times} series={c.series} summary={c.summary} />
            </div>
          ))}
        </div>
      )}
    </>
  );
}
