import { useEffect, useRef, useState } from 'preact/hooks';
import { get, send, type Answer } from './api.ts';
import { usePolled } from './poll.ts';
import { ConfirmDelete, Field, FormNotices, Loaded, useSubmit, valueOf } from './forms.tsx';

type Volume = Answer<'/v2/network-volumes', 'get'>['networkVolumes'][number];

const FIELDS = ['name', 'size', 'dataCenter'] as const;

/** A volume's size, and a form to grow it (PATCH /v2/network-volumes/{id}; the API refuses to shrink). */
function Resize({ volume, saved }: { volume: Volume; saved: () => void }) {
  const [open, setOpen] = useState(false);
  const f = useSubmit(['size']);
  const input = useRef<HTMLInputElement>(null);
  useEffect(() => {
    if (open) input.current?.focus();
  }, [open]);
  const id = `resize-${volume.id}`;
  if (!open)
    return (
      <>
        {volume.size} GB{' '}
        <button type="button" class="quiet" aria-label={`Resize ${volume.name}`} onClick={() => setOpen(true)}>
          Resize
        </button>
        <span role="status">{f.done}</span>
      </>
    );
  return (
    <form
      ref={f.form}
      class="inline"
      noValidate
      onKeyDown={(e) => e.key === 'Escape' && setOpen(false)}
      onSubmit={(e) => {
        e.preventDefault();
        const size = Number(valueOf(e.currentTarget, 'size'));
        void f.submit(async () => {
          await send('PATCH', `/v2/network-volumes/${encodeURIComponent(volume.id)}`, { size });
          setOpen(false);
          saved();
          return `Now ${size} GB.`;
        });
      }}
    >
      <Field
        id={id}
        label={`New size of ${volume.name}, GB`}
        hint={`At least ${volume.size}: a volume only grows.`}
        error={f.errors.size}
        control={(p) => (
          <input
            {...p}
            ref={input}
            name="size"
            data-field="size"
            type="number"
            min={volume.size}
            max={4096}
            step={1}
            defaultValue={String(volume.size)}
          />
        )}
      />
      <button type="submit" disabled={f.busy}>
        Save size
      </button>{' '}
      <button type="button" class="quiet" onClick={() => setOpen(false)}>
        Cancel
      </button>
      <FormNotices notice={f.notice} done="" />
    </form>
  );
}

/**
 * The account's network volumes (GET/POST/PATCH/DELETE /v2/network-volumes): storage in one data
 * center that endpoints and pods mount. The data centers offered are those of GET
 * /v2/catalog/datacenters that can hold one (shared storage, or a single host).
 */
export function VolumesPage() {
  const { data, error, reload } = usePolled(
    async () => {
      const [{ networkVolumes }, { dataCenters }] = await Promise.all([
        get<Answer<'/v2/network-volumes', 'get'>>('/v2/network-volumes'),
        get<Answer<'/v2/catalog/datacenters', 'get'>>('/v2/catalog/datacenters'),
      ]);
      return { volumes: networkVolumes, dataCenters };
    },
    [],
    30_000,
  );
  const f = useSubmit(FIELDS);
  const usable = data?.dataCenters.filter((d) => d.networkVolumeTypes.includes('STANDARD')) ?? [];
  const unusable = data?.dataCenters.filter((d) => !d.networkVolumeTypes.includes('STANDARD')) ?? [];
  return (
    <section aria-labelledby="volumes-heading">
      <h1 id="volumes-heading">Network volumes</h1>
      <p class="meta">
        Storage in one data center that endpoints (<code>networkVolumes</code>) and pods (<code>mounts.network</code>)
        mount; their workers are placed only where the volume is.
      </p>
      <Loaded data={data} error={error}>
        {({ volumes }) =>
          volumes.length === 0 ? (
            <p class="notice empty">
              No network volumes yet: create one below, then name its id in an endpoint's <code>networkVolumes</code> to
              keep files between workers (mounted at <code>/runpod-volume</code>).
            </p>
          ) : (
            <table class="list volumes">
              <thead>
                <tr>
                  <th scope="col">Name</th>
                  <th scope="col">Size</th>
                  <th scope="col">Data center</th>
                  <th scope="col">Id</th>
                  <th scope="col">Created</th>
                  <th scope="col">
                    <span class="visually-hidden">Actions</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {volumes.map((v) => (
                  <tr key={v.id} data-volume-id={v.id}>
                    <td class="name">{v.name}</td>
                    <td class="size">
                      <Resize volume={v} saved={reload} />
                    </td>
                    <td>{v.dataCenter}</td>
                    <td>
                      <code>{v.id}</code>
                    </td>
                    <td>{new Date(v.createdAt).toLocaleString()}</td>
                    <td>
                      <ConfirmDelete
                        what={v.name}
                        remove={async () => {
                          await send('DELETE', `/v2/network-volumes/${encodeURIComponent(v.id)}`);
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
      <h2 id="new-volume-heading">Create a network volume</h2>
      {data && usable.length === 0 && (
        <p class="notice">
          No data center can hold a network volume yet: one needs a single host, or shared storage set by the operator (
          <code>networkVolumePath</code> of <code>PUT /v2/datacenters/&#123;id&#125;</code>).
        </p>
      )}
      <form
        ref={f.form}
        class="create"
        aria-labelledby="new-volume-heading"
        noValidate
        onSubmit={(e) => {
          e.preventDefault();
          const form = e.currentTarget;
          const body = {
            name: valueOf(form, 'name').trim(),
            size: Number(valueOf(form, 'size')),
            dataCenter: valueOf(form, 'dataCenter'),
          };
          void f.submit(async () => {
            const made = await send<Answer<'/v2/network-volumes', 'post', 201>>('POST', '/v2/network-volumes', body);
            form.reset();
            reload();
            return `Created ${made.name}: ${made.size} GB in ${made.dataCenter}.`;
          });
        }}
      >
        <Field
          id="volume-name"
          label="Name"
          hint="Unique in the account."
          error={f.errors.name}
          control={(p) => <input {...p} name="name" data-field="name" maxLength={191} autocomplete="off" />}
        />
        <Field
          id="volume-size"
          label="Size, GB"
          hint="1 to 4096; it can grow later, never shrink."
          error={f.errors.size}
          control={(p) => (
            <input {...p} name="size" data-field="size" type="number" min={1} max={4096} step={1} defaultValue="10" />
          )}
        />
        <Field
          id="volume-data-center"
          label="Data center"
          error={f.errors.dataCenter}
          control={(p) => (
            <select {...p} name="dataCenter" data-field="dataCenter">
              {usable.map((d) => (
                <option key={d.id} value={d.id}>
                  {d.id} ({d.hosts.ready} of {d.hosts.total} hosts ready)
                </option>
              ))}
              {unusable.map((d) => (
                <option key={d.id} value={d.id} disabled>
                  {d.id} (no shared storage for its {d.hosts.total} hosts)
                </option>
              ))}
            </select>
          )}
        />
        <button type="submit" disabled={f.busy || !data || usable.length === 0}>
          Create volume
        </button>
        <FormNotices notice={f.notice} done={f.done} />
      </form>
    </section>
  );
}
