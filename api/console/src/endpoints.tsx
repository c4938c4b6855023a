import { useEffect, useState } from 'preact/hooks';
import { get, type Endpoint, type Health } from './api.ts';
import { Link } from './app.tsx';

type Row = Endpoint & { health: Health | null };

/** Workers by state, from the job API's health answer: "1 idle · 2 running", or "none". */
function workersText(h: Health | null): string {
  if (!h) return '—';
  const parts = Object.entries(h.workers)
    .filter(([, n]) => n > 0)
    .map(([state, n]) => `${n} ${state}`);
  return parts.length ? parts.join(' · ') : 'none';
}

/** The account's endpoints (GET /v2/serverless), each with GET /v2/{id}/health for workers and queue. */
export function EndpointsPage() {
  const [rows, setRows] = useState<Row[] | null>(null);
  const [error, setError] = useState('');
  useEffect(() => {
    let live = true;
    (async () => {
      const { endpoints } = await get<{ endpoints: Endpoint[] }>('/v2/serverless');
      const withHealth = await Promise.all(
        endpoints.map(async (e) => ({
          ...e,
          health: await get<Health>(`/v2/${encodeURIComponent(e.id)}/health`).catch(() => null),
        })),
      );
      if (live) setRows(withHealth);
    })().catch((err: unknown) => live && setError(err instanceof Error ? err.message : String(err)));
    return () => {
      live = false;
    };
  }, []);
  return (
    <section aria-labelledby="endpoints-heading">
      <h1 id="endpoints-heading">Endpoints</h1>
      {error ? (
        <p class="notice error" role="alert">
          {error}
        </p>
      ) : rows === null ? (
        <p aria-busy="true">Loading…</p>
      ) : rows.length === 0 ? (
        <p class="notice empty">
          No endpoints yet: create one with <code>POST /v2/serverless</code> or <code>gantry deploy</code>.
        </p>
      ) : (
        <table class="endpoints">
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Id</th>
              <th scope="col">Type</th>
              <th scope="col">Workers</th>
              <th scope="col">In queue</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((e) => (
              <tr key={e.id} data-endpoint-id={e.id}>
                <td class="name">
                  <Link href={`/console/endpoints/${encodeURIComponent(e.id)}`}>{e.name}</Link>
                </td>
                <td>
                  <code>{e.id}</code>
                </td>
                <td>{e.type}</td>
                <td>{workersText(e.health)}</td>
                <td>{e.health ? e.health.jobs.inQueue : '—'}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
