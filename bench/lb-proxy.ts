/**
 * Overhead of the load-balancing proxy: the same worker routes called directly on the worker's port
 * and through `/lb/<endpointId>/...` (bearer key checked, worker chosen, in-flight counted and
 * published, body streamed), with autocannon on loopback.
 *
 *   node --import tsx bench/lb-proxy.ts [seconds=10] [connections=10]
 *
 * Starts its own PostgreSQL (Debian's package) and Temporal dev server, like the test suite, the
 * whole platform in this process, and the test worker (test/fixtures/lb-worker) as its own process.
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { newId } from '../domain/shared/index.ts';
import { freePort, startBenchPlatform } from './support.ts';

const seconds = Number(process.argv[2] ?? 10);
const connections = Number(process.argv[3] ?? 10);

const bench = await startBenchPlatform('lb');
const { platform, base, headers } = bench;

// The worker, as its own process.
const workerPort = await freePort();
const workerScript = path.join(path.dirname(fileURLToPath(import.meta.url)), '../test/fixtures/lb-worker/index.js');
const workerProc = spawn(process.execPath, [workerScript], {
  env: { PATH: process.env.PATH ?? '', PORT: String(workerPort), WORKER_NAME: 'bench' },
  stdio: 'ignore',
});
for (let i = 0; ; i++) {
  try {
    if ((await fetch(`http://127.0.0.1:${workerPort}/ping`)).status === 200) break;
  } catch {
    if (i > 100) throw new Error('the worker did not start');
  }
  await new Promise((r) => setTimeout(r, 100));
}

const created = await fetch(`${base}/v2/serverless`, {
  method: 'POST',
  headers,
  body: JSON.stringify({
    name: 'bench-lb',
    type: 'LOAD_BALANCING',
    image: 'img:1',
    gpu: { pools: ['AMPERE_24'] },
    workers: { min: 0, max: 1 },
  }),
});
const endpoint = (await created.json()) as { id: string };
if (created.status !== 201) throw new Error(`create failed: ${created.status} ${JSON.stringify(endpoint)}`);
// A ready worker the way the orchestration leaves one: a host row (disabled: nothing is placed there) and an IDLE worker row.
const db = platform.ctx.db;
const hostId = newId();
await db.host.create({
  data: {
    id: hostId,
    name: 'bench-loopback',
    address: '127.0.0.1',
    user: 'bench',
    dataCenterId: 'dc',
    status: 'DISABLED',
  },
});
await db.worker.create({
  data: {
    id: newId(),
    endpointId: endpoint.id,
    hostId,
    hostPort: workerPort,
    status: 'IDLE',
    readyAt: new Date(),
    startedAt: new Date(),
  },
});

interface Row {
  name: string;
  reqPerSec: number;
  p50: number;
  p99: number;
  non2xx: number;
  errors: number;
}

async function run(name: string, opts: autocannon.Options): Promise<Row> {
  // The load generator runs in a worker thread: it must not share the server's event loop.
  const result = await autocannon({ connections, duration: seconds, workers: 1, ...opts });
  return {
    name,
    reqPerSec: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    non2xx: result.non2xx,
    errors: result.errors,
  };
}

const direct = `http://127.0.0.1:${workerPort}`;
const proxied = `${base}/lb/${endpoint.id}`;
const body = JSON.stringify({ prompt: 'a lighthouse at dusk', steps: 30, seed: 42 });
// Warm-up: connections, the endpoint's view, JIT.
await autocannon({ url: `${proxied}/health`, headers, connections, duration: 2, workers: 1 });

const rows: Row[] = [];
rows.push(await run('GET /health, direct to the worker', { url: `${direct}/health` }));
rows.push(await run('GET /health, through the proxy', { url: `${proxied}/health`, headers }));
rows.push(
  await run('POST /process (54-byte JSON), direct', { url: `${direct}/process`, method: 'POST', headers, body }),
);
rows.push(
  await run('POST /process (54-byte JSON), through the proxy', {
    url: `${proxied}/process`,
    method: 'POST',
    headers,
    body,
  }),
);

console.log(`connections ${connections}, ${seconds} s each; worker: test/fixtures/lb-worker (node, own process)`);
console.log('| request | req/s | p50 ms | p99 ms | non-2xx | errors |');
console.log('|---|---|---|---|---|---|');
for (const r of rows)
  console.log(`| ${r.name} | ${r.reqPerSec.toFixed(0)} | ${r.p50} | ${r.p99} | ${r.non2xx} | ${r.errors} |`);

workerProc.kill('SIGTERM');
await bench.stop();
