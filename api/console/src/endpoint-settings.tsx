import { useRef, useState } from 'preact/hooks';
import { ApiError, messageOf, send, type Answer, type Endpoint } from './api.ts';
import { navigate } from './app.tsx';
import {
  EndpointFields,
  NO_ERRORS,
  placeErrors,
  updateBody,
  useFocusOnErrors,
  valuesOf,
  type Placed,
} from './endpoint-form.tsx';

/**
 * An endpoint's settings, edited as PATCH /v2/serverless/{id} (only the fields that changed), and
 * its deletion (DELETE /v2/serverless/{id}) once its name is typed again.
 */
export function SettingsTab({ endpoint, saved }: { endpoint: Endpoint; saved: () => void }) {
  const [current, setCurrent] = useState(endpoint);
  // The values the form started from: what a PATCH is the difference from. The page's later reads
  // do not reset them, so nothing typed is lost to a refresh.
  const [initial, setInitial] = useState(() => valuesOf(endpoint));
  const [values, setValues] = useState(initial);
  const [errors, setErrors] = useState<Placed>(NO_ERRORS);
  const [message, setMessage] = useState('');
  const [busy, setBusy] = useState(false);
  const form = useRef<HTMLFormElement>(null);
  useFocusOnErrors(errors, form);
  const path = `/v2/serverless/${encodeURIComponent(endpoint.id)}`;
  return (
    <>
      <section aria-labelledby="settings-heading">
        <h2 id="settings-heading">Settings</h2>
        {errors.rest.length > 0 && (
          <div class="notice error" role="alert" tabIndex={-1}>
            {errors.rest.map((e, i) => (
              <p key={i}>{e}</p>
            ))}
          </div>
        )}
        {Object.keys(errors.byField).length > 0 && (
          <p class="notice error" role="alert">
            Nothing was saved: see the fields marked below.
          </p>
        )}
        <p class="notice ok" role="status">
          {message}
        </p>
        <form
          ref={form}
          class="endpoint-form"
          noValidate
          onSubmit={async (e) => {
            e.preventDefault();
            if (busy) return;
            const { body, problems } = updateBody(initial, values);
            setMessage('');
            if (Object.keys(problems).length > 0) return setErrors(placeErrors([], problems));
            if (Object.keys(body).length === 0) {
              setErrors(NO_ERRORS);
              return setMessage('Nothing changed.');
            }
            setBusy(true);
            try {
              const after = await send<Answer<'/v2/serverless/{id}', 'patch'>>('PATCH', path, body);
              const next = valuesOf(after);
              setCurrent(after);
              setInitial(next);
              setValues(next);
              setErrors(NO_ERRORS);
              setMessage(`Saved: ${Object.keys(body).join(', ')}.`);
              saved();
            } catch (err) {
              setErrors(
                err instanceof ApiError && err.errors.length > 0
                  ? placeErrors(err.errors)
                  : { byField: {}, rest: [messageOf(err)] },
              );
            } finally {
              setBusy(false);
            }
          }}
        >
          <EndpointFields mode="update" values={values} onChange={setValues} errors={errors} current={current} />
          <div class="actions">
            <button type="submit" disabled={busy}>
              {busy ? 'Saving…' : 'Save changes'}
            </button>
            <button
              type="button"
              class="quiet"
              disabled={busy}
              onClick={() => {
                setValues(initial);
                setErrors(NO_ERRORS);
                setMessage('');
              }}
            >
              Undo changes
            </button>
          </div>
        </form>
      </section>
      <DeleteEndpoint id={endpoint.id} name={current.name} />
    </>
  );
}

/** DELETE behind a confirmation: the button works once the endpoint's name is typed. */
function DeleteEndpoint({ id, name }: { id: string; name: string }) {
  const [typed, setTyped] = useState('');
  const [error, setError] = useState('');
  const [busy, setBusy] = useState(false);
  return (
    <section class="danger-zone" aria-labelledby="delete-heading">
      <h2 id="delete-heading">Delete this endpoint</h2>
      <p>
        Its workers drain (jobs in progress finish), its queued jobs are cancelled, and it is removed. This cannot be
        undone.
      </p>
      <form
        noValidate
        onSubmit={async (e) => {
          e.preventDefault();
          if (typed !== name || busy) return;
          setBusy(true);
          setError('');
          try {
            await send('DELETE', `/v2/serverless/${encodeURIComponent(id)}`);
            navigate('/console');
          } catch (err) {
            setError(messageOf(err));
            setBusy(false);
          }
        }}
      >
        <label for="delete-confirm">Type the endpoint's name to confirm</label>
        <p class="meta" id="delete-confirm-name">
          The name is <code>{name}</code>
        </p>
        <input
          id="delete-confirm"
          value={typed}
          autocomplete="off"
          spellcheck={false}
          aria-describedby={error ? 'delete-confirm-name delete-error' : 'delete-confirm-name'}
          onInput={(e) => setTyped(e.currentTarget.value)}
        />
        <button type="submit" class="danger" disabled={typed !== name || busy}>
          {busy ? 'Deleting…' : 'Delete endpoint'}
        </button>
        {error && (
          <p class="notice error" id="delete-error" role="alert">
            {error}
          </p>
        )}
      </form>
    </section>
  );
}
