import { get, send, type Answer } from './api.ts';
import { ConfirmDelete, Field, FormNotices, Loaded, useSubmit, valueOf } from './forms.tsx';
import { usePolled } from './poll.ts';

type RegistryList = Answer<'/v2/registries', 'get'>;

const FIELDS = ['name', 'registry', 'username', 'password'] as const;

/**
 * Container registry credentials (GET/POST/DELETE /v2/registries). The login is write-only: the API
 * never answers it, and the form forgets the password once it is sent.
 */
export function RegistriesPage() {
  const { data, error, reload } = usePolled(() => get<RegistryList>('/v2/registries'), [], 30_000);
  const f = useSubmit(FIELDS);
  return (
    <section aria-labelledby="registries-heading">
      <h1 id="registries-heading">Registries</h1>
      <p class="meta">
        Logins for pulling private images. Each is bound to one registry host and sent nowhere else; an endpoint,
        template or pod names it as its <code>registry</code>.
      </p>
      <Loaded data={data} error={error}>
        {({ registries }) =>
          registries.length === 0 ? (
            <p class="notice empty">
              No registry credentials yet: add one below to pull private images, then give its id as an endpoint's or
              template's registry.
            </p>
          ) : (
            <table class="list registries">
              <thead>
                <tr>
                  <th scope="col">Name</th>
                  <th scope="col">Registry</th>
                  <th scope="col">Id</th>
                  <th scope="col">
                    <span class="visually-hidden">Actions</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {registries.map((r) => (
                  <tr key={r.id} data-registry-id={r.id}>
                    <td class="name">{r.name}</td>
                    <td>{r.registry ?? 'not bound yet (refused until bound)'}</td>
                    <td>
                      <code>{r.id}</code>
                    </td>
                    <td>
                      <ConfirmDelete
                        what={r.name}
                        remove={async () => {
                          await send('DELETE', `/v2/registries/${encodeURIComponent(r.id)}`);
                          reload();
                        }}
                      />
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          )
        }
      </Loaded>
      <h2 id="new-registry-heading">Add a registry credential</h2>
      <form
        ref={f.form}
        class="create"
        aria-labelledby="new-registry-heading"
        noValidate
        onSubmit={(e) => {
          e.preventDefault();
          const form = e.currentTarget;
          const registry = valueOf(form, 'registry').trim();
          const body = {
            name: valueOf(form, 'name').trim(),
            username: valueOf(form, 'username'),
            password: valueOf(form, 'password'),
            ...(registry ? { registry } : {}),
          };
          void f.submit(async () => {
            const made = await send<Answer<'/v2/registries', 'post', 201>>('POST', '/v2/registries', body);
            form.reset();
            reload();
            return `Added ${made.name}, bound to ${made.registry ?? 'no registry'}.`;
          });
        }}
      >
        <Field
          id="registry-name"
          label="Name"
          hint="Unique in the account; a registry host (ghcr.io) also binds the credential to it."
          error={f.errors.name}
          control={(p) => <input {...p} name="name" data-field="name" maxLength={191} autocomplete="off" />}
        />
        <Field
          id="registry-host"
          label="Registry host (optional)"
          hint="Where the login may be sent, e.g. ghcr.io or registry.example.com:5000. Empty: the name when it is a host, else docker.io."
          error={f.errors.registry}
          control={(p) => <input {...p} name="registry" data-field="registry" autocomplete="off" spellcheck={false} />}
        />
        <Field
          id="registry-username"
          label="User name"
          error={f.errors.username}
          control={(p) => <input {...p} name="username" data-field="username" autocomplete="off" spellcheck={false} />}
        />
        <Field
          id="registry-password"
          label="Password or token"
          hint="Write-only: stored sealed and never shown again, here or by any API call."
          error={f.errors.password}
          control={(p) => (
            <input {...p} name="password" data-field="password" type="password" autocomplete="new-password" />
          )}
        />
        <button type="submit" disabled={f.busy}>
          Add credential
        </button>
        <FormNotices notice={f.notice} done={f.done} />
      </form>
    </section>
  );
}
