import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';

export interface Series {
  label: string;
  color: string;
  values: (number | null)[];
}

/**
 * One uPlot line chart over the metrics' step times (seconds). uPlot draws on a canvas and sets its
 * layout through element.style (the CSSOM), which the page's `style-src 'self'` allows: only style
 * attributes written in markup and <style> elements need 'unsafe-inline', and neither is used.
 * The caption repeats the totals as text for those who cannot see the canvas.
 */
export function Chart({
  title,
  times,
  series,
  summary,
}: {
  title: string;
  times: number[];
  series: Series[];
  summary: string;
}) {
  const ref = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const el = ref.current;
    if (!el) return;
    const plot = new uPlot(
      {
        width: Math.max(320, Math.min(el.clientWidth || 560, 720)),
        height: 200,
        scales: { x: { time: true } },
        series: [{}, ...series.map((s) => ({ label: s.label, stroke: s.color, width: 2 }))],
      },
      [times, ...series.map((s) => s.values)] as uPlot.AlignedData,
      el,
    );
    return () => plot.destroy();
  }, [times, series]);
  return (
    <figure class="chart">
      <figcaption>
        <h2>{title}</h2>
        <p class="summary">{summary}</p>
      </figcaption>
      <div ref={ref} role="img" aria-label={`${title}: ${summary}`} />
    </figure>
  );
}
