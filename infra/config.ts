import { homedir } from 'node:os';
import path from 'node:path';
import { Type, type Static } from 'typebox';
import { validateBlobKey, type BlobStoreSettings } from '../domain/blobs/index.ts';
import {
  DEFAULT_RUNTIME_BASE_IMAGE,
  FLASH_RUNTIME_MODULE,
  FLASH_RUNTIME_PACKAGES,
  GPU_RUNTIME_PACKAGES,
  runtimeContextDigest,
  runtimePackages,
} from '../domain/apps/index.ts';
import { DomainError } from '../domain/errors.ts';
import type { AppSettings } from '../domain/shared/index.ts';
import { readTlsCredentials, type TlsFiles } from '../api/tls.ts';
import { RUNTIME_CONTEXT_DIR, runtimeContextFiles } from './runtime-context.ts';
import { parseLocalHostLabels, type LocalHostSettings } from '../domain/hosts/index.ts';
import { jobSettings } from '../domain/jobs/index.ts';
import { parseLbHealthSettings } from '../domain/load-balancing/index.ts';
import { parseOrchestrationSettings } from '../domain/shared/index.ts';
import {
  DEFAULT_JOB_RATE_LIMITS,
  DEFAULT_PROXY_RATE_LIMITS,
  DEFAULT_RATE_LIMITS,
  parseRateLimits,
} from '../domain/rate-limits/index.ts';
import type { PlatformSettings } from '../domain/shared/index.ts';
import { validate } from '../domain/shared/index.ts';
import { DEFAULT_OUTPUT_SETTINGS } from '../domain/public-models/index.ts';
import { DEFAULT_METRICS_SETTINGS } from '../domain/metrics/index.ts';
import { parseWebhookAllowList } from '../domain/jobs/index.ts';

/**
 * Every environment variable Gantry reads, in one schema, read once at start (loadConfig): the
 * table of docs/configuration.md lists exactly these (test/unit/config.test.ts checks it). Values
 * are strings as the environment has them; the schema bounds their shape, loadConfig turns them
 * into the typed GantryConfig, and nothing else in the platform reads process.env.
 */
const Int = (description: string) => Type.Optional(Type.String({ pattern: '^\\s*[0-9]{1,10}\\s*$', description }));
const Text = (description: string) => Type.Optional(Type.String({ description }));

export const ENVIRONMENT_SCHEMA = Type.Object(
  {
    PORT: Int('API port'),
    GANTRY_HOST: Text('address the API binds to'),
    GANTRY_PUBLIC_URL: Text('address clients and worker containers use to reach the API'),
    GANTRY_LB_DOMAIN: Text('wildcard DNS domain of load-balancing endpoints'),
    GANTRY_TLS_CERT: Text('PEM certificate chain file: the API serves HTTPS'),
    GANTRY_TLS_KEY: Text('PEM private key file of GANTRY_TLS_CERT'),
    GANTRY_REUSE_PORT: Type.Optional(
      Type.Union(
        ['true', 'false', '1', '0'].map((v) => Type.Literal(v)),
        { description: 'several API processes may listen on the same address and port (SO_REUSEPORT)' },
      ),
    ),
    GANTRY_RATE_LIMITS: Text('management API quotas per account'),
    GANTRY_JOB_RATE_LIMITS: Text('job API quotas per account and endpoint'),
    GANTRY_PROXY_RATE_LIMITS: Text('load-balancing proxy quotas per account and endpoint'),
    GANTRY_AUTH_FAILURES_PER_MINUTE: Int('failed authentications one address may make in a minute'),
    GANTRY_MAX_QUEUED_JOBS: Int('most jobs one endpoint may hold queued'),
    GANTRY_JOB_WORKFLOW_BACKLOG: Int('job workflow signals an API process may hold unsent before /run answers 429'),
    GANTRY_WEBHOOK_ALLOW: Text('private CIDRs and host names job webhooks may reach'),
    GANTRY_WORKER_PORT: Int('port of the worker-facing listener'),
    GANTRY_WORKER_EGRESS: Type.Optional(
      Type.Union([Type.Literal('private'), Type.Literal('public')], {
        description: 'what worker containers may reach: private networks too (default), or public addresses only',
      }),
    ),
    GANTRY_ALLOW_UNWALLED_DOCKER: Type.Optional(
      Type.Union(
        ['true', 'false', '1', '0'].map((v) => Type.Literal(v)),
        { description: "use Docker hosts whose daemon does not keep tenants' networks apart" },
      ),
    ),
    GANTRY_DATA_DIR: Text('data directory'),
    GANTRY_ADMIN_API_KEY: Text('the admin key'),
    GANTRY_SECRET_KEY: Text('key sealing stored secrets'),
    GANTRY_PRICES_FILE: Text('price file'),
    GANTRY_BLOB_STORE: Type.Optional(
      Type.Union([Type.Literal('directory'), Type.Literal('s3')], { description: 'where build artifacts are kept' }),
    ),
    GANTRY_BLOB_DIR: Text('directory of the directory blob store'),
    GANTRY_S3_ENDPOINT: Text('S3 endpoint URL of the s3 blob store'),
    GANTRY_S3_REGION: Text('S3 region'),
    GANTRY_S3_BUCKET: Text('S3 bucket'),
    GANTRY_S3_ACCESS_KEY_ID: Text('S3 access key id'),
    GANTRY_S3_SECRET_ACCESS_KEY: Text('S3 secret access key'),
    GANTRY_S3_FORCE_PATH_STYLE: Type.Optional(
      Type.Union(
        ['true', 'false', '1', '0'].map((v) => Type.Literal(v)),
        { description: 'path-style S3 addressing' },
      ),
    ),
    GANTRY_S3_PREFIX: Text('key prefix inside the S3 bucket'),
    GANTRY_RUNTIME_IMAGE: Text('runtime image of deployed apps to pull ({python} = 3.10..3.13); unset: hosts build it'),
    GANTRY_RUNTIME_BASE_IMAGE: Text('base image hosts build the runtime image on ({python} replaced)'),
    GANTRY_RUNTIME_GPU_BASE_IMAGE: Text("base image of GPU resources' runtime image ({python} replaced)"),
    GANTRY_RUNTIME_GPU_PACKAGES: Text("pip requirements the GPU resources' runtime image adds to its base"),
    GANTRY_RUNTIME_GPU_IMAGE: Text("GPU resources' runtime image to pull ({python} replaced); unset: hosts build it"),
    GANTRY_ARTIFACT_CACHE_DIR: Text("host directory of deployed apps' artifact cache"),
    GANTRY_FLASH_RUNTIME_IMAGE: Text(
      "image run in place of flash's CPU images ({python} replaced); unset: hosts build it",
    ),
    GANTRY_FLASH_RUNTIME_GPU_IMAGE: Text(
      "image run in place of flash's GPU images ({python} replaced); unset: hosts build it",
    ),
    GANTRY_FLASH_RUNTIME_BASE_IMAGE: Text('base image hosts build the flash runtime on ({python} replaced)'),
    GANTRY_FLASH_RUNTIME_PACKAGES: Text('pip requirements the flash runtime image adds to its base'),
    GANTRY_DEBIAN_MIRROR: Text(
      "Debian mirror hosts build Python base images from; unset: the one each host's apt uses",
    ),
    GANTRY_ROLE: Type.Optional(
      Type.Union([Type.Literal('all'), Type.Literal('api'), Type.Literal('worker')], {
        description: 'the parts this process runs',
      }),
    ),
    GANTRY_TASK_QUEUE: Text('Temporal task queue'),
    DATABASE_URL: Text('PostgreSQL connection URL'),
    GANTRY_PG_PORT: Int('port of the embedded PostgreSQL'),
    TEMPORAL_ADDRESS: Text('Temporal frontend host:port'),
    TEMPORAL_NAMESPACE: Text('Temporal namespace'),
    TEMPORAL_PORT: Int('gRPC port of the embedded dev server'),
    TEMPORAL_UI_PORT: Int('Web UI port of the embedded dev server'),
    TEMPORAL_UI_URL: Text(
      "a Temporal Web UI's address, for the console's links to workflows; unset: the embedded dev server's UI",
    ),
    TEMPORAL_CLI_PATH: Text('the temporal executable'),
    LOG_LEVEL: Type.Optional(
      Type.Union(
        ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].map((l) => Type.Literal(l)),
        { description: 'log level' },
      ),
    ),
    GANTRY_HOSTS_FILE: Text('hosts file applied at start'),
    GANTRY_LOCAL_HOST: Type.Optional(
      Type.Union([Type.Literal(''), Type.Literal('0'), Type.Literal('1')], {
        description: '1: register this machine as the host local',
      }),
    ),
    GANTRY_LOCAL_HOST_PORT: Int('SSH port of the local host'),
    GANTRY_LOCAL_HOST_USER: Text('SSH user of the local host'),
    GANTRY_LOCAL_HOST_KEY: Text('SSH private key file of the local host'),
    GANTRY_LOCAL_HOST_DATACENTER: Text('data center of the local host'),
    GANTRY_LOCAL_HOST_LABELS: Text('JSON object: labels of the local host, applied at every start'),
    GANTRY_ORCHESTRATION: Text('JSON object overriding orchestration timings'),
    GANTRY_PREPULL_HOSTS: Int("hosts a new release's image is pulled on ahead of its first worker; 0: none"),
    GANTRY_LB_HEALTH: Text('JSON object overriding the proxy health probes'),
    GANTRY_JOB_TAKE_HOLD_MS: Int('job-take long-poll hold'),
    GANTRY_JOB_SIGNAL_DELAY_MS: Int('workflow signal coalescing window'),
    GANTRY_JOB_UNSIGNALLED_GRACE_MS: Int('wait before a job state whose signal was not confirmed is told again'),
    GANTRY_JOB_RETENTION_MS: Int('how long /run results stay readable'),
    GANTRY_JOB_SYNC_RETENTION_MS: Int('how long /runsync results stay readable'),
    GANTRY_WORKER_PING_INTERVAL_MS: Int('RUNPOD_PING_INTERVAL given to workers'),
    GANTRY_OUTPUT_URL_TTL_MS: Int("how long public models' output URLs work"),
    GANTRY_OUTPUT_PURGE_INTERVAL_MS: Int('how often expired outputs are deleted'),
    GANTRY_METRICS_ROLLUP_INTERVAL_MS: Int('how often endpoint metrics are rolled up'),
    NODE_ENV: Text('development: error answers carry stack traces'),
    XDG_CACHE_HOME: Text('where per-machine builds are cached'),
  },
  // The rest of the environment (PATH, HOME, ...) is not Gantry's.
  { additionalProperties: true },
);
export type GantryEnvironment = Static<typeof ENVIRONMENT_SCHEMA>;

/** The process's settings, with their defaults. Unset TEMPORAL_ADDRESS / DATABASE_URL mean "start the embedded default". */
export interface GantryConfig {
  /** Which parts this process runs: everything, only the API, or only the Temporal worker. */
  role: 'all' | 'api' | 'worker';
  dataDir: string;
  host: string;
  port: number;
  /** Address worker containers and clients use to reach the API (requestUrls, worker env). */
  publicUrl: string;
  /** The API serves HTTPS with these files (GANTRY_TLS_CERT, GANTRY_TLS_KEY); undefined: plain HTTP. */
  tls: TlsFiles | undefined;
  /** Several API processes share `host:port`, the kernel spreading connections among them (GANTRY_REUSE_PORT). */
  reusePort: boolean;
  /** With a loopback publicUrl: the worker-facing listener's port on the container bridge's gateway. */
  workerPort: number;
  temporalAddress: string | undefined;
  temporalNamespace: string;
  temporalPort: number;
  temporalUiPort: number;
  /** An operator's Temporal Web UI (TEMPORAL_UI_URL); the embedded dev server's own when unset. */
  temporalUiUrl: string | undefined;
  temporalCliPath: string | undefined;
  taskQueue: string;
  databaseUrl: string | undefined;
  embeddedPostgresPort: number;
  adminApiKey: string | undefined;
  /** 32-byte key (hex or base64) sealing stored secrets; default: generated once into the data dir. */
  secretKey: string | undefined;
  logLevel: string;
  cacheDir: string;
  /** Hosts applied at start: a hosts file, and the local machine. */
  hostsFile: string | undefined;
  localHost: LocalHostSettings | undefined;
  /** What the domain, the activities and the API run with (DomainContext.settings). */
  settings: PlatformSettings;
  /** Where build artifacts (and later model outputs) are kept: createBlobStore(config.blobStore). */
  blobStore: BlobStoreSettings;
}

const intOf = (value: string | undefined, fallback: number): number =>
  value === undefined || value.trim() === '' ? fallback : Number(value.trim());

/** Like intOf, for values that must not be 0 (an interval, a count of allowed failures). */
function positive(name: string, value: string | undefined, fallback: number, problems: string[]): number {
  const n = intOf(value, fallback);
  if (n < 1) problems.push(`${name} must be a positive integer, got "${value}"`);
  return n;
}

/** Runs a parser of a variable's value, collecting its error as a problem. */
function parsed<T>(problems: string[], fallback: T, parse: () => T): T {
  try {
    return parse();
  } catch (err) {
    problems.push(err instanceof Error ? err.message : String(err));
    return fallback;
  }
}

/** The runtime image of deployed apps: pulled when named, else built by each host from sdk/python on the base. */
function appSettings(env: GantryEnvironment, problems: string[]): AppSettings {
  const runtimeBaseImage = env.GANTRY_RUNTIME_BASE_IMAGE?.trim() || DEFAULT_RUNTIME_BASE_IMAGE;
  const gpuBaseImage = env.GANTRY_RUNTIME_GPU_BASE_IMAGE?.trim() || runtimeBaseImage;
  const gpuPackages = parsed(problems, [...GPU_RUNTIME_PACKAGES], () =>
    runtimePackages('GANTRY_RUNTIME_GPU_PACKAGES', env.GANTRY_RUNTIME_GPU_PACKAGES ?? GPU_RUNTIME_PACKAGES.join(' ')),
  );
  const files = runtimeContextFiles();
  const flashBase = env.GANTRY_FLASH_RUNTIME_BASE_IMAGE?.trim() || runtimeBaseImage;
  const flashPackages = parsed(problems, [...FLASH_RUNTIME_PACKAGES], () =>
    runtimePackages(
      'GANTRY_FLASH_RUNTIME_PACKAGES',
      env.GANTRY_FLASH_RUNTIME_PACKAGES ?? FLASH_RUNTIME_PACKAGES.join(' '),
    ),
  );
  const flashGpuPackages = [...new Set([...gpuPackages, ...flashPackages])];
  return {
    runtimeImage: env.GANTRY_RUNTIME_IMAGE?.trim() || undefined,
    runtimeBaseImage,
    runtimeDigest: runtimeContextDigest(files, runtimeBaseImage),
    gpuRuntime: {
      image: env.GANTRY_RUNTIME_GPU_IMAGE?.trim() || undefined,
      baseImage: gpuBaseImage,
      packages: gpuPackages,
      digest: runtimeContextDigest(files, `${gpuBaseImage}\0${gpuPackages.join(' ')}`),
    },
    runtimeContextDir: RUNTIME_CONTEXT_DIR,
    debianMirror: env.GANTRY_DEBIAN_MIRROR?.trim().replace(/\/+$/, '') || undefined,
    artifactCacheDir: env.GANTRY_ARTIFACT_CACHE_DIR?.trim().replace(/\/+$/, '') || '/var/tmp/gantry/artifacts',
    flashRuntime: {
      image: env.GANTRY_FLASH_RUNTIME_IMAGE?.trim() || undefined,
      gpuImage: env.GANTRY_FLASH_RUNTIME_GPU_IMAGE?.trim() || undefined,
      baseImage: flashBase,
      gpuBaseImage,
      packages: flashPackages,
      gpuPackages: flashGpuPackages,
      digest: runtimeContextDigest(files, `${flashBase}\0${flashPackages.join(' ')}\0${FLASH_RUNTIME_MODULE}`),
      gpuDigest: runtimeContextDigest(files, `${gpuBaseImage}\0${flashGpuPackages.join(' ')}\0${FLASH_RUNTIME_MODULE}`),
      contextDir: RUNTIME_CONTEXT_DIR,
    },
  };
}

/** GANTRY_BLOB_STORE and its companions; an s3 store's problems are collected with the others. */
function blobStoreSettings(env: GantryEnvironment, dataDir: string, problems: string[]): BlobStoreSettings {
  if ((env.GANTRY_BLOB_STORE ?? 'directory') === 'directory') {
    return { kind: 'directory', dir: path.resolve(env.GANTRY_BLOB_DIR ?? path.join(dataDir, 'blobs')) };
  }
  const bucket = env.GANTRY_S3_BUCKET?.trim() ?? '';
  if (!bucket) problems.push('GANTRY_S3_BUCKET is required with GANTRY_BLOB_STORE=s3');
  const endpoint = env.GANTRY_S3_ENDPOINT?.trim().replace(/\/+$/, '') || undefined;
  if (endpoint !== undefined) {
    let protocol = '';
    try {
      protocol = new URL(endpoint).protocol;
    } catch {
      // reported below
    }
    if (protocol !== 'http:' && protocol !== 'https:')
      problems.push(`GANTRY_S3_ENDPOINT must be an http(s) URL, got "${endpoint}"`);
  }
  const accessKeyId = env.GANTRY_S3_ACCESS_KEY_ID;
  const secretAccessKey = env.GANTRY_S3_SECRET_ACCESS_KEY;
  // Neither: the AWS SDK's own credential chain (environment, profile, instance role).
  if ((accessKeyId === undefined) !== (secretAccessKey === undefined))
    problems.push('GANTRY_S3_ACCESS_KEY_ID and GANTRY_S3_SECRET_ACCESS_KEY go together: set both or neither');
  const prefix = env.GANTRY_S3_PREFIX?.trim().replace(/^\/+|\/+$/g, '') || undefined;
  if (prefix !== undefined) {
    try {
      validateBlobKey(prefix, 'prefix');
    } catch (err) {
      problems.push(`GANTRY_S3_PREFIX: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
  return {
    kind: 's3',
    endpoint,
    region: env.GANTRY_S3_REGION?.trim() || 'us-east-1',
    bucket,
    accessKeyId,
    secretAccessKey,
    forcePathStyle:
      env.GANTRY_S3_FORCE_PATH_STYLE === undefined ||
      env.GANTRY_S3_FORCE_PATH_STYLE === 'true' ||
      env.GANTRY_S3_FORCE_PATH_STYLE === '1',
    prefix,
  };
}

/** GANTRY_TLS_CERT and GANTRY_TLS_KEY: both or neither, read and checked now so a bad pair stops the start. */
function tlsFiles(env: GantryEnvironment, lbDomain: string | undefined, problems: string[]): TlsFiles | undefined {
  const certFile = env.GANTRY_TLS_CERT?.trim() || undefined;
  const keyFile = env.GANTRY_TLS_KEY?.trim() || undefined;
  if (!certFile && !keyFile) return undefined;
  if (!certFile || !keyFile) {
    problems.push('GANTRY_TLS_CERT and GANTRY_TLS_KEY go together: set both or neither');
    return undefined;
  }
  const files = { certFile: path.resolve(certFile), keyFile: path.resolve(keyFile) };
  return parsed(problems, undefined, () => (readTlsCredentials(files, lbDomain), files));
}

/**
 * Reads the environment once: every variable's shape is checked against ENVIRONMENT_SCHEMA, every
 * value parsed, and all problems are reported together, each naming its variable.
 */
export function loadConfig(rawEnv: NodeJS.ProcessEnv = process.env): GantryConfig {
  // Empty means unset, as shells and compose files write it.
  const cleaned = Object.fromEntries(Object.entries(rawEnv).filter(([, v]) => v !== undefined && v !== ''));
  let env: GantryEnvironment;
  try {
    env = validate(ENVIRONMENT_SCHEMA, cleaned);
  } catch (err) {
    if (err instanceof DomainError)
      throw new Error(`configuration: ${(err.errors ?? [err.message]).map((e) => e.replace(/^\$\./, '')).join('; ')}`);
    throw err;
  }
  const problems: string[] = [];
  const port = intOf(env.PORT, 8080);
  const host = env.GANTRY_HOST ?? '127.0.0.1';
  const cacheHome = env.XDG_CACHE_HOME ?? path.join(homedir(), '.cache');

  const orchestration = parsed(problems, parseOrchestrationSettings(undefined), () =>
    parseOrchestrationSettings(env.GANTRY_ORCHESTRATION),
  );
  // One interval for what workers are told and for how their loss is detected: GANTRY_ORCHESTRATION
  // may name it too, and then it must agree.
  const pingIntervalMs = positive(
    'GANTRY_WORKER_PING_INTERVAL_MS',
    env.GANTRY_WORKER_PING_INTERVAL_MS,
    orchestration.pingIntervalMs,
    problems,
  );
  if (
    env.GANTRY_WORKER_PING_INTERVAL_MS !== undefined &&
    orchestration.pingIntervalMs !== parseOrchestrationSettings(undefined).pingIntervalMs &&
    orchestration.pingIntervalMs !== pingIntervalMs
  ) {
    problems.push(
      `GANTRY_WORKER_PING_INTERVAL_MS (${pingIntervalMs}) and GANTRY_ORCHESTRATION's pingIntervalMs (${orchestration.pingIntervalMs}) disagree; set one`,
    );
  }
  orchestration.pingIntervalMs = pingIntervalMs;
  const jobs = jobSettings({
    pingIntervalMs,
    takeHoldMs: intOf(env.GANTRY_JOB_TAKE_HOLD_MS, 30_000),
    signalDelayMs: intOf(env.GANTRY_JOB_SIGNAL_DELAY_MS, 100),
    unsignalledGraceMs: intOf(env.GANTRY_JOB_UNSIGNALLED_GRACE_MS, 30_000),
    maxQueuedPerEndpoint: intOf(env.GANTRY_MAX_QUEUED_JOBS, 10_000),
    maxWorkflowBacklog: positive('GANTRY_JOB_WORKFLOW_BACKLOG', env.GANTRY_JOB_WORKFLOW_BACKLOG, 20_000, problems),
    retention: {
      runMs: intOf(env.GANTRY_JOB_RETENTION_MS, 30 * 60_000),
      syncMs: intOf(env.GANTRY_JOB_SYNC_RETENTION_MS, 60_000),
    },
  });
  const settings: PlatformSettings = {
    workerEgress: env.GANTRY_WORKER_EGRESS ?? 'private',
    allowUnwalledDocker: env.GANTRY_ALLOW_UNWALLED_DOCKER === 'true' || env.GANTRY_ALLOW_UNWALLED_DOCKER === '1',
    lbDomain:
      env.GANTRY_LB_DOMAIN?.trim()
        .replace(/^\.+|\.+$/g, '')
        .toLowerCase() || undefined,
    lbHealth: parsed(problems, parseLbHealthSettings(undefined), () => parseLbHealthSettings(env.GANTRY_LB_HEALTH)),
    webhookAllow: parsed(problems, parseWebhookAllowList(undefined), () =>
      parseWebhookAllowList(env.GANTRY_WEBHOOK_ALLOW),
    ),
    pricesFile: env.GANTRY_PRICES_FILE,
    jobs,
    limits: {
      management: parsed(problems, DEFAULT_RATE_LIMITS, () =>
        parseRateLimits(env.GANTRY_RATE_LIMITS, DEFAULT_RATE_LIMITS, 'GANTRY_RATE_LIMITS'),
      ),
      jobs: parsed(problems, DEFAULT_JOB_RATE_LIMITS, () =>
        parseRateLimits(env.GANTRY_JOB_RATE_LIMITS, DEFAULT_JOB_RATE_LIMITS, 'GANTRY_JOB_RATE_LIMITS'),
      ),
      proxy: parsed(problems, DEFAULT_PROXY_RATE_LIMITS, () =>
        parseRateLimits(env.GANTRY_PROXY_RATE_LIMITS, DEFAULT_PROXY_RATE_LIMITS, 'GANTRY_PROXY_RATE_LIMITS'),
      ),
      authFailuresPerMinute: positive(
        'GANTRY_AUTH_FAILURES_PER_MINUTE',
        env.GANTRY_AUTH_FAILURES_PER_MINUTE,
        30,
        problems,
      ),
    },
    orchestration,
    prepullHosts: intOf(env.GANTRY_PREPULL_HOSTS, 2),
    apps: appSettings(env, problems),
    outputs: {
      urlTtlMs: positive(
        'GANTRY_OUTPUT_URL_TTL_MS',
        env.GANTRY_OUTPUT_URL_TTL_MS,
        DEFAULT_OUTPUT_SETTINGS.urlTtlMs,
        problems,
      ),
      purgeIntervalMs: positive(
        'GANTRY_OUTPUT_PURGE_INTERVAL_MS',
        env.GANTRY_OUTPUT_PURGE_INTERVAL_MS,
        DEFAULT_OUTPUT_SETTINGS.purgeIntervalMs,
        problems,
      ),
    },
    metrics: {
      rollupIntervalMs: positive(
        'GANTRY_METRICS_ROLLUP_INTERVAL_MS',
        env.GANTRY_METRICS_ROLLUP_INTERVAL_MS,
        DEFAULT_METRICS_SETTINGS.rollupIntervalMs,
        problems,
      ),
    },
    stackTraces: env.NODE_ENV === 'development',
  };
  const dataDir = path.resolve(env.GANTRY_DATA_DIR ?? '.gantry/data');
  const tls = tlsFiles(env, settings.lbDomain, problems);
  const scheme = tls ? 'https' : 'http';
  const config: GantryConfig = {
    role: env.GANTRY_ROLE ?? 'all',
    dataDir,
    host,
    port,
    publicUrl: (env.GANTRY_PUBLIC_URL ?? `${scheme}://${host === '0.0.0.0' ? '127.0.0.1' : host}:${port}`).replace(
      /\/$/,
      '',
    ),
    tls,
    reusePort: env.GANTRY_REUSE_PORT === 'true' || env.GANTRY_REUSE_PORT === '1',
    workerPort: intOf(env.GANTRY_WORKER_PORT, port + 1),
    temporalAddress: env.TEMPORAL_ADDRESS,
    temporalNamespace: env.TEMPORAL_NAMESPACE ?? 'default',
    temporalPort: intOf(env.TEMPORAL_PORT, 7233),
    temporalUiPort: intOf(env.TEMPORAL_UI_PORT, 8233),
    temporalUiUrl: env.TEMPORAL_UI_URL?.replace(/\/+$/, ''),
    temporalCliPath: env.TEMPORAL_CLI_PATH,
    taskQueue: env.GANTRY_TASK_QUEUE ?? 'gantry',
    databaseUrl: env.DATABASE_URL,
    embeddedPostgresPort: intOf(env.GANTRY_PG_PORT, 54329),
    adminApiKey: env.GANTRY_ADMIN_API_KEY,
    secretKey: env.GANTRY_SECRET_KEY,
    logLevel: env.LOG_LEVEL ?? 'info',
    cacheDir: path.join(cacheHome, 'gantry'),
    hostsFile: env.GANTRY_HOSTS_FILE,
    localHost:
      env.GANTRY_LOCAL_HOST === '1'
        ? {
            port: intOf(env.GANTRY_LOCAL_HOST_PORT, 22),
            user: env.GANTRY_LOCAL_HOST_USER,
            keyFile: env.GANTRY_LOCAL_HOST_KEY,
            dataCenterId: env.GANTRY_LOCAL_HOST_DATACENTER ?? 'local',
            labels: parsed(problems, undefined, () => parseLocalHostLabels(env.GANTRY_LOCAL_HOST_LABELS)),
          }
        : undefined,
    settings,
    blobStore: blobStoreSettings(env, dataDir, problems),
  };
  for (const [name, value] of [
    ['PORT', config.port],
    ['GANTRY_WORKER_PORT', config.workerPort],
    ['GANTRY_PG_PORT', config.embeddedPostgresPort],
    ['TEMPORAL_PORT', config.temporalPort],
    ['TEMPORAL_UI_PORT', config.temporalUiPort],
    ['GANTRY_LOCAL_HOST_PORT', config.localHost?.port ?? 22],
  ] as const) {
    if (value > 65_535) problems.push(`${name} must be a port (0-65535), got ${value}`);
  }
  if (config.temporalUiUrl !== undefined && !/^https?:\/\/[^\s"'<>]+$/.test(config.temporalUiUrl))
    problems.push(`TEMPORAL_UI_URL must be an http(s) address, got ${JSON.stringify(config.temporalUiUrl)}`);
  if (problems.length > 0) throw new Error(`configuration: ${problems.join('; ')}`);
  return config;
}
