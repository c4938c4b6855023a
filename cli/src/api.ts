import { openAsBlob } from 'node:fs';
import { CliError, describeError } from './errors.ts';
import type { Answer, components, RequestBody } from './generated-api-types.ts';

/*
 * The platform's answers (docs/apps.md "Platform REST"), from the types openapi-typescript generates
 * of the API's OpenAPI document (./generated-api-types.ts; `npm run generate:cli-types` writes it
 * again, test/api/cli-api-types.test.ts fails while it is out of date). Written here by hand only
 * what the document does not describe: the GraphQL envelope of `graphql` (POST /graphql is no REST
 * route) and the signed upload URL of `upload` (the blob store's, not the API's).
 */

export type App = Answer<'/v2/apps/{app}', 'get', 200>;
/** `deploying`: the deployment under way; older platforms leave it out, so readers treat it as optional. */
export type Environment = Answer<'/v2/apps/{app}/environments/{env}', 'get', 200>;
export type AppEndpoint = Environment['endpoints'][number];
export type Build = Answer<'/v2/apps/{app}/builds/{build}/finalize', 'post', 200>;
export type PreparedUpload = Answer<'/v2/apps/{app}/builds', 'post', 201>;
/** `resources`: where each resource stands; older platforms leave it out (deploy reads `resources ?? []`). */
export type Deployment = Answer<'/v2/apps/{app}/deployments/{deployment}', 'get', 200>;
export type DeploymentResource = Deployment['resources'][number];
/** A source upload's answer: versions count up from 1 per environment. */
export type SourceVersion = Answer<'/v2/apps/{app}/environments/{env}/source', 'put', 200>;
/** GET /v2/serverless/{id}/workers: the workers of an endpoint, and why they wait while they do. */
export type EndpointWorkers = Answer<'/v2/serverless/{id}/workers', 'get', 200>;
export type EndpointWorker = EndpointWorkers['workers'][number];

/** RFC 9457 problem details, the error body of every REST answer (a proxy's error page has none of it). */
type Problem = Partial<components['schemas']['Problem']>;

export class ApiError extends CliError {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

const REQUEST_TIMEOUT_MS = 60_000;
/** An upload of up to 1.5 GB over a slow link. */
const UPLOAD_TIMEOUT_MS = 60 * 60_000;

export class PlatformClient {
  constructor(
    readonly baseUrl: string,
    private readonly apiKey: string,
  ) {}

  private url(pathname: string): URL {
    const base = this.baseUrl.endsWith('/') ? this.baseUrl : `${this.baseUrl}/`;
    return new URL(pathname.replace(/^\//, ''), base);
  }

  async request<T>(method: string, pathname: string, body?: unknown): Promise<T> {
    return (await this.exchange<T>(method, pathname, body !== undefined ? { json: body } : {})).body;
  }

  /** One call with its status too (a 201 and a 200 can mean different things); a JSON body, or raw bytes of a given type. */
  private async exchange<T>(
    method: string,
    pathname: string,
    payload: { json?: unknown; bytes?: Buffer; contentType?: string },
  ): Promise<{ status: number; body: T }> {
    const url = this.url(pathname);
    const contentType = payload.json !== undefined ? 'application/json' : payload.contentType;
    let res: Response;
    try {
      res = await fetch(url, {
        method,
        headers: {
          authorization: `Bearer ${this.apiKey}`,
          accept: 'application/json, application/problem+json',
          ...(contentType ? { 'content-type': contentType } : {}),
        },
        body: payload.json !== undefined ? JSON.stringify(payload.json) : payload.bytes,
        signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
      });
    } catch (err) {
      throw unreachable(this.baseUrl, err);
    }
    if (!res.ok) throw await problemError(res, `${method} ${url.pathname}`);
    if (res.status === 204) return { status: res.status, body: undefined as T };
    const text = await res.text();
    if (!text) return { status: res.status, body: undefined as T };
    try {
      return { status: res.status, body: JSON.parse(text) as T };
    } catch {
      throw new CliError(
        `The platform answered ${method} ${url.pathname} with something other than JSON (is ${this.baseUrl} a Gantry API?).`,
      );
    }
  }

  /** One GraphQL operation (the hosted tools' surface, e.g. flash login's decisions); its data, or its first error as a CliError. */
  async graphql<T>(query: string, variables: Record<string, unknown>): Promise<T> {
    const body = await this.request<{ data?: T; errors?: Array<{ message?: string }> }>('POST', '/graphql', {
      query,
      variables,
    });
    const message = body?.errors?.[0]?.message;
    if (message || !body?.data) throw new CliError(message ?? 'The platform answered GraphQL without data.');
    return body.data;
  }

  listApps = (): Promise<Answer<'/v2/apps', 'get', 200>> => this.request('GET', '/v2/apps');
  getApp = (app: string): Promise<App> => this.request('GET', `/v2/apps/${enc(app)}`);
  createApp = (name: string, environment?: string): Promise<Answer<'/v2/apps', 'post', 201>> =>
    this.request('POST', '/v2/apps', { name, ...(environment ? { environment } : {}) });
  deleteApp = (app: string): Promise<void> => this.request('DELETE', `/v2/apps/${enc(app)}`);
  listEnvironments = (app: string): Promise<Answer<'/v2/apps/{app}/environments', 'get', 200>> =>
    this.request('GET', `/v2/apps/${enc(app)}/environments`);
  createEnvironment = (app: string, name: string): Promise<Answer<'/v2/apps/{app}/environments', 'post', 201>> =>
    this.request('POST', `/v2/apps/${enc(app)}/environments`, { name });
  deleteEnvironment = (app: string, env: string): Promise<void> =>
    this.request('DELETE', `/v2/apps/${enc(app)}/environments/${enc(env)}`);
  /** The manifest is the Python scanner's (artifact.ts Manifest, route methods as it wrote them): the platform checks it. */
  prepareUpload = (
    app: string,
    body: Omit<RequestBody<'/v2/apps/{app}/builds', 'post'>, 'manifest'> & { manifest: unknown },
  ): Promise<PreparedUpload> => this.request('POST', `/v2/apps/${enc(app)}/builds`, body);
  finalizeUpload = (app: string, buildId: string): Promise<Build> =>
    this.request('POST', `/v2/apps/${enc(app)}/builds/${enc(buildId)}/finalize`);
  deploy = (
    app: string,
    env: string,
    buildId: string,
  ): Promise<Answer<'/v2/apps/{app}/environments/{env}/deployments', 'post', 202>> =>
    this.request('POST', `/v2/apps/${enc(app)}/environments/${enc(env)}/deployments`, { buildId });
  getDeployment = (app: string, id: string): Promise<Deployment> =>
    this.request('GET', `/v2/apps/${enc(app)}/deployments/${enc(id)}`);
  deleteEndpoint = (id: string): Promise<void> => this.request('DELETE', `/v2/serverless/${enc(id)}`);
  listWorkers = (id: string): Promise<EndpointWorkers> => this.request('GET', `/v2/serverless/${enc(id)}/workers`);
  getEnvironment = (app: string, env: string): Promise<Environment> =>
    this.request('GET', `/v2/apps/${enc(app)}/environments/${enc(env)}`);

  /** docs/dev-loop.md `provisionResource`: one resource's endpoint from a build, without the deploy workflow; 201 created, 200 updated. */
  async provisionResource(
    app: string,
    env: string,
    resource: string,
    buildId: string,
  ): Promise<{ endpoint: AppEndpoint; created: boolean }> {
    const r = await this.exchange<Answer<'/v2/apps/{app}/environments/{env}/endpoints/{resource}', 'put', 200 | 201>>(
      'PUT',
      `/v2/apps/${enc(app)}/environments/${enc(env)}/endpoints/${enc(resource)}`,
      { json: { buildId } },
    );
    return { endpoint: r.body, created: r.status === 201 };
  }

  /** docs/dev-loop.md: a gzip tar of the source files becomes the environment's next source version. */
  async uploadSource(app: string, env: string, tarball: Buffer): Promise<SourceVersion> {
    return (
      await this.exchange<SourceVersion>('PUT', `/v2/apps/${enc(app)}/environments/${enc(env)}/source`, {
        bytes: tarball,
        contentType: 'application/gzip',
      })
    ).body;
  }

  /** The artifact's bytes to the signed URL: no bearer key (the URL is the credential), only the headers it came with. */
  async upload(upload: PreparedUpload['upload'], file: string): Promise<void> {
    const url = new URL(upload.url, this.url('/'));
    let res: Response;
    try {
      res = await fetch(url, {
        method: upload.method || 'PUT',
        headers: upload.headers,
        body: await openAsBlob(file),
        signal: AbortSignal.timeout(UPLOAD_TIMEOUT_MS),
      });
    } catch (err) {
      throw unreachable(url.origin, err);
    }
    if (!res.ok) throw await problemError(res, 'the artifact upload');
    await res.arrayBuffer();
  }
}

const enc = encodeURIComponent;

function unreachable(where: string, err: unknown): CliError {
  const cause = (err as { cause?: { code?: string; message?: string } }).cause;
  if ((err as Error).name === 'TimeoutError') return new CliError(`The platform at ${where} did not answer in time.`);
  const why = cause?.code ?? cause?.message ?? describeError(err);
  return new CliError(
    `Cannot reach the platform at ${where} (${why}); check that it runs and that GANTRY_API_URL (or \`gantry login --api-url\`) points at it.`,
  );
}

/** One message from an error answer: the problem's detail, its errors entries, the status. */
async function problemError(res: Response, what: string): Promise<ApiError> {
  const text = await res.text().catch(() => '');
  let problem: Problem = {};
  try {
    problem = JSON.parse(text) as Problem;
  } catch {
    // Not problem+json (a proxy's page): the status says what there is to say.
  }
  const entries = (problem.errors ?? []).map((e) => (typeof e === 'string' ? e : JSON.stringify(e)));
  const detail = (problem.detail ?? problem.title ?? res.statusText) || `HTTP ${res.status}`;
  const withEntries = entries.length > 0 ? `${detail.replace(/\.$/, '')}: ${entries.join('; ')}` : detail;
  const hint =
    res.status === 401
      ? '; the API key was refused: check SERVICE_API_KEY, the project .env, or run `gantry login`'
      : '';
  return new ApiError(res.status, `${withEntries.replace(/\.$/, '')} (${what}: HTTP ${res.status})${hint}.`);
}
