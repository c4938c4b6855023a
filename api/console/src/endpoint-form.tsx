/**
 * The fields of an endpoint, shared by the create form (POST /v2/serverless) and the settings tab
 * (PATCH /v2/serverless/{id}): the form's values as text, the request bodies made from them, and
 * the API's validation errors placed beside the fields they name.
 */
import { useEffect, useState } from 'preact/hooks';
import { fieldErrors, get, messageOf, type Answer, type Endpoint } from './api.ts';

/** What the controls hold: text as typed, so that the API (not the form) judges every value. */
export interface FormValues {
  name: string;
  type: 'QUEUE_BASED' | 'LOAD_BALANCING';
  image: string;
  registry: string;
  args: string;
  disk: string;
  ports: string;
  env: Array<{ key: string; value: string }>;
  compute: 'GPU' | 'CPU';
  pools: string[];
  gpuCount: string;
  workersMin: string;
  workersMax: string;
  scalerType: string;
  scalerValue: string;
  idleTimeout: string;
  dataCenterIds: string[];
  networkVolumes: string[];
  timeout: string;
  flashboot: string;
}

/** The create schema's defaults (domain/endpoints/endpoints.ts createEndpoint), shown filled in. */
export const DEFAULTS: FormValues = {
  name: '',
  type: 'QUEUE_BASED',
  image: '',
  registry: '',
  args: '',
  disk: '10',
  ports: '',
  env: [],
  compute: 'GPU',
  pools: [],
  gpuCount: '1',
  workersMin: '0',
  workersMax: '3',
  scalerType: 'QUEUE_DELAY',
  scalerValue: '4',
  idleTimeout: '5',
  dataCenterIds: [],
  networkVolumes: [],
  timeout: '600000',
  flashboot: 'OFF',
};

export function valuesOf(e: Endpoint): FormValues {
  return {
    name: e.name,
    type: e.type,
    image: e.image,
    registry: e.registry ?? '',
    args: e.args,
    disk: String(e.disk),
    ports: e.ports.join(', '),
    env: Object.entries(e.env).map(([key, value]) => ({ key, value })),
    compute: e.gpu ? 'GPU' : 'CPU',
    pools: e.gpu?.pools ?? [],
    gpuCount: String(e.gpu?.count ?? 1),
    workersMin: String(e.workers.min),
    workersMax: String(e.workers.max),
    scalerType: e.scaling.type,
    scalerValue: String(e.scaling.value),
    idleTimeout: String(e.scaling.idleTimeout),
    dataCenterIds: e.dataCenterIds,
    networkVolumes: e.networkVolumes,
    timeout: String(e.timeout),
    flashboot: e.flashboot,
  };
}

/** A number as typed; an empty box is null and text that is no number goes as it is, for the API to refuse by name. */
const num = (s: string): number | string | null => {
  const t = s.trim();
  if (t === '') return null;
  const n = Number(t);
  return Number.isNaN(n) ? t : n;
};
const list = (s: string): string[] => s.split(/[\s,]+/).filter(Boolean);
const sameSet = (a: string[], b: string[]) => a.length === b.length && a.every((x) => b.includes(x));

/** The env rows as the API's object; blank rows are left out, and a name given twice is the form's own error. */
function envOf(rows: FormValues['env']): { env: Record<string, string>; twice: string[] } {
  const env: Record<string, string> = {};
  const twice: string[] = [];
  for (const { key, value } of rows) {
    if (key === '' && value === '') continue;
    if (Object.hasOwn(env, key)) twice.push(key);
    env[key] = value;
  }
  return { env, twice };
}
const sameEnv = (a: Record<string, string>, b: Record<string, string>) =>
  Object.keys(a).length === Object.keys(b).length && Object.entries(a).every(([k, v]) => b[k] === v);

export interface Built {
  body: Record<string, unknown>;
  /** What the form itself refuses before a call, by field. */
  problems: Record<string, string>;
}

function localProblems(v: FormValues, env: ReturnType<typeof envOf>): Record<string, string> {
  const problems: Record<string, string> = {};
  if (env.twice.length > 0) problems.env = `${env.twice.join(', ')}: named more than once`;
  return problems;
}

/** POST /v2/serverless's body: every field the form shows; an empty disk or timeout takes the default. */
export function createBody(v: FormValues): Built {
  const env = envOf(v.env);
  const body: Record<string, unknown> = {
    name: v.name,
    type: v.type,
    image: v.image.trim(),
    args: v.args,
    ports: list(v.ports),
    env: env.env,
    workers: { min: num(v.workersMin), max: num(v.workersMax) },
    scaling: { type: v.scalerType, value: num(v.scalerValue), idleTimeout: num(v.idleTimeout) },
    dataCenterIds: v.dataCenterIds,
    networkVolumes: v.networkVolumes,
    flashboot: v.flashboot,
  };
  if (v.registry) body.registry = v.registry;
  if (v.disk.trim()) body.disk = num(v.disk);
  if (v.timeout.trim()) body.timeout = num(v.timeout);
  // Leaving `gpu` out is how REST makes a CPU endpoint (its `cpu` is read-only).
  if (v.compute === 'GPU') body.gpu = { pools: v.pools, ...(v.gpuCount.trim() ? { count: num(v.gpuCount) } : {}) };
  return { body, problems: localProblems(v, env) };
}

/** PATCH /v2/serverless/{id}'s body: only what differs from `was`; `workers` and `scaling` only the members that do. */
export function updateBody(was: FormValues, v: FormValues): Built {
  const body: Record<string, unknown> = {};
  const env = envOf(v.env);
  if (v.name !== was.name) body.name = v.name;
  if (v.image.trim() !== was.image) body.image = v.image.trim();
  if (v.registry !== was.registry) body.registry = v.registry || null;
  if (v.args !== was.args) body.args = v.args;
  if (v.disk !== was.disk) body.disk = num(v.disk);
  if (list(v.ports).join(',') !== list(was.ports).join(',')) body.ports = list(v.ports);
  if (!sameEnv(env.env, envOf(was.env).env)) body.env = env.env;
  if (v.compute === 'GPU' && (was.compute === 'CPU' || !sameSet(v.pools, was.pools) || v.gpuCount !== was.gpuCount))
    body.gpu = { pools: v.pools, count: num(v.gpuCount) };
  const workers: Record<string, unknown> = {};
  if (v.workersMin !== was.workersMin) workers.min = num(v.workersMin);
  if (v.workersMax !== was.workersMax) workers.max = num(v.workersMax);
  if (Object.keys(workers).length > 0) body.workers = workers;
  const scaling: Record<string, unknown> = {};
  if (v.scalerType !== was.scalerType) scaling.type = v.scalerType;
  if (v.scalerValue !== was.scalerValue) scaling.value = num(v.scalerValue);
  if (v.idleTimeout !== was.idleTimeout) scaling.idleTimeout = num(v.idleTimeout);
  if (Object.keys(scaling).length > 0) body.scaling = scaling;
  if (!sameSet(v.dataCenterIds, was.dataCenterIds)) body.dataCenterIds = v.dataCenterIds;
  if (!sameSet(v.networkVolumes, was.networkVolumes)) body.networkVolumes = v.networkVolumes;
  if (v.timeout !== was.timeout) body.timeout = num(v.timeout);
  if (v.flashboot !== was.flashboot) body.flashboot = v.flashboot;
  return { body, problems: localProblems(v, env) };
}

/** The fields errors can be shown beside (their API paths, `workers.min` for `$.workers.min`). */
const FIELDS = [
  'name',
  'type',
  'image',
  'registry',
  'args',
  'disk',
  'ports',
  'env',
  'gpu',
  'gpu.pools',
  'gpu.count',
  'workers',
  'workers.min',
  'workers.max',
  'scaling',
  'scaling.type',
  'scaling.value',
  'scaling.idleTimeout',
  'dataCenterIds',
  'networkVolumes',
  'timeout',
  'flashboot',
];

export interface Placed {
  byField: Record<string, string>;
  /** Errors no field of the form names: shown in the notice at the top. */
  rest: string[];
}
export const NO_ERRORS: Placed = { byField: {}, rest: [] };

/**
 * A 422's `errors` by the field of the form that shows them. `$.ports[1]` goes to `ports` (as
 * "entry 2: ..."), `$.env.KEY` to `env` (as "KEY: ..."), and a rule of the whole endpoint
 * (`$: workers.min must not exceed workers.max`) to the field its text begins with.
 */
export function placeErrors(errors: string[], local: Record<string, string> = {}): Placed {
  const byField: Record<string, string> = {};
  const rest: string[] = [];
  const add = (field: string, message: string) => {
    byField[field] = byField[field] ? `${byField[field]}; ${message}` : message;
  };
  for (const [path, raw] of [...Object.entries(fieldErrors(errors)), ...Object.entries(local)]) {
    // An image reference's pattern is hundreds of characters: the field's hint says the form in words.
    const message = raw.replace(/must match pattern "[^"]{60,}"/g, 'is not in the form the hint shows');
    if (path === '') {
      const named = FIELDS.filter((f) => message.startsWith(`${f} `)).sort((a, b) => b.length - a.length)[0];
      if (named) add(named, message);
      else rest.push(message);
      continue;
    }
    let field = path;
    let text = message;
    while (!FIELDS.includes(field) && field.includes('.')) {
      const cut = field.lastIndexOf('.');
      const tail = field.slice(cut + 1);
      text = /^\d+$/.test(tail) ? `entry ${Number(tail) + 1}: ${text}` : `${tail}: ${text}`;
      field = field.slice(0, cut);
    }
    if (FIELDS.includes(field)) add(field, text);
    else rest.push(`${path}: ${message}`);
  }
  return { byField, rest };
}

/** The id of the element that shows a field's error. */
const errorId = (field: string) => `ep-${field.replace(/\./g, '-')}-error`;
const controlId = (field: string) => `ep-${field.replace(/\./g, '-')}`;

/** aria-invalid and aria-describedby for a control of `field` (and its hint, when it has one). */
function described(field: string, errors: Placed, hint?: string) {
  const err = errors.byField[field];
  const ids = [err ? errorId(field) : '', hint ?? ''].filter(Boolean).join(' ');
  return { 'aria-invalid': err ? ('true' as const) : undefined, 'aria-describedby': ids || undefined };
}

function FieldError({ field, errors }: { field: string; errors: Placed }) {
  const err = errors.byField[field];
  return err ? (
    <p class="field-error" id={errorId(field)}>
      {err}
    </p>
  ) : null;
}

type GpuType = Answer<'/v2/catalog/gpus', 'get'>['gpus'][number];
type CpuType = Answer<'/v2/catalog/cpus', 'get'>['cpus'][number];
type DataCenter = Answer<'/v2/catalog/datacenters', 'get'>['dataCenters'][number];
type Volume = Answer<'/v2/network-volumes', 'get'>['networkVolumes'][number];
type Registry = Answer<'/v2/registries', 'get'>['registries'][number];
interface Catalogs {
  gpus: GpuType[] | null;
  cpus: CpuType[] | null;
  dataCenters: DataCenter[] | null;
  volumes: Volume[] | null;
  registries: Registry[] | null;
  /** Why a list could not be read (a key without READ on it, say), by list. */
  failed: string[];
}

/** The lists the form picks from, read once per form. */
function useCatalogs(): Catalogs {
  const [c, setC] = useState<Catalogs>({
    gpus: null,
    cpus: null,
    dataCenters: null,
    volumes: null,
    registries: null,
    failed: [],
  });
  useEffect(() => {
    let live = true;
    const reads = [
      ['GPU types', get<Answer<'/v2/catalog/gpus', 'get'>>('/v2/catalog/gpus').then((r) => r.gpus)],
      ['CPU flavors', get<Answer<'/v2/catalog/cpus', 'get'>>('/v2/catalog/cpus').then((r) => r.cpus)],
      [
        'data centers',
        get<Answer<'/v2/catalog/datacenters', 'get'>>('/v2/catalog/datacenters').then((r) => r.dataCenters),
      ],
      [
        'network volumes',
        get<Answer<'/v2/network-volumes', 'get'>>('/v2/network-volumes').then((r) => r.networkVolumes),
      ],
      ['registry credentials', get<Answer<'/v2/registries', 'get'>>('/v2/registries').then((r) => r.registries)],
    ] as const;
    void Promise.allSettled(reads.map(([, p]) => p)).then((results) => {
      if (!live) return;
      const value = <T,>(i: number): T | null =>
        results[i]!.status === 'fulfilled' ? (results[i] as PromiseFulfilledResult<T>).value : null;
      setC({
        gpus: value(0),
        cpus: value(1),
        dataCenters: value(2),
        volumes: value(3),
        registries: value(4),
        failed: results.flatMap((r, i) => (r.status === 'rejected' ? [`${reads[i]![0]}: ${messageOf(r.reason)}`] : [])),
      });
    });
    return () => {
      live = false;
    };
  }, []);
  return c;
}

/** The GPU pools of the catalog, each with its types and free GPUs; pools the endpoint names but the catalog lacks too. */
function poolsOf(gpus: GpuType[] | null, chosen: string[]) {
  const pools = new Map<string, { types: string[]; total: number; available: number }>();
  for (const g of gpus ?? []) {
    if (!g.pool) continue;
    const p = pools.get(g.pool) ?? { types: [], total: 0, available: 0 };
    p.types.push(g.id);
    p.total += g.count.total;
    p.available += g.count.available;
    pools.set(g.pool, p);
  }
  for (const id of chosen) if (!pools.has(id)) pools.set(id, { types: [], total: 0, available: 0 });
  return [...pools.entries()];
}

const toggle = (xs: string[], x: string, on: boolean) =>
  on ? [...xs.filter((y) => y !== x), x] : xs.filter((y) => y !== x);

/** A group of checkboxes (pools, data centers, volumes), each described by the group's error. */
function Checks({
  field,
  legend,
  options,
  chosen,
  onChange,
  errors,
  empty,
}: {
  field: string;
  legend: string;
  options: Array<{ id: string; label: string; meta?: string }>;
  chosen: string[];
  onChange: (next: string[]) => void;
  errors: Placed;
  empty: string;
}) {
  return (
    <fieldset>
      <legend>{legend}</legend>
      {options.length === 0 && <p class="meta">{empty}</p>}
      <ul class="checks">
        {options.map((o, i) => (
          <li key={o.id}>
            <input
              type="checkbox"
              id={`${controlId(field)}-${i}`}
              value={o.id}
              checked={chosen.includes(o.id)}
              onChange={(e) => onChange(toggle(chosen, o.id, e.currentTarget.checked))}
              {...described(field, errors)}
            />
            <label for={`${controlId(field)}-${i}`}>
              {o.label}
              {o.meta && <span class="meta"> · {o.meta}</span>}
            </label>
          </li>
        ))}
      </ul>
      <FieldError field={field} errors={errors} />
    </fieldset>
  );
}

function TextField({
  field,
  label,
  value,
  onInput,
  errors,
  hint,
  type = 'text',
  step,
}: {
  field: string;
  label: string;
  value: string;
  onInput: (v: string) => void;
  errors: Placed;
  hint?: string;
  type?: 'text' | 'number';
  step?: string;
}) {
  const id = controlId(field);
  return (
    <div class="field">
      <label for={id}>{label}</label>
      <input
        id={id}
        name={field}
        // Preact's types give each input type its own attributes; text and number take the same ones here.
        type={type as 'text'}
        step={step}
        value={value}
        spellcheck={false}
        autocomplete="off"
        onInput={(e) => onInput(e.currentTarget.value)}
        {...described(field, errors, hint ? `${id}-hint` : undefined)}
      />
      {hint && (
        <p class="meta hint" id={`${id}-hint`}>
          {hint}
        </p>
      )}
      <FieldError field={field} errors={errors} />
    </div>
  );
}

function Select({
  field,
  label,
  value,
  options,
  onChange,
  errors,
}: {
  field: string;
  label: string;
  value: string;
  options: Array<[string, string]>;
  onChange: (v: string) => void;
  errors: Placed;
}) {
  const id = controlId(field);
  return (
    <div class="field">
      <label for={id}>{label}</label>
      <select
        id={id}
        name={field}
        value={value}
        onChange={(e) => onChange(e.currentTarget.value)}
        {...described(field, errors)}
      >
        {options.map(([v, text]) => (
          <option key={v} value={v}>
            {text}
          </option>
        ))}
      </select>
      <FieldError field={field} errors={errors} />
    </div>
  );
}

/** Radio buttons in a fieldset; `locked` shows the value as text (what the API does not let change). */
function Radios({
  field,
  legend,
  value,
  options,
  onChange,
  errors,
  disabled = [],
  note,
}: {
  field: string;
  legend: string;
  value: string;
  options: Array<[string, string]>;
  onChange: (v: string) => void;
  errors: Placed;
  disabled?: string[];
  note?: string;
}) {
  return (
    <fieldset>
      <legend>{legend}</legend>
      <div class="radios">
        {options.map(([v, text]) => (
          <span key={v}>
            <input
              type="radio"
              id={`${controlId(field)}-${v}`}
              name={field}
              value={v}
              checked={value === v}
              disabled={disabled.includes(v)}
              onChange={() => onChange(v)}
              {...described(field, errors)}
            />
            <label for={`${controlId(field)}-${v}`}>{text}</label>
          </span>
        ))}
      </div>
      {note && <p class="meta">{note}</p>}
      <FieldError field={field} errors={errors} />
    </fieldset>
  );
}

const TYPES: Array<[string, string]> = [
  ['QUEUE_BASED', 'Queue-based (QB): jobs through the job API'],
  ['LOAD_BALANCING', 'Load-balancing (LB): HTTP through the proxy'],
];

/**
 * Every control of the endpoint form. `mode` says which body it feeds: `create` (POST) shows the
 * type and the compute kind to choose; `update` (PATCH) shows the type as text (the PATCH body has
 * none) and lets a CPU endpoint move to GPUs but not back (REST cannot name a CPU size).
 */
export function EndpointFields({
  mode,
  values: v,
  onChange,
  errors,
  current,
}: {
  mode: 'create' | 'update';
  values: FormValues;
  onChange: (next: FormValues) => void;
  errors: Placed;
  current?: Endpoint;
}) {
  const c = useCatalogs();
  const set =
    <K extends keyof FormValues>(k: K) =>
    (value: FormValues[K]) =>
      onChange({ ...v, [k]: value });
  const setEnv = (i: number, part: 'key' | 'value', text: string) =>
    onChange({ ...v, env: v.env.map((row, j) => (j === i ? { ...row, [part]: text } : row)) });
  const dataCenters = [
    ...(c.dataCenters ?? []).map((d) => ({ id: d.id, label: d.name === d.id ? d.id : `${d.name} (${d.id})` })),
    ...v.dataCenterIds.filter((id) => !c.dataCenters?.some((d) => d.id === id)).map((id) => ({ id, label: id })),
  ];
  const volumes = [
    ...(c.volumes ?? []).map((x) => ({ id: x.id, label: x.name, meta: `${x.size} GB in ${x.dataCenter}, ${x.id}` })),
    ...v.networkVolumes.filter((id) => !c.volumes?.some((x) => x.id === id)).map((id) => ({ id, label: id })),
  ];
  const registries: Array<[string, string]> = [
    ['', 'None (a public image)'],
    ...(c.registries ?? []).map((r): [string, string] => [r.id, `${r.name} (${r.registry ?? 'not bound'})`]),
    ...(v.registry && !c.registries?.some((r) => r.id === v.registry)
      ? [[v.registry, v.registry] as [string, string]]
      : []),
  ];
  return (
    <>
      {c.failed.length > 0 && (
        <p class="notice">Some lists could not be read, so their choices are missing: {c.failed.join('; ')}</p>
      )}
      <fieldset>
        <legend>Endpoint</legend>
        <TextField
          field="name"
          label="Name"
          value={v.name}
          onInput={set('name')}
          errors={errors}
          hint="Unique in the account."
        />
        {mode === 'create' ? (
          <Radios
            field="type"
            legend="Type"
            value={v.type}
            options={TYPES}
            onChange={set('type') as (x: string) => void}
            errors={errors}
          />
        ) : (
          <p class="meta">
            Type: {TYPES.find(([t]) => t === v.type)?.[1] ?? v.type} (the REST API does not change it; GraphQL
            saveEndpoint does)
          </p>
        )}
      </fieldset>

      <fieldset>
        <legend>Container (a change makes a new release)</legend>
        <TextField
          field="image"
          label="Image"
          value={v.image}
          onInput={set('image')}
          errors={errors}
          hint="[registry[:port]/]repository[:tag][@digest], e.g. ghcr.io/acme/worker:1.2"
        />
        <Select
          field="registry"
          label="Registry credential"
          value={v.registry}
          options={registries}
          onChange={set('registry')}
          errors={errors}
        />
        <TextField
          field="args"
          label="Start command"
          value={v.args}
          onInput={set('args')}
          errors={errors}
          hint="Empty keeps the image's own."
        />
        <TextField
          field="disk"
          label="Container disk (GB)"
          type="number"
          value={v.disk}
          onInput={set('disk')}
          errors={errors}
        />
        <TextField
          field="ports"
          label="Ports"
          value={v.ports}
          onInput={set('ports')}
          errors={errors}
          hint="port/protocol, comma-separated, e.g. 8000/http. A load-balancing endpoint's first /http port is its app's PORT."
        />
        <fieldset>
          <legend>Environment variables</legend>
          {v.env.length === 0 && <p class="meta">None.</p>}
          {v.env.map((row, i) => (
            <div class="env-row" key={i}>
              <div>
                <label for={`ep-env-key-${i}`}>Name {i + 1}</label>
                <input
                  id={`ep-env-key-${i}`}
                  value={row.key}
                  spellcheck={false}
                  autocomplete="off"
                  onInput={(e) => setEnv(i, 'key', e.currentTarget.value)}
                  {...described('env', errors)}
                />
              </div>
              <div>
                <label for={`ep-env-value-${i}`}>Value {i + 1}</label>
                <input
                  id={`ep-env-value-${i}`}
                  value={row.value}
                  spellcheck={false}
                  autocomplete="off"
                  onInput={(e) => setEnv(i, 'value', e.currentTarget.value)}
                />
              </div>
              <button
                type="button"
                class="quiet"
                aria-label={`Remove variable ${i + 1}${row.key ? ` (${row.key})` : ''}`}
                onClick={() => onChange({ ...v, env: v.env.filter((_, j) => j !== i) })}
              >
                Remove
              </button>
            </div>
          ))}
          <button
            type="button"
            class="quiet"
            onClick={() => onChange({ ...v, env: [...v.env, { key: '', value: '' }] })}
          >
            Add variable
          </button>
          <FieldError field="env" errors={errors} />
        </fieldset>
      </fieldset>

      <fieldset>
        <legend>Compute</legend>
        <Radios
          field="compute"
          legend="Workers run on"
          value={v.compute}
          options={[
            ['GPU', 'GPUs'],
            ['CPU', 'CPUs only'],
          ]}
          onChange={set('compute') as (x: string) => void}
          errors={errors}
          disabled={mode === 'update' && current?.gpu ? ['CPU'] : []}
          note={
            mode === 'update' && current?.gpu
              ? 'A GPU endpoint becomes a CPU one only through GraphQL saveEndpoint(instanceIds).'
              : undefined
          }
        />
        {v.compute === 'GPU' ? (
          <>
            <Checks
              field="gpu.pools"
              legend="GPU pools (any of them)"
              options={poolsOf(c.gpus, v.pools).map(([id, p]) => ({
                id,
                label: id,
                meta: p.types.length
                  ? `${p.types.join(', ')}; ${p.available} of ${p.total} free`
                  : 'not in the catalog',
              }))}
              chosen={v.pools}
              onChange={set('pools')}
              errors={errors}
              empty="The GPU catalog could not be read."
            />
            <FieldError field="gpu" errors={errors} />
            <TextField
              field="gpu.count"
              label="GPUs per worker"
              type="number"
              value={v.gpuCount}
              onInput={set('gpuCount')}
              errors={errors}
            />
          </>
        ) : (
          <div class="cpu">
            <p class="meta">
              {current?.cpu
                ? `This endpoint's workers are ${current.cpu.id}-${current.cpu.vcpuCount}-${current.cpu.memory} (${current.cpu.vcpuCount} vCPUs, ${current.cpu.memory} GB).`
                : 'A CPU endpoint made here gets cpu3c-2-4 (2 vCPUs, 4 GB);'}{' '}
              other sizes are named with GraphQL saveEndpoint(instanceIds). Flavors the hosts offer:
            </p>
            {c.cpus && c.cpus.length > 0 ? (
              <ul class="meta">
                {c.cpus.map((f) => (
                  <li key={f.id}>
                    {f.id}: {f.ramGbPerVcpu} GB per vCPU, {f.vcpu.min}–{f.vcpu.max} vCPUs, {f.hosts} host(s)
                  </li>
                ))}
              </ul>
            ) : (
              <p class="meta">none listed.</p>
            )}
          </div>
        )}
        <Checks
          field="dataCenterIds"
          legend="Data centers (none chosen: any)"
          options={dataCenters}
          chosen={v.dataCenterIds}
          onChange={set('dataCenterIds')}
          errors={errors}
          empty="No data centers are registered."
        />
      </fieldset>

      <fieldset>
        <legend>Scaling</legend>
        <div class="pair">
          <TextField
            field="workers.min"
            label="Workers, minimum"
            type="number"
            value={v.workersMin}
            onInput={set('workersMin')}
            errors={errors}
          />
          <TextField
            field="workers.max"
            label="Workers, maximum"
            type="number"
            value={v.workersMax}
            onInput={set('workersMax')}
            errors={errors}
          />
        </div>
        <FieldError field="workers" errors={errors} />
        <Select
          field="scaling.type"
          label="Scaler"
          value={v.scalerType}
          options={[
            ['QUEUE_DELAY', 'Queue delay: add workers while the oldest job waits longer than the value (s)'],
            ['REQUEST_COUNT', 'Request count: one worker per value jobs queued or running'],
          ]}
          onChange={set('scalerType')}
          errors={errors}
        />
        <div class="pair">
          <TextField
            field="scaling.value"
            label="Scaler value"
            type="number"
            step="any"
            value={v.scalerValue}
            onInput={set('scalerValue')}
            errors={errors}
          />
          <TextField
            field="scaling.idleTimeout"
            label="Idle timeout (s)"
            type="number"
            value={v.idleTimeout}
            onInput={set('idleTimeout')}
            errors={errors}
          />
        </div>
        <FieldError field="scaling" errors={errors} />
        <Select
          field="flashboot"
          label="FlashBoot"
          value={v.flashboot}
          options={[
            ['OFF', 'Off: an idle worker is removed'],
            ['FLASHBOOT', 'FlashBoot: an idle worker is frozen on its host'],
            ['PRIORITY_FLASHBOOT', 'Priority FlashBoot: frozen, and evicted last'],
          ]}
          onChange={set('flashboot')}
          errors={errors}
        />
        <TextField
          field="timeout"
          label="Execution timeout (ms)"
          type="number"
          value={v.timeout}
          onInput={set('timeout')}
          errors={errors}
          hint="Per request, at least 1000."
        />
      </fieldset>

      <Checks
        field="networkVolumes"
        legend="Network volumes (mounted at /runpod-volume; one per data center)"
        options={volumes}
        chosen={v.networkVolumes}
        onChange={set('networkVolumes')}
        errors={errors}
        empty="The account has no network volumes."
      />
    </>
  );
}

/** Moves focus to the first field with an error, else to the notice, once the errors are shown. */
export function useFocusOnErrors(errors: Placed, form: { current: HTMLFormElement | null }): void {
  useEffect(() => {
    if (errors === NO_ERRORS) return;
    const target =
      form.current?.querySelector<HTMLElement>('[aria-invalid="true"]') ??
      form.current?.parentElement?.querySelector<HTMLElement>('.notice.error');
    target?.focus();
  }, [errors]);
}
