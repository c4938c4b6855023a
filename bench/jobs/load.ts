/**
 * The load process (bench/jobs.ts --load): plays the workers (a handler that returns at once) and
 * the clients, and runs each scenario's traffic when the platform process asks for it over IPC.
 */
import { createServer } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { summary } from './stats.ts';

interface Msg {
  id: number;
  cmd: string;
  [k: string]: unknown;
}

export function runLoadProcess(): void {
  const cfg = JSON.parse(process.env.BENCH_LOAD ?? '{}') as {
    url: string;
    key: string;
    endpointId: string;
    workers: Array<{ id: string; key: string }>;
  };
  const v2 = `${cfg.url}/v2/${cfg.endpointId}`;
  let workersOn = false;
  let workerJobs = 0;
  // The latency scenario's jobs by their input's `i`: when a worker got each (the split of a runsync call).
  const takenAt = new Map<number, number>();

  async function workerLoop(w: { id: string; key: string }): Promise<void> {
    while (workersOn) {
      const res = await fetch(`${v2}/job-take/${w.id}?gpu=BENCH&job_in_progress=0`, {
        headers: { authorization: w.key },
      });
      if (res.status !== 200) {
        await res.text();
        continue;
      }
      const job = (await res.json()) as { id: string; input: unknown };
      const i = (job.input as { i?: unknown } | null)?.i;
      if (typeof i === 'number') takenAt.set(i, performance.now());
      // The handler: returns at once.
      const d = await fetch(`${v2}/job-done/${w.id}/${job.id}?gpu=BENCH&isStream=false`, {
        method: 'POST',
        headers: { authorization: w.key, 'content-type': 'application/x-www-form-urlencoded' },
        body: JSON.stringify({ output: job.input }),
      });
      await d.text();
      workerJobs++;
    }
  }

  const client = (method: string, p: string, body?: unknown): Promise<Response> =>
    fetch(v2 + p, {
      method,
      headers: { authorization: `Bearer ${cfg.key}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });

  const handlers: Record<string, (m: Msg) => Promise<unknown>> = {
    async workers(m) {
      const on = Boolean(m.on);
      if (on && !workersOn) {
        workersOn = true;
        for (const w of cfg.workers.slice(0, Number(m.count ?? cfg.workers.length))) void workerLoop(w);
      } else if (!on && workersOn) {
        // The loops end when their long-polls return (within the platform's hold time).
        workersOn = false;
      }
      return { on: workersOn };
    },
    async direct(m) {
      // The same handler behind a plain HTTP server: the floor any job path is compared with.
      const server = createServer((req, res) => {
        let body = '';
        req.on('data', (c: Buffer) => (body += c.toString()));
        req.on('end', () => {
          const parsed = JSON.parse(body) as { input: unknown };
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ output: parsed.input }));
        });
      });
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
      const port = (server.address() as { port: number }).port;
      const n = Number(m.n);
      const lat: number[] = [];
      for (let i = 0; i < n + 50; i++) {
        const t = performance.now();
        const r = await fetch(`http://127.0.0.1:${port}/`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ input: { i } }),
        });
        await r.json();
        if (i >= 50) lat.push(performance.now() - t);
      }
      // Throughput with the same concurrency as the job runs.
      const conc = Number(m.concurrency);
      let done = 0;
      const until = performance.now() + 5_000;
      await Promise.all(
        Array.from({ length: conc }, async () => {
          while (performance.now() < until) {
            const r = await fetch(`http://127.0.0.1:${port}/`, {
              method: 'POST',
              headers: { 'content-type': 'application/json' },
              body: '{"input":{}}',
            });
            await r.text();
            done++;
          }
        }),
      );
      server.close();
      return { latency: summary(lat), perSecond: done / 5 };
    },
    async latency(m) {
      const n = Number(m.n);
      // 0: back to back; else one request started every 1/pace s (when the previous one has answered).
      const intervalMs = Number(m.pace) > 0 ? 1000 / Number(m.pace) : 0;
      const lat: number[] = [];
      const toWorker: number[] = [];
      const fromWorker: number[] = [];
      takenAt.clear();
      for (let i = 0; i < n + 50; i++) {
        const t = performance.now();
        const r = await client('POST', '/runsync', { input: { i } });
        const body = (await r.json()) as { status: string };
        if (body.status !== 'COMPLETED') throw new Error(`runsync answered ${JSON.stringify(body)}`);
        const answered = performance.now();
        const taken = takenAt.get(i);
        if (i >= 50) {
          lat.push(answered - t);
          if (taken !== undefined) {
            toWorker.push(taken - t);
            fromWorker.push(answered - taken);
          }
        }
        const rest = intervalMs - (performance.now() - t);
        if (rest > 0) await sleep(rest);
      }
      return { latency: summary(lat), toWorker: summary(toWorker), fromWorker: summary(fromWorker) };
    },
    async throughput(m) {
      const seconds = Number(m.seconds);
      const conc = Number(m.concurrency);
      const mode = String(m.mode);
      let completed = 0;
      let submitted = 0;
      const perSecond: number[] = [];
      const lat: number[] = [];
      const until = performance.now() + seconds * 1000;
      const startJobs = workerJobs;
      const ticker = setInterval(() => perSecond.push(workerJobs), 1000);
      await Promise.all(
        Array.from({ length: conc }, async () => {
          while (performance.now() < until) {
            const t = performance.now();
            if (mode === 'runsync') {
              const r = await client('POST', '/runsync', { input: { t } });
              const body = (await r.json()) as { status: string };
              if (body.status === 'COMPLETED') completed++;
              lat.push(performance.now() - t);
            } else {
              const r = await client('POST', '/run', { input: { t } });
              await r.text();
              lat.push(performance.now() - t);
            }
            submitted++;
          }
        }),
      );
      clearInterval(ticker);
      const ticks = perSecond.map((v, i) => v - (i === 0 ? startJobs : (perSecond[i - 1] as number)));
      return {
        submitted,
        completed,
        workerJobs: workerJobs - startJobs,
        perSecondByWorkers: ticks,
        latency: summary(lat),
      };
    },
    async burst(m) {
      // n jobs by `concurrency` clients at once; done when the workers have finished all of them.
      const n = Number(m.n);
      const conc = Number(m.concurrency);
      const startJobs = workerJobs;
      const t0 = performance.now();
      let sent = 0;
      let refused = 0;
      const perSecond: number[] = [];
      const ticker = setInterval(() => perSecond.push(workerJobs - startJobs), 1000);
      await Promise.all(
        Array.from({ length: conc }, async () => {
          while (sent < n) {
            sent++;
            const r = await client('POST', '/run', { input: { burst: sent } });
            await r.text();
            if (r.status !== 200) {
              // Back-pressure (429) or a quota: counted, and sent again.
              refused++;
              sent--;
              await sleep(Number(r.headers.get('retry-after') ?? '1') * 1000);
            }
          }
        }),
      );
      const submitSecs = (performance.now() - t0) / 1000;
      while (workerJobs - startJobs < n) await sleep(20);
      clearInterval(ticker);
      const doneSecs = (performance.now() - t0) / 1000;
      const ticks = perSecond.map((v, i) => v - (i === 0 ? 0 : (perSecond[i - 1] as number)));
      return { submitSecs, doneSecs, refused, perSecondByWorkers: ticks };
    },
    async fill(m) {
      const n = Number(m.n);
      let i = 0;
      await Promise.all(
        Array.from({ length: 32 }, async () => {
          while (i < n) {
            i++;
            const r = await client('POST', '/run', { input: { fill: i } });
            await r.text();
          }
        }),
      );
      return { queued: n };
    },
    async takeLatency(m) {
      // One worker takes and finishes jobs one by one: how long does a take answer take?
      const w = cfg.workers[0] as { id: string; key: string };
      const n = Number(m.n);
      const lat: number[] = [];
      for (let i = 0; i < n; i++) {
        const t = performance.now();
        const res = await fetch(`${v2}/job-take/${w.id}?gpu=BENCH&job_in_progress=0`, {
          headers: { authorization: w.key },
        });
        if (res.status !== 200) throw new Error(`take answered ${res.status}`);
        const job = (await res.json()) as { id: string };
        lat.push(performance.now() - t);
        const d = await fetch(`${v2}/job-done/${w.id}/${job.id}?isStream=false`, {
          method: 'POST',
          headers: { authorization: w.key },
          body: '{"output":1}',
        });
        await d.text();
      }
      return { latency: summary(lat) };
    },
    async purge() {
      const r = await client('POST', '/purge-queue');
      return r.json();
    },
  };

  process.on('message', (m: Msg) => {
    const h = handlers[m.cmd];
    if (!h) return process.send?.({ id: m.id, error: `unknown command ${m.cmd}` });
    h(m).then(
      (result) => process.send?.({ id: m.id, result }),
      (err: unknown) => process.send?.({ id: m.id, error: String(err instanceof Error ? err.stack : err) }),
    );
  });
  process.send?.({ id: 0, result: 'ready' });
}
