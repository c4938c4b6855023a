/**
 * Load-balancing endpoints at `https://<endpointId>.<GANTRY_LB_DOMAIN>`, the address the hosted
 * service's `flash` tool forms from RUNPOD_ENDPOINT_BASE_URL's host, served by the API's own TLS
 * (GANTRY_TLS_CERT, GANTRY_TLS_KEY). A throwaway CA signs a certificate for `*.gantry.test` and
 * `gantry.test`; the wildcard name resolves to the loopback address through the clients' own
 * resolver hooks (Node's `lookup`, Python's `socket.getaddrinfo`), so no DNS is touched. Workers are
 * the lb-worker fixture as processes of their own, registered as ready Worker rows.
 */
import { execFile } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { connect as tlsConnect } from 'node:tls';
import { Agent, fetch as undiciFetch } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { issueApiKey } from '../../domain/accounts/index.ts';
import { newId } from '../../domain/shared/index.ts';
import { ensurePythonClients, FLASH_CLIENT_REQUIREMENTS } from '../support/python-clients.ts';
import { startTestPlatform, type TestPlatform } from '../support/platform.ts';
import { createTestCa, issueTestCertificate, type TestCa } from '../support/test-certificates.ts';
import {
  createLoopbackHost,
  registerWorker,
  startLbWorker,
  stats,
  until,
  type LbWorkerProcess,
} from '../support/lb.ts';

const DOMAIN = 'gantry.test';

let ca: TestCa;
/** The files the platform serves from: renewals are copied over them. */
let served: { certFile: string; keyFile: string };
let p: TestPlatform;
let port: number;
let endpointId: string;
let worker: LbWorkerProcess;
let python: string;

/** Every name under DOMAIN is this machine, as a wildcard DNS record would say. */
function lookup(
  hostname: string,
  options: { all?: boolean },
  callback: (err: Error | null, address: string | LookupAddress[], family?: number) => void,
): void {
  if (hostname !== DOMAIN && !hostname.endsWith(`.${DOMAIN}`))
    return void dnsLookup(hostname, options, callback as never);
  if (options.all) callback(null, [{ address: '127.0.0.1', family: 4 }]);
  else callback(null, '127.0.0.1', 4);
}

let agent: Agent;
async function https(
  url: string,
  init: { method?: string; key?: string; body?: unknown } = {},
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- tests read arbitrary JSON
): Promise<{ status: number; headers: Headers; body: any }> {
  const headers: Record<string, string> = {};
  if (init.key) headers.authorization = `Bearer ${init.key}`;
  if (init.body !== undefined) headers['content-type'] = 'application/json';
  const res = await undiciFetch(url, {
    method: init.method ?? 'GET',
    headers,
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
    dispatcher: agent,
  });
  const text = await res.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON: keep the text
  }
  return { status: res.status, headers: res.headers as unknown as Headers, body };
}

/** The certificate a TLS client asking for `servername` is shown, and whether it checks out against the test CA. */
function servedCertificate(servername: string): Promise<{ fingerprint: string; authorized: boolean }> {
  return new Promise((resolve, reject) => {
    const socket = tlsConnect(
      { host: '127.0.0.1', port, servername, ca: [readCa()], rejectUnauthorized: false },
      () => {
        const peer = socket.getPeerCertificate();
        resolve({ fingerprint: peer.fingerprint256, authorized: socket.authorized });
        socket.end();
      },
    );
    socket.once('error', reject);
  });
}

const fingerprintOf = (file: string): string => new X509Certificate(readFileSync(file)).fingerprint256;
const readCa = (): Buffer => readFileSync(ca.certFile);

beforeAll(async () => {
  python = await ensurePythonClients({ requirements: FLASH_CLIENT_REQUIREMENTS });
  ca = createTestCa();
  const first = issueTestCertificate(ca, 'first', [`*.${DOMAIN}`, DOMAIN]);
  served = { certFile: path.join(ca.dir, 'served.pem'), keyFile: path.join(ca.dir, 'served.key') };
  copyFileSync(first.certFile, served.certFile);
  copyFileSync(first.keyFile, served.keyFile);
  agent = new Agent({ connect: { ca: readCa(), lookup } });
  p = await startTestPlatform({
    GANTRY_TLS_CERT: served.certFile,
    GANTRY_TLS_KEY: served.keyFile,
    GANTRY_LB_DOMAIN: DOMAIN,
    GANTRY_LB_HEALTH: JSON.stringify({ intervalMs: 200, failuresToRemove: 2, timeoutMs: 1000 }),
  });
  port = Number(new URL(p.url).port);
  const created = await https(`https://${DOMAIN}:${port}/v2/serverless`, {
    method: 'POST',
    key: p.adminKey,
    body: {
      name: 'tls',
      type: 'LOAD_BALANCING',
      image: 'localhost/lb-test:1',
      gpu: { pools: ['AMPERE_24'] },
      workers: { min: 0, max: 1 },
    },
  });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  endpointId = created.body.id;
  worker = await startLbWorker('w-tls');
  await registerWorker(p.ctx.db, { endpointId, hostId: await createLoopbackHost(p.ctx.db), port: worker.port });
}, 600_000);

afterAll(async () => {
  await worker?.stop();
  await p?.stop();
  await agent?.close();
  if (ca) rmSync(ca.dir, { recursive: true, force: true });
});

describe('https://<endpointId>.<GANTRY_LB_DOMAIN> served by the API', () => {
  it('serves the given certificate on the API port, and the public URL and requestUrls are https', async () => {
    expect(p.ctx.publicUrl).toBe(`https://127.0.0.1:${port}`);
    const view = await https(`https://${DOMAIN}:${port}/v2/serverless/${endpointId}`, { key: p.adminKey });
    expect(view.body.requestUrls).toEqual({ base: `https://${endpointId}.${DOMAIN}:${port}` });
    const shown = await servedCertificate(`${endpointId}.${DOMAIN}`);
    expect(shown).toEqual({ fingerprint: fingerprintOf(served.certFile), authorized: true });
    // TLS only: a plain HTTP request on the port gets no answer from the API.
    const plain = await fetch(`http://127.0.0.1:${port}/healthz`).then(
      (r) => r.status,
      () => 'refused',
    );
    expect(plain).toBe('refused');
  });

  it("answers with the endpoint's worker over TLS, the key checked and not forwarded", async () => {
    const base = `https://${endpointId}.${DOMAIN}:${port}`;
    const processed = await https(`${base}/process`, { method: 'POST', key: p.adminKey, body: { n: 1 } });
    expect(processed.status).toBe(200);
    expect(processed.body).toMatchObject({ worker: 'w-tls', output: { n: 1 } });
    const seen = processed.body.headers;
    expect(seen.authorization).toBeUndefined();
    expect(seen['x-forwarded-proto']).toBe('https');
    expect(seen['x-forwarded-host']).toBe(`${endpointId}.${DOMAIN}:${port}`);

    const before = (await stats(worker)).served;
    const noKey = await https(`${base}/process`, { method: 'POST', body: { n: 2 } });
    expect(noKey.status).toBe(401);
    expect(noKey.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    const wrongKey = await https(`${base}/process`, { method: 'POST', key: 'gntr_not_a_real_key_at_all', body: {} });
    expect(wrongKey.status).toBe(401);
    expect(wrongKey.body).toMatchObject({ detail: expect.stringMatching(/invalid bearer token/) });
    // Another account's key reaches nothing of this endpoint.
    const other = await p.ctx.db.account.create({
      data: { id: newId(), email: `other-${newId()}@test`, name: 'other' },
    });
    const otherKey = await issueApiKey(p.ctx.db, other.id, 'other account', ['RUN']);
    const foreign = await https(`${base}/process`, { method: 'POST', key: otherKey.key, body: {} });
    expect(foreign.status).toBe(404);
    expect((await stats(worker)).served).toBe(before + 1); // only the /stats call itself
  });

  it('gives no worker to a host that is not an endpoint of the domain', async () => {
    const before = (await stats(worker)).served;
    const unknown = await https(`https://nosuchendpoint1.${DOMAIN}:${port}/process`, {
      method: 'POST',
      key: p.adminKey,
      body: {},
    });
    expect(unknown.status).toBe(404);
    expect(unknown.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    // The bare domain is the API: its routes, not the worker's.
    const api = await https(`https://${DOMAIN}:${port}/process`, { method: 'POST', key: p.adminKey, body: {} });
    expect(api.status).toBe(404);
    expect(api.body).toMatchObject({ detail: 'no route POST /process' });
    expect((await https(`https://${DOMAIN}:${port}/healthz`)).body).toEqual({ status: 'ok' });
    expect((await stats(worker)).served).toBe(before + 1); // only the /stats call itself
  });

  it('upgrades WebSockets over TLS', async () => {
    const ws = new WebSocket(`wss://${endpointId}.${DOMAIN}:${port}/ws`, {
      headers: { authorization: `Bearer ${p.adminKey}` },
      ca: readCa(),
      lookup: lookup as never,
    });
    try {
      const hello = await new Promise<{ hello: string; url: string }>((resolve, reject) => {
        ws.once('message', (d: Buffer) => resolve(JSON.parse(d.toString())));
        ws.once('error', reject);
      });
      expect(hello).toMatchObject({ hello: 'w-tls', url: '/ws' });
    } finally {
      ws.close();
    }
  });
});

/** runpod-flash's own code calling the platform, with only the variables a flash user sets (and the CA). */
function flashClientCall(opts: {
  key: string;
  caFile?: string;
}): Promise<{ code: number; stdout: string; stderr: string }> {
  const site = mkdtempSync(path.join(ca.dir, 'flash-'));
  // The resolver override, as a wildcard DNS record would answer: in this test's Python only.
  writeFileSync(
    path.join(site, 'sitecustomize.py'),
    [
      'import socket',
      '_getaddrinfo = socket.getaddrinfo',
      'def _resolve(host, *args, **kwargs):',
      // anyio (under httpx) asks with the name IDNA-encoded, as bytes.
      '    name = host.decode() if isinstance(host, bytes) else host',
      `    if isinstance(name, str) and (name == "${DOMAIN}" or name.endswith(".${DOMAIN}")):`,
      '        host = "127.0.0.1"',
      '    return _getaddrinfo(host, *args, **kwargs)',
      'socket.getaddrinfo = _resolve',
      '',
    ].join('\n'),
  );
  // What `flash deploy` records and prints for a load-balancing resource, its GraphQL client (aiohttp)
  // and its endpoint client (httpx), each as flash itself makes them.
  const script = [
    'import asyncio, json, sys',
    'from runpod_flash import Endpoint',
    'from runpod_flash.core.api.runpod import RunpodGraphQLClient',
    'from runpod_flash.core.resources.load_balancer_sls_resource import LoadBalancerSlsResource',
    'async def main():',
    '    endpoint_id = sys.argv[1]',
    '    url = LoadBalancerSlsResource(name="tls", imageName="unused", id=endpoint_id).endpoint_url',
    '    async with RunpodGraphQLClient() as api:',
    '        exists = await api.endpoint_exists(endpoint_id)',
    '    answer = await Endpoint(id=endpoint_id).post("/process", {"from": "flash"})',
    '    print(json.dumps({"url": url, "exists": exists, "answer": answer}))',
    'asyncio.run(main())',
  ].join('\n');
  const api = `https://${DOMAIN}:${port}`;
  return new Promise((resolve) => {
    execFile(
      python,
      ['-c', script, endpointId],
      {
        encoding: 'utf8',
        timeout: 120_000,
        cwd: site,
        env: {
          PATH: process.env.PATH,
          HOME: site,
          PYTHONPATH: site,
          RUNPOD_API_KEY: opts.key,
          RUNPOD_API_BASE_URL: api,
          RUNPOD_ENDPOINT_BASE_URL: `${api}/v2`,
          RUNPOD_REST_API_URL: `${api}/v2`,
          RUNPOD_HAPI_URL: api,
          RUNPOD_CONSOLE_URL: api,
          FLASH_NO_UPDATE_CHECK: '1',
          // httpx (load-balancing calls) and aiohttp (GraphQL), flash's clients, trust this CA file
          // instead of certifi's and the system's lists.
          ...(opts.caFile ? { SSL_CERT_FILE: opts.caFile } : {}),
        },
      },
      (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

describe("flash's own client", () => {
  it('calls https://<endpointId>.<host of RUNPOD_ENDPOINT_BASE_URL> and gets the worker, trusting the CA given in SSL_CERT_FILE', async () => {
    const ok = await flashClientCall({ key: p.adminKey, caFile: ca.certFile });
    expect(ok.code, ok.stderr).toBe(0);
    const out = JSON.parse(ok.stdout.trim().split('\n').at(-1)!);
    // flash keeps RUNPOD_ENDPOINT_BASE_URL's port and drops its path.
    expect(out.url).toBe(`https://${endpointId}.${DOMAIN}:${port}`);
    // The GraphQL API over the same TLS, through aiohttp, which reads SSL_CERT_FILE too.
    expect(out.exists).toBe(true);
    expect(out.answer).toMatchObject({ worker: 'w-tls', output: { from: 'flash' } });
    expect(out.answer.headers['x-forwarded-proto']).toBe('https');
    expect(out.answer.headers['user-agent']).toMatch(/flash/i);

    // Without the CA, the certificate is refused: the call above did check it.
    const untrusted = await flashClientCall({ key: p.adminKey });
    expect(untrusted.code).not.toBe(0);
    expect(untrusted.stderr).toMatch(/CERTIFICATE_VERIFY_FAILED/);
    // A wrong key is the platform's 401, raised by flash's client.
    const refused = await flashClientCall({ key: 'gntr_not_a_real_key_at_all', caFile: ca.certFile });
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(/401/);
  }, 240_000);
});

describe('certificate renewal', () => {
  it('serves a renewed pair to new connections without a restart, and keeps the served one when the new pair does not match', async () => {
    const host = `${endpointId}.${DOMAIN}`;
    const before = fingerprintOf(served.certFile);
    const renewed = issueTestCertificate(ca, 'renewed', [`*.${DOMAIN}`, DOMAIN]);
    copyFileSync(renewed.keyFile, served.keyFile);
    copyFileSync(renewed.certFile, served.certFile);
    const now = fingerprintOf(renewed.certFile);
    expect(now).not.toBe(before);
    await until(
      'the renewed certificate to be served',
      async () => (await servedCertificate(host)).fingerprint === now,
      15_000,
      200,
    );
    const after = await https(`https://${host}:${port}/process`, { method: 'POST', key: p.adminKey, body: { n: 3 } });
    expect(after.body).toMatchObject({ worker: 'w-tls', output: { n: 3 } });

    // A certificate whose key is not there (a renewal cut off half way): the renewed one stays.
    const orphan = issueTestCertificate(ca, 'orphan', [`*.${DOMAIN}`, DOMAIN]);
    copyFileSync(orphan.certFile, served.certFile);
    await new Promise((r) => setTimeout(r, 3000));
    expect((await servedCertificate(host)).fingerprint).toBe(now);
  }, 60_000);
});
