/**
 * versitygw, an S3-compatible server over a local directory, for the tests that exercise the S3
 * blob store against a real server (never a mock). No npm package ships one; it builds from the Go
 * module proxy, once per machine, into the per-machine cache beside the Temporal CLI
 * (`<cacheDir>/bin`, `~/.cache/gantry/bin` by default). The first build takes about a minute (48 s on a 2-core machine);
 * later calls only check that the binary is there.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, renameSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { loadConfig } from '../../infra/config.ts';
import { stopChild } from '../../infra/temporal.ts';
import { freeLoopbackPort } from './local-port.ts';
import { releaseBuildLock, tryBuildLock } from '../../infra/build-lock.ts';

/** Pinned: the flags startVersityGw passes are the ones this release takes. */
export const VERSITYGW_MODULE = 'github.com/versity/versitygw/cmd/versitygw@v1.8.0';
const BINARY_NAME = 'versitygw-v1.8.0';

/** A build that takes longer than this is taken for dead, and its lock for stale. */
const STALE_LOCK_MS = 30 * 60_000;

function run(command: string, args: string[], env: NodeJS.ProcessEnv, log: (line: string) => void): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    const forward = (chunk: Buffer): void => {
      for (const line of chunk.toString('utf8').split('\n')) if (line.trim()) log(line);
    };
    child.stdout.on('data', forward);
    child.stderr.on('data', forward);
    child.once('error', reject);
    child.once('close', (code) => resolve(code ?? 1));
  });
}

/**
 * The path of a versitygw binary, built with `go install` into `<cacheDir>/bin` when it is not there
 * yet. Several processes (parallel test files) may call this at once: a lock directory lets one
 * build while the others wait for its result.
 */
export async function ensureVersityGw(
  options: { log?: (line: string) => void; cacheDir?: string } = {},
): Promise<string> {
  const log = options.log ?? ((line: string) => console.error(line));
  const binDir = path.join(options.cacheDir ?? loadConfig().cacheDir, 'bin');
  const binary = path.join(binDir, BINARY_NAME);
  if (existsSync(binary)) return binary;
  mkdirSync(binDir, { recursive: true });
  const lock = path.join(binDir, '.building-versitygw');
  while (!tryBuildLock(lock, STALE_LOCK_MS)) {
    await sleep(2000);
    if (existsSync(binary)) return binary;
  }
  try {
    if (existsSync(binary)) return binary;
    // GOBIN is a directory of its own: `go install` names the output after the command, and the
    // cached binary must appear under its versioned name only when it is whole (the rename below).
    const buildBin = path.join(lock, 'bin');
    log(
      `Building versitygw (${VERSITYGW_MODULE}) from the Go module proxy into ${binDir}; this happens once per machine and takes a minute or two.`,
    );
    const started = Date.now();
    const code = await run(
      'go',
      ['install', VERSITYGW_MODULE],
      {
        ...process.env,
        GOBIN: buildBin,
        // Pure Go: no C toolchain needed, and the binary does not depend on this machine's libc.
        CGO_ENABLED: '0',
        // `go install pkg@version` ignores any go.mod around it; a -mod setting inherited from the
        // caller's environment would make it refuse to run.
        GOFLAGS: (process.env.GOFLAGS ?? '')
          .split(/\s+/)
          .filter((f) => f && !f.startsWith('-mod='))
          .join(' '),
      },
      log,
    ).catch((err: unknown) => {
      throw new Error(`cannot run go to build versitygw (install Go 1.24 or later): ${String(err)}`);
    });
    const built = path.join(buildBin, 'versitygw');
    if (code !== 0 || !existsSync(built)) throw new Error(`building versitygw failed (go install exited with ${code})`);
    renameSync(built, binary);
    log(`Built versitygw in ${Math.round((Date.now() - started) / 1000)} s.`);
    return binary;
  } finally {
    releaseBuildLock(lock);
  }
}

export interface RunningVersityGw {
  /** `http://127.0.0.1:<port>`, for the S3 client's endpoint (path-style addressing). */
  endpoint: string;
  port: number;
  stop(): Promise<void>;
}

/** Polls until the gateway answers HTTP (any status: an unsigned request gets an S3 error), or the child exits. */
async function waitForGateway(
  endpoint: string,
  child: ChildProcess,
  timeoutMs: number,
  output: () => string,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`versitygw exited (${child.exitCode ?? child.signalCode}) before answering: ${output()}`);
    }
    try {
      const res = await fetch(endpoint, { signal: AbortSignal.timeout(1000) });
      await res.arrayBuffer();
      return;
    } catch (err) {
      lastError = err;
      await sleep(100);
    }
  }
  throw new Error(`versitygw at ${endpoint} did not answer within ${timeoutMs} ms: ${String(lastError)}; ${output()}`);
}

/**
 * Starts versitygw's POSIX backend over `dir` on a loopback port, with one root account, and waits
 * until it answers. Buckets are directories directly under `dir` (CreateBucket makes one). Without
 * `port`, a free one is picked; a port another process took in between is retried with a new one.
 */
export async function startVersityGw(options: {
  dir: string;
  port?: number;
  accessKey: string;
  secretKey: string;
  binary?: string;
  log?: (line: string) => void;
}): Promise<RunningVersityGw> {
  const binary = options.binary ?? (await ensureVersityGw({ log: options.log }));
  mkdirSync(options.dir, { recursive: true, mode: 0o700 });
  const attempts = options.port === undefined ? 3 : 1;
  let lastError: unknown;
  for (let attempt = 0; attempt < attempts; attempt++) {
    const port = options.port ?? (await freeLoopbackPort());
    // The keys go in the environment, not the argument list, so that `ps` does not show them.
    const child = spawn(binary, ['--quiet', '--port', `127.0.0.1:${port}`, 'posix', options.dir], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, ROOT_ACCESS_KEY_ID: options.accessKey, ROOT_SECRET_ACCESS_KEY: options.secretKey },
    });
    let output = '';
    const keep = (chunk: Buffer): void => {
      output = (output + chunk.toString('utf8')).slice(-4000);
    };
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    // A test process that ends without calling stop() still takes the gateway with it.
    const stopOnExit = (): void => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    };
    process.once('exit', stopOnExit);
    child.once('exit', () => process.off('exit', stopOnExit));
    const endpoint = `http://127.0.0.1:${port}`;
    try {
      await waitForGateway(endpoint, child, 30_000, () => output.trim());
      return { endpoint, port, stop: () => stopChild(child, 5000) };
    } catch (err) {
      lastError = err;
      child.kill('SIGKILL');
    }
  }
  throw lastError;
}
