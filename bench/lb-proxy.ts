/**
 * The load-balancing proxy against its floors: the same routes of the test worker called directly
 * on the worker's port, through nginx (Debian's package, a plain keep-alive reverse proxy: the
 * anchor for what a proxy costs on this machine) and through Gantry's `/lb/<endpointId>/...` (bearer
 * key checked, quota counted, worker chosen, in-flight counted and published, body streamed).
 *
 *   node --import tsx bench/lb-proxy.ts [seconds=6] [connections=1,10,100] [rounds=1] [requests=get,post,ws]
 *
 * The load generators (autocannon's CLI, bench/lb-ws-load.ts for WebSocket echoes) run as processes
 * of their own, so that the CPU each proxy spends per request is read off that proxy alone: the
 * platform's from this process (process.cpuUsage), nginx's and the worker's from /proc. Starts its own
 * PostgreSQL and Temporal dev server like the test suite, the whole platform in this process, the
 * test worker (test/fixtures/lb-worker) and two nginx instances (1 worker process, and `auto`).
 * Gantry is measured three ways: the platform in this process (as `npm start` runs it), one API
 * process of its own (GANTRY_ROLE=api), and two API processes sharing one port (GANTRY_REUSE_PORT).
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { newId } from '../domain/shared/index.ts';
import { cpuSeconds, loadAverage } from './proc.ts';
import { BENCH_QUOTAS, freePort, startBenchPlatform } from './support.ts';

const seconds = Number(process.argv[2] ?? 6);
const connectionLevels = (process.argv[3] ?? '1,10,100').split(',').map(Number);
const rounds = Number(process.argv[4] ?? 1);
const REQUESTS = { get: 'GET /health', post: 'POST /process', ws: 'WebSocket echo' } as const;
const requests = (process.argv[5] ?? 'get,post,ws').split(',').map((k) => REQUESTS[k as keyof typeof REQUESTS]);
const here = path.dirname(fileURLToPath(import.meta.url));
const autocannonBin = createRequire(import.meta.url).resolve('autocannon/autocannon.js');

const bench = await startBenchPlatform('lb');
const { platform, base, headers } = bench;
const children: Array<{ kill: (signal?: NodeJS.Signals) => boolean }> = [];
const scratch = mkdtempSync(path.join(tmpdir(), 'gantry-bench-lb-'));

async function waitFor(url: string, what: string): Promise<void> {
  for (let i = 0; ; i++) {
    try {
      if ((await fetch(url)).status < 500) return;
    } catch {
      if (i > 100) throw new Error(`${what} did not start`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

// The worker, as its own process.
const workerPort = await freePort();
const workerProc = spawn(process.execPath, [path.join(here, '../test/fixtures/lb-worker/index.js')], {
  env: { PATH: process.env.PATH ?? '', PORT: String(workerPort), WORKER_NAME: 'bench' },
  stdio: 'ignore',
});
children.push(workerProc);
await waitFor(`http://127.0.0.1:${workerPort}/ping`, 'the worker');

/** nginx as a plain keep-alive reverse proxy to the worker, WebSocket upgrades passed through. */
async function startNginx(workers: string): Promise<{ url: string; pid: number }> {
  const dir = path.join(scratch, `nginx-${workers}`);
  mkdirSync(dir);
  const port = await freePort();
  writeFileSync(
    path.join(dir, 'nginx.conf'),
    `worker_processes ${workers};
daemon off;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path ${dir}/body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
  upstream worker { server 127.0.0.1:${workerPort}; keepalive 128; keepalive_timeout 4s; }
  map $http_upgrade $connection_upgrade { default upgrade; '' ''; }
  server {
    listen 127.0.0.1:${port};
    location / {
      proxy_pass http://worker;
      proxy_http_version 1.1;
      proxy_set_header Upgrade $http_upgrade;
      proxy_set_header Connection $connection_upgrade;
    }
  }
}
`,
  );
  const proc = spawn('nginx', ['-c', path.join(dir, 'nginx.conf'), '-p', dir], { stdio: 'ignore' });
  children.push(proc);
  await waitFor(`http://127.0.0.1:${port}/ping`, `nginx (${workers})`);
  return { url: `http://127.0.0.1:${port}`, pid: proc.pid! };
}
/** A proxy in Node with no checks at all (bench/lb-bare-proxy.ts): what Node's HTTP stack and undici cost alone. */
async function startBareProxy(): Promise<{ url: string; pid: number }> {
  const port = await freePort();
  const proc = spawn(
    process.execPath,
    ['--import', 'tsx', path.join(here, 'lb-bare-proxy.ts'), String(port), `http://127.0.0.1:${workerPort}`],
    { stdio: 'ignore' },
  );
  children.push(proc);
  await waitFor(`http://127.0.0.1:${port}/ping`, 'the bare Node proxy');
  return { url: `http://127.0.0.1:${port}`, pid: proc.pid! };
}
/**
 * Gantry's API as OS processes of their own (GANTRY_ROLE=api, the platform's database and Temporal),
 * `n` of them sharing one port (GANTRY_REUSE_PORT): the kernel spreads the connections.
 */
async function startApiProcesses(n: number): Promise<{ url: string; pids: number[] }> {
  const port = await freePort();
  const pids: number[] = [];
  for (let i = 0; i < n; i++) {
    const proc = spawn(process.execPath, ['--import', 'tsx', path.join(here, '../infra/start.ts')], {
      env: {
        ...process.env,
        GANTRY_ROLE: 'api',
        PORT: String(port),
        GANTRY_REUSE_PORT: 'true',
        GANTRY_WORKER_PORT: String(await freePort()),
        DATABASE_URL: platform.databaseUrl,
        TEMPORAL_ADDRESS: platform.temporalAddress,
        GANTRY_ADMIN_API_KEY: bench.adminKey,
        GANTRY_DATA_DIR: mkdtempSync(path.join(scratch, 'api-')),
        LOG_LEVEL: 'warn',
        GANTRY_RATE_LIMITS: BENCH_QUOTAS,
        GANTRY_JOB_RATE_LIMITS: BENCH_QUOTAS,
        GANTRY_PROXY_RATE_LIMITS: BENCH_QUOTAS,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.push(proc);
    let out = '';
    proc.stdout.on('data', (d: Buffer) => (out += d.toString()));
    proc.stderr.on('data', (d: Buffer) => (out += d.toString()));
    for (let waited = 0; !out.includes('Gantry is up'); waited += 100) {
      if (proc.exitCode !== null || waited > 120_000) throw new Error(`API process ${i + 1} did not start: ${out}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    pids.push(proc.pid!);
  }
  return { url: `http://127.0.0.1:${port}`, pids };
}
const bare = await startBareProxy();
const nginx1 = await startNginx('1');
const nginxAuto = await startNginx('auto');

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

const oneApi = await startApiProcesses(1);
const twoApis = await startApiProcesses(2);

interface Target {
  name: string;
  base: string;
  /** CPU seconds of the proxy so far (none for the direct calls). */
  cpu?: () => number;
}
const selfCpu = (): number => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
};
const targets: Target[] = [
  { name: 'direct', base: `http://127.0.0.1:${workerPort}` },
  { name: 'nginx, 1 worker process', base: nginx1.url, cpu: () => cpuSeconds(nginx1.pid) },
  { name: 'nginx, auto (2)', base: nginxAuto.url, cpu: () => cpuSeconds(nginxAuto.pid) },
  { name: 'bare Node proxy, no checks', base: bare.url, cpu: () => cpuSeconds(bare.pid) },
  { name: 'Gantry', base: `${base}/lb/${endpoint.id}`, cpu: selfCpu },
  {
    name: 'Gantry, 1 API process',
    base: `${oneApi.url}/lb/${endpoint.id}`,
    cpu: () => cpuSeconds(oneApi.pids[0]!),
  },
  {
    name: 'Gantry, 2 API processes on one port',
    base: `${twoApis.url}/lb/${endpoint.id}`,
    cpu: () => twoApis.pids.reduce((sum, pid) => sum + cpuSeconds(pid), 0),
  },
];

interface Measured {
  perSecond: number;
  p50: number;
  p99: number;
  failed: number;
  proxyCpuUs?: number;
  workerCpuUs: number;
}

function runChild(args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.on('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`load generator exited ${code}`))));
  });
}

/** Runs `load` against `target` and reads the CPU the proxy and the worker spent meanwhile. */
async function measure(
  target: Target,
  load: () => Promise<Omit<Measured, 'proxyCpuUs' | 'workerCpuUs'> & { count: number }>,
): Promise<Measured> {
  const proxyBefore = target.cpu?.();
  const workerBefore = cpuSeconds(workerProc.pid!);
  const r = await load();
  const perCount = (s: number): number => (s * 1e6) / Math.max(1, r.count);
  return {
    ...r,
    proxyCpuUs: target.cpu ? perCount(target.cpu() - proxyBefore!) : undefined,
    workerCpuUs: perCount(cpuSeconds(workerProc.pid!) - workerBefore),
  };
}

const authorization = headers.authorization!;
const body = JSON.stringify({ prompt: 'a lighthouse at dusk', steps: 30, seed: 42 });

async function http(target: Target, route: 'GET /health' | 'POST /process', connections: number): Promise<Measured> {
  const args = [autocannonBin, '--json', '-c', String(connections), '-d', String(seconds)];
  if (target.name.startsWith('Gantry')) args.push('-H', `authorization=${authorization}`);
  if (route === 'POST /process') args.push('-m', 'POST', '-H', 'content-type=application/json', '-b', body);
  args.push(`${target.base}${route.split(' ')[1]}`);
  return measure(target, async () => {
    const out = JSON.parse(await runChild(args)) as {
      requests: { average: number; total: number };
      latency: { p50: number; p99: number };
      non2xx: number;
      errors: number;
    };
    return {
      perSecond: out.requests.average,
      p50: out.latency.p50,
      p99: out.latency.p99,
      failed: out.non2xx + out.errors,
      count: out.requests.total,
    };
  });
}

async function webSocket(target: Target, connections: number): Promise<Measured> {
  if (target.name.startsWith('bare')) return { perSecond: NaN, p50: NaN, p99: NaN, failed: 0, workerCpuUs: NaN };
  const url = `${target.base.replace(/^http/, 'ws')}/ws`;
  const args = ['--import', 'tsx', path.join(here, 'lb-ws-load.ts'), url, String(connections), String(seconds)];
  if (target.name.startsWith('Gantry')) args.push(authorization);
  return measure(target, async () => {
    const out = JSON.parse(await runChild(args)) as {
      messages: number;
      perSecond: number;
      p50Ms: number;
      p99Ms: number;
    };
    return { perSecond: out.perSecond, p50: out.p50Ms, p99: out.p99Ms, failed: 0, count: out.messages };
  });
}

// Warm-up: connections, the endpoint's view, JIT.
for (const t of targets) await http(t, 'GET /health', 10);

interface Row extends Measured {
  round: number;
  what: string;
  connections: number;
  target: string;
}
const rows: Row[] = [];
const idleFrom = selfCpu();
await new Promise((r) => setTimeout(r, 3000));
const idleMsPerSecond = ((selfCpu() - idleFrom) / 3) * 1000;

for (let round = 0; round < rounds; round++) {
  for (const connections of connectionLevels) {
    for (const what of requests) {
      for (const t of targets) {
        const m = what === 'WebSocket echo' ? await webSocket(t, connections) : await http(t, what, connections);
        rows.push({ ...m, round, what, connections, target: t.name });
      }
    }
  }
}

const f = (n: number | undefined, digits = 0): string => (n === undefined || Number.isNaN(n) ? '' : n.toFixed(digits));
console.log(
  `${new Date().toISOString()}, ${seconds} s per row, load average at the end ${loadAverage()}; ` +
    `the platform process idles at ${idleMsPerSecond.toFixed(1)} ms CPU/s (counted in its CPU per request)`,
);
console.log(
  '| request | conns | target | per s | of direct | of nginx (best) | p50 ms | p99 ms | failed | proxy CPU µs/req | worker CPU µs/req |',
);
console.log('|---|---|---|---|---|---|---|---|---|---|---|');
for (const r of rows) {
  const same = rows.filter((o) => o.round === r.round && o.what === r.what && o.connections === r.connections);
  const direct = same.find((o) => o.target === 'direct')!;
  const nginxBest = Math.max(...same.filter((o) => o.target.startsWith('nginx')).map((o) => o.perSecond));
  console.log(
    `| ${r.what} | ${r.connections} | ${r.target} | ${f(r.perSecond)} | ${f(r.perSecond / direct.perSecond, 2)} | ` +
      `${r.target === 'direct' ? '' : f(r.perSecond / nginxBest, 2)} | ${f(r.p50, 2)} | ${f(r.p99, 2)} | ${r.failed} | ` +
      `${f(r.proxyCpuUs)} | ${f(r.workerCpuUs)} |`,
  );
}
// At one connection the mean time per request is 1 / rate: what each proxy adds to the direct call.
for (const what of ['GET /health', 'POST /process', 'WebSocket echo']) {
  const one = rows.filter((r) => r.round === 0 && r.what === what && r.connections === 1);
  const direct = one.find((r) => r.target === 'direct');
  if (!direct) continue;
  const added = one
    .filter((r) => r.target !== 'direct')
    .map((r) => `${r.target} +${f(1000 / r.perSecond - 1000 / direct.perSecond, 3)} ms`);
  console.log(`one connection, ${what}: mean added per request: ${added.join(', ')}`);
}

for (const c of children) c.kill('SIGTERM');
await bench.stop();
rmSync(scratch, { recursive: true, force: true });
