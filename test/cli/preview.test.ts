/**
 * `gantry deploy --preview` for real: a `gantry init` project plus a resource that calls another
 * through its discovery variable, run by the CLI as a child process in local Podman containers
 * (the runtime image built from sdk/python/Containerfile on the local Python base image), called
 * on its local ports, stopped with SIGINT; then a run killed with SIGKILL, whose leftovers the next
 * run removes.
 *
 * gpu_worker.py stays in: it is the only check that a GPU resource runs in a preview (on the CPU,
 * and the table says so); its function is plain Python, so it needs no GPU to answer.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensurePythonBaseImage } from '../support/python-base-image.ts';
import { cliEnv, gantry, gantryBin, tempDir } from '../support/cli.ts';
import type { PreviewRow } from '../../cli/src/commands/deploy/preview.ts';

/** Calls the queue-based cpu-worker and the load-balanced lb-worker by the names the preview gives them. */
const CALLER = `"""Calls the other endpoints through their discovery variables."""

import json
import os
import urllib.request

from gantry import Endpoint

api = Endpoint(name="caller", cpu="cpu3c-2-4")


def post(url, body):
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


@api.post("/add")
def add(body: dict) -> dict:
    """Adds on the cpu-worker."""
    answer = post(os.environ["GANTRY_ENDPOINT_CPU_WORKER"] + "/runsync", {"input": {"a": body["a"], "b": body["b"]}})
    return {"via": os.environ["GANTRY_ENDPOINT_CPU_WORKER"], "answer": answer}


@api.post("/reverse")
def reverse(body: dict) -> dict:
    """Reverses on the lb-worker."""
    return post(os.environ["GANTRY_ENDPOINT_LB_WORKER"] + "/reverse", body)


@api.get("/endpoints")
def endpoints() -> dict:
    """What GANTRY_ENDPOINTS says."""
    return json.loads(os.environ["GANTRY_ENDPOINTS"])
`;

interface PreviewJson {
  app: string;
  runtime: string;
  network: string;
  discovery: 'dns' | 'hosts';
  image: string;
  artifact: { sha256: string; dir: string };
  endpoints: PreviewRow[];
  timings: { buildMs: number; imageMs: number; imageBuilt: boolean; startMs: number; totalMs: number };
}

interface Preview {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

const podman = (args: string[]): string => {
  const r = spawnSync('podman', args, { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`podman ${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
};
const labelled = (app: string): { containers: string[]; networks: string[] } => ({
  containers: podman(['ps', '-a', '--format', '{{.Names}}', '--filter', `label=io.gantry.preview=${app}`])
    .split('\n')
    .filter(Boolean)
    .sort(),
  networks: podman(['network', 'ls', '--format', '{{.Name}}', '--filter', `label=io.gantry.preview=${app}`])
    .split('\n')
    .filter(Boolean),
});

async function post(url: string, body: unknown): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> };
}

async function get(url: string): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await fetch(url);
  const text = await res.text();
  let json: Record<string, unknown> = {};
  try {
    json = JSON.parse(text) as Record<string, unknown>;
  } catch {
    // a plain-text answer (a health check's): the status is what counts
  }
  return { status: res.status, json };
}

describe('gantry deploy --preview', () => {
  const root = tempDir('gantry-preview-');
  const home = path.join(root, 'home');
  // The app name (the directory's) labels everything: one of its own per test run.
  const app = `preview-${process.pid}`;
  const dir = path.join(root, app);
  const children: ChildProcess[] = [];
  const env = { GANTRY_PREVIEW_BASE_IMAGE: 'localhost/gantry-python:{python}' };

  function startPreview(args: string[], extraEnv: Record<string, string> = {}): Preview {
    const child = spawn(process.execPath, [gantryBin, 'deploy', '--preview', '--python-version', '3.11', ...args], {
      cwd: dir,
      env: cliEnv(home, { ...env, ...extraEnv }),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.push(child);
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
    const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      child.on('close', (code, signal) => resolve({ code, signal })),
    );
    return { child, stdout: () => stdout, stderr: () => stderr, exit };
  }

  /** Polls `find` until it gives a value; the preview exiting first, or the time running out, fails with its output. */
  async function until<T>(p: Preview, what: string, find: () => T | undefined, timeoutMs = 240_000): Promise<T> {
    let exited: { code: number | null; signal: NodeJS.Signals | null } | undefined;
    void p.exit.then((e) => (exited = e));
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = find();
      if (found !== undefined) return found;
      if (exited)
        throw new Error(`the preview exited (${exited.code ?? exited.signal}) before ${what}:\n${p.stderr()}`);
      if (Date.now() > deadline) throw new Error(`no ${what} within ${timeoutMs} ms:\n${p.stderr()}`);
      await sleep(100);
    }
  }

  const readJson = (p: Preview): Promise<PreviewJson> =>
    until(p, 'the JSON table', () => {
      try {
        return JSON.parse(p.stdout()) as PreviewJson;
      } catch {
        return undefined;
      }
    });

  async function stop(p: Preview): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
    p.child.kill('SIGINT');
    return p.exit;
  }

  beforeAll(async () => {
    await ensurePythonBaseImage('3.11');
    const r = await gantry(['init', app], { cwd: root, home });
    expect(r.code, r.stderr).toBe(0);
    writeFileSync(path.join(dir, 'caller.py'), CALLER);
  });

  afterAll(() => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    // Whatever a failed test left behind.
    const { containers, networks } = labelled(app);
    if (containers.length > 0) spawnSync('podman', ['rm', '-f', ...containers]);
    if (networks.length > 0) spawnSync('podman', ['network', 'rm', ...networks]);
  });

  it(
    'runs every resource in its own container, wired to the others, and removes them all on SIGINT',
    { timeout: 360_000 },
    async () => {
      const p = startPreview(['--json']);
      const table = await readJson(p);
      expect(table).toMatchObject({ app, runtime: 'podman', network: `gantry-preview-${app}` });
      expect(table.image).toMatch(/^localhost\/gantry-runtime-preview:py3\.11-[0-9a-f]{12}$/);
      expect(table.artifact.dir).toBe(path.join(dir, '.gantry', 'preview', table.artifact.sha256));
      const byName = Object.fromEntries(table.endpoints.map((e) => [e.resource, e]));
      expect(Object.keys(byName).sort()).toEqual(['caller', 'cpu-worker', 'gpu-worker', 'lb-worker']);
      for (const e of table.endpoints) {
        expect(e.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
        expect(e.container).toBe(`gantry-preview-${app}-${e.resource}`);
        expect(e.internalUrl).toBe(`http://${e.container}:8000`);
      }
      expect(byName['cpu-worker']).toMatchObject({
        kind: 'queue',
        variable: 'GANTRY_ENDPOINT_CPU_WORKER',
        gpuRequested: false,
      });
      expect(byName['cpu-worker']!.routes.map((r) => `${r.method} ${r.path}`)).toContain('POST /runsync');
      expect(byName['gpu-worker']).toMatchObject({ kind: 'queue', gpuRequested: true });
      expect(byName['gpu-worker']!.compute).toMatch(/no GPU/);
      expect(byName['lb-worker']!.routes.map((r) => `${r.method} ${r.path}`)).toEqual(
        expect.arrayContaining(['POST /process', 'GET /health', 'POST /reverse']),
      );

      // Queue resources: the local job API of the runtime.
      const cpu = byName['cpu-worker']!.url;
      expect(await post(`${cpu}/runsync`, { input: { a: 2, b: 3 } })).toMatchObject({
        status: 200,
        json: { status: 'COMPLETED', output: { sum: 5 } },
      });
      const queued = await post(`${cpu}/run`, { input: { a: 10, b: 20 } });
      expect(queued.json).toMatchObject({ status: 'IN_QUEUE' });
      let status: Record<string, unknown> = {};
      for (let i = 0; i < 100 && status.status !== 'COMPLETED'; i++) {
        status = (await get(`${cpu}/status/${String(queued.json.id)}`)).json;
        if (status.status !== 'COMPLETED') await sleep(100);
      }
      expect(status).toMatchObject({ id: queued.json.id, status: 'COMPLETED', output: { sum: 30 } });
      expect((await get(`${cpu}/health`)).status).toBe(200);
      expect(await post(`${byName['gpu-worker']!.url}/runsync`, { input: { prompt: 'a cat on a mat' } })).toMatchObject(
        {
          json: { status: 'COMPLETED', output: { tokens: 5, steps: 20 } },
        },
      );

      // Load-balanced: the routes themselves.
      const lb = byName['lb-worker']!.url;
      expect(await post(`${lb}/process`, { text: 'one two three' })).toMatchObject({ status: 200, json: { words: 3 } });
      expect(await get(`${lb}/health`)).toMatchObject({ status: 200, json: { status: 'ok' } });

      // Container to container, by the discovery variables.
      const caller = byName['caller']!.url;
      expect(await post(`${caller}/add`, { a: 4, b: 5 })).toMatchObject({
        status: 200,
        json: {
          via: `http://gantry-preview-${app}-cpu-worker:8000`,
          answer: { status: 'COMPLETED', output: { sum: 9 } },
        },
      });
      expect(await post(`${caller}/reverse`, { text: 'abc' })).toMatchObject({
        status: 200,
        json: { reversed: 'cba' },
      });
      expect((await get(`${caller}/endpoints`)).json).toEqual(
        Object.fromEntries(table.endpoints.map((e) => [e.resource, e.internalUrl])),
      );

      expect(labelled(app).containers).toEqual(table.endpoints.map((e) => e.container).sort());
      expect(labelled(app).networks).toEqual([table.network]);

      const exit = await stop(p);
      expect(exit, p.stderr()).toEqual({ code: 0, signal: null });
      expect(labelled(app)).toEqual({ containers: [], networks: [] });
    },
  );

  it(
    'starts clean after a run killed with SIGKILL, and prints a table without --json',
    { timeout: 360_000 },
    async () => {
      // GANTRY_PODMAN_ARGS: the flags this machine's containers.conf drop-in already sets, passed explicitly.
      const killed = startPreview([], { GANTRY_PODMAN_ARGS: '--runtime runc --cgroup-manager cgroupfs' });
      await until(killed, 'the table', () => (killed.stderr().includes('Press Ctrl+C') ? true : undefined));
      const lines = killed.stdout().split('\n');
      expect(lines[0]).toMatch(/^RESOURCE\s+KIND\s+LOCAL URL\s+COMPUTE\s+ROUTES$/);
      expect(lines.find((l) => l.startsWith('gpu-worker'))).toMatch(/queue\s+http:\/\/127\.0\.0\.1:\d+\s+no GPU here/);
      expect(lines.find((l) => l.startsWith('lb-worker'))).toContain('POST /process');
      killed.child.kill('SIGKILL');
      await killed.exit;
      // Nothing removed them: the containers outlive the CLI.
      expect(labelled(app).containers).toHaveLength(4);
      expect(labelled(app).networks).toHaveLength(1);

      const again = startPreview(['--json']);
      const table = await readJson(again);
      const cpu = table.endpoints.find((e) => e.resource === 'cpu-worker')!;
      expect(await post(`${cpu.url}/runsync`, { input: { a: 1, b: 1 } })).toMatchObject({
        json: { status: 'COMPLETED', output: { sum: 2 } },
      });
      const caller = table.endpoints.find((e) => e.resource === 'caller')!;
      expect(await post(`${caller.url}/add`, { a: 1, b: 2 })).toMatchObject({
        json: { answer: { output: { sum: 3 } } },
      });
      expect(table.timings.imageBuilt).toBe(false);

      const exit = await stop(again);
      expect(exit, again.stderr()).toEqual({ code: 0, signal: null });
      expect(labelled(app)).toEqual({ containers: [], networks: [] });
    },
  );

  it('refuses --env, which has no meaning for a preview', async () => {
    const r = await gantry(['deploy', '--preview', '--env', 'dev'], { cwd: dir, home, env });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/--env has no meaning with --preview/);
  });
});
