/**
 * Requests per second of the management API with rate limiting on (quotas set high, so every
 * request still runs the counter upsert): GET /v2/serverless/{id}, and PATCH of its scaling (a
 * database transaction plus the `updateSpec` Temporal Update on the endpoint's workflow).
 *
 *   node --import tsx bench/management.ts [seconds=10] [connections=10]
 *
 * Starts its own PostgreSQL (Debian's package) and Temporal dev server, like the test suite, and
 * the whole platform (API and Temporal worker) in this process.
 */
import autocannon from 'autocannon';
import { authenticate, authenticateCurrent } from '../domain/accounts/index.ts';
import { consumeRateLimit, parseRateLimits } from '../domain/rate-limits/index.ts';
import { startBenchPlatform } from './support.ts';

const seconds = Number(process.argv[2] ?? 10);
const connections = Number(process.argv[3] ?? 10);

// High quotas: the limiter runs on every request but never refuses one.
process.env.GANTRY_RATE_LIMITS = 'minute=1000000000,hour=1000000000,day=1000000000';
const bench = await startBenchPlatform('mgmt');
const { platform, base, adminKey, headers } = bench;

const created = await fetch(`${base}/v2/serverless`, {
  method: 'POST',
  headers,
  body: JSON.stringify({ name: 'bench', image: 'img:1', gpu: { pools: ['AMPERE_24'] }, workers: { min: 0, max: 3 } }),
});
const endpoint = (await created.json()) as { id: string };
if (created.status !== 201) throw new Error(`create failed: ${created.status} ${JSON.stringify(endpoint)}`);
// Let the workflow load its spec before Updates arrive.
await new Promise((r) => setTimeout(r, 1000));

interface Row {
  name: string;
  reqPerSec: number;
  p50: number;
  p99: number;
  non2xx: number;
  errors: number;
  /** CPU of the API's event loop (the main thread; the load generator runs in a worker thread) per request, µs. */
  cpuUs: number;
}

async function run(name: string, opts: autocannon.Options): Promise<Row> {
  // The load generator runs in a worker thread: it must not share the server's event loop.
  const cpuBefore = process.threadCpuUsage();
  const result = await autocannon({ connections, duration: seconds, workers: 1, ...opts });
  const cpu = process.threadCpuUsage(cpuBefore);
  return {
    cpuUs: (cpu.user + cpu.system) / Math.max(1, result.requests.total),
    name,
    reqPerSec: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    non2xx: result.non2xx,
    errors: result.errors,
  };
}

const url = `${base}/v2/serverless/${endpoint.id}`;
const rows: Row[] = [];
rows.push(await run('GET /healthz (no key, no database: the floor)', { url: `${base}/healthz` }));
rows.push(await run('GET /v2/serverless/{id}', { url, headers }));
rows.push(
  await run('PATCH /v2/serverless/{id} (scaling)', {
    url,
    // Each connection cycles through these, so consecutive requests change the value.
    requests: Array.from({ length: 20 }, (_, i) => ({
      method: 'PATCH' as const,
      headers,
      body: JSON.stringify({ scaling: { value: 1 + i / 10 } }),
    })),
  }),
);

// The limiter's own cost: its one SQL statement, sequentially, on an otherwise idle server.
const principal = await authenticate(platform.ctx, adminKey);
const quotas = parseRateLimits(process.env.GANTRY_RATE_LIMITS);
const calls = 1000;
const started = performance.now();
for (let i = 0; i < calls; i++) await consumeRateLimit(platform.ctx, principal, quotas);
const limiterMs = (performance.now() - started) / calls;

// The key check's CPU in this process: as the management API makes it (remembered while the
// process hears key changes) and as a read of the key every time.
async function cpuPerCall(fn: () => Promise<unknown>): Promise<number> {
  for (let i = 0; i < 100; i++) await fn();
  const before = process.cpuUsage();
  for (let i = 0; i < calls; i++) await fn();
  const used = process.cpuUsage(before);
  return (used.user + used.system) / 1000 / calls;
}
const keyCurrentMs = await cpuPerCall(() => authenticateCurrent(platform.ctx, adminKey));
const keyReadMs = await cpuPerCall(() => authenticate(platform.ctx, adminKey));
const following = platform.ctx.records?.followsChanges ?? false;

const spec = await fetch(url, { headers }).then((r) => r.json());
console.log(
  `connections ${connections}, ${seconds} s each, rate limiting on; final scaling ${JSON.stringify((spec as { scaling: unknown }).scaling)}`,
);
console.log('| request | req/s | p50 ms | p99 ms | non-2xx | errors | API main thread CPU µs/req |');
console.log('|---|---|---|---|---|---|---|');
for (const r of rows)
  console.log(
    `| ${r.name} | ${r.reqPerSec.toFixed(0)} | ${r.p50} | ${r.p99} | ${r.non2xx} | ${r.errors} | ${r.cpuUs.toFixed(0)} |`,
  );
console.log(`rate-limit statement alone: ${limiterMs.toFixed(2)} ms per call (${calls} sequential calls)`);
console.log(
  `GET /v2/serverless/{id} as a ratio to the floor: ${((100 * rows[1]!.reqPerSec) / rows[0]!.reqPerSec).toFixed(1)} %`,
);
console.log(
  `key check, CPU per call: ${keyCurrentMs.toFixed(3)} ms as the management API makes it (following key changes: ${following}), ${keyReadMs.toFixed(3)} ms reading the key`,
);

await bench.stop();
