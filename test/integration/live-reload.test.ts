/**
 * Live reload end to end (docs/dev-loop.md), the way `gantry dev` drives it but without the CLI:
 * an artifact made here (manifest.json, src/, deps/gantry), a queue resource and a load-balanced
 * one provisioned in the environment `live` on an SSH test host in front of this machine's Podman,
 * then new source versions uploaded while calls keep going through the public job API and the
 * load-balancing proxy. The workers are never restarted: the new code must answer within 3 s, and
 * a version that does not import must leave the old code answering.
 */
import { createHash } from 'node:crypto';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { create as createTar } from 'tar';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Manifest } from '../../domain/apps/index.ts';
import { call, type TestPlatform } from '../support/platform.ts';
import { startAppsPlatform, until, type OneHostPlatform } from '../support/orchestration.ts';

let fixture: OneHostPlatform | undefined;
let p: TestPlatform;
const root = mkdtempSync(path.join(tmpdir(), 'gantry-live-'));
const sdkPackage = path.join(import.meta.dirname, '..', '..', 'sdk', 'python', 'gantry');
const sha256 = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

beforeAll(async () => {
  fixture = await startAppsPlatform('live-box', path.join(root, 'host-cache'));
  p = fixture.p;
}, 900_000);

afterAll(async () => {
  await fixture?.stop();
  rmSync(root, { recursive: true, force: true });
}, 180_000);

/** The project's source files at one version: a queue function and a load-balanced route that say which version they are, through a helper module. */
function sources(version: number, broken = false): Record<string, string> {
  const tail = broken ? '\n\ndef oops(:\n    pass\n' : '';
  return {
    'helper.py': `VERSION = ${version}\n`,
    'worker.py': `from gantry import endpoint\nimport helper\n\n\n@endpoint(name="echo", cpu="cpu3c-2-4", workers=(1, 1))\ndef echo(text: str) -> dict:\n    return {"text": text, "version": helper.VERSION}\n${tail}`,
    'lb.py': `from gantry import Endpoint\nimport helper\n\napi = Endpoint(name="api", cpu="cpu3c-2-4", workers=(1, 1))\n\n\n@api.get("/version")\ndef version() -> dict:\n    return {"version": helper.VERSION}\n${tail}`,
  };
}

function resource(
  r: Partial<Manifest['resources'][number]> & { name: string; kind: 'queue' | 'lb'; file: string },
): Manifest['resources'][number] {
  return {
    compute: { cpu: 'cpu3c-2-4' },
    workers: { min: 1, max: 1 },
    idleTimeout: 60,
    scaler: { type: 'QUEUE_DELAY', value: 4 },
    timeout: 60,
    env: {},
    dependencies: [],
    ...r,
  };
}

/** A gzip tar of `dir`'s entries `names`, as bytes. */
async function tarGz(dir: string, names: string[]): Promise<Buffer> {
  const file = path.join(root, `t-${Date.now()}-${Math.random().toString(36).slice(2)}.tar.gz`);
  await createTar({ gzip: true, cwd: dir, file, portable: true }, names);
  return readFileSync(file);
}

function writeFiles(dir: string, files: Record<string, string>): void {
  mkdirSync(dir, { recursive: true });
  for (const [name, text] of Object.entries(files)) writeFileSync(path.join(dir, name), text);
}

/** The artifact `gantry build` would make of version 1 (its deps/ only the gantry package). */
async function artifact(): Promise<{ bytes: Buffer; manifest: Manifest }> {
  const dir = path.join(root, 'artifact');
  writeFiles(path.join(dir, 'src'), sources(1));
  cpSync(sdkPackage, path.join(dir, 'deps', 'gantry'), { recursive: true, filter: (f) => !f.includes('__pycache__') });
  const manifest: Manifest = {
    format: 1,
    pythonVersion: '3.11',
    fingerprint: sha256(Buffer.from(JSON.stringify(sources(1)))),
    resources: [
      resource({
        name: 'echo',
        kind: 'queue',
        file: 'worker.py',
        function: 'echo',
        params: [{ name: 'text', annotation: 'str', required: true }],
      }),
      resource({
        name: 'api',
        kind: 'lb',
        file: 'lb.py',
        object: 'api',
        routes: [{ method: 'GET', path: '/version', function: 'version' }],
        scaler: { type: 'REQUEST_COUNT', value: 4 },
      }),
    ],
    excluded: [],
    createdAt: new Date().toISOString(),
  };
  writeFileSync(path.join(dir, 'manifest.json'), JSON.stringify(manifest));
  return { bytes: await tarGz(dir, ['manifest.json', 'src', 'deps']), manifest };
}

async function uploadSource(version: number, broken = false): Promise<{ version: number; sha256: string }> {
  const dir = path.join(root, `source-${version}${broken ? '-broken' : ''}`);
  writeFiles(dir, sources(version, broken));
  const body = await tarGz(dir, Object.keys(sources(version)));
  const res = await fetch(`${p.url}/v2/apps/live-app/environments/live/source`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${p.adminKey}`, 'content-type': 'application/gzip' },
    body,
  });
  const answer = (await res.json()) as { version: number; sha256: string };
  expect(res.status, JSON.stringify(answer)).toBe(200);
  expect(answer.sha256).toBe(sha256(body));
  return answer;
}

describe('live endpoints reload new sources without a restart', () => {
  let queueUrl: string;
  let lbUrl: string;

  const queueVersion = async (): Promise<number | undefined> => {
    const r = await call(queueUrl, 'POST', '/runsync', { key: p.adminKey, body: { input: { text: 'hi' } } });
    return r.status === 200 && r.body.status === 'COMPLETED' ? (r.body.output.version as number) : undefined;
  };
  const lbVersion = async (): Promise<number | undefined> => {
    const r = await call(lbUrl, 'GET', '/version', { key: p.adminKey });
    return r.status === 200 ? (r.body.version as number) : undefined;
  };

  /** Calls both endpoints until each answers `version`; the seconds each took from `since`. */
  async function timeToVersion(
    version: number,
    since: number,
    timeoutMs = 30_000,
  ): Promise<{ queue: number; lb: number }> {
    const took: { queue?: number; lb?: number } = {};
    const deadline = Date.now() + timeoutMs;
    while ((took.queue === undefined || took.lb === undefined) && Date.now() < deadline) {
      const [q, l] = await Promise.all([
        took.queue === undefined ? queueVersion() : version,
        took.lb === undefined ? lbVersion() : version,
      ]);
      const now = performance.now();
      if (q === version && took.queue === undefined) took.queue = (now - since) / 1000;
      if (l === version && took.lb === undefined) took.lb = (now - since) / 1000;
      await new Promise((r) => setTimeout(r, 50));
    }
    if (took.queue === undefined || took.lb === undefined)
      throw new Error(`version ${version} not answered within ${timeoutMs} ms: ${JSON.stringify(took)}`);
    return { queue: took.queue, lb: took.lb };
  }

  it("provisions a queue and a load-balanced resource in live, and both answer the build's code", async () => {
    expect(
      (await call(p.url, 'POST', '/v2/apps', { key: p.adminKey, body: { name: 'live-app', environment: 'live' } }))
        .status,
    ).toBe(201);
    const { bytes, manifest } = await artifact();
    const prepared = await call(p.url, 'POST', '/v2/apps/live-app/builds', {
      key: p.adminKey,
      body: { sha256: sha256(bytes), size: bytes.length, manifest },
    });
    expect(prepared.status, JSON.stringify(prepared.body)).toBe(201);
    expect(
      (await fetch(prepared.body.upload.url, { method: 'PUT', headers: prepared.body.upload.headers, body: bytes }))
        .status,
    ).toBe(200);
    expect(
      (await call(p.url, 'POST', `/v2/apps/live-app/builds/${prepared.body.build.id}/finalize`, { key: p.adminKey }))
        .status,
    ).toBe(200);

    const [queue, lb] = await Promise.all(
      ['echo', 'api'].map((r) =>
        call(p.url, 'PUT', `/v2/apps/live-app/environments/live/endpoints/${r}`, {
          key: p.adminKey,
          body: { buildId: prepared.body.build.id },
        }),
      ),
    );
    expect(queue!.status, JSON.stringify(queue!.body)).toBe(201);
    expect(lb!.status, JSON.stringify(lb!.body)).toBe(201);
    expect([queue!.body.name, lb!.body.name]).toEqual(['live-echo', 'live-api']);
    queueUrl = queue!.body.url;
    lbUrl = lb!.body.url;

    // The first workers start (the host builds the runtime image the first time).
    expect(await until('the queue worker to answer', queueVersion, 600_000, 500)).toBe(1);
    expect(await until('the load-balanced worker to answer', lbVersion, 300_000, 500)).toBe(1);
  }, 900_000);

  it('answers with a new source version within 3 s of its upload, on the same workers', async () => {
    const liveWorkers = () =>
      p.ctx.db.worker.findMany({
        where: { endpoint: { appEnvironment: { name: 'live' } }, status: { notIn: ['STOPPED', 'FAILED'] } },
        select: { id: true, status: true },
      });
    const workersBefore = await liveWorkers();
    expect(workersBefore, JSON.stringify(workersBefore)).toHaveLength(2);
    const timings: Array<{ code: number; sourceVersion: number; queue: number; lb: number }> = [];
    for (const version of [2, 3, 4]) {
      const started = performance.now();
      const uploaded = await uploadSource(version);
      const took = await timeToVersion(version, started);
      timings.push({ code: version, sourceVersion: uploaded.version, ...took });
    }
    console.log(
      `edit-to-new-code (upload start to first answer from the new code), seconds: ${JSON.stringify(timings)}`,
    );
    for (const t of timings) {
      expect(t.queue, JSON.stringify(t)).toBeLessThan(3);
      expect(t.lb, JSON.stringify(t)).toBeLessThan(3);
    }
    // No restart: the same workers, still on their first release.
    const workersAfter = await liveWorkers();
    expect(workersAfter.map((w) => w.id).sort()).toEqual(workersBefore.map((w) => w.id).sort());
  }, 300_000);

  it('keeps the old code answering when a new version does not import, and takes the next good one', async () => {
    const broken = await uploadSource(5, true);
    // Long enough for several polls, downloads and the failed import to have happened.
    const deadline = performance.now() + 4000;
    const answers = new Set<number | undefined>();
    while (performance.now() < deadline) {
      const [q, l] = await Promise.all([queueVersion(), lbVersion()]);
      answers.add(q);
      answers.add(l);
    }
    expect([...answers], `while version ${broken.version} (broken) was the newest`).toEqual([4]);

    const started = performance.now();
    await uploadSource(6);
    const took = await timeToVersion(6, started);
    console.log(`after a broken version, the next good one answered in ${JSON.stringify(took)} s`);
    expect(Math.max(took.queue, took.lb)).toBeLessThan(3);
  }, 300_000);
});
