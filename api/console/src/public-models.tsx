import { get, type Answer } from './api.ts';
import { usePolled } from './poll.ts';
import { Loaded } from './forms.tsx';

type PublicModel = Answer<'/v2/public-endpoints', 'get'>[number];
/** The parts of an input schema (JSON Schema) the example reads; the API types it as any object. */
interface InputSchema {
  properties?: Record<string, { type?: unknown; default?: unknown }>;
  required?: unknown;
}

const OUTPUT: Record<string, string> = {
  image: 'an image (image_url)',
  video: 'a video (video_url)',
  audio: 'audio (audio_url)',
  json: 'JSON',
};

/**
 * An input to show in the example call: the schema's required fields and those with defaults, each
 * its default or an empty value of its type. A sketch to edit, not a promise that it validates.
 */
function exampleInput(schema: InputSchema): Record<string, unknown> {
  const props = schema.properties && typeof schema.properties === 'object' ? schema.properties : {};
  const required = Array.isArray(schema.required) ? (schema.required as unknown[]) : [];
  const out: Record<string, unknown> = {};
  for (const [name, p] of Object.entries(props)) {
    if (p && 'default' in p) out[name] = p.default;
    else if (required.includes(name))
      out[name] =
        p?.type === 'integer' || p?.type === 'number'
          ? 0
          : p?.type === 'boolean'
            ? false
            : p?.type === 'array'
              ? []
              : p?.type === 'object'
                ? {}
                : '';
  }
  return out;
}

/** The call, for a shell: the key stays a variable, never this session's key. */
function curlOf(m: PublicModel): string {
  const body = JSON.stringify({ input: exampleInput(m.inputSchema as InputSchema) }).replace(/'/g, `'\\''`);
  return [
    `curl -X POST '${m.runUrl.replace(/'/g, `'\\''`)}/runsync' \\`,
    `  -H "Authorization: Bearer $GANTRY_API_KEY" -H 'Content-Type: application/json' \\`,
    `  -d '${body}'`,
  ].join('\n');
}

/** The public models offered to every account (GET /v2/public-endpoints), and how to call each. */
export function PublicModelsPage() {
  const { data, error } = usePolled(
    () => get<Answer<'/v2/public-endpoints', 'get'>>('/v2/public-endpoints'),
    [],
    60_000,
  );
  return (
    <section aria-labelledby="public-models-heading">
      <h1 id="public-models-heading">Public models</h1>
      <p class="meta">
        Models the platform's operator publishes for every account. Call one with the job API at its address (
        <code>/run</code>, <code>/runsync</code>, <code>/status/&#123;id&#125;</code>) and a key with the RUN scope;
        each completed call is billed to your account at its price (Usage, public models).
      </p>
      <Loaded data={data} error={error}>
        {(models) =>
          models.length === 0 ? (
            <p class="notice empty">
              No public models are offered here yet: the platform's operator publishes them (
              <code>POST /v2/public-endpoints</code> with an admin key). Your own endpoints are under Endpoints.
            </p>
          ) : (
            <ul class="models">
              {models.map((m) => (
                <li key={m.id} class="model" data-model-id={m.id}>
                  <h2 class="name">{m.name}</h2>
                  <p class="meta">
                    <code>{m.id}</code> · returns {OUTPUT[m.outputKind] ?? m.outputKind} · ${m.price.amount} per{' '}
                    {m.price.unit}
                  </p>
                  {m.description && <p class="description">{m.description}</p>}
                  <p>
                    Address: <code>{m.runUrl}</code> ·{' '}
                    <a href={`/playground/${encodeURIComponent(m.id)}`}>Try it in the playground</a>
                  </p>
                  <details>
                    <summary>How to call it</summary>
                    <pre class="json">{curlOf(m)}</pre>
                    <p class="meta">Input schema (the API checks each call's input against it):</p>
                    <pre class="json">{JSON.stringify(m.inputSchema, null, 2)}</pre>
                  </details>
                </li>
              ))}
            </ul>
          )
        }
      </Loaded>
    </section>
  );
}
