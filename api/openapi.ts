import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance } from 'fastify';
import type { OpenAPIV3_1 } from 'openapi-types';
// config.requiredScope, read below, is declared with the authentication hooks.
import type {} from './auth.ts';

/**
 * The REST /v2 description (OpenAPI 3.1), generated from the route schemas at start-up: every
 * management route appears with its body, parameter and response schemas, so a route added with
 * a schema is described without further work. Served at /v2/openapi.json, with an explorer at
 * /v2/docs whose assets ship inside the npm package (no CDN).
 */

const problemSchema: OpenAPIV3_1.SchemaObject = {
  type: 'object',
  description: 'RFC 9457 problem details',
  required: ['title', 'status', 'detail'],
  properties: {
    title: { type: 'string', examples: ['Not Found'] },
    status: { type: 'integer', examples: [404] },
    detail: { type: 'string', examples: ['endpoint not found'] },
    errors: {
      type: 'array',
      items: { type: 'string' },
      description: 'individual validation failures',
      examples: [["$: additional properties 'bogus' not allowed"]],
    },
  },
};

const rateLimitHeaders: Record<string, OpenAPIV3_1.ReferenceObject> = {
  RateLimit: { $ref: '#/components/headers/RateLimit' },
  'RateLimit-Policy': { $ref: '#/components/headers/RateLimit-Policy' },
};

const problemResponse = (
  description: string,
  extraHeaders: Record<string, OpenAPIV3_1.HeaderObject | OpenAPIV3_1.ReferenceObject> = {},
): OpenAPIV3_1.ResponseObject => ({
  description,
  headers: { ...rateLimitHeaders, ...extraHeaders },
  content: { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } } },
});

const components: OpenAPIV3_1.ComponentsObject = {
  securitySchemes: {
    bearerAuth: {
      type: 'http',
      scheme: 'bearer',
      description:
        'An API key: `Authorization: Bearer <key>`. Missing, malformed, unknown, revoked or expired keys are 401; a key without the scope an operation needs is 403.',
    },
  },
  schemas: { Problem: problemSchema },
  headers: {
    RateLimit: {
      description:
        'Structured-field list, one member per window: `"minute";r=<remaining>;t=<seconds to reset>, "hour";..., "day";...`',
      schema: { type: 'string' },
      example: '"minute";r=599;t=42, "hour";r=19990;t=1812, "day";r=199000;t=45012',
    },
    'RateLimit-Policy': {
      description:
        'Structured-field list, one member per window: `"minute";q=<quota>;w=60, "hour";q=...;w=3600, "day";q=...;w=86400`',
      schema: { type: 'string' },
      example: '"minute";q=600;w=60, "hour";q=20000;w=3600, "day";q=200000;w=86400',
    },
  },
  responses: {
    BadRequest: problemResponse('the request is malformed or breaks a rule'),
    Unauthorized: {
      description: 'the bearer key is missing, malformed, unknown, revoked or expired',
      content: { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } } },
    },
    Forbidden: problemResponse('the key lacks the scope this operation needs, or does not reach this resource'),
    NotFound: problemResponse("no such resource in the caller's account"),
    Conflict: problemResponse('the change conflicts with an existing resource (for example a name in use)'),
    UnprocessableEntity: problemResponse('the body or parameters fail validation; `errors` lists each failure'),
    TooManyRequests: problemResponse('the account is over its quota in some window; the detail names the window', {
      'Retry-After': {
        description: 'seconds until the exceeded window resets',
        schema: { type: 'integer', minimum: 1 },
      },
    }),
    Error: problemResponse('any other error'),
  },
};

/** Which problem answers an operation can give, by what it takes. */
function errorResponses(method: string, op: OpenAPIV3_1.OperationObject): Array<[string, string]> {
  const params = (op.parameters ?? []) as OpenAPIV3_1.ParameterObject[];
  const takesInput = op.requestBody !== undefined || params.length > 0;
  const list: Array<[string, string]> = [
    ['400', 'BadRequest'],
    ['401', 'Unauthorized'],
    ['403', 'Forbidden'],
  ];
  if (params.some((p) => p.in === 'path')) list.push(['404', 'NotFound']);
  if (method === 'post' || method === 'patch' || method === 'put') list.push(['409', 'Conflict']);
  if (takesInput) list.push(['422', 'UnprocessableEntity']);
  list.push(['429', 'TooManyRequests'], ['default', 'Error']);
  return list;
}

const METHODS = ['get', 'put', 'post', 'delete', 'patch'] as const;

/** Adds what every management operation shares: bearer security, rate-limit headers, problem answers. */
function completeDocument(doc: OpenAPIV3_1.Document): OpenAPIV3_1.Document {
  for (const item of Object.values(doc.paths ?? {})) {
    for (const method of METHODS) {
      const op = item?.[method];
      if (!op) continue;
      op.security = [{ bearerAuth: [] }];
      const responses = (op.responses ??= {});
      for (const [code, response] of Object.entries(responses)) {
        if (/^2/.test(code) && !('$ref' in response)) response.headers = { ...rateLimitHeaders, ...response.headers };
      }
      for (const [code, name] of errorResponses(method, op))
        responses[code] ??= { $ref: `#/components/responses/${name}` };
    }
  }
  return doc;
}

/** Call before the route modules are registered: the generator collects routes as they are added. */
export function registerOpenApi(app: FastifyInstance): void {
  app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Gantry REST API',
        version: '2.0.0',
        description:
          'Management API of a self-hosted serverless GPU platform. Every operation needs `Authorization: Bearer <key>`; answers carry `RateLimit` and `RateLimit-Policy` headers; errors are `application/problem+json`.',
      },
      components,
    },
    // Only the management API is described here: its routes, and only they, declare the key scope they
    // need (routes/management.ts). The job API and worker protocol have their own rules.
    transform: ({ schema, url, route }) => {
      const scope = route.config?.requiredScope;
      return { schema: scope ? { ...schema, 'x-required-scope': scope } : { ...schema, hide: true }, url };
    },
    transformObject: (doc) =>
      'openapiObject' in doc ? completeDocument(doc.openapiObject as OpenAPIV3_1.Document) : doc.swaggerObject,
  });
  app.register(swaggerUi, {
    routePrefix: '/v2/docs',
    // No validator badge: the page makes no request outside this server.
    validatorUrl: false,
    uiConfig: { deepLinking: true, persistAuthorization: false },
  });
  app.get('/v2/openapi.json', { schema: { hide: true } }, async () => app.swagger());
}
