import { useMemo, useState } from 'preact/hooks';
import { get, type Answer, type Endpoint } from './api.ts';
import { Link } from './app.tsx';
import { Chart, type Series } from './chart.tsx';
import { usePolled } from './poll.ts';
import { Loaded } from './forms.tsx';

/** The bucket sizes the console asks for (PERIODS); the API offers more. */
type BucketSize = 'hour' | 'day' | 'month';
/** GET /v2/billing, whose buckets are the size asked for: one of the console's. */
type Billing = Answer<'/v2/billing', 'get'> & { metadata: { query: { bucketSize: BucketSize } } };
type ServerlessRecord = Answer<'/v2/billing/serverless', 'get'>['records'][number];

/** The periods offered: the last N buckets ending with the current one (the billing routes' lastN). */
const PERIODS = [
  { label: '24 hours', bucketSize: 'hour', lastN: 24 },
  { label: '7 days', bucketSize: 'day', lastN: 7 },
  { label: '30 days', bucketSize: 'day', lastN: 30 },
  { label: '12 months', bucketSize: 'month', lastN: 12 },
] as const;
type Period = (typeof PERIODS)[number];

const usd = (x: number): string =>
  x === 0
    ? '$0'
    : x < 0.01
      ? `$${x.toFixed(4)}`
      : `$${x.toLocaleString(undefined, { minimumFractionDigits: 2, maximumFractionDigits: 2 })}`;

/** The next bucket's start (UTC), as the billing routes cut them. */
function nextBucket(t: Date, size: BucketSize): Date {
  const d = new Date(t);
  if (size === 'hour') d.setUTCHours(d.getUTCHours() + 1);
  else if (size === 'day') d.setUTCDate(d.getUTCDate() + 1);
  else d.setUTCMonth(d.getUTCMonth() + 1);
  return d;
}

/** A bucket's name in headings: the billing routes cut buckets in UTC. */
const UNIT: Record<BucketSize, string> = { hour: 'Hour (UTC)', day: 'Day (UTC)', month: 'Month (UTC)' };

/** A bucket's start as a reader wants it: the hour, the day or the month, in UTC as cut. */
function bucketLabel(iso: string, size: BucketSize): string {
  const d = new Date(iso);
  return size === 'hour'
    ? d.toLocaleString(undefined, {
        month: 'short',
        day: 'numeric',
        hour: '2-digit',
        minute: '2-digit',
        timeZone: 'UTC',
      })
    : size === 'day'
      ? d.toLocaleDateString(undefined, { year: 'numeric', month: 'short', day: 'numeric', timeZone: 'UTC' })
      : d.toLocaleDateString(undefined, { year: 'numeric', month: 'long', timeZone: 'UTC' });
}

/**
 * Spend per bucket over the whole window, zeros where the API left a bucket out (it lists only
 * buckets with spend): the chart's time series.
 */
function spendSeries(b: Billing): { times: number[]; series: Series[] } {
  const byStart = new Map(b.records.map((r) => [Date.parse(r.startTime), r]));
  const times: number[] = [];
  const cols = { serverless: [] as number[], pods: [] as number[], models: [] as number[] };
  const end = Date.parse(b.metadata.query.endTime);
  for (
    let t = new Date(b.metadata.query.startTime);
    t.getTime() < end;
    t = nextBucket(t, b.metadata.query.bucketSize)
  ) {
    const r = byStart.get(t.getTime());
    times.push(t.getTime() / 1000);
    cols.serverless.push(r ? r.serverlessGpuAmount + r.serverlessCpuAmount : 0);
    cols.pods.push(r ? r.podGpuAmount + r.podCpuAmount : 0);
    cols.models.push(r ? r.endpointAmount : 0);
  }
  return {
    times,
    series: [
      { label: 'serverless', color: '#2a7ab0', values: cols.serverless },
      { label: 'pods', color: '#7d5ba6', values: cols.pods },
      { label: 'public models', color: '#2e8b57', values: cols.models },
    ],
  };
}

interface EndpointSpend {
  id: string;
  name: string | null;
  gpu: number;
  cpu: number;
  total: number;
  buckets: ServerlessRecord[];
}

function byEndpoint(records: ServerlessRecord[], names: Map<string, string>): EndpointSpend[] {
  const out = new Map<string, EndpointSpend>();
  for (const r of records) {
    let e = out.get(r.serverlessId);
    if (!e)
      out.set(
        r.serverlessId,
        (e = { id: r.serverlessId, name: names.get(r.serverlessId) ?? null, gpu: 0, cpu: 0, total: 0, buckets: [] }),
      );
    e.gpu += r.gpuAmount;
    e.cpu += r.cpuAmount;
    e.total += r.totalAmount;
    e.buckets.push(r);
  }
  return [...out.values()].sort((a, b) => b.total - a.total);
}

/**
 * What the account spent over a chosen period: GET /v2/billing (totals and the chart),
 * /v2/billing/serverless (per endpoint and bucket) and /v2/billing/endpoints (public models called).
 */
export function UsagePage() {
  const [period, setPeriod] = useState<Period>(PERIODS[2]);
  const q = `bucketSize=${period.bucketSize}&lastN=${period.lastN}`;
  const { data, error } = usePolled(
    async () => {
      const [account, serverless, models, endpoints] = await Promise.all([
        get<Billing>(`/v2/billing?${q}`),
        get<Answer<'/v2/billing/serverless', 'get'>>(`/v2/billing/serverless?${q}`),
        get<Answer<'/v2/billing/endpoints', 'get'>>(`/v2/billing/endpoints?${q}`),
        // Names only: spend of a deleted endpoint still shows, by id.
        get<Answer<'/v2/serverless', 'get'>>('/v2/serverless').then(
          (r) => r.endpoints,
          () => [] as Endpoint[],
        ),
      ]);
      return { account, serverless: serverless.records, models, endpoints };
    },
    [q],
    60_000,
  );
  const chart = useMemo(() => (data && data.account.records.length > 0 ? spendSeries(data.account) : null), [data]);
  const spend = useMemo(
    () => (data ? byEndpoint(data.serverless, new Map(data.endpoints.map((e) => [e.id, e.name]))) : []),
    [data],
  );
  return (
    <section aria-labelledby="usage-heading">
      <h1 id="usage-heading">Usage and billing</h1>
      <p class="meta">
        Workers are billed for the time their containers run (not while frozen on standby), at the price table's rates
        of their GPU type or CPU flavor; public models at their price per call. Amounts in USD.
      </p>
      <div class="windows" role="group" aria-label="Period">
        {PERIODS.map((p) => (
          <button type="button" key={p.label} aria-pressed={p === period} onClick={() => setPeriod(p)}>
            {p.label}
          </button>
        ))}
      </div>
      <Loaded data={data} error={error}>
        {(d) => {
          const t = d.account.metadata.totals;
          const { query, discount } = d.account.metadata;
          return (
            <div class="usage" data-bucket={query.bucketSize}>
              <p class="meta">
                From {new Date(query.startTime).toLocaleString()} to {new Date(query.endTime).toLocaleString()}, by{' '}
                {query.bucketSize}.
                {discount &&
                  ` Serverless at ${Math.round(discount.discountFactor * 100)} % of list prices${discount.expirationDate ? ` until ${new Date(discount.expirationDate).toLocaleDateString()}` : ''}.`}
              </p>
              <table class="list totals">
                <caption>Totals for the period</caption>
                <tbody>
                  <tr>
                    <th scope="row">Serverless endpoints</th>
                    <td>{usd(t.serverlessGpuAmount + t.serverlessCpuAmount)}</td>
                  </tr>
                  <tr>
                    <th scope="row">Pods</th>
                    <td>{usd(t.podGpuAmount + t.podCpuAmount)}</td>
                  </tr>
                  <tr>
                    <th scope="row">Public models called</th>
                    <td>{usd(t.endpointAmount)}</td>
                  </tr>
                  <tr>
                    <th scope="row">Total</th>
                    <td class="total">{usd(t.totalAmount)}</td>
                  </tr>
                </tbody>
              </table>
              {chart ? (
                <div class="spend" data-chart="spend">
                  <Chart
                    title={`Spend per ${query.bucketSize} (USD)`}
                    times={chart.times}
                    series={chart.series}
                    summary={`${usd(t.totalAmount)} in ${d.account.records.length} of ${chart.times.length} ${query.bucketSize}s with spend`}
                  />
                </div>
              ) : (
                <p class="notice empty">
                  No spend in this period: workers of your endpoints and pods are billed while they run, and public
                  models per call. <Link href="/console/endpoints/new">Create an endpoint</Link> and send it a job, or
                  choose a longer period.
                </p>
              )}
              <h2>By endpoint</h2>
              {spend.length === 0 ? (
                <p class="meta">No serverless endpoint ran a worker in this period.</p>
              ) : (
                <>
                  <table class="list by-endpoint">
                    <thead>
                      <tr>
                        <th scope="col">Endpoint</th>
                        <th scope="col">{UNIT[query.bucketSize].replace(' (UTC)', 's')} with spend</th>
                        <th scope="col">GPU</th>
                        <th scope="col">CPU</th>
                        <th scope="col">Total</th>
                      </tr>
                    </thead>
                    <tbody>
                      {spend.map((e) => (
                        <tr key={e.id} data-endpoint-id={e.id}>
                          <td class="name">
                            {e.name !== null ? (
                              <Link href={`/console/endpoints/${encodeURIComponent(e.id)}`}>{e.name}</Link>
                            ) : (
                              'deleted endpoint'
                            )}{' '}
                            <code>{e.id}</code>
                          </td>
                          <td>{e.buckets.length}</td>
                          <td>{usd(e.gpu)}</td>
                          <td>{usd(e.cpu)}</td>
                          <td class="total">{usd(e.total)}</td>
                        </tr>
                      ))}
                    </tbody>
                  </table>
                  {spend.map((e) => (
                    <details key={e.id} class="endpoint-buckets" data-endpoint-id={e.id}>
                      <summary>
                        {e.name ?? 'deleted endpoint'} <code>{e.id}</code>: by {query.bucketSize}
                      </summary>
                      <table class="list">
                        <thead>
                          <tr>
                            <th scope="col">{UNIT[query.bucketSize]}</th>
                            <th scope="col">GPU</th>
                            <th scope="col">CPU</th>
                            <th scope="col">Total</th>
                          </tr>
                        </thead>
                        <tbody>
                          {e.buckets.map((b) => (
                            <tr key={b.startTime}>
                              <td>
                                <time dateTime={b.startTime}>{bucketLabel(b.startTime, query.bucketSize)}</time>
                              </td>
                              <td>{usd(b.gpuAmount)}</td>
                              <td>{usd(b.cpuAmount)}</td>
                              <td>{usd(b.totalAmount)}</td>
                            </tr>
                          ))}
                        </tbody>
                      </table>
                    </details>
                  ))}
                </>
              )}
              <h2>Public models</h2>
              {d.models.records.length === 0 ? (
                <p class="meta">
                  No calls of public models were billed in this period (
                  <Link href="/console/public-models">Public models</Link> lists them).
                </p>
              ) : (
                <table class="list models-spend">
                  <thead>
                    <tr>
                      <th scope="col">{UNIT[query.bucketSize]}</th>
                      <th scope="col">Spent</th>
                    </tr>
                  </thead>
                  <tbody>
                    {d.models.records.map((r) => (
                      <tr key={r.startTime}>
                        <td>
                          <time dateTime={r.startTime}>{bucketLabel(r.startTime, query.bucketSize)}</time>
                        </td>
                        <td>{usd(r.totalAmount)}</td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              )}
            </div>
          );
        }}
      </Loaded>
    </section>
  );
}
