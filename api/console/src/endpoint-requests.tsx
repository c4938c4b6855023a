import { useState } from 'preact/hooks';
import { get, messageOf, send, type Answer } from './api.ts';
import { usePolled } from './poll.ts';

/** GET /v2/serverless/{id}/jobs and /jobs/{jobId} (api/routes/shapes/endpoint-job.ts). */
type JobList = Answer<'/v2/serverless/{id}/jobs', 'get'>;
type JobDetail = Answer<'/v2/serverless/{id}/jobs/{jobId}', 'get'>;
type Status = JobList['jobs'][number]['status'];
/** The status filter's choices, in the order shown. */
const STATUSES: readonly Status[] = ['IN_QUEUE', 'IN_PROGRESS', 'COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT'];

const PAGE = 50;
const CANCELLABLE: readonly Status[] = ['IN_QUEUE', 'IN_PROGRESS'];
const RETRYABLE: readonly Status[] = ['FAILED', 'TIMED_OUT'];

const time = (iso: string | null): string => (iso ? new Date(iso).toLocaleTimeString() : '—');
const ms = (x: number | null): string => (x === null ? '—' : x >= 1000 ? `${(x / 1000).toFixed(1)} s` : `${x} ms`);
const kib = (bytes: number): string =>
  bytes >= 1024 * 1024 ? `${(bytes / 1024 / 1024).toFixed(1)} MiB` : `${Math.ceil(bytes / 1024)} KiB`;

/** One payload as JSON text (Preact renders it as text: a tenant's markup stays characters), or its cut start. */
function Payload({
  label,
  value,
  bytes,
  truncated,
  preview,
  none,
}: {
  label: string;
  value: unknown;
  bytes: number | null;
  truncated: boolean;
  preview: string | undefined;
  none: string;
}) {
  const slug = label.toLowerCase();
  return (
    <div data-payload={slug}>
      <h3>{label}</h3>
      {bytes === null ? (
        <p class="meta">{none}</p>
      ) : truncated ? (
        <>
          <p class="meta">{kib(bytes)} of JSON: only its start is shown (the API answers at most 64 KiB of it).</p>
          <pre class="json" data-truncated="true">
            {preview}
          </pre>
        </>
      ) : (
        <pre class="json">{JSON.stringify(value, null, 2)}</pre>
      )}
    </div>
  );
}

function JobPanel({ endpointId, jobId, changed }: { endpointId: string; jobId: string; changed: () => void }) {
  const path = `/v2/serverless/${encodeURIComponent(endpointId)}/jobs/${encodeURIComponent(jobId)}`;
  const { data: job, error, reload } = usePolled(() => get<JobDetail>(path), [path]);
  const [busy, setBusy] = useState(false);
  const [said, setSaid] = useState<{ ok: boolean; text: string } | null>(null);
  const act = async (what: 'cancel' | 'retry') => {
    setBusy(true);
    setSaid(null);
    try {
      // The job API (scope RUN), as every client calls it; retry takes no body.
      const r = await send<{ id: string; status: string }>(
        'POST',
        `/v2/${encodeURIComponent(endpointId)}/${what}/${encodeURIComponent(jobId)}`,
      );
      setSaid({ ok: true, text: `${what === 'cancel' ? 'Cancelled' : 'Retried'}: the job is ${r.status}.` });
      reload();
      changed();
    } catch (err) {
      setSaid({ ok: false, text: messageOf(err) });
    } finally {
      setBusy(false);
    }
  };
  return (
    <section class="job-detail" aria-labelledby="job-heading" data-job-id={jobId}>
      <h2 id="job-heading">
        Job <code>{jobId}</code>
      </h2>
      {error && (
        <p class="notice error" role="alert">
          {error}
        </p>
      )}
      {said && (
        <p class={said.ok ? 'notice' : 'notice error'} role={said.ok ? 'status' : 'alert'}>
          {said.text}
        </p>
      )}
      {job === null ? (
        !error && <p aria-busy="true">Loading the job…</p>
      ) : (
        <>
          <p class="meta">
            <span data-status={job.status}>{job.status}</span> · submitted {new Date(job.createdAt).toLocaleString()}
            {job.workerId && (
              <>
                {' '}
                · worker <code>{job.workerId}</code>
              </>
            )}
            {job.retries > 0 && ` · retried ${job.retries}×`} · kept until {new Date(job.expiresAt).toLocaleString()}
          </p>
          <div class="actions">
            {CANCELLABLE.includes(job.status) && (
              <button type="button" disabled={busy} onClick={() => void act('cancel')}>
                Cancel job
              </button>
            )}
            {RETRYABLE.includes(job.status) && (
              <button type="button" disabled={busy} onClick={() => void act('retry')}>
                Retry job
              </button>
            )}
          </div>
          {job.error !== null && (
            <>
              <h3>Error</h3>
              <pre class="json" data-payload="error">
                {job.error}
                {job.errorTruncated && '…'}
              </pre>
            </>
          )}
          <Payload
            label="Input"
            value={job.input}
            bytes={job.inputBytes}
            truncated={job.inputTruncated}
            preview={job.inputPreview}
            none="No input."
          />
          <Payload
            label="Output"
            value={job.output}
            bytes={job.outputBytes}
            truncated={job.outputTruncated}
            preview={job.outputPreview}
            none={CANCELLABLE.includes(job.status) ? 'No output yet.' : 'No output.'}
          />
        </>
      )}
    </section>
  );
}

/**
 * An endpoint's recent jobs (GET /v2/serverless/{id}/jobs: those /status still answers), newest
 * first, a page at a time, refreshed while the tab is visible; choosing one shows its input and
 * output (GET .../jobs/{jobId}) with Cancel or Retry (the job API) where they apply.
 */
export function RequestsTab({ id }: { id: string }) {
  const base = `/v2/serverless/${encodeURIComponent(id)}`;
  const [status, setStatus] = useState<Status | ''>('');
  /** The page's `before` cursor: '' for the newest page. */
  const [before, setBefore] = useState('');
  const [selected, setSelected] = useState<string | null>(null);
  const query = new URLSearchParams({ limit: String(PAGE) });
  if (status) query.set('status', status);
  if (before) query.set('before', before);
  const listPath = `${base}/jobs?${query}`;
  const { data, error, reload } = usePolled(() => get<JobList>(listPath), [listPath]);
  return (
    <>
      <div class="filters">
        <label for="job-status">Status</label>
        <select
          id="job-status"
          value={status}
          onChange={(e) => {
            setStatus((e.currentTarget as HTMLSelectElement).value as Status | '');
            setBefore('');
          }}
        >
          <option value="">any</option>
          {STATUSES.map((s) => (
            <option key={s} value={s}>
              {s}
            </option>
          ))}
        </select>
      </div>
      {error && (
        <p class="notice error" role="alert">
          {error}
        </p>
      )}
      {data === null ? (
        !error && <p aria-busy="true">Loading requests…</p>
      ) : data.jobs.length === 0 ? (
        <p class="notice empty">
          {status || before
            ? 'No jobs here.'
            : `No recent jobs. Send one with POST /v2/${id}/run; finished jobs stay listed for their retention (30 minutes after /run, 1 minute after /runsync, by default).`}
        </p>
      ) : (
        <table class="list requests">
          <thead>
            <tr>
              <th scope="col">Job</th>
              <th scope="col">Status</th>
              <th scope="col">Created</th>
              <th scope="col">Started</th>
              <th scope="col">Completed</th>
              <th scope="col">Delay</th>
              <th scope="col">Execution</th>
            </tr>
          </thead>
          <tbody>
            {data.jobs.map((j) => (
              <tr
                key={j.id}
                data-job-id={j.id}
                data-status={j.status}
                data-selected={j.id === selected ? 'true' : undefined}
              >
                <td>
                  <button
                    type="button"
                    class="link"
                    aria-pressed={j.id === selected}
                    aria-label={`Show job ${j.id}`}
                    onClick={() => setSelected(j.id === selected ? null : j.id)}
                  >
                    <code>{j.id}</code>
                  </button>
                </td>
                <td>{j.status}</td>
                <td>{time(j.createdAt)}</td>
                <td>{time(j.startedAt)}</td>
                <td>{time(j.completedAt)}</td>
                <td>{ms(j.delayTime)}</td>
                <td>{ms(j.executionTime)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <div class="pager">
        {before && (
          <button type="button" class="quiet" onClick={() => setBefore('')}>
            Newest
          </button>
        )}
        {data?.nextBefore && (
          <button type="button" class="quiet" onClick={() => setBefore(data.nextBefore!)}>
            Older
          </button>
        )}
      </div>
      {selected && <JobPanel key={selected} endpointId={id} jobId={selected} changed={reload} />}
    </>
  );
}
