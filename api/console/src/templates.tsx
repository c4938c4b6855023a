import { get, send, type Answer } from './api.ts';
import { usePolled } from './poll.ts';
import { ConfirmDelete, Field, FormNotices, Loaded, useSubmit, valueOf } from './forms.tsx';

const FIELDS = ['name', 'image', 'args', 'disk', 'ports', 'env', 'registry', 'serverless'] as const;

/** Environment as the text it is edited as: one `KEY=value` a line, by key (stored order is not the entered one). */
const envText = (env: Record<string, string>): string =>
  Object.entries(env)
    .sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0))
    .map(([k, v]) => `${k}=${v}`)
    .join('\n');

/**
 * `KEY=value` lines into the API's object (blank lines and `#` comments skipped), or the first
 * line that is not one. Keys are the API's to check: its error names the field.
 */
function parseEnv(text: string): { env: Record<string, string> } | { error: string } {
  const env: Record<string, string> = {};
  const lines = text.split(/\r?\n/);
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (!line.trim() || line.trimStart().startsWith('#')) continue;
    const at = line.indexOf('=');
    if (at < 1) return { error: `line ${i + 1}: write KEY=value` };
    env[line.slice(0, at).trim()] = line.slice(at + 1);
  }
  return { env };
}

/** The account's templates (GET/POST/DELETE /v2/templates): named container settings to start from. */
export function TemplatesPage() {
  const { data, error, reload } = usePolled(
    async () => {
      const [{ templates }, registries] = await Promise.all([
        get<Answer<'/v2/templates', 'get'>>('/v2/templates'),
        // Only for their names: the list still shows without them.
        get<Answer<'/v2/registries', 'get'>>('/v2/registries').then(
          (r) => r.registries,
          () => [],
        ),
      ]);
      return { templates, registries };
    },
    [],
    30_000,
  );
  const f = useSubmit(FIELDS);
  const registryName = (id: string | null) =>
    id === null ? '—' : (data?.registries.find((r) => r.id === id)?.name ?? id);
  return (
    <section aria-labelledby="templates-heading">
      <h1 id="templates-heading">Templates</h1>
      <p class="meta">
        Named container settings (image, start command, disk, ports, environment, registry login) that pods and
        endpoints start from.
      </p>
      <Loaded data={data} error={error}>
        {({ templates }) =>
          templates.length === 0 ? (
            <p class="notice empty">
              No templates yet: create one below, then start pods from it (<code>templateId</code> of{' '}
              <code>POST /v2/pods</code>) or endpoints (GraphQL <code>saveEndpoint</code>).
            </p>
          ) : (
            <table class="list templates">
              <thead>
                <tr>
                  <th scope="col">Name</th>
                  <th scope="col">Image</th>
                  <th scope="col">For</th>
                  <th scope="col">Disk</th>
                  <th scope="col">Ports</th>
                  <th scope="col">Environment</th>
                  <th scope="col">Registry</th>
                  <th scope="col">Id</th>
                  <th scope="col">
                    <span class="visually-hidden">Actions</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {templates.map((t) => (
                  <tr key={t.id} data-template-id={t.id}>
                    <td class="name">{t.name}</td>
                    <td>
                      <code>{t.image}</code>
                      {t.args && (
                        <div class="meta">
                          start: <code>{t.args}</code>
                        </div>
                      )}
                    </td>
                    <td>{t.serverless ? 'serverless' : 'pods'}</td>
                    <td>{t.disk} GB</td>
                    <td>{t.ports.length ? t.ports.join(', ') : '—'}</td>
                    <td class="env">{Object.keys(t.env).length ? <pre class="json">{envText(t.env)}</pre> : '—'}</td>
                    <td>{registryName(t.registry)}</td>
                    <td>
                      <code>{t.id}</code>
                    </td>
                    <td>
                      <ConfirmDelete
                        what={t.name}
                        remove={async () => {
                          await send('DELETE', `/v2/templates/${encodeURIComponent(t.id)}`);
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
      <h2 id="new-template-heading">Create a template</h2>
      <form
        ref={f.form}
        class="create"
        aria-labelledby="new-template-heading"
        noValidate
        onSubmit={(e) => {
          e.preventDefault();
          const form = e.currentTarget;
          const env = parseEnv(valueOf(form, 'env'));
          const disk = valueOf(form, 'disk').trim();
          const ports = valueOf(form, 'ports')
            .split(/[\s,]+/)
            .filter(Boolean);
          const registry = valueOf(form, 'registry');
          const body = {
            name: valueOf(form, 'name').trim(),
            image: valueOf(form, 'image').trim(),
            args: valueOf(form, 'args'),
            ...(disk ? { disk: Number(disk) } : {}),
            ports,
            ...('env' in env ? { env: env.env } : {}),
            ...(registry ? { registry } : {}),
            serverless: (form.elements.namedItem('serverless') as HTMLInputElement).checked,
          };
          void f.submit(
            async () => {
              const made = await send<Answer<'/v2/templates', 'post', 201>>('POST', '/v2/templates', body);
              form.reset();
              reload();
              return `Created template ${made.name}.`;
            },
            'error' in env ? { env: env.error } : {},
          );
        }}
      >
        <Field
          id="template-name"
          label="Name"
          hint="Unique in the account."
          error={f.errors.name}
          control={(p) => <input {...p} name="name" data-field="name" maxLength={191} autocomplete="off" />}
        />
        <Field
          id="template-image"
          label="Image"
          hint="A container image reference, e.g. ghcr.io/acme/worker:1.2."
          error={f.errors.image}
          control={(p) => <input {...p} name="image" data-field="image" autocomplete="off" spellcheck={false} />}
        />
        <Field
          id="template-args"
          label="Start command (optional)"
          hint="Replaces the image's own; empty keeps it."
          error={f.errors.args}
          control={(p) => <input {...p} name="args" data-field="args" autocomplete="off" spellcheck={false} />}
        />
        <Field
          id="template-disk"
          label="Container disk, GB (optional)"
          error={f.errors.disk}
          control={(p) => <input {...p} name="disk" data-field="disk" type="number" min={1} max={4096} step={1} />}
        />
        <Field
          id="template-ports"
          label="Ports (optional)"
          hint="port/protocol, separated by commas: 8000/http, 22/tcp."
          error={f.errors.ports}
          control={(p) => <input {...p} name="ports" data-field="ports" autocomplete="off" spellcheck={false} />}
        />
        <Field
          id="template-env"
          label="Environment (optional)"
          hint="One KEY=value a line."
          error={f.errors.env}
          control={(p) => <textarea {...p} name="env" data-field="env" rows={4} spellcheck={false} />}
        />
        <Field
          id="template-registry"
          label="Registry login (optional)"
          hint="For a private image: a credential from Registries, bound to the image's registry."
          error={f.errors.registry}
          control={(p) => (
            <select {...p} name="registry" data-field="registry">
              <option value="">None</option>
              {data?.registries.map((r) => (
                <option key={r.id} value={r.id}>
                  {r.name} ({r.registry ?? 'not bound'})
                </option>
              ))}
            </select>
          )}
        />
        <div class="field check">
          <input
            id="template-serverless"
            name="serverless"
            data-field="serverless"
            type="checkbox"
            defaultChecked
            aria-invalid={f.errors.serverless ? 'true' : undefined}
            aria-describedby={f.errors.serverless ? 'template-serverless-error' : undefined}
          />
          <label for="template-serverless">For serverless endpoints (unchecked: for pods)</label>
          {f.errors.serverless && (
            <p id="template-serverless-error" class="field-error">
              {f.errors.serverless}
            </p>
          )}
        </div>
        <button type="submit" disabled={f.busy}>
          Create template
        </button>
        <FormNotices notice={f.notice} done={f.done} />
      </form>
    </section>
  );
}
