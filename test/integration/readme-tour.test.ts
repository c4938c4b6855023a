/**
 * The README's five-minute tour, run as written: its code blocks are read from README.md at test
 * time and executed (sh blocks with bash, the Python block with the hosted service's `runpod`
 * package, the JavaScript block with `runpod-sdk`) with only their placeholders filled in, so a
 * README edit that breaks the tour fails here. The platform runs as `npm start` runs it
 * (infra/start.ts on its embedded defaults: the runtime images' base is Docker Hub's, which no host
 * here reaches, as on a newcomer's machine without it), with ports and a data dir of its own; "this
 * machine" is an OpenSSH test host on a loopback port in front of this machine's Podman. The
 * reader's projects are made in their home, outside the clone.
 *
 * Besides the tour, the first mistake a newcomer makes, a wrong image name, is named by the
 * endpoint's workers and the job's status within a minute.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import {
  appendFileSync,
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { launchChromium } from '../support/browser.ts';
import { freePort } from '../support/ports.ts';
import { exampleWorkerImage } from '../../domain/apps/index.ts';
import { ensurePythonBaseImage } from '../support/python-base-image.ts';
import { ensurePythonClients, FLASH_CLIENT_REQUIREMENTS } from '../support/python-clients.ts';
import { startSshTestHost, type SshTestHost } from '../support/ssh-test-host.ts';
import { removeManagedContainers, until } from '../support/orchestration.ts';

const repoRoot = path.resolve(import.meta.dirname, '../..');
const README = readFileSync(path.join(repoRoot, 'README.md'), 'utf8');

/** The text of the tour's step `n` (from its `### n.` heading to the next heading). */
function step(n: number): string {
  const start = README.indexOf(`\n### ${n}. `);
  if (start < 0) throw new Error(`README.md has no step "### ${n}." in its tour`);
  const end = README.slice(start + 1).search(/\n##/);
  return end < 0 ? README.slice(start) : README.slice(start, start + 1 + end);
}

/** The fenced code blocks of a step, in order, with their language. */
function blocks(text: string): Array<{ lang: string; code: string }> {
  return [...text.matchAll(/^```(\w*)\n([\s\S]*?)^```/gm)].map((m) => ({ lang: m[1]!, code: m[2]! }));
}

function block(n: number, lang: string, index = 0): string {
  const found = blocks(step(n)).filter((b) => b.lang === lang);
  const b = found[index];
  if (!b) throw new Error(`README.md step ${n} has no ${lang} block number ${index + 1}`);
  return b.code;
}

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function runProcess(
  command: string,
  args: string[],
  opts: { env: NodeJS.ProcessEnv; cwd?: string; timeoutMs?: number },
): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: opts.cwd ?? repoRoot, env: opts.env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 60_000);
    child.once('error', reject);
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** A README sh block, run as a reader's shell would, but stopping at the first failing command. */
const bash = (script: string, opts: { env: NodeJS.ProcessEnv; cwd?: string; timeoutMs?: number }): Promise<Run> =>
  runProcess('bash', ['-euo', 'pipefail', '-c', script], opts);

function expectOk(r: Run, what: string): void {
  expect(r.code, `${what} failed:\n${r.stdout}\n${r.stderr}`).toBe(0);
}

/** The JSON documents curl printed one after another (curl -s adds no newline between them). */
function jsonDocuments(text: string): unknown[] {
  const docs: unknown[] = [];
  let depth = 0;
  let start = -1;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === '\\') i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === '{' || c === '[') {
      if (depth++ === 0) start = i;
    } else if ((c === '}' || c === ']') && --depth === 0) docs.push(JSON.parse(text.slice(start, i + 1)));
  }
  return docs;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("the README's five-minute tour", () => {
  // A home of the reader's own: the key the tour generates, the CLI's stored login, the projects.
  const home = mkdtempSync(path.join(tmpdir(), 'gantry-tour-home-'));
  // Only for the JavaScript block's file (git-ignored): `import "runpod-sdk"` resolves from the
  // clone's node_modules, where the reader would have run `npm install runpod-sdk`.
  mkdirSync(path.join(repoRoot, '.gantry'), { recursive: true });
  const work = mkdtempSync(path.join(repoRoot, '.gantry', 'readme-tour-'));
  const dataDir = mkdtempSync(path.join(tmpdir(), 'gantry-tour-data-'));
  chmodSync(dataDir, 0o755); // as root, the embedded PostgreSQL runs as the postgres user
  let sshHost: SshTestHost | undefined;
  let platform: ChildProcess | undefined;
  let output = '';
  const image = exampleWorkerImage('3.11');
  /** What the reader copies from the banner and the answers. */
  const tour = { key: '', api: '', temporalUi: '', ep: '', hostId: '', typo: '' };

  /** The tour's placeholders, filled in as the reader would; none may be left. */
  function fill(code: string): string {
    const filled = code
      .replaceAll('gntr_...', tour.key)
      .replaceAll('http://127.0.0.1:8080', tour.api)
      .replaceAll('<the id from the answer>', tour.ep)
      .replaceAll('<endpoint id>', tour.ep);
    expect(filled, 'a placeholder the tour does not fill in').not.toMatch(/<[a-z][^<>\n]*>/);
    return filled;
  }

  /** The environment of the reader's shell after step 1's `KEY=... API=...` (and step 2's `EP=...`). */
  const shellEnv = (): NodeJS.ProcessEnv => ({
    ...process.env,
    HOME: home,
    KEY: tour.key,
    API: tour.api,
    EP: tour.ep,
  });

  beforeAll(async () => {
    // What a host here makes itself when it cannot pull Docker Hub's python:3.11-slim (made once per
    // machine before the suite; hostctl/python-base.ts makes it the same way over SSH).
    await ensurePythonBaseImage('3.11');
    sshHost = await startSshTestHost();
  }, 600_000);

  afterAll(async () => {
    if (platform && platform.exitCode === null && platform.signalCode === null) {
      const exited = new Promise((r) => platform!.once('exit', r));
      platform.kill('SIGTERM');
      const timer = setTimeout(() => platform!.kill('SIGKILL'), 30_000);
      await exited;
      clearTimeout(timer);
    }
    if (tour.hostId) removeManagedContainers([tour.hostId]);
    await sshHost?.stop();
    for (const dir of [home, work, dataDir]) rmSync(dir, { recursive: true, force: true });
  }, 120_000);

  it('1. starts with this machine as the first host: the banner, then the host `local`, READY once probed', async () => {
    const lines = block(1, 'sh')
      .split('\n')
      .filter((l) => l.trim());
    const startLine = lines.pop()!;
    // The key-generation lines target ~/.ssh: they run with HOME set to a home of the test's own.
    // "This machine" is the SSH test host on a loopback port, so the key the reader authorizes in
    // ~/.ssh/authorized_keys goes to that server's authorized keys as well.
    expectOk(await bash(lines.join('\n'), { env: { ...process.env, HOME: home } }), 'the key-generation lines');
    appendFileSync(
      path.join(sshHost!.dir, 'authorized_keys'),
      readFileSync(path.join(home, '.ssh', 'authorized_keys'), 'utf8'),
    );

    // `VARS... npm start`: the variables as written (bash expands their ~), then what `npm start` runs,
    // infra/start.ts, on ports and a data dir of its own and with the test host's port and user in
    // place of port 22 and the current user.
    const m = /^((?:[A-Z_]+=\S+\s+)+)npm start$/.exec(startLine.trim());
    expect(m, `the start line: ${startLine}`).not.toBeNull();
    expect(m![1]).toContain('GANTRY_LOCAL_HOST=1');
    const api = await freePort();
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      HOME: home,
      // Per-machine builds stay in the machine's cache, not the test's home.
      XDG_CACHE_HOME: process.env.XDG_CACHE_HOME ?? path.join(homedir(), '.cache'),
      GANTRY_DATA_DIR: dataDir,
      PORT: String(api),
      GANTRY_WORKER_PORT: String(await freePort()),
      TEMPORAL_PORT: String(await freePort()),
      TEMPORAL_UI_PORT: String(await freePort()),
      GANTRY_PG_PORT: String(await freePort()),
      TEMPORAL_CLI_PATH: inject('temporalBinary'),
      GANTRY_LOCAL_HOST_PORT: String(sshHost!.port),
      GANTRY_LOCAL_HOST_USER: sshHost!.user,
      GANTRY_NODE: process.execPath,
      DATABASE_URL: undefined,
      TEMPORAL_ADDRESS: undefined,
      GANTRY_ADMIN_API_KEY: undefined,
      LOG_LEVEL: 'warn',
    };
    platform = spawn('bash', ['-euo', 'pipefail', '-c', `${m![1]}exec "$GANTRY_NODE" --import tsx infra/start.ts`], {
      cwd: repoRoot,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    platform.stdout?.on('data', (d: Buffer) => (output += d.toString()));
    platform.stderr?.on('data', (d: Buffer) => (output += d.toString()));
    const deadline = Date.now() + 180_000;
    while (!output.includes('Gantry is up')) {
      if (platform.exitCode !== null) throw new Error(`start exited ${platform.exitCode}:\n${output}`);
      if (Date.now() > deadline) throw new Error(`start did not come up:\n${output}`);
      await sleep(100);
    }
    // The banner as the README shows it; the reader copies KEY and API from it.
    const banner = block(1, '');
    for (const label of ['REST API', 'GraphQL', 'Console', 'Temporal UI', 'Admin API key'])
      expect(banner, `the README's banner shows ${label}`).toContain(label);
    tour.key = /Admin API key (gntr_\S+)/.exec(output)?.[1] ?? '';
    tour.api = /REST API\s+(http\S+)\/v2\b/.exec(output)?.[1] ?? '';
    tour.temporalUi = /Temporal UI\s+(http\S+)/.exec(output)?.[1] ?? '';
    expect(tour.key, output).toMatch(/^gntr_/);
    expect(tour.api).toBe(`http://127.0.0.1:${api}`);
    expect(tour.temporalUi).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);

    // The hosts block, run again until the probe has answered, as a reader would.
    const hostsBlock = fill(block(1, 'sh', 1));
    let last = '';
    const until = Date.now() + 120_000;
    for (;;) {
      const r = await bash(hostsBlock, { env: shellEnv() });
      expectOk(r, 'the hosts block');
      last = r.stdout;
      const [answer] = jsonDocuments(r.stdout) as Array<{ hosts: Array<{ id: string; name: string; status: string }> }>;
      const local = answer?.hosts.find((h) => h.name === 'local');
      expect(local, `the host local in ${last}`).toBeDefined();
      tour.hostId = local!.id;
      if (local!.status === 'READY') break;
      if (Date.now() > until) throw new Error(`the host local did not become READY: ${last}`);
      await sleep(1000);
    }
  }, 360_000);

  it('2. creates an endpoint of the example worker', async () => {
    const code = block(2, 'sh');
    expect(code).toContain('EP=<the id from the answer>');
    // The EP= line is the reader copying the id from the answer: the test takes it from the answer
    // itself and exports EP for the blocks that follow.
    const r = await bash(fill(code.replace(/^EP=.*$/m, '')), { env: shellEnv() });
    expectOk(r, 'the create block');
    const [endpoint] = jsonDocuments(r.stdout) as Array<{ id: string; name: string; image: string }>;
    expect(endpoint, r.stdout).toMatchObject({ id: expect.any(String), name: 'hello', image });
    tour.ep = endpoint!.id;
  }, 60_000);

  it('3. calls it with curl (runsync, run + status), the Python client and the JavaScript client', async () => {
    const r = await bash(fill(block(3, 'sh')), { env: shellEnv(), timeoutMs: 240_000 });
    expectOk(r, 'the curl block');
    const [sync, status] = jsonDocuments(r.stdout) as Array<{ id: string; status: string; output?: unknown }>;
    expect(sync, r.stdout).toMatchObject({ status: 'COMPLETED', output: { echo: { prompt: 'hello' } } });
    expect(status, r.stdout).toMatchObject({ id: expect.any(String), status: expect.any(String) });
    expect(['IN_QUEUE', 'IN_PROGRESS', 'COMPLETED']).toContain(status!.status);
    // The job the block started runs to its end.
    let done: { status: string; output?: unknown } = status!;
    const until = Date.now() + 60_000;
    while (done.status !== 'COMPLETED' && Date.now() < until) {
      await sleep(500);
      const s = await fetch(`${tour.api}/v2/${tour.ep}/status/${status!.id}`, {
        headers: { authorization: `Bearer ${tour.key}` },
      });
      done = (await s.json()) as typeof done;
    }
    expect(done).toMatchObject({ status: 'COMPLETED', output: { echo: { prompt: 'hello' } } });

    const python = await ensurePythonClients();
    const py = await runProcess(python, ['-c', fill(block(3, 'python'))], { env: shellEnv(), timeoutMs: 180_000 });
    expectOk(py, 'the Python block');
    expect(py.stdout).toContain("'echo': {'prompt': 'hello'}");

    const script = path.join(work, 'tour.mjs');
    writeFileSync(script, fill(block(3, 'js')));
    try {
      const js = await runProcess(process.execPath, [script], { env: shellEnv(), timeoutMs: 180_000 });
      expectOk(js, 'the JavaScript block');
      expect(js.stdout).toContain("status: 'COMPLETED'");
      expect(js.stdout).toMatch(/echo: \{ prompt: 'hello' \}/);
    } finally {
      rmSync(script, { force: true });
    }
  }, 600_000);

  /** The environment of the reader's shell for the CLI steps: their home, none of this process's CLI settings. */
  const cliShellEnv = (): NodeJS.ProcessEnv => {
    const env: NodeJS.ProcessEnv = { ...shellEnv(), XDG_CONFIG_HOME: undefined };
    for (const name of ['SERVICE_API_KEY', 'GANTRY_API_URL', 'RUNPOD_API_KEY']) delete env[name];
    return env;
  };

  it('4. puts the CLI on the PATH, logs in, makes a project in the home, deploys it and calls it', async () => {
    const code = block(4, 'sh');
    const curlAt = code.indexOf('curl ');
    expect(curlAt).toBeGreaterThan(0);
    // Everything up to the call, run as written from the clone; the call needs the URL it prints.
    const setup = fill(code.slice(0, curlAt));
    expect(setup).toMatch(/^gantry deploy/m);
    const r = await bash(`${setup}\npwd`, { env: cliShellEnv(), cwd: repoRoot, timeoutMs: 600_000 });
    expectOk(r, 'the CLI block');
    const project = path.join(home, 'shop');
    expect(r.stdout.trim().split('\n').at(-1)).toBe(project);
    for (const f of ['gantry.toml', 'cpu_worker.py', 'lb_worker.py'])
      expect(existsSync(path.join(project, f)), f).toBe(true);
    expect(existsSync(path.join(project, 'gpu_worker.py'))).toBe(false);
    const credentials = JSON.parse(readFileSync(path.join(home, '.config', 'gantry', 'credentials.json'), 'utf8'));
    expect(credentials).toEqual({ apiUrl: tour.api, apiKey: tour.key });
    // The deploy names the key the reader logged in with, not a variable they never set.
    expect(r.stdout).toContain('the key `gantry login` stored');
    const base = new RegExp(`cpu-worker[^\\n]*\\n\\s+base URL\\s+(\\S+)`).exec(r.stdout)?.[1];
    expect(base, r.stdout).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/v2\/\S+$/);

    const call = fill(code.slice(curlAt).replaceAll("<the cpu-worker's base URL>", base!));
    const answer = await bash(call, { env: cliShellEnv(), cwd: project, timeoutMs: 240_000 });
    expectOk(answer, 'the call');
    expect(jsonDocuments(answer.stdout)[0], answer.stdout).toMatchObject({ status: 'COMPLETED', output: { sum: 5 } });
  }, 900_000);

  it("5. deploys a fresh flash project for Python 3.11 with flash's URL variables", async () => {
    const lines = block(5, 'sh').split('\n');
    const venv = lines.findIndex((l) => l.startsWith('python3 -m venv ~/flash'));
    expect(venv).toBe(0);
    // The venv line installs runpod-flash from PyPI: the suite's venv of the same pinned flash stands
    // in for it (made once per machine), as ~/flash/bin/flash (its own console script's first line
    // names the directory the venv was built in, so the command runs flash's module).
    const python = await ensurePythonClients({ requirements: FLASH_CLIENT_REQUIREMENTS });
    mkdirSync(path.join(home, 'flash', 'bin'), { recursive: true });
    writeFileSync(
      path.join(home, 'flash', 'bin', 'flash'),
      `#!/bin/sh\nexec ${JSON.stringify(python)} -m runpod_flash.cli.main "$@"\n`,
      { mode: 0o755 },
    );
    const r = await bash(fill(lines.slice(1).join('\n')), { env: cliShellEnv(), cwd: repoRoot, timeoutMs: 600_000 });
    expectOk(r, 'the flash block');
    const env = await until('the hello-flash environment', async () => {
      const apps = await fetch(`${tour.api}/v2/apps/hello-flash`, { headers: { authorization: `Bearer ${tour.key}` } });
      return apps.status === 200 ? ((await apps.json()) as { environments: Array<{ name: string }> }) : undefined;
    });
    expect(env.environments.length).toBeGreaterThan(0);
    const listed = await fetch(`${tour.api}/v2/serverless`, { headers: { authorization: `Bearer ${tour.key}` } });
    const { endpoints } = (await listed.json()) as { endpoints: Array<{ id: string; name: string }> };
    const cpu = endpoints.find((e) => e.name === 'cpu_worker');
    expect(cpu, JSON.stringify(endpoints)).toBeDefined();
    const sync = await bash(
      `curl -s -X POST $API/v2/${cpu!.id}/runsync?wait=240000 -H "Authorization: Bearer $KEY" -H 'content-type: application/json' -d '{"input": {"input_data": {"message": "hi"}}}'`,
      { env: shellEnv(), timeoutMs: 300_000 },
    );
    expect(jsonDocuments(sync.stdout)[0], sync.stdout).toMatchObject({
      status: 'COMPLETED',
      output: { message: 'hi', python_version: expect.stringMatching(/^3\.11\./) },
    });
  }, 900_000);

  it('names a wrong image name in the workers route and the job’s status within a minute', async () => {
    const headers = { authorization: `Bearer ${tour.key}`, 'content-type': 'application/json' };
    const created = await fetch(`${tour.api}/v2/serverless`, {
      method: 'POST',
      headers,
      body: JSON.stringify({
        name: 'typo',
        image: 'localhost/gantry-exampel-worker:py3.11',
        workers: { min: 0, max: 1 },
      }),
    });
    expect(created.status).toBe(201);
    const ep = ((await created.json()) as { id: string }).id;
    tour.typo = ep;
    const job = (await (
      await fetch(`${tour.api}/v2/${ep}/run`, { method: 'POST', headers, body: '{"input": {}}' })
    ).json()) as { id: string };
    const started = Date.now();
    const problem = await until('the workers route to name the image', async () => {
      const w = (await (await fetch(`${tour.api}/v2/serverless/${ep}/workers`, { headers })).json()) as {
        workerProblem?: { reason: string } | null;
      };
      return w.workerProblem ?? undefined;
    });
    expect(Date.now() - started).toBeLessThan(60_000);
    expect(problem.reason).toContain('localhost/gantry-exampel-worker:py3.11');
    const status = (await (await fetch(`${tour.api}/v2/${ep}/status/${job.id}`, { headers })).json()) as {
      status: string;
      workerProblem?: { reason: string };
    };
    expect(status).toMatchObject({
      status: 'IN_QUEUE',
      workerProblem: { reason: expect.stringContaining('gantry-exampel-worker') },
    });
  }, 120_000);

  it('6. the console signs in with the key, lists `hello` and shows why `typo` waits', async () => {
    const text = step(6);
    const address = /<(http:\/\/127\.0\.0\.1:8080\/console)>/.exec(text)?.[1];
    expect(address).toBeDefined();
    expect(output).toContain(`Console       ${tour.api}/console`);
    const browser = await launchChromium();
    try {
      const page = await browser.newPage();
      await page.goto(address!.replace('http://127.0.0.1:8080', tour.api));
      await page.getByLabel('API key').fill(tour.key);
      await page.keyboard.press('Enter');
      const hello = page.locator(`tr[data-endpoint-id="${tour.ep}"]`);
      await hello.waitFor({ timeout: 30_000 });
      expect(await hello.locator('td.name').innerText()).toBe('hello');
      await hello.getByRole('link').click();
      await page.locator('[data-chart="jobs"] canvas').first().waitFor({ timeout: 30_000 });
      // The mistake of step 5's check, named in the console as in the API.
      await page.goto(`${tour.api}/console/endpoints/${tour.typo}/workers`);
      await page.getByText('gantry-exampel-worker', { exact: false }).first().waitFor({ timeout: 30_000 });
    } finally {
      await browser.close();
    }
  }, 120_000);

  it('7. the Temporal UI, the playground and the explorers answer', async () => {
    const text = step(7);
    const urls = [...text.matchAll(/<(http:\/\/127\.0\.0\.1:\d+[^>]*)>/g)].map((m) =>
      m[1]!.replace('http://127.0.0.1:8233', tour.temporalUi).replace('http://127.0.0.1:8080', tour.api),
    );
    const openapi = /`(\/v2\/openapi\.json)`/.exec(text)?.[1];
    expect(openapi).toBeDefined();
    urls.push(`${tour.api}${openapi}`);
    expect(urls).toEqual([
      tour.temporalUi,
      `${tour.api}/playground`,
      `${tour.api}/graphql`,
      `${tour.api}/v2/docs`,
      `${tour.api}/v2/openapi.json`,
    ]);
    for (const url of urls) {
      // As a browser asks (the GraphQL explorer is served to a browser, a JSON client gets the API).
      const r = await fetch(url, { headers: { accept: 'text/html,application/json;q=0.9' } });
      expect(r.status, url).toBe(200);
      await r.arrayBuffer();
    }
  }, 60_000);
});
