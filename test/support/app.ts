import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import type { FastifyInstance } from 'fastify';
import { inject } from 'vitest';
import { buildApp, type AppOptions } from '../../api/server.ts';
import { ensureAdmin } from '../../domain/accounts/index.ts';
import { createBlobStore } from '../../domain/blobs/index.ts';
import type { DomainContext } from '../../domain/context.ts';
import { createDb } from '../../domain/shared/index.ts';
import { randomString } from '../../domain/shared/index.ts';
import { RateLimiter } from '../../domain/rate-limits/index.ts';
import { RecordCaches } from '../../domain/shared/index.ts';
import { SecretBox } from '../../domain/shared/index.ts';
import { SshPool } from '../../hostctl/ssh.ts';
import { loadConfig } from '../../infra/config.ts';
import { createJobRuntime } from '../../infra/job-runtime.ts';
import { freshDatabase } from './databases.ts';

/** What `call` in ./platform.ts answers, so that a test reads the same whether it went over HTTP or not. */
export interface Answer {
  status: number;
  headers: Headers;
  body: any; // eslint-disable-line @typescript-eslint/no-explicit-any -- tests read arbitrary JSON
}

export interface CallOptions {
  key?: string;
  body?: unknown;
  rawBody?: string;
  headers?: Record<string, string>;
  /** The client's address (default 127.0.0.1): the failed-authentication throttle counts per address. */
  remoteAddress?: string;
}

/** `call` (./platform.ts) through `app.inject`: the whole request lifecycle of the app, no socket. */
export async function injectCall(
  app: FastifyInstance,
  method: string,
  route: string,
  opts: CallOptions = {},
): Promise<Answer> {
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.key) headers.authorization = `Bearer ${opts.key}`;
  let payload: string | undefined;
  if (opts.rawBody !== undefined) payload = opts.rawBody;
  else if (opts.body !== undefined) payload = JSON.stringify(opts.body);
  if (payload !== undefined) headers['content-type'] ??= 'application/json';
  const res = await app.inject({
    method: method as 'GET',
    url: route,
    headers,
    ...(payload !== undefined ? { payload } : {}),
    ...(opts.remoteAddress ? { remoteAddress: opts.remoteAddress } : {}),
  });
  const answerHeaders = new Headers();
  for (const [name, value] of Object.entries(res.headers)) {
    if (value === undefined) continue;
    for (const v of Array.isArray(value) ? value : [value]) answerHeaders.append(name, String(v));
  }
  let body: unknown = res.body;
  try {
    body = res.body ? JSON.parse(res.body) : undefined;
  } catch {
    // not JSON: keep the text
  }
  return { status: res.statusCode, headers: answerHeaders, body };
}

export interface TestApp {
  app: FastifyInstance;
  ctx: DomainContext;
  /** A key with every scope of the admin account. */
  adminKey: string;
  databaseUrl: string;
  call(method: string, route: string, opts?: CallOptions): Promise<Answer>;
  /** Another app (another API process) on the same database, with its own pool and options. */
  another(opts?: Partial<AppOptions>): Promise<{ app: FastifyInstance; call: TestApp['call']; close(): Promise<void> }>;
  stop(): Promise<void>;
}

/**
 * The API alone (api/server.ts buildApp), for tests that need no network: a fresh database of the
 * suite's migrated template, a client of the suite's Temporal server and the job runtime the
 * composition root would build, but no Temporal worker (workflows that routes start stay queued),
 * no background tasks and no listening socket. Starts in about a second, where startTestPlatform
 * bundles workflows and starts a worker.
 */
export async function startTestApp(
  options: Partial<AppOptions> & { revocationBoundMs?: number } = {},
): Promise<TestApp> {
  // A test may shorten or lengthen the record caches' revocation bound (domain/shared/record-cache.ts).
  const { revocationBoundMs, ...opts } = options;
  const databaseUrl = await freshDatabase();
  const db = createDb(databaseUrl, 4);
  const connection = await Connection.connect({ address: inject('temporalAddress') });
  const secrets = SecretBox.fromKey(randomBytes(32).toString('hex'));
  const config = loadConfig();
  const ctx: DomainContext = {
    db,
    temporal: new Client({ connection }),
    taskQueue: `inject-${randomString(8)}`,
    publicUrl: 'http://127.0.0.1:8080',
    secrets,
    ssh: new SshPool(),
    records: new RecordCaches(revocationBoundMs),
    // The settings the environment gives (a test sets GANTRY_* variables before it starts the app).
    settings: config.settings,
    blobs: createBlobStore(
      config.blobStore.kind === 'directory'
        ? { kind: 'directory', dir: mkdtempSync(path.join(tmpdir(), 'gantry-blobs-')) }
        : config.blobStore,
    ),
    signingKey: secrets.derive('signed-urls'),
  };
  const adminKey = `gntr_test_${randomString(32)}`;
  await ensureAdmin(db, adminKey);
  const closers: Array<() => Promise<unknown>> = [];
  /** An app on `appCtx` with its own job runtime, as infra/platform.ts builds them; closing stops both. */
  const start = async (appCtx: DomainContext, appOpts: Partial<AppOptions>) => {
    const jobs = createJobRuntime(appCtx, () => {});
    appCtx.jobs = jobs;
    await jobs.start();
    appCtx.rateLimiter = new RateLimiter(appCtx.db);
    const app = buildApp(appCtx, { logLevel: 'silent', ...appOpts });
    app.addHook('onClose', async () => jobs.stop());
    await app.ready();
    return app;
  };
  const app = await start(ctx, opts);
  return {
    app,
    ctx,
    adminKey,
    databaseUrl,
    call: (method, route, callOpts) => injectCall(app, method, route, callOpts),
    async another(anotherOpts = {}) {
      const anotherDb = createDb(databaseUrl, 4);
      // Its own context object: the job runtime and the record caches are per context.
      const other = await start(
        { ...ctx, db: anotherDb, records: new RecordCaches(revocationBoundMs), rateLimiter: undefined },
        anotherOpts,
      );
      let closed = false;
      const close = async (): Promise<void> => {
        if (closed) return;
        closed = true;
        await other.close();
        await anotherDb.$disconnect();
      };
      closers.push(close);
      return { app: other, call: (method, route, callOpts) => injectCall(other, method, route, callOpts), close };
    },
    async stop() {
      for (const close of closers) await close();
      await app.close();
      await ctx.ssh.close();
      await db.$disconnect();
      await connection.close();
    },
  };
}
