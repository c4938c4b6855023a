import { get, type Answer, type Endpoint } from './api.ts';
import { usePolled } from './poll.ts';

/** GET /v2/serverless/{id}/workers (api/routes/shapes/endpoint-worker.ts ListEndpointWorkersResponseSchema). */
type Workers = Answer<'/v2/serverless/{id}/workers', 'get'>;
type WorkerProblem = NonNullable<Workers['workerProblem']>;

const PROBLEM_TITLES: Record<WorkerProblem['kind'], string> = {
  placement: 'No host can take a worker',
  image: 'The image cannot be had',
  start: 'The container exits before it is ready',
};

/** What to do about a problem, where the reason alone does not say. */
function nextStep(p: WorkerProblem): string | null {
  // Placement's reason counts the hosts ("0 of 0 hosts READY"): none at all is the usual first-run case.
  if (p.kind === 'placement' && /\b0 of 0 hosts\b/.test(p.reason))
    return 'No hosts yet: register one (POST /v2/hosts, or a hosts file; see docs/hosts.md).';
  if (p.kind === 'placement')
    return 'Register a host that has what it asks for, or change the endpoint’s GPU pools, size or locations.';
  if (p.kind === 'image')
    return 'Check the image name and the endpoint’s registry credential; hosts must reach the registry.';
  return 'The Logs tab shows what the container printed before it stopped.';
}

function uptime(seconds: number | null): string {
  if (seconds === null) return '—';
  if (seconds < 60) return `${seconds} s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min`;
  if (seconds < 86_400) return `${Math.floor(seconds / 3600)} h ${Math.floor((seconds % 3600) / 60)} min`;
  return `${Math.floor(seconds / 86_400)} d ${Math.floor((seconds % 86_400) / 3600)} h`;
}

const when = (iso: string): string => new Date(iso).toLocaleString();

function summaryText(s: Workers['summary']): string {
  const parts = (['running', 'idle', 'initializing', 'throttled', 'unhealthy', 'standby'] as const)
    .filter((k) => s[k] > 0)
    .map((k) => `${s[k]} ${k}`);
  return `${s.total} worker${s.total === 1 ? '' : 's'}${parts.length ? `: ${parts.join(' · ')}` : ''}`;
}

/**
 * An endpoint's workers (GET /v2/serverless/{id}/workers), refreshed while the tab is visible: why
 * none can run (the endpoint's workerProblem) above the table, then each worker with its state and
 * what it waits for. The host itself is not in the view (its location is).
 */
export function WorkersTab({ id }: { id: string }) {
  const base = `/v2/serverless/${encodeURIComponent(id)}`;
  const { data, error } = usePolled(() => get<Workers>(`${base}/workers`), [base]);
  // Only for the empty state's minimum; the page's header reads it as well.
  const { data: endpoint } = usePolled(() => get<Endpoint>(base), [base], 60_000);
  const problem = data?.workerProblem ?? null;
  const failure = data?.lastFailure ?? null;
  return (
    <>
      {error && (
        <p class="notice error" role="alert">
          {error}
        </p>
      )}
      {problem && (
        <div class="notice error worker-problem" role="status" data-worker-problem={problem.kind}>
          <p>
            <strong>{PROBLEM_TITLES[problem.kind]}</strong>: <span class="reason">{problem.reason}</span>
          </p>
          <p class="meta">
            Since {when(problem.since)}
            {problem.workerId && (
              <>
                {' '}
                · worker <code>{problem.workerId}</code>
              </>
            )}
            . {nextStep(problem)}
          </p>
        </div>
      )}
      {failure && (!problem || problem.workerId !== failure.workerId) && (
        <p class="notice" data-last-failure={failure.workerId}>
          Last failed worker <code>{failure.workerId}</code> (release v{failure.version}, {when(failure.failedAt)}):{' '}
          {failure.reason}
        </p>
      )}
      {data === null ? (
        !error && <p aria-busy="true">Loading workers…</p>
      ) : data.workers.length === 0 ? (
        <p class="notice empty">
          {problem
            ? 'No workers running: see above for why none can start.'
            : `No workers now. Workers start when jobs arrive (min ${endpoint ? endpoint.workers.min : '—'}, max ${endpoint ? endpoint.workers.max : '—'}); send one with POST /v2/${id}/run.`}
        </p>
      ) : (
        <>
          <p class="meta">
            {summaryText(data.summary)}
            {data.endpointVersion !== null && ` · current release v${data.endpointVersion}`}
          </p>
          <table class="list workers">
            <thead>
              <tr>
                <th scope="col">Worker</th>
                <th scope="col">State</th>
                <th scope="col">Location</th>
                <th scope="col">GPU</th>
                <th scope="col">Release</th>
                <th scope="col">Why</th>
                <th scope="col">Uptime</th>
                <th scope="col">Last job</th>
              </tr>
            </thead>
            <tbody>
              {data.workers.map((w) => (
                <tr key={w.id} data-worker-id={w.id} data-status={w.status}>
                  <td>
                    <code>{w.id}</code>
                  </td>
                  <td>{w.status.toLowerCase()}</td>
                  <td>
                    {w.dataCenterId ?? '—'}
                    {w.hostId && <div class="meta">host {w.hostId}</div>}
                  </td>
                  <td>{w.gpuCount === 0 ? 'CPU' : `${w.gpuCount} × ${w.gpuTypeId ?? 'GPU (not placed)'}`}</td>
                  <td>
                    {w.version === null ? '—' : `v${w.version}`}
                    {w.isStale && ' (older release)'}
                  </td>
                  <td class="reason">{w.statusReason ?? '—'}</td>
                  <td>{uptime(w.uptimeSeconds)}</td>
                  <td>{w.lastJobAt ? when(w.lastJobAt) : '—'}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </>
      )}
    </>
  );
}
