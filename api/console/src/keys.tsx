import { useContext, useEffect, useRef, useState } from 'preact/hooks';
import { get, send, signOut, type Answer, type Endpoint } from './api.ts';
import { CallingKeyContext } from './app.tsx';
import { usePolled } from './poll.ts';
import { Confirm, Field, FormNotices, Loaded, useSubmit, valueOf } from './forms.tsx';

type KeyList = Answer<'/v2/keys', 'get'>;
type ApiKey = KeyList['keys'][number];
/** POST /v2/keys: the key with its secret, shown once. */
type CreatedKey = Answer<'/v2/keys', 'post', 201>;

const SCOPES: Record<string, string> = {
  READ: 'read management resources',
  WRITE: 'change them, and make and revoke keys',
  RUN: 'submit jobs and call endpoints',
  ADMIN: 'all of these',
};
const FIELDS = ['name', 'scopes', 'expiresAt', 'endpointIds'] as const;

export const when = (iso: string | null): string => (iso ? new Date(iso).toLocaleString() : '—');

/** The key just made, shown this once with a copy button; gone when dismissed or on leaving the page. */
function NewSecret({ made, dismiss }: { made: CreatedKey; dismiss: () => void }) {
  const [copied, setCopied] = useState('');
  const box = useRef<HTMLDivElement>(null);
  useEffect(() => box.current?.focus(), []);
  return (
    <div class="notice secret" role="region" aria-label="The new key" tabIndex={-1} ref={box}>
      <p>
        <strong>{made.name}</strong> was created. Copy the key now: <strong>it will not be shown again</strong> (only
        its hash is kept).
      </p>
      <p>
        <code class="secret-value" data-secret>
          {made.key}
        </code>
      </p>
      <p class="actions">
        {typeof navigator.clipboard?.writeText === 'function' && (
          <button
            type="button"
            onClick={() =>
              navigator.clipboard.writeText(made.key).then(
                () => setCopied('Copied.'),
                () => setCopied('Copying failed: select the key and copy it by hand.'),
              )
            }
          >
            Copy key
          </button>
        )}
        <button type="button" class="quiet" onClick={dismiss}>
          I have copied it
        </button>
        <span role="status">{copied}</span>
      </p>
    </div>
  );
}

function statusOf(k: ApiKey): string {
  if (k.revokedAt) return `revoked ${when(k.revokedAt)}`;
  if (k.expiresAt && Date.parse(k.expiresAt) <= Date.now()) return `expired ${when(k.expiresAt)}`;
  return 'active';
}

/**
 * The account's API keys (GET/POST/DELETE /v2/keys): a new key is shown once; revoking asks first,
 * and revoking the key this console is signed in with signs out.
 */
export function KeysPage() {
  const self = useContext(CallingKeyContext);
  const { data, error, reload } = usePolled(() => get<KeyList>('/v2/keys'), []);
  // The account's endpoints, to limit a new key to some (a failure leaves the choice out).
  const { data: endpoints } = usePolled(
    () => get<Answer<'/v2/serverless', 'get'>>('/v2/serverless').catch(() => ({ endpoints: [] as Endpoint[] })),
    [],
    30_000,
  );
  const [made, setMade] = useState<CreatedKey | null>(null);
  const f = useSubmit(FIELDS);
  // A key can grant only scopes it holds (ADMIN holds them all); ADMIN is offered to ADMIN keys only.
  const offered = Object.keys(SCOPES).filter((s) => s !== 'ADMIN' || self?.scopes.includes('ADMIN'));
  return (
    <section aria-labelledby="keys-heading">
      <h1 id="keys-heading">API keys</h1>
      <p class="meta">
        Keys of this account: bearer tokens for the REST API, GraphQL, the job API and the console.
        {self && (
          <>
            {' '}
            This console is signed in with <strong>{self.name}</strong> (<code>{self.prefix}…</code>).
          </>
        )}
      </p>
      {made && <NewSecret made={made} dismiss={() => setMade(null)} />}
      <Loaded data={data} error={error}>
        {({ keys }) => (
          <table class="list keys">
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Key</th>
                <th scope="col">Scopes</th>
                <th scope="col">Endpoints</th>
                <th scope="col">Created</th>
                <th scope="col">Expires</th>
                <th scope="col">Last used</th>
                <th scope="col">Status</th>
                <th scope="col">
                  <span class="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {keys.map((k) => (
                <tr key={k.id} data-key-id={k.id} data-revoked={k.revokedAt ? 'true' : undefined}>
                  <td class="name">
                    {k.name}
                    {self?.id === k.id && <span class="meta"> (this console)</span>}
                  </td>
                  <td>
                    <code>{k.prefix}…</code>
                  </td>
                  <td class="scopes">{k.scopes.join(', ')}</td>
                  <td>{k.endpointIds.length ? k.endpointIds.join(', ') : 'all'}</td>
                  <td>{when(k.createdAt)}</td>
                  <td>{k.expiresAt ? when(k.expiresAt) : 'never'}</td>
                  <td>{when(k.lastUsedAt)}</td>
                  <td class="status">{statusOf(k)}</td>
                  <td>
                    {!k.revokedAt && (
                      <Confirm
                        label="Revoke"
                        name={`Revoke ${k.name}`}
                        question={
                          self?.id === k.id
                            ? `Revoke ${k.name}? This console is signed in with it and will sign out.`
                            : `Revoke ${k.name}? It stops working at once.`
                        }
                        yes="Yes, revoke"
                        run={async () => {
                          await send('DELETE', `/v2/keys/${encodeURIComponent(k.id)}`);
                          // The key check would see it within a second; no reason to wait for it.
                          if (self?.id === k.id) return signOut('You revoked the key this console was signed in with.');
                          reload();
                        }}
                      />
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </Loaded>

      <h2 id="new-key-heading">Create a key</h2>
      <form
        ref={f.form}
        class="create"
        aria-labelledby="new-key-heading"
        noValidate
        onSubmit={(e) => {
          e.preventDefault();
          const form = e.currentTarget;
          const scopes = [...form.querySelectorAll<HTMLInputElement>('input[name="scope"]:checked')].map(
            (c) => c.value,
          );
          const endpointIds = [...form.querySelectorAll<HTMLInputElement>('input[name="endpoint"]:checked')].map(
            (c) => c.value,
          );
          const name = valueOf(form, 'name').trim();
          const expires = valueOf(form, 'expiresAt');
          const own: Record<string, string> = {};
          if (!name) own.name = 'Give the key a name.';
          if (scopes.length === 0) own.scopes = 'Choose at least one scope.';
          // datetime-local is the browser's local time; the API takes an instant.
          const expiresAt = expires ? new Date(expires) : null;
          if (expiresAt && Number.isNaN(expiresAt.getTime())) own.expiresAt = 'Not a date and time.';
          void f.submit(async () => {
            const created = await send<CreatedKey>('POST', '/v2/keys', {
              name,
              scopes,
              ...(endpointIds.length ? { endpointIds } : {}),
              ...(expiresAt ? { expiresAt: expiresAt.toISOString() } : {}),
            });
            form.reset();
            setMade(created);
            reload();
            return '';
          }, own);
        }}
      >
        <Field
          id="key-name"
          label="Name"
          hint="Says what the key is for (who or what uses it)."
          error={f.errors.name}
          control={(p) => <input {...p} name="name" data-field="name" maxLength={191} autocomplete="off" />}
        />
        <fieldset
          data-field="scopes"
          tabIndex={-1}
          aria-invalid={f.errors.scopes ? 'true' : undefined}
          aria-describedby={f.errors.scopes ? 'key-scopes-error' : undefined}
        >
          <legend>Scopes</legend>
          <ul class="checks">
            {offered.map((s) => (
              <li key={s}>
                <input type="checkbox" id={`key-scope-${s}`} name="scope" value={s} />
                <label for={`key-scope-${s}`}>
                  {s}: {SCOPES[s]}
                </label>
              </li>
            ))}
          </ul>
          <p class="hint">A key can grant only scopes it has itself.</p>
          {f.errors.scopes && (
            <p id="key-scopes-error" class="field-error">
              {f.errors.scopes}
            </p>
          )}
        </fieldset>
        <Field
          id="key-expires"
          label="Expires (optional)"
          hint="Your local time. Empty: never (a key cannot outlive the key that makes it)."
          error={f.errors.expiresAt}
          control={(p) => <input {...p} name="expiresAt" data-field="expiresAt" type="datetime-local" />}
        />
        {endpoints && endpoints.endpoints.length > 0 && (
          <fieldset
            data-field="endpointIds"
            tabIndex={-1}
            aria-describedby={f.errors.endpointIds ? 'key-endpoints-error' : undefined}
          >
            <legend>Limit to endpoints (optional)</legend>
            <ul class="checks">
              {endpoints.endpoints.map((e) => (
                <li key={e.id}>
                  <input type="checkbox" id={`key-endpoint-${e.id}`} name="endpoint" value={e.id} />
                  <label for={`key-endpoint-${e.id}`}>
                    {e.name} (<code>{e.id}</code>)
                  </label>
                </li>
              ))}
            </ul>
            <p class="hint">None checked: every endpoint. A limited key reaches only those, and no keys.</p>
            {f.errors.endpointIds && (
              <p id="key-endpoints-error" class="field-error">
                {f.errors.endpointIds}
              </p>
            )}
          </fieldset>
        )}
        <button type="submit" disabled={f.busy}>
          Create key
        </button>
        <FormNotices notice={f.notice} done={f.done} />
      </form>
    </section>
  );
}
