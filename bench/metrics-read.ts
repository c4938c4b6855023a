/**
 * Endpoint metrics (domain/metrics): the rollup over a week of one endpoint's jobs, the reads of
 * GET /v2/serverless/{id}/metrics against GET /healthz, and what the partial completedAt index the
 * rollup reads by costs a job's completion.
 *
 *   node tooling/bootstrap.mjs node --import tsx bench/metrics-read.ts [jobs=1000000] [reads=40]
 *
 * Starts its own PostgreSQL (Debian's package) and Temporal dev server and the whole platform in
 * this process (bench/support.ts). The platform's own rollup schedule is deleted first so that the
 * backfill below is the only run. CPU is counted for this process (the API and the Prisma client)
 * and for the PostgreSQL server (its processes' times from /proc), separately.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { metricsRollupScheduleId } from '../contracts/workflows.ts';
import { rollupEndpointMetrics } from '../domain/metrics/index.ts';
import { startBenchPlatform } from './support.ts';

const JOBS = Number(process.argv[2] ?? 1_000_000);
const READS = Number(process.argv[3] ?? 40);
const DAY = 86_400_000;

const bench = await startBenchPlatform('metrics');
const { platform, base, headers } = bench;
const { db } = platform.ctx;
await platform.ctx.temporal.schedule
  .getHandle(metricsRollupScheduleId(platform.ctx.taskQueue))
  .delete()
  .catch(() => undefined);

/** CPU ms of this bench's PostgreSQL server: the postmaster (with its ended children) and its live children. */
const TICK_MS = 10; // USER_HZ 100
function postgresCpuMs(): number {
  const procs = readdirSync('/proc').filter((d) => /^\d+$/.test(d));
  const stat = (pid: string) => {
    try {
      const s = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
      return { ppid: f[1]!, utime: +f[11]!, stime: +f[12]!, cutime: +f[13]!, cstime: +f[14]! };
    } catch {
      return null;
    }
  };
  // The postmaster: the `postgres` process whose command line names this bench's directory.
  const master = procs.find((pid) => {
    try {
      return (
        readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === 'postgres' &&
        readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('gantry-bench-metrics-')
      );
    } catch {
      return false;
    }
  });
  if (!master) return NaN;
  const m = stat(master)!;
  let ticks = m.utime + m.stime + m.cutime + m.cstime;
  for (const pid of procs) {
    const s = stat(pid);
    if (s?.ppid === master) ticks += s.utime + s.stime;
  }
  return ticks * TICK_MS;
}

/** Wall ms, this process's CPU ms and PostgreSQL's CPU ms of fn. */
async function measure<T>(fn: () => Promise<T>): Promise<{ wall: number; cpu: number; pg: number; value: T }> {
  const pg0 = postgresCpuMs();
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const value = await fn();
  const wall = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  return { wall, cpu: (cpu.user + cpu.system) / 1000, pg: postgresCpuMs() - pg0, value };
}

const created = await fetch(`${base}/v2/serverless`, {
  method: 'POST',
  headers,
  body: JSON.stringify({ name: 'metrics', image: 'img:1', gpu: { pools: ['AMPERE_24'] }, workers: { min: 0, max: 3 } }),
});
const endpoint = (await created.json()) as { id: string };
if (created.status !== 201) throw new Error(`create failed: ${created.status} ${JSON.stringify(endpoint)}`);
const [{ accountId }] = await db.$queryRawUnsafe<[{ accountId: string }]>(
  `SELECT "accountId" FROM "Endpoint" WHERE id = $1`,
  endpoint.id,
);

// A week of finished jobs, evenly spread, ending a minute ago: 95 % completed, 3 % failed, 1 % timed
// out, 1 % cancelled; execution about 1 ms .. 3 s and delay about 1 ms .. 400 ms, log-uniform.
const insert = await measure(() =>
  db.$executeRawUnsafe(
    `INSERT INTO "Job" (id, "endpointId", "accountId", status, input, "createdAt", "startedAt", "completedAt", "expiresAt")
     SELECT 'bench' || i, $1, $2, s.status::"JobStatus", '{}'::jsonb,
            c - (x + d) * interval '1 millisecond', c - x * interval '1 millisecond', c, c + interval '30 days'
     FROM generate_series(1, $3::int) AS i,
          LATERAL (SELECT (now() AT TIME ZONE 'UTC') - interval '1 minute' - (i::float8 / $3::float8) * interval '7 days' AS c,
                          exp(random() * 8) AS x, exp(random() * 6) AS d, random() AS r) g,
          LATERAL (SELECT CASE WHEN g.r < 0.95 THEN 'COMPLETED' WHEN g.r < 0.98 THEN 'FAILED'
                               WHEN g.r < 0.99 THEN 'TIMED_OUT' ELSE 'CANCELLED' END AS status) s`,
    endpoint.id,
    accountId,
    JOBS,
  ),
);
await db.$executeRawUnsafe(`VACUUM ANALYZE "Job"`);
console.log(`inserted ${JOBS} jobs over 7 days in ${(insert.wall / 1000).toFixed(1)} s`);

// The whole week but its last two minutes in one run (the schedule's runs reach 10 minutes back; this
// is a backfill), then a scheduled run: the next minute (about JOBS / 10080 jobs), found by the
// completedAt index among all the rows.
await db.$executeRawUnsafe(`DELETE FROM "MetricRollupState"`);
const backfillAt = Date.now() - 2 * 60_000;
const backfill = await measure(() =>
  rollupEndpointMetrics(platform.ctx, {
    now: new Date(backfillAt),
    lookbackMs: 7 * DAY + 3_600_000,
    timeoutMs: 3_600_000,
  }),
);
const rows = await db.endpointMetricMinute.count({ where: { endpointId: endpoint.id } });
console.log(
  `rollup of the week: ${backfill.value.jobs} jobs into ${rows} minutes, ${(backfill.wall / 1000).toFixed(1)} s wall, ` +
    `${((1000 * backfill.wall) / backfill.value.jobs).toFixed(1)} µs wall/job, PostgreSQL CPU ${((1000 * backfill.pg) / backfill.value.jobs).toFixed(1)} µs/job, ` +
    `this process ${backfill.cpu.toFixed(0)} ms CPU`,
);
const step = await measure(() => rollupEndpointMetrics(platform.ctx, { now: new Date(backfillAt + 60_000) }));
console.log(
  `one scheduled run (${step.value.jobs} jobs of one minute, ${JOBS} rows in Job): ${step.wall.toFixed(1)} ms wall, PostgreSQL ${step.pg.toFixed(0)} ms CPU, this process ${step.cpu.toFixed(1)} ms CPU`,
);
await rollupEndpointMetrics(platform.ctx);

/** Sequential GETs: wall and CPU per request. */
async function reads(path: string, n: number, auth = true) {
  const get = async () => {
    const r = await fetch(base + path, { headers: auth ? headers : {} });
    if (r.status !== 200) throw new Error(`${path}: ${r.status} ${await r.text()}`);
    return r.text();
  };
  for (let i = 0; i < 3; i++) await get();
  const m = await measure(async () => {
    for (let i = 0; i < n; i++) await get();
  });
  return { path, wall: m.wall / n, cpu: m.cpu / n, pg: m.pg / n };
}
const results = [
  await reads('/healthz', READS * 10, false),
  await reads(`/v2/serverless/${endpoint.id}/metrics?window=7d&step=1h`, READS),
  await reads(`/v2/serverless/${endpoint.id}/metrics?window=24h&step=5m`, READS),
  await reads(`/v2/serverless/${endpoint.id}/metrics?window=1h&step=1m`, READS),
];
console.log('| request | ms wall/req | × /healthz | API process CPU ms/req | PostgreSQL CPU ms/req |');
console.log('|---|---|---|---|---|');
for (const r of results)
  console.log(
    `| ${r.path.replace(endpoint.id, '{id}')} | ${r.wall.toFixed(2)} | ${(r.wall / results[0]!.wall).toFixed(1)} | ${r.cpu.toFixed(2)} | ${r.pg.toFixed(2)} |`,
  );

// What the partial completedAt index costs a completion: jobs taken (IN_PROGRESS) then finished,
// with and without it, twice each: 100k in statements of 1000 rows, and 10k one row per statement
// (as the job API finishes them). On an endpoint row of its own (no workflow), the jobs seen by their
// worker until tomorrow (no supervision sweep takes them for lost).
const quiet = `bench${Date.now()}`;
await db.endpoint.create({ data: { id: quiet, accountId, name: 'completions', image: 'img:1' } });
async function completions(withIndex: boolean, round: number) {
  if (!withIndex) await db.$executeRawUnsafe(`DROP INDEX IF EXISTS "Job_completedAt_idx"`);
  const prefix = `c${round}${withIndex ? 'i' : 'n'}`;
  await db.$executeRawUnsafe(
    `INSERT INTO "Job" (id, "endpointId", "accountId", status, input, "createdAt", "startedAt", "lastSeenAt", "expiresAt")
     SELECT $3 || i, $1, $2, 'IN_PROGRESS', '{}'::jsonb, n, n, n + interval '1 day', n + interval '1 day'
     FROM generate_series(1, 110000) AS i, (SELECT now() AT TIME ZONE 'UTC' AS n) t`,
    quiet,
    accountId,
    prefix,
  );
  await db.$executeRawUnsafe(`VACUUM ANALYZE "Job"`);
  const batched = await measure(async () => {
    for (let b = 0; b < 100; b++)
      await db.$executeRawUnsafe(
        `UPDATE "Job" SET status = 'COMPLETED', "completedAt" = now() AT TIME ZONE 'UTC', seq = seq + 1
         WHERE id IN (SELECT $1 || i FROM generate_series($2::int, $2::int + 999) AS i)`,
        prefix,
        1 + b * 1000,
      );
  });
  const single = await measure(async () => {
    for (let i = 100_001; i <= 110_000; i++)
      await db.$executeRawUnsafe(
        `UPDATE "Job" SET status = 'COMPLETED', "completedAt" = now() AT TIME ZONE 'UTC', seq = seq + 1 WHERE id = $1`,
        prefix + i,
      );
  });
  if (!withIndex)
    await db.$executeRawUnsafe(
      `CREATE INDEX "Job_completedAt_idx" ON "Job"("completedAt") WHERE ("completedAt" IS NOT NULL)`,
    );
  return {
    withIndex,
    batchedUs: (1000 * batched.wall) / 100_000,
    batchedPgUs: (1000 * batched.pg) / 100_000,
    singleUs: (1000 * single.wall) / 10_000,
    singlePgUs: (1000 * single.pg) / 10_000,
  };
}
const costs = [];
for (let round = 0; round < 2; round++) {
  costs.push(await completions(false, round));
  costs.push(await completions(true, round));
}
console.log(
  '| completedAt index | batched µs wall/job | batched PostgreSQL CPU µs/job | single µs wall/job | single PostgreSQL CPU µs/job |',
);
console.log('|---|---|---|---|---|');
for (const c of costs)
  console.log(
    `| ${c.withIndex ? 'with' : 'without'} | ${c.batchedUs.toFixed(1)} | ${c.batchedPgUs.toFixed(1)} | ${c.singleUs.toFixed(0)} | ${c.singlePgUs.toFixed(0)} |`,
  );

await bench.stop();
