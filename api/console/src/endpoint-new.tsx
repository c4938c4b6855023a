import { useRef, useState } from 'preact/hooks';
import { ApiError, messageOf, send, type Answer } from './api.ts';
import { Link, navigate } from './app.tsx';
import {
  createBody,
  DEFAULTS,
  EndpointFields,
  NO_ERRORS,
  placeErrors,
  useFocusOnErrors,
  type Placed,
} from './endpoint-form.tsx';

/** The form of POST /v2/serverless; the new endpoint's page once it is made. */
export function NewEndpointPage() {
  const [values, setValues] = useState(DEFAULTS);
  const [errors, setErrors] = useState<Placed>(NO_ERRORS);
  const [busy, setBusy] = useState(false);
  const form = useRef<HTMLFormElement>(null);
  useFocusOnErrors(errors, form);
  return (
    <section aria-labelledby="new-endpoint-heading">
      <p>
        <Link href="/console">← Endpoints</Link>
      </p>
      <h1 id="new-endpoint-heading">Create an endpoint</h1>
      {errors.rest.length > 0 && (
        <div class="notice error" role="alert" tabIndex={-1}>
          {errors.rest.length === 1 ? (
            errors.rest[0]
          ) : (
            <ul>
              {errors.rest.map((e, i) => (
                <li key={i}>{e}</li>
              ))}
            </ul>
          )}
        </div>
      )}
      {Object.keys(errors.byField).length > 0 && (
        <p class="notice error" role="alert">
          The endpoint was not created: see the fields marked below.
        </p>
      )}
      <form
        ref={form}
        class="endpoint-form"
        noValidate
        onSubmit={async (e) => {
          e.preventDefault();
          if (busy) return;
          const { body, problems } = createBody(values);
          if (Object.keys(problems).length > 0) return setErrors(placeErrors([], problems));
          setBusy(true);
          try {
            const made = await send<Answer<'/v2/serverless', 'post', 201>>('POST', '/v2/serverless', body);
            navigate(`/console/endpoints/${encodeURIComponent(made.id)}`);
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
        <EndpointFields mode="create" values={values} onChange={setValues} errors={errors} />
        <button type="submit" disabled={busy}>
          {busy ? 'Creating…' : 'Create endpoint'}
        </button>
      </form>
    </section>
  );
}
