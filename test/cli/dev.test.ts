/**
 * `gantry dev` as a user runs it: the real CLI as a long-running child process in a temporary
 * project, against the whole platform with an SSH test host in front of this machine's Podman
 * (set up as test/integration/cli-deploy.test.ts does). Calls to the local server run on real
 * live endpoints (`live-<name>`), which reload saved files without a redeploy (docs/dev-loop.md).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAppsPlatform, until, type OneHostPlatform } from '../support/orchestration.ts';
import { call, type TestPlatform } from '../support/platform.ts';
import { freePort } from '../support/ports.ts';
import { cliEnv, gantry, gantryBin, tempDir } from '../support/cli.ts';

let fixture: OneHostPlatform | undefined;
let p: TestPlatform;
const root = tempDir('gantry-dev-');
const home = path.join(root, 'home');
const project = path.join(root, 'devshop');

const CPU_WORKER = (v: number, workers = '(0, 1)', idle = 60): string => `from gantry import endpoint


@endpoint(name="adder", cpu="cpu3c-2-4", workers=${workers}, idle_timeout=${idle})
def add(a: int, b: int = 1) -> dict:
    """Adds two numbers.

    The rest of the docstring is not the summary.
    """
    return {"sum": a + b, "v": ${v}}
`;

const LB_WORKER = (v: number): string => `from gantry import Endpoint

api = Endpoint(name="api", cpu="cpu3c-2-4", workers=(0, 1), idle_timeout=60)


@api.post("/process")
def process(body: dict) -> dict:
    """Counts the words of a text."""
    return {"words": len(str(body.get("text", "")).split()), "v": ${v}}


@api.get("/health")
def health(query: dict) -> dict:
    """Says the worker is up."""
    return {"status": "ok", "query": query}
`;

interface Dev {
  url: string;
  port: number;
  output(): string;
  /** Where the output is now: a later waitFor from here ignores what came before. */
  mark(): number;
  waitFor(pattern: RegExp, from?: number, timeoutMs?: number): Promise<string>;
  /** Ctrl+C; resolves with the exit code. */
  stop(): Promise<number | null>;
}

const running = new Set<ChildProcess>();

/** Spawns `gantry dev` (it keeps running) and resolves once it says where it listens. */
async function startDev(cwd: string, args: string[] = [], env: Record<string, string> = {}): Promise<Dev> {
  mkdirSync(home, { recursive: true });
  const child = spawn(process.execPath, [gantryBin, 'dev', '--host', '127.0.0.1', ...args], {
    cwd,
    env: cliEnv(home, { SERVICE_API_KEY: p.adminKey, GANTRY_API_URL: p.url, ...env }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  running.add(child);
  let out = '';
  const listeners = new Set<() => void>();
  const onData = (chunk: Buffer): void => {
    out += chunk.toString();
    for (const l of [...listeners]) l();
  };
  child.stdout!.on('data', onData);
  child.stderr!.on('data', onData);
  const exited = new Promise<number | null>((resolve) =>
    child.on('exit', (code) => {
      running.delete(child);
      for (const l of [...listeners]) l();
      resolve(code);
    }),
  );
  const waitFor = (pattern: RegExp, from = 0, timeoutMs = 300_000): Promise<string> =>
    new Promise((resolve, reject) => {
      const done = (): void => {
        clearTimeout(timer);
        listeners.delete(check);
      };
      const check = (): void => {
        const m = pattern.exec(out.slice(from));
        if (m) {
          done();
          resolve(m[0]);
        } else if (child.exitCode !== null || child.signalCode !== null) {
          done();
          reject(new Error(`gantry dev ended (${child.exitCode ?? child.signalCode}) before ${pattern}:\n${out}`));
        }
      };
      const timer = setTimeout(() => {
        done();
        reject(new Error(`timed out waiting for ${pattern}:\n${out}`));
      }, timeoutMs);
      listeners.add(check);
      check();
    });
  const line = await waitFor(/listening on http:\/\/\S+/, 0, 120_000);
  const url = /http:\/\/\S+/.exec(line)![0];
  return {
    url,
    port: Number(new URL(url).port),
    output: () => out,
    mark: () => out.length,
    waitFor,
    stop: async () => {
      child.kill('SIGINT');
      const killer = setTimeout(() => child.kill('SIGKILL'), 20_000);
      const code = await exited;
      clearTimeout(killer);
      if (code !== 0) console.log(`gantry dev ended with ${code ?? child.signalCode}:\n${out}`);
      return code;
    },
  };
}

function liveState(dir = project): {
  build: { id: string };
  resources: Record<string, { endpointId: string; url: string; kind: string; configHash: string }>;
  source?: { version: number };
} {
  return JSON.parse(readFileSync(path.join(dir, '.gantry', 'live.json'), 'utf8'));
}

/** The endpoints of an app's live environment, in the platform's database. */
const liveEndpoints = (app: string) =>
  p.ctx.db.endpoint.findMany({
    where: { appEnvironment: { name: 'live', app: { name: app } }, deletingAt: null },
    orderBy: { name: 'asc' },
  });

/** A call through the local server that must answer 200 (the output of gantry dev explains a failure). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- JSON
async function devCall(dev: Dev, method: string, route: string, body?: unknown): Promise<any> {
  const r = await call(dev.url, method, route, { body });
  expect(r.status, `${method} ${route}: ${JSON.stringify(r.body)}\n${dev.output()}`).toBe(200);
  return r.body;
}

beforeAll(async () => {
  fixture = await startAppsPlatform('dev-box', path.join(root, 'host-cache'));
  p = fixture.p;
  mkdirSync(project, { recursive: true });
  writeFileSync(path.join(project, 'gantry.toml'), '[project]\nname = "devshop"\npython_version = "3.11"\n');
  writeFileSync(path.join(project, 'cpu_worker.py'), CPU_WORKER(1));
  writeFileSync(path.join(project, 'lb_worker.py'), LB_WORKER(1));
}, 900_000);

afterAll(async () => {
  for (const child of running) child.kill('SIGKILL');
  await fixture?.stop();
}, 180_000);

describe('gantry dev on real live endpoints', () => {
  let dev: Dev;
  let ids: Record<string, string>;

  it('makes a live endpoint on the first call to it, and the call answers', async () => {
    dev = await startDev(project, ['--port', String(await freePort())]);
    const health = await devCall(dev, 'GET', '/');
    expect(health).toMatchObject({ status: 'ok', app: 'devshop', environment: 'live' });
    expect(health.resources.map((r: { name: string; provisioned: boolean }) => [r.name, r.provisioned])).toEqual([
      ['adder', false],
      ['api', false],
    ]);
    expect(await liveEndpoints('devshop')).toEqual([]);

    // The first call waits for the endpoint, then answers what the platform's /runsync answers;
    // two first calls at once share one provisioning.
    const [job, twin] = await Promise.all([
      devCall(dev, 'POST', '/adder/runsync', { input: { a: 2, b: 3 } }),
      devCall(dev, 'POST', '/adder/runsync', { input: { a: 1, b: 1 } }),
    ]);
    expect(job).toMatchObject({ status: 'COMPLETED', output: { sum: 5, v: 1 } });
    expect(twin).toMatchObject({ status: 'COMPLETED', output: { sum: 2, v: 1 } });
    expect(dev.output().match(/creating the live endpoint live-adder/g)).toHaveLength(1);
    expect(dev.output()).toMatch(/First call to adder .*creating the live endpoint live-adder/);
    expect(dev.output().match(/live-adder created in/g)).toHaveLength(1);
    // A function's own error is the job's FAILED answer, not the server's.
    const bad = await devCall(dev, 'POST', '/adder/runsync', { input: { b: 1 } });
    expect(bad.status).toBe('FAILED');

    // Load-balanced: the same method, path, query and body on the endpoint.
    expect(await devCall(dev, 'POST', '/api/process', { text: 'one two three' })).toEqual({ words: 3, v: 1 });
    expect(await devCall(dev, 'GET', '/api/health?who=me')).toEqual({ status: 'ok', query: { who: 'me' } });
    expect((await call(dev.url, 'GET', '/api/nowhere')).status).toBe(404);
    expect((await call(dev.url, 'GET', '/api/process')).status).toBe(405);
    expect((await call(dev.url, 'POST', '/nobody/runsync', { body: { input: {} } })).status).toBe(404);

    const state = liveState();
    expect(Object.keys(state.resources).sort()).toEqual(['adder', 'api']);
    const rows = await liveEndpoints('devshop');
    expect(rows.map((e) => e.name)).toEqual(['live-adder', 'live-api']);
    ids = Object.fromEntries(Object.entries(state.resources).map(([name, r]) => [name, r.endpointId]));
    expect(rows.map((e) => e.id).sort()).toEqual(Object.values(ids).sort());
    const after = await devCall(dev, 'GET', '/');
    expect(after.resources.every((r: { provisioned: boolean }) => r.provisioned)).toBe(true);
  }, 900_000);

  it('serves /docs: an explorer listing every function with its summary, no CDN', async () => {
    const page = await fetch(`${dev.url}/docs`);
    expect(page.status).toBe(200);
    const html = await page.text();
    expect(html).toMatch(/swagger-ui/i);
    // Every script and stylesheet comes from the dev server itself.
    for (const m of html.matchAll(/(?:src|href)="([^"]+)"/g)) expect(m[1]).not.toMatch(/^(https?:)?\/\//);

    const doc = (await call(dev.url, 'GET', '/docs/json')).body;
    expect(doc.paths['/adder/runsync'].post.summary).toBe('Adds two numbers.');
    expect(doc.paths['/api/process'].post.summary).toBe('Counts the words of a text.');
    expect(doc.paths['/api/health'].get.summary).toBe('Says the worker is up.');
    const input = doc.paths['/adder/runsync'].post.requestBody.content['application/json'].schema.properties.input;
    expect(input.properties).toEqual({ a: { type: 'integer' }, b: { type: 'integer', default: 1 } });
    expect(input.required).toEqual(['a']);
    expect((await call(dev.url, 'GET', '/openapi.json')).body).toEqual(doc);
  });

  it('reloads a saved edit: the live endpoints answer with the new code, no redeploy', async () => {
    const buildBefore = liveState().build.id;
    // Warm workers: what is measured is the reload, not a cold start.
    await devCall(dev, 'POST', '/adder/runsync', { input: { a: 1 } });
    await devCall(dev, 'POST', '/api/process', { text: 'warm' });

    /**
     * Milliseconds from writing the file to the first call that answers with the new code. A
     * rename-save writes a temporary file and renames it over the old one, as `sed -i` and many
     * editors' safe-save do; the file must stay watched for the saves after it.
     */
    const timeReload = async (
      file: string,
      content: string,
      answersNew: () => Promise<boolean>,
      save: 'in-place' | 'rename' = 'in-place',
    ): Promise<number> => {
      const started = performance.now();
      if (save === 'rename') {
        writeFileSync(path.join(project, `.${file}.swp`), content);
        renameSync(path.join(project, `.${file}.swp`), path.join(project, file));
      } else writeFileSync(path.join(project, file), content);
      await until(`the new code of ${file}`, answersNew, 60_000, 20);
      return Math.round(performance.now() - started);
    };
    const queueAnswers = (v: number) => async () =>
      (await call(dev.url, 'POST', '/adder/runsync', { body: { input: { a: 1 } } })).body?.output?.v === v;
    const from = dev.mark();
    const queueMs = [
      await timeReload('cpu_worker.py', CPU_WORKER(20), queueAnswers(20), 'rename'),
      await timeReload('cpu_worker.py', CPU_WORKER(2), queueAnswers(2)),
    ];
    const lbMs = await timeReload(
      'lb_worker.py',
      LB_WORKER(2),
      async () => (await call(dev.url, 'POST', '/api/process', { body: { text: 'a b' } })).body?.v === 2,
    );
    await dev.waitFor(/lb_worker\.py changed: source uploaded as version \d+/, from);
    const uploads =
      dev
        .output()
        .slice(from)
        .match(/.*changed: source uploaded as version.*/g) ?? [];
    console.log(
      `gantry dev: saving a file to the first call answering with the new code: queue ${queueMs.join(' ms, ')} ms; load-balanced ${lbMs} ms\n${uploads.join('\n')}`,
    );

    // The same endpoints and build: only the source went up.
    expect(liveState().build.id).toBe(buildBefore);
    expect(Object.fromEntries(Object.entries(liveState().resources).map(([n, r]) => [n, r.endpointId]))).toEqual(ids);
    for (const ms of [...queueMs, lbMs]) expect(ms).toBeLessThan(10_000);
  }, 300_000);

  it('keeps the last good code when a saved file does not parse', async () => {
    const from = dev.mark();
    writeFileSync(path.join(project, 'cpu_worker.py'), `${CPU_WORKER(9)}\ndef broken(:\n    pass\n`);
    await dev.waitFor(/cpu_worker\.py:\d+.*keeping the last good code/, from, 30_000);
    expect((await devCall(dev, 'POST', '/adder/runsync', { input: { a: 1 } })).output.v).toBe(2);

    writeFileSync(path.join(project, 'cpu_worker.py'), CPU_WORKER(3));
    await until(
      'the fixed code',
      async () => (await call(dev.url, 'POST', '/adder/runsync', { body: { input: { a: 1 } } })).body?.output?.v === 3,
      60_000,
      50,
    );
  }, 120_000);

  it('updates a live endpoint whose configuration changed, in place', async () => {
    const hashBefore = liveState().resources.adder!.configHash;
    const from = dev.mark();
    writeFileSync(path.join(project, 'cpu_worker.py'), CPU_WORKER(3, '(0, 2)'));
    await dev.waitFor(/resource adder configuration changed: updating the live endpoint live-adder/, from, 30_000);
    await dev.waitFor(/live-adder updated in/, from, 300_000);
    // No pip for a configuration change: the dependencies of the last build are reused.
    expect(dev.output().slice(from)).toMatch(/dependencies reused/);

    const row = await p.ctx.db.endpoint.findUniqueOrThrow({ where: { id: ids.adder! } });
    expect(row.workersMax).toBe(2);
    const state = liveState();
    expect(state.resources.adder!.endpointId).toBe(ids.adder);
    expect(state.resources.adder!.configHash).not.toBe(hashBefore);
    expect((await devCall(dev, 'POST', '/adder/runsync', { input: { a: 4, b: 4 } })).output).toEqual({ sum: 8, v: 3 });
    expect((await liveEndpoints('devshop')).length).toBe(2);
  }, 600_000);

  it('rebuilds when the dependencies change and updates the live endpoints in place', async () => {
    const buildBefore = liveState().build.id;
    const from = dev.mark();
    writeFileSync(path.join(project, 'requirements.txt'), 'six==1.17.0\n');
    const withSix = CPU_WORKER(3, '(0, 2)')
      .replace('from gantry import endpoint', 'import six\nfrom gantry import endpoint')
      .replace('"v": 3}', '"v": 3, "six": six.__version__}');
    writeFileSync(path.join(project, 'cpu_worker.py'), withSix);
    await dev.waitFor(/dependencies changed: rebuilding and updating live-adder, live-api/, from, 60_000);
    await dev.waitFor(/Live endpoints ready: 0 created, 2 updated/, from, 600_000);
    expect(dev.output().slice(from)).toMatch(/Installed the dependencies/);
    expect(liveState().build.id).not.toBe(buildBefore);
    await until(
      'the code that imports six',
      async () =>
        (await call(dev.url, 'POST', '/adder/runsync', { body: { input: { a: 1 } } })).body?.output?.six === '1.17.0',
      300_000,
      250,
    );
    expect(Object.fromEntries(Object.entries(liveState().resources).map(([n, r]) => [n, r.endpointId]))).toEqual(ids);

    // The dependency stays; the code goes back to not using it: a source upload, no build.
    const buildNow = liveState().build.id;
    const reverted = dev.mark();
    writeFileSync(path.join(project, 'cpu_worker.py'), CPU_WORKER(3, '(0, 2)'));
    await dev.waitFor(/cpu_worker\.py changed: source uploaded as version \d+/, reverted, 30_000);
    await until(
      'the code without six',
      async () =>
        (await call(dev.url, 'POST', '/adder/runsync', { body: { input: { a: 1 } } })).body?.output?.six === undefined,
      60_000,
      50,
    );
    expect(liveState().build.id).toBe(buildNow);
  }, 900_000);

  it('restarts from .gantry/live.json: the same endpoints, none made', async () => {
    expect(await dev.stop()).toBe(0);
    expect(dev.output()).toMatch(/Stopped\. The live endpoints stay/);
    const before = await liveEndpoints('devshop');

    dev = await startDev(project, ['--port', String(await freePort())]);
    expect((await devCall(dev, 'POST', '/adder/runsync', { input: { a: 1, b: 1 } })).output).toEqual({ sum: 2, v: 3 });
    expect((await devCall(dev, 'POST', '/api/process', { text: 'x' })).v).toBe(2);
    expect(dev.output()).not.toMatch(/creating the live endpoint|updating the live endpoint/);
    const after = await liveEndpoints('devshop');
    expect(after.map((e) => [e.id, e.name])).toEqual(before.map((e) => [e.id, e.name]));
    expect(Object.fromEntries(Object.entries(liveState().resources).map(([n, r]) => [n, r.endpointId]))).toEqual(ids);
  }, 600_000);

  it('updates an endpoint whose configuration changed while dev was stopped, on its next call', async () => {
    expect(await dev.stop()).toBe(0);
    writeFileSync(path.join(project, 'cpu_worker.py'), CPU_WORKER(4, '(0, 2)', 61));
    dev = await startDev(project, ['--port', String(await freePort())]);
    expect(dev.output()).toMatch(
      /resource adder configuration changed since live-adder was made: it is updated on its next call/,
    );
    expect((await devCall(dev, 'POST', '/adder/runsync', { input: { a: 1, b: 2 } })).output).toEqual({ sum: 3, v: 4 });
    expect(dev.output()).toMatch(/live-adder updated in/);
    const row = await p.ctx.db.endpoint.findUniqueOrThrow({ where: { id: ids.adder! } });
    expect(row.idleTimeout).toBe(61);
    expect(liveState().resources.adder!.endpointId).toBe(ids.adder);
  }, 600_000);

  it('takes the next port when the port is in use, and says so', async () => {
    expect(await dev.stop()).toBe(0);
    const busy = await freePort();
    const blocker = net.createServer();
    await new Promise<void>((resolve) => blocker.listen(busy, '127.0.0.1', resolve));
    try {
      dev = await startDev(project, ['--port', String(busy), '--no-reload']);
      expect(dev.port).toBeGreaterThan(busy);
      expect(dev.output()).toMatch(new RegExp(`Port ${busy} is in use; using ${dev.port} instead`));
      expect((await devCall(dev, 'GET', '/')).status).toBe('ok');
      expect(await dev.stop()).toBe(0);
    } finally {
      blocker.close();
    }
  }, 120_000);
});

describe('the README flow in its order: gantry dev, then gantry deploy', () => {
  it("deploys to production with a plain gantry deploy, beside dev's live environment", async () => {
    expect((await liveEndpoints('devshop')).length).toBeGreaterThan(0);
    const r = await gantry(['deploy', '--json'], {
      cwd: project,
      home,
      env: { SERVICE_API_KEY: p.adminKey, GANTRY_API_URL: p.url },
      timeoutMs: 300_000,
    });
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({
      app: 'devshop',
      environment: 'production',
      deployment: { status: 'SUCCEEDED' },
    });
    // The live environment and its endpoints stay as dev left them.
    const app = await p.ctx.db.app.findFirstOrThrow({ where: { name: 'devshop' }, include: { environments: true } });
    expect(app.environments.map((e) => e.name).sort()).toEqual(['live', 'production']);
    expect((await liveEndpoints('devshop')).length).toBeGreaterThan(0);
  }, 600_000);
});

describe('gantry dev --auto-provision', () => {
  const many = path.join(root, 'many');
  const names = ['one', 'two', 'three', 'four', 'five', 'six'];

  beforeAll(() => {
    mkdirSync(many, { recursive: true });
    writeFileSync(path.join(many, 'gantry.toml'), '[project]\nname = "many"\npython_version = "3.11"\n');
    const functions = names.map(
      (n) =>
        `@endpoint(name="w-${n}", cpu="cpu3c-2-4")\ndef ${n}(x: int = 0) -> dict:\n    """Worker ${n}."""\n    return {"${n}": x}\n`,
    );
    writeFileSync(path.join(many, 'workers.py'), `from gantry import endpoint\n\n\n${functions.join('\n\n')}`);
  });

  it('asks before creating more than 5 endpoints: without a terminal it refuses unless --yes', async () => {
    const r = await gantry(['dev', '--auto-provision', '--port', String(await freePort())], {
      cwd: many,
      home,
      env: { SERVICE_API_KEY: p.adminKey, GANTRY_API_URL: p.url },
      timeoutMs: 60_000,
    });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/would create 6 live endpoints/);
    expect(r.stderr.trim().split('\n').at(-1)).toMatch(/^error: Create 6 live endpoints .*no terminal.*--yes/);
    expect(await liveEndpoints('many')).toEqual([]);
  }, 120_000);

  it('with --yes, provisions all six at start, never more than 3 at once', async () => {
    const dev = await startDev(many, ['--auto-provision', '--yes', '--no-reload', '--port', String(await freePort())], {
      GANTRY_DEV_TRACE: '1',
    });
    await dev.waitFor(/Live endpoints ready: 6 created, 0 updated, 0 reused/, 0, 600_000);
    // [trace] provision-start|end NAME EPOCH_MS, one pair per PUT .../endpoints/NAME.
    const events = [...dev.output().matchAll(/^\[trace\] provision-(start|end) (\S+) (\d+)$/gm)].map((m) => ({
      kind: m[1]!,
      name: m[2]!,
      at: Number(m[3]),
    }));
    expect(
      events
        .filter((e) => e.kind === 'start')
        .map((e) => e.name)
        .sort(),
    ).toEqual(names.map((n) => `w-${n}`).sort());
    let inside = 0;
    let most = 0;
    for (const e of events) {
      inside += e.kind === 'start' ? 1 : -1;
      most = Math.max(most, inside);
    }
    console.log(`gantry dev --auto-provision: at most ${most} provisionings at once (6 resources)`);
    expect(most).toBe(3);
    expect((await liveEndpoints('many')).map((e) => e.name)).toEqual(names.map((n) => `live-w-${n}`).sort());
    expect(Object.keys(liveState(many).resources).sort()).toEqual(names.map((n) => `w-${n}`).sort());
    expect(await dev.stop()).toBe(0);

    // Again: all six are in the cache and current, nothing to create, so nothing to confirm either.
    const again = await startDev(many, ['--auto-provision', '--no-reload', '--port', String(await freePort())], {
      GANTRY_DEV_TRACE: '1',
    });
    await again.waitFor(/All 6 live endpoints are up to date/, 0, 60_000);
    expect(again.output()).not.toMatch(/\[trace\] provision-start/);
    expect(await again.stop()).toBe(0);
  }, 900_000);
});

describe('gantry dev says why a call cannot run', () => {
  it('names the GPU no host has in its log within a minute of the first call', async () => {
    const gpuProject = path.join(root, 'devgpu');
    mkdirSync(gpuProject, { recursive: true });
    writeFileSync(path.join(gpuProject, 'gantry.toml'), '[project]\nname = "devgpu"\npython_version = "3.11"\n');
    writeFileSync(
      path.join(gpuProject, 'gpu_worker.py'),
      'from gantry import endpoint\n\n\n@endpoint(name="gpu-adder", gpu=["ADA_24"], workers=(0, 1))\n' +
        'def add(a: int, b: int = 1) -> dict:\n    return {"sum": a + b}\n',
    );
    const dev = await startDev(gpuProject, ['--port', String(await freePort()), '--no-reload']);
    const calling = AbortSignal.timeout(120_000);
    try {
      const from = dev.mark();
      // The call waits on a job no worker can take; the log says why meanwhile.
      void fetch(`${dev.url}/gpu-adder/runsync`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ input: { a: 1 } }),
        signal: calling,
      }).catch(() => undefined);
      await dev.waitFor(/live-gpu-adder created/, from, 120_000);
      const created = Date.now();
      const said = await dev.waitFor(/live-gpu-adder: [^\n]*ADA_24[^\n]*/, from, 60_000);
      expect(Date.now() - created).toBeLessThan(60_000);
      expect(said).toMatch(/cannot be placed: no READY host has 1 free GPU of pool ADA_24/);
    } finally {
      expect(await dev.stop()).toBe(0);
      const [live] = Object.values(liveState(gpuProject).resources);
      if (live) await call(p.url, 'DELETE', `/v2/serverless/${live.endpointId}`, { key: p.adminKey });
    }
  }, 300_000);
});
