/**
 * A real image registry for the tests that pull private images (distribution's `registry`, the one
 * Docker Hub's and most self-hosted registries descend from), with htpasswd logins: no mock, and no
 * registry on the internet. No npm package ships one; it builds from the Go module proxy, once per
 * machine, into the per-machine cache beside versitygw and the Temporal CLI (`<cacheDir>/bin`). The
 * first build takes about two minutes (1 min 45 s on a 2-core machine); later calls only check
 * that the binary is there.
 *
 * It serves plain HTTP on loopback: a test host's Podman is told it may (registriesConf, through the
 * SSH session's CONTAINERS_REGISTRIES_CONF), and the test's own pushes say --tls-verify=false.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { loadConfig } from '../../infra/config.ts';
import { releaseBuildLock, tryBuildLock } from '../../infra/build-lock.ts';
import { stopChild } from '../../infra/temporal.ts';
import { freeLoopbackPort } from './local-port.ts';

/** Pinned: the configuration written below is this release's. */
export const REGISTRY_MODULE = 'github.com/distribution/distribution/v3/cmd/registry@v3.0.0';
const BINARY_NAME = 'distribution-registry-v3.0.0';

/** A build that takes longer than this is taken for dead, and its lock for stale. */
const STALE_LOCK_MS = 30 * 60_000;

/**
 * The one login of the test registry. htpasswd needs a bcrypt hash, which neither Node nor this
 * machine's tools make: this one was made once for this password (cost 5, checked by the registry
 * at every login, so a wrong pair here fails the tests that log in).
 */
export const REGISTRY_USER = 'alice';
export const REGISTRY_PASSWORD = 'gantry-test-registry-secret';
const REGISTRY_HTPASSWD = `${REGISTRY_USER}:$2b$05$TGLRJbCf1dlGa0Gvd.m4M.M2RJVFvV.BPfyiCiUctpPRXVHewOOcS`;

/** The path of the registry binary, built with `go install` into `<cacheDir>/bin` when it is not there yet. */
export async function ensureImageRegistry(options: { log?: (line: string) => void } = {}): Promise<string> {
  const log = options.log ?? ((line: string) => console.error(line));
  const binDir = path.join(loadConfig().cacheDir, 'bin');
  const binary = path.join(binDir, BINARY_NAME);
  if (existsSync(binary)) return binary;
  mkdirSync(binDir, { recursive: true });
  const lock = path.join(binDir, '.building-registry');
  // Several test files may ask at once: one builds, the others wait for its result.
  while (!tryBuildLock(lock, STALE_LOCK_MS)) {
    await sleep(2000);
    if (existsSync(binary)) return binary;
  }
  try {
    if (existsSync(binary)) return binary;
    // GOBIN is a directory of its own, so the cached binary appears under its versioned name only when whole.
    const buildBin = path.join(lock, 'bin');
    log(`Building the image registry (${REGISTRY_MODULE}) from the Go module proxy into ${binDir}; once per machine.`);
    const started = Date.now();
    const code = await new Promise<number>((resolve, reject) => {
      const child = spawn('go', ['install', REGISTRY_MODULE], {
        stdio: ['ignore', 'pipe', 'pipe'],
        env: {
          ...process.env,
          GOBIN: buildBin,
          CGO_ENABLED: '0',
          // `go install pkg@version` refuses an inherited -mod flag.
          GOFLAGS: (process.env.GOFLAGS ?? '')
            .split(/\s+/)
            .filter((f) => f && !f.startsWith('-mod='))
            .join(' '),
        },
      });
      const forward = (chunk: Buffer): void => {
        for (const line of chunk.toString('utf8').split('\n')) if (line.trim()) log(line);
      };
      child.stdout.on('data', forward);
      child.stderr.on('data', forward);
      child.once('error', reject);
      child.once('close', (c) => resolve(c ?? 1));
    }).catch((err: unknown) => {
      throw new Error(`cannot run go to build the image registry (install Go 1.24 or later): ${String(err)}`);
    });
    const built = path.join(buildBin, 'registry');
    if (code !== 0 || !existsSync(built))
      throw new Error(`building the image registry failed (go install exited with ${code})`);
    renameSync(built, binary);
    log(`Built the image registry in ${Math.round((Date.now() - started) / 1000)} s.`);
    return binary;
  } finally {
    releaseBuildLock(lock);
  }
}

export interface RunningImageRegistry {
  /** `127.0.0.1:<port>`: the registry part of its image names. */
  host: string;
  /**
   * A registries.conf that lets Podman pull from it over plain HTTP: a test host's sessions get it as
   * CONTAINERS_REGISTRIES_CONF (startSshTestHost's sessionEnv).
   */
  registriesConf: string;
  /** Pushes a local image to `<host>/<name>` with the registry's login; the name is not tagged locally. */
  push(localImage: string, name: string): void;
  stop(): Promise<void>;
}

/** Starts the registry on a free loopback port over a new storage directory, with the one htpasswd login. */
export async function startImageRegistry(
  options: { log?: (line: string) => void } = {},
): Promise<RunningImageRegistry> {
  const binary = await ensureImageRegistry(options);
  const dir = mkdtempSync(path.join(tmpdir(), 'gantry-registry-'));
  writeFileSync(path.join(dir, 'htpasswd'), `${REGISTRY_HTPASSWD}\n`, { mode: 0o600 });
  let lastError: unknown;
  for (let attempt = 0; attempt < 3; attempt++) {
    const port = await freeLoopbackPort();
    const host = `127.0.0.1:${port}`;
    const config = path.join(dir, 'config.yml');
    writeFileSync(
      config,
      [
        'version: 0.1',
        'log:',
        '  level: error',
        'storage:',
        '  filesystem:',
        `    rootdirectory: ${path.join(dir, 'data')}`,
        'http:',
        `  addr: ${host}`,
        'auth:',
        '  htpasswd:',
        '    realm: gantry-test',
        `    path: ${path.join(dir, 'htpasswd')}`,
        '',
      ].join('\n'),
    );
    const registriesConf = path.join(dir, 'registries.conf');
    writeFileSync(registriesConf, `[[registry]]\nlocation = "${host}"\ninsecure = true\n`);
    const child = spawn(binary, ['serve', config], { stdio: ['ignore', 'ignore', 'pipe'] });
    let output = '';
    child.stderr.on('data', (c: Buffer) => {
      output = (output + c.toString('utf8')).slice(-4000);
    });
    const stopOnExit = (): void => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    };
    process.once('exit', stopOnExit);
    child.once('exit', () => process.off('exit', stopOnExit));
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline && child.exitCode === null) {
      // Without a login the API root answers 401: it is up.
      const status = await fetch(`http://${host}/v2/`, { signal: AbortSignal.timeout(1000) })
        .then((r) => r.status)
        .catch(() => 0);
      if (status === 401) {
        return {
          host,
          registriesConf,
          push(localImage, name) {
            const r = spawnSync(
              'podman',
              [
                'push',
                '--quiet',
                '--tls-verify=false',
                '--creds',
                `${REGISTRY_USER}:${REGISTRY_PASSWORD}`,
                localImage,
                `${host}/${name}`,
              ],
              { encoding: 'utf8' },
            );
            if (r.status !== 0) throw new Error(`podman push ${localImage} ${host}/${name} failed: ${r.stderr}`);
          },
          async stop() {
            await stopChild(child, 5000);
            rmSync(dir, { recursive: true, force: true });
          },
        };
      }
      await sleep(100);
    }
    lastError = new Error(`the registry at ${host} did not come up: ${output.trim()}`);
    child.kill('SIGKILL');
  }
  rmSync(dir, { recursive: true, force: true });
  throw lastError;
}
