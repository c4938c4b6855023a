import { useEffect, useRef, useState } from 'preact/hooks';
import { get, messageOf, send, type Answer } from './api.ts';
import { usePolled } from './poll.ts';

type Releases = Answer<'/v2/serverless/{id}/releases', 'get'>;
type WorkerSummary = Releases['releases'][number]['workers'];

/** A diff value as text: strings as they are, lists one per line, env as NAME=value lines. */
function asText(value: unknown): string {
  if (value === null || value === undefined) return '(none)';
  if (typeof value === 'string') return value === '' ? '(empty)' : value;
  if (Array.isArray(value)) return value.length === 0 ? '(none)' : value.map((x) => asText(x)).join('\n');
  if (typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>);
    return entries.length === 0 ? '(none)' : entries.map(([k, v]) => `${k}=${asText(v)}`).join('\n');
  }
  return String(value);
}

const workersText = (w: WorkerSummary): string => {
  const parts = (['running', 'idle', 'initializing', 'throttled', 'unhealthy', 'standby'] as const)
    .filter((s) => w[s] > 0)
    .map((s) => `${w[s]} ${s}`);
  return parts.length ? parts.join(' · ') : 'none';
};

const when = (iso: string | null) => (iso ? new Date(iso).toLocaleString() : '');

/**
 * An endpoint's releases (GET /v2/serverless/{id}/releases): the rollout between them, each release
 * with its status and what it changed, and a rollback to an older one
 * (POST /v2/serverless/{id}/releases/{version}/rollback) once confirmed.
 */
export function ReleasesTab({ id }: { id: string }) {
  const base = `/v2/serverless/${encodeURIComponent(id)}`;
  const { data, error, reload } = usePolled(() => get<Releases>(`${base}/releases`), [base]);
  const [confirming, setConfirming] = useState<number | null>(null);
  const [busy, setBusy] = useState(false);
  const [outcome, setOutcome] = useState<{ ok: boolean; text: string } | null>(null);
  const confirmButton = useRef<HTMLButtonElement>(null);
  useEffect(() => {
    if (confirming !== null) confirmButton.current?.focus();
  }, [confirming]);

  async function rollback(version: number) {
    setBusy(true);
    try {
      const made = await send<Answer<'/v2/serverless/{id}/releases/{version}/rollback', 'post', 201>>(
        'POST',
        `${base}/releases/${version}/rollback`,
      );
      setOutcome({ ok: true, text: `Release ${made.version} made: it runs release ${version}'s container fields.` });
      reload();
    } catch (err) {
      setOutcome({ ok: false, text: `Rollback to release ${version} refused: ${messageOf(err)}` });
    } finally {
      setBusy(false);
      setConfirming(null);
    }
  }

  if (!data)
    return error ? (
      <p class="notice error" role="alert">
        {error}
      </p>
    ) : (
      <p aria-busy="true">Loading releases…</p>
    );
  const r = data.rollout;
  return (
    <>
      {error && (
        <p class="notice error" role="alert">
          {error}
        </p>
      )}
      <p class={outcome ? `notice ${outcome.ok ? 'ok' : 'error'}` : 'notice ok'} role="status">
        {outcome?.text ?? ''}
      </p>
      <section class="rollout" aria-labelledby="rollout-heading">
        <h2 id="rollout-heading">Rollout</h2>
        <p id="rollout-text">
          {r.workersTotal === 0
            ? `No workers. Release ${r.currentVersion} is current: new workers run it.`
            : `${r.inProgress ? 'Rolling out' : 'Done'}: ${r.workersOnLatest} of ${r.workersTotal} worker(s) on release ${r.currentVersion} (${r.percentOnLatest} %), ${r.workersOnOlder} on older releases.`}
        </p>
        {r.workersTotal > 0 && (
          <progress
            max={r.workersTotal}
            value={r.workersOnLatest}
            aria-label={`Workers on release ${r.currentVersion}`}
            aria-describedby="rollout-text"
          >
            {r.percentOnLatest} %
          </progress>
        )}
      </section>
      <h2>Releases</h2>
      {data.releases.map((rel) => {
        const current = rel.version === data.endpointVersion;
        return (
          <article key={rel.id} class="release" data-version={rel.version} aria-labelledby={`release-${rel.version}`}>
            <h3 id={`release-${rel.version}`}>
              Release {rel.version}
              {current && ' (current)'}
            </h3>
            <p class="meta">
              <span class="status">{rel.status}</span> · made {when(rel.createdAt)}
              {rel.finishedAt && ` · finished ${when(rel.finishedAt)}`} · workers: {workersText(rel.workers)}
            </p>
            {rel.statusReason && <p class="reason">{rel.statusReason}</p>}
            {rel.diff.length === 0 ? (
              <p class="meta">{rel.version === 1 ? 'The first release.' : 'No container field changed.'}</p>
            ) : (
              <table class="list diff">
                <caption>What changed from the release before</caption>
                <thead>
                  <tr>
                    <th scope="col">Field</th>
                    <th scope="col">Old</th>
                    <th scope="col" aria-hidden="true"></th>
                    <th scope="col">New</th>
                  </tr>
                </thead>
                <tbody>
                  {rel.diff.map((d) => (
                    <tr key={d.field} data-field={d.field}>
                      <th scope="row">{d.field}</th>
                      <td class="old">
                        <pre>{asText(d.old)}</pre>
                      </td>
                      <td aria-hidden="true">→</td>
                      <td class="new">
                        <pre>{asText(d.new)}</pre>
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            )}
            {rel.version < data.endpointVersion &&
              (confirming === rel.version ? (
                <div class="confirm" role="group" aria-label={`Roll back to release ${rel.version}`}>
                  <p>
                    A new release will run release {rel.version}'s container fields (image, start command, disk, ports,
                    env, registry); its workers replace the current ones as it rolls out. Network volumes and scaling
                    stay as they are.
                  </p>
                  <button type="button" ref={confirmButton} disabled={busy} onClick={() => void rollback(rel.version)}>
                    {busy ? 'Rolling back…' : `Confirm rollback to release ${rel.version}`}
                  </button>{' '}
                  <button type="button" class="quiet" disabled={busy} onClick={() => setConfirming(null)}>
                    Cancel
                  </button>
                </div>
              ) : (
                <button
                  type="button"
                  class="quiet"
                  disabled={busy}
                  onClick={() => {
                    setOutcome(null);
                    setConfirming(rel.version);
                  }}
                >
                  Roll back to release {rel.version}…
                </button>
              ))}
          </article>
        );
      })}
    </>
  );
}
