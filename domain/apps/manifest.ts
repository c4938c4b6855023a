import { Type, type Static } from 'typebox';
import { CPU_FLAVORS, parseCpuInstanceId, cpuInstanceProblems } from '../catalog/cpu-instances.ts';
import { GPU_POOLS } from '../catalog/gpu-pools.ts';

/** The limits and names of apps, and the manifest a build carries (docs/apps.md): its schema and its rules. */

/** Uncompressed content of an artifact (docs/apps.md: deployment size 1.5GB); the compressed upload is at most this too. */
export const MAX_ARTIFACT_BYTES = 1_500_000_000;
/** Each resource's endpoint carries one discovery variable per resource: the endpoint env limit (100) bounds both. */
export const MAX_RESOURCES = 40;
export const MAX_RESOURCE_ENV = 40;
export const PYTHON_VERSIONS = ['3.10', '3.11', '3.12', '3.13'] as const;
const PythonVersionSchema = Type.Union([
  Type.Literal('3.10'),
  Type.Literal('3.11'),
  Type.Literal('3.12'),
  Type.Literal('3.13'),
]);
export const UPLOAD_URL_TTL_SEC = 3600;
export const DOWNLOAD_URL_TTL_SEC = 3600;
/** A live environment's source upload (docs/dev-loop.md "Source reload"): the project's files only, no dependencies. */
export const MAX_SOURCE_BYTES = 50 * 1024 * 1024;
/** The environment whose endpoints `gantry dev` provisions one resource at a time (docs/dev-loop.md). */
export const LIVE_ENVIRONMENT = 'live';

const NAME_PATTERN = '^[a-z0-9][a-z0-9-]{0,39}$';
export const NameSchema = Type.String({
  pattern: NAME_PATTERN,
  description: 'lower-case letters, digits and -, at most 40',
});
const RESOURCE_PATTERN = '^[a-z][a-z0-9-]{0,39}$';
export const Sha256Schema = Type.String({ pattern: '^[0-9a-f]{64}$' });
/** Variables Gantry sets itself (the runtime's and the worker protocol's): a resource may not set them. */
const RESERVED_ENV = /^(GANTRY_|RUNPOD_|PORT$|PORT_HEALTH$)/;

const ShortText = (maxLength: number) => Type.String({ maxLength });
const Nullable = <T extends ReturnType<typeof Type.String>>(t: T) => Type.Optional(Type.Union([t, Type.Null()]));

const ParamSchema = Type.Object({
  name: ShortText(200),
  annotation: Nullable(ShortText(500)),
  required: Type.Boolean(),
  default: Type.Optional(Type.Unknown()),
});
const RouteSchema = Type.Object({
  method: Type.Union([
    Type.Literal('GET'),
    Type.Literal('POST'),
    Type.Literal('PUT'),
    Type.Literal('PATCH'),
    Type.Literal('DELETE'),
  ]),
  path: Type.String({ pattern: "^/[A-Za-z0-9._~!$&'()*+,;=:@/{}-]*$", maxLength: 200 }),
  function: ShortText(200),
  summary: Nullable(ShortText(1000)),
});
const ComputeSchema = Type.Union([
  Type.Object(
    {
      gpu: Type.Object({
        pools: Type.Array(ShortText(64), { minItems: 1, maxItems: 16 }),
        count: Type.Integer({ minimum: 1, maximum: 8 }),
      }),
    },
    { additionalProperties: false },
  ),
  Type.Object({ cpu: ShortText(64) }, { additionalProperties: false }),
]);
const ResourceSchema = Type.Object({
  name: Type.String({ pattern: RESOURCE_PATTERN }),
  kind: Type.Union([Type.Literal('queue'), Type.Literal('lb')]),
  file: ShortText(500),
  line: Type.Optional(Type.Integer({ minimum: 0 })),
  function: Type.Optional(ShortText(200)),
  object: Type.Optional(ShortText(200)),
  summary: Nullable(ShortText(1000)),
  params: Type.Optional(Type.Array(ParamSchema, { maxItems: 100 })),
  routes: Type.Optional(Type.Array(RouteSchema, { maxItems: 100 })),
  compute: ComputeSchema,
  workers: Type.Object({
    min: Type.Integer({ minimum: 0, maximum: 1000 }),
    max: Type.Integer({ minimum: 0, maximum: 1000 }),
  }),
  idleTimeout: Type.Integer({ minimum: 0, maximum: 86_400 }),
  scaler: Type.Object({
    type: Type.Union([Type.Literal('QUEUE_DELAY'), Type.Literal('REQUEST_COUNT')]),
    value: Type.Number({ minimum: 0.5, maximum: 10_000 }),
  }),
  timeout: Type.Integer({ minimum: 1, maximum: 86_400, description: 'seconds' }),
  env: Type.Record(
    Type.String({ pattern: '^[A-Za-z_][A-Za-z0-9_]*$', maxLength: 128 }),
    Type.String({ maxLength: 32 * 1024, pattern: '^[^\\r\\n]*$' }),
    { maxProperties: MAX_RESOURCE_ENV },
  ),
  dependencies: Type.Array(ShortText(500), { maxItems: 500 }),
  pythonVersion: Type.Optional(Type.Union([PythonVersionSchema, Type.Null()])),
  /** Runtime image packages (torch, numpy, ...) the resource's file imports; absent from older CLIs. */
  preinstalledImports: Type.Optional(Type.Array(ShortText(100), { maxItems: 20 })),
});
export type ManifestResource = Static<typeof ResourceSchema>;

export const ManifestSchema = Type.Object({
  format: Type.Literal(1),
  pythonVersion: PythonVersionSchema,
  fingerprint: Sha256Schema,
  resources: Type.Array(ResourceSchema, { minItems: 1, maxItems: MAX_RESOURCES }),
  excluded: Type.Optional(Type.Array(ShortText(200), { maxItems: 1000 })),
  createdAt: Type.Optional(ShortText(64)),
});
export type Manifest = Static<typeof ManifestSchema>;

/** Rules the schema cannot say: unique names, known pools and CPU sizes, routes where they belong. */
export function manifestProblems(m: Manifest): string[] {
  const problems: string[] = [];
  const seen = new Set<string>();
  m.resources.forEach((r, i) => {
    const at = `$.manifest.resources[${i}]`;
    if (seen.has(r.name)) problems.push(`${at}.name: '${r.name}' is declared twice`);
    seen.add(r.name);
    if (r.workers.min > r.workers.max)
      problems.push(`${at}.workers: min (${r.workers.min}) is above max (${r.workers.max})`);
    if (r.kind === 'lb' && (r.routes ?? []).length === 0)
      problems.push(`${at}.routes: a load-balanced endpoint needs at least one route`);
    if (r.kind === 'queue' && !r.function) problems.push(`${at}.function: a queue-based endpoint names its function`);
    for (const name of Object.keys(r.env))
      if (RESERVED_ENV.test(name))
        problems.push(
          `${at}.env.${name}: names starting with GANTRY_ or RUNPOD_ (and PORT, PORT_HEALTH) are set by Gantry`,
        );
    if ('gpu' in r.compute) {
      for (const pool of r.compute.gpu.pools)
        if (!GPU_POOLS.some((p) => p.id === pool))
          problems.push(
            `${at}.compute.gpu.pools: unknown GPU pool '${pool}' (known: ${GPU_POOLS.map((p) => p.id).join(', ')})`,
          );
    } else {
      const cpu = parseCpuInstanceId(r.compute.cpu);
      if (!cpu)
        problems.push(
          `${at}.compute.cpu: '${r.compute.cpu}' is not a CPU instance id (flavor-vcpus-memoryGb, flavors: ${CPU_FLAVORS.map((f) => f.id).join(', ')})`,
        );
      else for (const p of cpuInstanceProblems(cpu)) problems.push(`${at}.compute.cpu: ${p}`);
    }
  });
  return problems;
}
