import { useContext, useState } from 'preact/hooks';
import { get, messageOf, send, type Answer } from './api.ts';
import { CallingKeyContext } from './app.tsx';
import { when } from './keys.tsx';
import { usePolled } from './poll.ts';
import { Confirm, Field, FormNotices, Loaded, useSubmit, valueOf } from './forms.tsx';

type HostList = Answer<'/v2/hosts', 'get'>;
type Host = HostList['hosts'][number];

const FIELDS = [
  'name',
  'address',
  'port',
  'user',
  'privateKey',
  'hostKeySha256',
  'dataCenterId',
  'labels',
  'maxWorkers',
] as const;

/** The probe's findings worth an operator's attention: what keeps GPUs or containers from working. */
function hintsOf(probe: Record<string, unknown> | null): string[] {
  if (!probe) return [];
  return (['gpuError', 'gpuHint', 'wallsHint'] as const)
    .map((k) => probe[k])
    .filter((v): v is string => typeof v === 'string' && v !== '');
}

function runtimeOf(h: Host): string {
  const r = h.probe?.runtime as { name?: string; version?: string | null } | null | undefined;
  if (r?.name) return r.version ? `${r.name} ${r.version}` : r.name;
  return h.containerRuntime ?? '—';
}

/** "NVIDIA A100 80GB (AMPERE_80): 1 free of 2" per GPU type the host has. */
function gpusOf(h: Host): string[] {
  const inUse = new Set(h.gpusInUse);
  const byType = new Map<string, { total: number; free: number }>();
  for (const g of h.gpus) {
    const type = g.pool ? `${g.name} (${g.pool})` : g.name;
    const n = byType.get(type) ?? { total: 0, free: 0 };
    n.total++;
    if (!inUse.has(g.uuid)) n.free++;
    byType.set(type, n);
  }
  return [...byType].map(([type, n]) => `${type}: ${n.free} free of ${n.total}`);
}

/** `key=value` lines as labels; a line without `=` is an error. */
function parseLabels(text: string): Record<string, string> | string {
  const labels: Record<string, string> = {};
  for (const [i, raw] of text.split('\n').entries()) {
    const line = raw.trim();
    if (!line) continue;
    const eq = line.indexOf('=');
    if (eq <= 0) return `line ${i + 1}: write key=value`;
    labels[line.slice(0, eq).trim()] = line.slice(eq + 1).trim();
  }
  return labels;
}

/** Probes at once (harmless, so no question); a probe of an unreachable host may take a while. */
function ProbeButton({ h, reload }: { h: Host; reload: () => void }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState('');
  return (
    <span>
      <button
        type="button"
        class="quiet"
        aria-label={`Probe ${h.name} now`}
        disabled={busy}
        onClick={async () => {
          setBusy(true);
          setError('');
          try {
            await send('POST', `/v2/hosts/${encodeURIComponent(h.id)}/probe`, {});
            reload();
          } catch (err) {
            setError(messageOf(err));
          } finally {
            setBusy(false);
          }
        }}
      >
        {busy ? 'Probing…' : 'Probe now'}
      </button>
      {error && (
        <span class="error" role="alert">
          {' '}
          {error}
        </span>
      )}{' '}
    </span>
  );
}

function HostRow({ h, reload }: { h: Host; reload: () => void }) {
  const hints = hintsOf(h.probe);
  const gpus = gpusOf(h);
  return (
    <tr data-host-id={h.id} data-status={h.status}>
      <td class="name">
        {h.name}
        <div class="meta">
          <code>
            {h.user}@{h.address}:{h.port}
          </code>{' '}
          · {h.dataCenterId} · {h.source}
        </div>
      </td>
      <td class="status">
        {h.status}
        {h.statusReason && <div class="meta">{h.statusReason}</div>}
      </td>
      <td class="probe">
        {h.lastProbeAt ? `probed ${when(h.lastProbeAt)}` : 'not probed yet'}
        {h.cpuCount !== null && (
          <div class="meta">
            {h.cpuCount} CPUs · {h.memoryMb ?? '?'} MB · {h.diskFreeGb ?? '?'} GB free
          </div>
        )}
        {hints.map((hint) => (
          <div key={hint} class="meta hint-line">
            {hint}
          </div>
        ))}
      </td>
      <td>{runtimeOf(h)}</td>
      <td class="gpus">
        {gpus.length ? gpus.map((g) => <div key={g}>{g}</div>) : 'none'}
        {h.gpus.length > 0 && h.gpuMethod && <div class="meta">passthrough: {h.gpuMethod}</div>}
      </td>
      <td>
        {h.workers}
        {h.maxWorkers !== null && ` of ${h.maxWorkers}`}
      </td>
      <td class="labels">
        {Object.entries(h.labels).map(([k, v]) => (
          <div key={k}>
            <code>
              {k}={v}
            </code>
          </div>
        ))}
      </td>
      <td class="actions-cell">
        <ProbeButton h={h} reload={reload} />
        {h.status !== 'DISABLED' && (
          <Confirm
            label="Drain and remove"
            name={`Drain and remove ${h.name}`}
            question={`Drain ${h.name} and remove it? No new workers go there; its ${h.workers} workers are replaced elsewhere, then it is removed.`}
            yes="Yes, drain and remove"
            run={async () => {
              await send('DELETE', `/v2/hosts/${encodeURIComponent(h.id)}`);
              reload();
            }}
          />
        )}
      </td>
    </tr>
  );
}

function HostsAdmin() {
  const { data, error, reload } = usePolled(() => get<HostList>('/v2/hosts'), []);
  const f = useSubmit(FIELDS);
  return (
    <>
      <Loaded data={data} error={error}>
        {({ hosts }) =>
          hosts.length === 0 ? (
            <p class="notice empty">No hosts yet: register one below.</p>
          ) : (
            <table class="list hosts">
              <thead>
                <tr>
                  <th scope="col">Host</th>
                  <th scope="col">Status</th>
                  <th scope="col">Probe</th>
                  <th scope="col">Runtime</th>
                  <th scope="col">GPUs</th>
                  <th scope="col">Workers</th>
                  <th scope="col">Labels</th>
                  <th scope="col">
                    <span class="visually-hidden">Actions</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {hosts.map((h) => (
                  <HostRow key={h.id} h={h} reload={reload} />
                ))}
              </tbody>
            </table>
          )
        }
      </Loaded>

      <h2 id="new-host-heading">Register a host</h2>
      <form
        ref={f.form}
        class="create"
        aria-labelledby="new-host-heading"
        noValidate
        onSubmit={(e) => {
          e.preventDefault();
          const form = e.currentTarget;
          const own: Record<string, string> = {};
          const text = (name: string) => valueOf(form, name).trim();
          const labels = parseLabels(valueOf(form, 'labels'));
          if (typeof labels === 'string') own.labels = labels;
          if (!text('address')) own.address = 'Give the DNS name or IP address to reach over SSH.';
          if (!text('dataCenterId')) own.dataCenterId = 'Name the data center the host is in.';
          const body: Record<string, unknown> = {
            address: text('address'),
            dataCenterId: text('dataCenterId'),
            privateKey: valueOf(form, 'privateKey'),
          };
          for (const k of ['name', 'user', 'hostKeySha256'] as const) if (text(k)) body[k] = text(k);
          for (const k of ['port', 'maxWorkers'] as const) if (text(k)) body[k] = Number(text(k));
          if (typeof labels !== 'string' && Object.keys(labels).length) body.labels = labels;
          void f.submit(async () => {
            const h = await send<Answer<'/v2/hosts', 'post', 201>>('POST', '/v2/hosts', body);
            form.reset();
            reload();
            return `Registered ${h.name}: ${h.status}${h.statusReason ? ` (${h.statusReason})` : ''}.`;
          }, own);
        }}
      >
        <Field
          id="host-address"
          label="Address"
          hint="DNS name or IP address the platform reaches over SSH."
          error={f.errors.address}
          control={(p) => <input {...p} name="address" data-field="address" autocomplete="off" spellcheck={false} />}
        />
        <div class="pair">
          <Field
            id="host-port"
            label="SSH port"
            error={f.errors.port}
            control={(p) => (
              <input {...p} name="port" data-field="port" type="number" min={1} max={65535} placeholder="22" />
            )}
          />
          <Field
            id="host-user"
            label="SSH user"
            error={f.errors.user}
            control={(p) => (
              <input {...p} name="user" data-field="user" autocomplete="off" spellcheck={false} placeholder="root" />
            )}
          />
        </div>
        <Field
          id="host-key"
          label="Private key"
          hint="OpenSSH or PEM, without a passphrase. Write-only: sealed at rest, never shown again."
          error={f.errors.privateKey}
          control={(p) => (
            <textarea {...p} name="privateKey" data-field="privateKey" rows={4} spellcheck={false} autocomplete="off" />
          )}
        />
        <Field
          id="host-fingerprint"
          label="Host key fingerprint (optional)"
          hint="SHA256:… as ssh-keygen -lf prints it. Empty: the key seen on first contact is pinned."
          error={f.errors.hostKeySha256}
          control={(p) => (
            <input {...p} name="hostKeySha256" data-field="hostKeySha256" autocomplete="off" spellcheck={false} />
          )}
        />
        <div class="pair">
          <Field
            id="host-dc"
            label="Data center"
            error={f.errors.dataCenterId}
            control={(p) => <input {...p} name="dataCenterId" data-field="dataCenterId" autocomplete="off" />}
          />
          <Field
            id="host-name"
            label="Name (optional)"
            hint="Default: user@address:port."
            error={f.errors.name}
            control={(p) => <input {...p} name="name" data-field="name" autocomplete="off" />}
          />
        </div>
        <Field
          id="host-labels"
          label="Labels (optional)"
          hint="One key=value a line; placement reads them (gantry.io/cpu-overcommit=4, ...)."
          error={f.errors.labels}
          control={(p) => <textarea {...p} name="labels" data-field="labels" rows={2} spellcheck={false} />}
        />
        <Field
          id="host-max"
          label="Most workers (optional)"
          error={f.errors.maxWorkers}
          control={(p) => <input {...p} name="maxWorkers" data-field="maxWorkers" type="number" min={0} />}
        />
        <button type="submit" disabled={f.busy} aria-busy={f.busy ? 'true' : undefined}>
          {f.busy ? 'Registering and probing…' : 'Register host'}
        </button>
        <FormNotices notice={f.notice} done={f.done} />
      </form>
    </>
  );
}

/**
 * The platform's hosts (GET/POST/DELETE /v2/hosts, POST /v2/hosts/{id}/probe), for the platform
 * admin's key only; other keys get a notice (the API would answer them 403).
 */
export function HostsPage() {
  const self = useContext(CallingKeyContext);
  return (
    <section aria-labelledby="hosts-heading">
      <h1 id="hosts-heading">Hosts</h1>
      <p class="meta">
        The machines workers run on, reached over SSH; each is probed on registration and then regularly.
      </p>
      {self === null ? (
        <p aria-busy="true">Loading…</p>
      ) : !self.admin ? (
        <p class="notice">Hosts are managed with the admin's key (a key of the admin account with ADMIN).</p>
      ) : (
        <HostsAdmin />
      )}
    </section>
  );
}
