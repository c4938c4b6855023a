import { get, type Answer, type Endpoint, type Health, type Metrics } from './api.ts';
import { Link } from './app.tsx';
import { usePolled } from './poll.ts';

/** The health answer with its worker problem (GET /v2/{id}/health; docs/endpoints.md#why-a-job-waits). */
type HealthNow = Health & { workerProblem?: { kind: string; reason: string } | null };
type Row = Endpoint & { health: HealthNow | null };
/** The last hour's figures of one endpoint. */
interface Hour {
  jobsPerMinute: number;
  p50: number | null;
}

/** Workers by state, from the job API's health answer: "1 idle · 2 running", or "none". */
function workersText(h: Health | null): string {
  if (!h) return '—';
  const parts = Object.entries(h.workers)
    .filter(([, n]) => n > 0)
    .map(([state, n]) => `${n} ${state}`);
  return parts.length ? parts.join(' · ') : 'none';
}

/**
 * The endpoint's state now, from its health answer, first match wins: serving (a worker is ready,
 * or frozen on standby and thawed by the next job), blocked (no worker can run: the worker
 * problem), scaling (workers starting or waiting for a host), waiting (jobs queued and no worker),
 * unhealthy (only unhealthy workers), idle (no worker and nothing queued).
 */
function statusOf(h: HealthNow | null): { label: string; detail: string } {
  if (!h) return { label: '—', detail: 'the health call failed' };
  const w = h.workers;
  if ((w.ready ?? 0) > 0 || (w.idle ?? 0) > 0)
    return { label: 'serving', detail: `${w.running ?? 0} running, ${w.idle ?? 0} idle or on standby` };
  if (h.workerProblem) return { label: 'blocked', detail: `${h.workerProblem.kind}: ${h.workerProblem.reason}` };
  if ((w.initializing ?? 0) > 0 || (w.throttled ?? 0) > 0)
    return { label: 'scaling', detail: 'workers are starting or waiting for a host' };
  if (h.jobs.inQueue > 0) return { label: 'waiting', detail: 'jobs are queued and no worker has started yet' };
  if ((w.unhealthy ?? 0) > 0) return { label: 'unhealthy', detail: 'its only workers are unhealthy' };
  return { label: 'idle', detail: 'no workers and nothing queued' };
}

/**
 * The last hour as one point (window 1h, step 1h: the cheapest read of the metrics route, one
 * merged row): jobs that ended in it per minute, and its p50 execution time.
 */
async function lastHour(id: string): Promise<Hour | null> {
  const m = await get<Metrics>(`/v2/serverless/${encodeURIComponent(id)}/metrics?window=1h&step=1h`).catch(() => null);
  const p = m?.points[0];
  if (!p) return null;
  const { completed, failed, timedOut, cancelled } = p.jobs;
  return { jobsPerMinute: (completed + failed + timedOut + cancelled) / 60, p50: p.executionMs.p50 };
}

const perMinute = (x: number): string =>
  x === 0 ? '0' : x < 0.1 ? x.toFixed(2) : x < 10 ? x.toFixed(1) : `${Math.round(x)}`;
const ms = (x: number | null): string =>
  x === null ? '—' : x >= 1000 ? `${(x / 1000).toFixed(1)} s` : `${Math.round(x)} ms`;

/**
 * The account's endpoints (GET /v2/serverless), each with GET /v2/{id}/health for its state, workers
 * and queue (every few seconds) and GET /v2/serverless/{id}/metrics for the last hour (once a
 * minute: the rollup changes no faster).
 */
export function EndpointsPage() {
  const { data: rows, error } = usePolled(async (): Promise<Row[]> => {
    const { endpoints } = await get<Answer<'/v2/serverless', 'get'>>('/v2/serverless');
    return Promise.all(
      endpoints.map(async (e) => ({
        ...e,
        health: await get<HealthNow>(`/v2/${encodeURIComponent(e.id)}/health`).catch(() => null),
      })),
    );
  }, []);
  const ids = rows ? rows.map((r) => r.id).join(' ') : '';
  const { data: hours } = usePolled(
    async () => {
      const list = ids ? ids.split(' ') : [];
      return new Map(await Promise.all(list.map(async (id) => [id, await lastHour(id)] as const)));
    },
    [ids],
    60_000,
  );
  return (
    <section aria-labelledby="endpoints-heading">
      <div class="heading-row">
        <h1 id="endpoints-heading">Endpoints</h1>
        <Link href="/console/endpoints/new">Create endpoint</Link>
      </div>
      {error && (
        <p class="notice error" role="alert">
          {error}
        </p>
      )}
      {rows === null ? (
        !error && <p aria-busy="true">Loading…</p>
      ) : rows.length === 0 ? (
        <p class="notice empty">
          No endpoints yet: <Link href="/console/endpoints/new">create one</Link> here, with{' '}
          <code>POST /v2/serverless</code> or with <code>gantry deploy</code>.
        </p>
      ) : (
        <table class="endpoints">
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Id</th>
              <th scope="col">Type</th>
              <th scope="col">Status</th>
              <th scope="col">Workers</th>
              <th scope="col">In queue</th>
              <th scope="col">
                Jobs / min <span class="meta">(last hour)</span>
              </th>
              <th scope="col">
                p50 execution <span class="meta">(last hour)</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {rows.map((e) => {
              const s = statusOf(e.health);
              const hour = hours?.get(e.id);
              return (
                <tr key={e.id} data-endpoint-id={e.id}>
                  <td class="name">
                    <Link href={`/console/endpoints/${encodeURIComponent(e.id)}`}>{e.name}</Link>
                  </td>
                  <td>
                    <code>{e.id}</code>
                  </td>
                  <td>{e.type}</td>
                  <td class="status" data-status={s.label}>
                    {s.label}
                    <div class="meta">{s.detail}</div>
                  </td>
                  <td>{workersText(e.health)}</td>
                  <td>{e.health ? e.health.jobs.inQueue : '—'}</td>
                  <td class="jobs-per-minute">{hour ? perMinute(hour.jobsPerMinute) : '—'}</td>
                  <td class="p50">{hour ? ms(hour.p50) : '—'}</td>
                </tr>
              );
            })}
          </tbody>
        </table>
      )}
    </section>
  );
}
