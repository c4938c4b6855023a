import type { Resource } from '../../scan.ts';

type Schema = Record<string, unknown>;
type Operation = Record<string, unknown>;

/** Python annotations the explorer can turn into a JSON type; anything else takes any value. */
const JSON_TYPES: Record<string, Schema> = {
  int: { type: 'integer' },
  float: { type: 'number' },
  str: { type: 'string' },
  bool: { type: 'boolean' },
  dict: { type: 'object' },
  list: { type: 'array', items: {} },
  tuple: { type: 'array', items: {} },
};

function annotationSchema(annotation: string | null): Schema {
  if (!annotation) return {};
  const bare = annotation.replace(/\s/g, '');
  const direct = JSON_TYPES[bare];
  if (direct) return { ...direct };
  // Optional[int], int | None, list[str], dict[str, int]: the outer shape is what the explorer shows.
  const optional = /^Optional\[(.+)\]$/.exec(bare) ?? /^(.+)\|None$/.exec(bare) ?? /^None\|(.+)$/.exec(bare);
  if (optional) return { ...annotationSchema(optional[1]!), nullable: true };
  const generic = /^(list|List|tuple|Tuple|set|Set|dict|Dict)\[/.exec(bare);
  if (generic) return /^(dict|Dict)$/.test(generic[1]!) ? { type: 'object' } : { type: 'array', items: {} };
  return { description: `Python: ${annotation}` };
}

/** The job's `input`: one member per parameter of the function (docs/apps.md). */
function inputSchema(r: Resource): Schema {
  const params = r.params ?? [];
  const properties: Record<string, Schema> = {};
  const example: Record<string, unknown> = {};
  for (const p of params) {
    properties[p.name] = { ...annotationSchema(p.annotation), ...(p.required ? {} : { default: p.default }) };
    if (!p.required && p.default !== undefined) example[p.name] = p.default;
    else if (p.required) example[p.name] = exampleValue(p.annotation);
  }
  const required = params.filter((p) => p.required).map((p) => p.name);
  return { type: 'object', properties, ...(required.length > 0 ? { required } : {}), example };
}

function exampleValue(annotation: string | null): unknown {
  switch (annotationSchema(annotation).type) {
    case 'integer':
      return 1;
    case 'number':
      return 1.5;
    case 'boolean':
      return true;
    case 'object':
      return {};
    case 'array':
      return [];
    default:
      return 'text';
  }
}

const summaryOf = (summary: string | null | undefined, fn: string | undefined): string =>
  summary || `${fn ?? 'function'}()`;

function queueOperation(r: Resource): Operation {
  const signature = `${r.function}(${(r.params ?? []).map((p) => p.name).join(', ')})`;
  return {
    tags: [r.name],
    operationId: `${r.name}-runsync`,
    summary: summaryOf(r.summary, r.function),
    description: `Runs \`${signature}\` (${r.file}:${r.line}) on the live endpoint \`live-${r.name}\`, created on the first call. The members of \`input\` are the function's parameters.`,
    requestBody: {
      required: true,
      content: {
        'application/json': { schema: { type: 'object', required: ['input'], properties: { input: inputSchema(r) } } },
      },
    },
    responses: {
      200: {
        description: "The platform's /runsync answer: `status` COMPLETED with `output`, or FAILED with `error`.",
        content: {
          'application/json': {
            schema: {
              type: 'object',
              properties: { id: { type: 'string' }, status: { type: 'string' }, output: {}, error: {} },
            },
          },
        },
      },
    },
  };
}

function routeOperation(r: Resource, route: NonNullable<Resource['routes']>[number]): Operation {
  const pathParams = [...route.path.matchAll(/\{([^}]+)\}/g)].map((m) => ({
    name: m[1],
    in: 'path',
    required: true,
    schema: { type: 'string' },
  }));
  const withBody = route.method !== 'GET' && route.method !== 'DELETE';
  return {
    tags: [r.name],
    operationId: `${r.name}-${route.method.toLowerCase()}-${route.path}`,
    summary: summaryOf(route.summary, route.function),
    description: `\`${route.function}\` of \`${r.object}\` (${r.file}) on the live load-balanced endpoint \`live-${r.name}\`, created on the first call. ${withBody ? 'The body is the JSON the function gets.' : 'The query parameters are what the function gets.'}`,
    ...(pathParams.length > 0 ? { parameters: pathParams } : {}),
    ...(withBody ? { requestBody: { content: { 'application/json': { schema: { type: 'object' } } } } } : {}),
    responses: {
      200: { description: "The function's answer (JSON).", content: { 'application/json': { schema: {} } } },
    },
  };
}

/** The explorer's document, generated from the scanned functions (docs/dev-loop.md "The CLI"). */
export function openApiDocument(app: string, resources: Resource[]): Record<string, unknown> {
  const paths: Record<string, Record<string, Operation>> = {
    '/': {
      get: {
        tags: ['dev server'],
        operationId: 'health',
        summary: 'Health: the resources and their live endpoints',
        responses: {
          200: {
            description: 'The dev server is up.',
            content: { 'application/json': { schema: { type: 'object' } } },
          },
        },
      },
    },
  };
  for (const r of resources) {
    if (r.kind === 'queue') {
      paths[`/${r.name}/runsync`] = { post: queueOperation(r) };
      continue;
    }
    for (const route of r.routes ?? []) {
      const key = `/${r.name}${route.path}`;
      paths[key] = { ...paths[key], [route.method.toLowerCase()]: routeOperation(r, route) };
    }
  }
  return {
    openapi: '3.0.3',
    info: {
      title: `${app}: gantry dev`,
      version: 'live',
      description:
        'Calls run on real workers: each resource has a live endpoint (`live-<name>`), made on its first call. Queue-based functions take `{"input": {...}}`; load-balanced routes take their body as it is.',
    },
    tags: resources.map((r) => ({
      name: r.name,
      description: `${r.kind === 'lb' ? 'load-balanced' : 'queue-based'}, ${r.file}`,
    })),
    paths,
  };
}
