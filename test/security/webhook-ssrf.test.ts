/**
 * Webhooks are URLs a tenant names and the Temporal worker POSTs to: they must not reach loopback,
 * private, link-local or metadata addresses, in any spelling, through DNS, or through a DNS answer
 * that changes between the check and the connection, unless the operator allows them.
 */
import { lookup } from 'node:dns';
import { createServer, type Server } from 'node:http';
import { Agent, fetch } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { guardedLookup, parseWebhookAllowList, refusedAddress, webhookUrlProblem } from '../../domain/jobs/index.ts';
import { createQueueEndpoint, createWorker, eventually, workerCall } from '../support/jobs.ts';
import { call, startTestPlatform, type TestPlatform } from '../support/platform.ts';
import { jobWorkflowId } from '../../contracts/workflows.ts';

const NONE = parseWebhookAllowList(undefined);

/** Loopback, private, link-local and metadata targets, spelled every way a URL parser accepts. */
const REFUSED = [
  'http://127.0.0.1:9/',
  'http://2130706433/',
  'http://0x7f000001/',
  'http://0177.0.0.1/',
  'http://127.1/',
  'http://[::ffff:127.0.0.1]/',
  'http://[::7f00:1]/',
  'http://[::127.0.0.1]/',
  'http://[::a9fe:a9fe]/',
  'http://[::1]/',
  'http://localhost/',
  'http://LOCALHOST./',
  'http://api.localhost/',
  'http://0.0.0.0/',
  'http://10.1.2.3/',
  'http://172.16.0.1/',
  'http://192.168.1.1/',
  'http://100.64.0.1/',
  'http://169.254.169.254/latest/meta-data/',
  'http://[fd00::1]/',
  'http://[fe80::1]/',
  'http://[64:ff9b::7f00:1]/',
  'http://[2002:7f00:1::]/',
  'http://224.0.0.1/',
  'ftp://hooks.example.com/',
  'http://user:pass@hooks.example.com/',
  `https://hooks.example.com/${'x'.repeat(2100)}`,
];

function listener(): Promise<{ server: Server; url: string; hits: string[] }> {
  const hits: string[] = [];
  const server = createServer((req, res) => {
    hits.push(`${req.method} ${req.url}`);
    res.writeHead(200).end();
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () =>
      resolve({ server, url: `http://127.0.0.1:${(server.address() as { port: number }).port}/hook`, hits }),
    ),
  );
}

describe('webhook targets', () => {
  it('refuses every non-public spelling before any look-up, and takes public ones', () => {
    for (const url of REFUSED) expect(webhookUrlProblem(url, NONE), url).toBeDefined();
    // The refusal reads as a sentence (it is shown to the tenant as `$.webhook: ...`).
    expect(webhookUrlProblem('http://10.1.2.3/', NONE)).toBe(
      'may not target 10.1.2.3, a private address (operators allow such targets with GANTRY_WEBHOOK_ALLOW)',
    );
    for (const url of ['https://hooks.example.com/x', 'http://8.8.8.8/', 'http://[2606:4700::1]/'])
      expect(webhookUrlProblem(url, NONE), url).toBeUndefined();
  });

  it('lets through what the operator allows, and nothing more', () => {
    const allow = parseWebhookAllowList('127.0.0.1/32, 10.0.0.0/8, hooks.internal');
    expect(webhookUrlProblem('http://127.0.0.1:9/', allow)).toBeUndefined();
    expect(webhookUrlProblem('http://2130706433/', allow)).toBeUndefined();
    expect(webhookUrlProblem('http://10.9.9.9/', allow)).toBeUndefined();
    expect(webhookUrlProblem('http://hooks.internal/x', allow)).toBeUndefined();
    expect(webhookUrlProblem('http://127.0.0.2/', allow)).toBeDefined();
    expect(webhookUrlProblem('http://169.254.169.254/', allow)).toBeDefined();
    expect(refusedAddress('::ffff:10.1.1.1', allow)).toBeUndefined();
    expect(() => parseWebhookAllowList('10.0.0.0/99')).toThrow(/GANTRY_WEBHOOK_ALLOW/);
  });

  it('refuses at connect time a name whose DNS answer is private, as a rebinding resolver would give it', async () => {
    const answers: Record<string, Array<{ address: string; family: number }>> = {
      'rebind.example': [{ address: '10.0.0.5', family: 4 }],
      'mixed.example': [
        { address: '93.184.216.34', family: 4 },
        { address: '127.0.0.1', family: 4 },
      ],
      'public.example': [{ address: '93.184.216.34', family: 4 }],
    };
    const stub = (
      host: string,
      _o: { all: true },
      cb: (err: NodeJS.ErrnoException | null, a: Array<{ address: string; family: number }>) => void,
    ) => cb(null, answers[host] ?? []);
    const guarded = guardedLookup(stub, () => NONE);
    const ask = (host: string, all: boolean) =>
      new Promise<{ err: (Error & { code?: string }) | null; result: unknown }>((resolve) =>
        (
          guarded as unknown as (
            h: string,
            o: { all: boolean },
            cb: (err: Error | null, result?: unknown) => void,
          ) => void
        )(host, { all }, (err, result) => resolve({ err, result })),
      );
    for (const host of ['rebind.example', 'mixed.example']) {
      for (const all of [true, false]) expect((await ask(host, all)).err?.code, host).toBe('EWEBHOOKREFUSED');
    }
    expect((await ask('public.example', true)).result).toEqual(answers['public.example']);
    expect((await ask('public.example', false)).result).toBe('93.184.216.34');
  });

  it('a real connection through the guard to a name that resolves to loopback never reaches the listener', async () => {
    const l = await listener();
    try {
      const agent = new Agent({
        connect: { lookup: guardedLookup(lookup as Parameters<typeof guardedLookup>[0], () => NONE) },
      });
      const port = (l.server.address() as { port: number }).port;
      const err = await fetch(`http://localhost:${port}/hook`, { method: 'POST', dispatcher: agent }).catch(
        (e: unknown) => e,
      );
      expect((err as { cause?: { code?: string } }).cause?.code).toBe('EWEBHOOKREFUSED');
      expect(l.hits).toEqual([]);
      await agent.close();
    } finally {
      l.server.close();
    }
  });
});

describe('webhooks through the job API', () => {
  let p: TestPlatform;
  let ep: string;

  beforeAll(async () => {
    delete process.env.GANTRY_WEBHOOK_ALLOW;
    p = await startTestPlatform();
    ep = await createQueueEndpoint(p);
  });
  afterAll(async () => {
    delete process.env.GANTRY_WEBHOOK_ALLOW;
    await p?.stop();
  });

  it('every refused spelling is a 422 naming webhook, and no job is queued', async () => {
    for (const webhook of REFUSED) {
      const r = await call(p.url, 'POST', `/v2/${ep}/run`, { key: p.adminKey, body: { input: {}, webhook } });
      expect(r.status, webhook).toBe(422);
      expect(r.body.errors[0], webhook).toMatch(/^\$\.webhook: /);
    }
    expect(await p.ctx.db.job.count({ where: { endpointId: ep } })).toBe(0);
  });

  it('a loopback webhook is delivered while the operator allows it, and refused at delivery once that is withdrawn', async () => {
    const l = await listener();
    const worker = await createWorker(p, ep);
    const finish = async (): Promise<string> => {
      const taken = await workerCall(
        p.url,
        'GET',
        `/v2/${ep}/job-take/${worker.id}?gpu=X&job_in_progress=0`,
        worker.key,
      );
      expect(taken.status).toBe(200);
      const id = taken.body.id as string;
      expect(
        (
          await workerCall(p.url, 'POST', `/v2/${ep}/job-done/${worker.id}/${id}?gpu=X&isStream=false`, worker.key, {
            output: { ok: true },
          })
        ).status,
      ).toBe(200);
      return id;
    };
    try {
      // What GANTRY_WEBHOOK_ALLOW sets at start, changed on the running platform (API and activities read it there).
      p.ctx.settings.webhookAllow = parseWebhookAllowList('127.0.0.1/32');
      const allowed = await call(p.url, 'POST', `/v2/${ep}/run`, {
        key: p.adminKey,
        body: { input: { n: 1 }, webhook: l.url },
      });
      expect(allowed.status).toBe(200);
      await finish();
      await eventually(async () => l.hits.length === 1, 30_000, 'the allowed webhook delivered');

      const second = await call(p.url, 'POST', `/v2/${ep}/run`, {
        key: p.adminKey,
        body: { input: { n: 2 }, webhook: l.url },
      });
      expect(second.status).toBe(200);
      p.ctx.settings.webhookAllow = parseWebhookAllowList(undefined);
      const id = await finish();
      // The delivery is tried once, refused, and not retried: the listener hears nothing more.
      await eventually(
        async () => (await p.ctx.db.job.findUniqueOrThrow({ where: { id } })).webhookAttempts >= 1,
        30_000,
        'the refused webhook attempted',
      );
      await eventually(
        async () => (await p.ctx.temporal.workflow.getHandle(jobWorkflowId(id)).describe()).status.name === 'COMPLETED',
        30_000,
        'the job workflow done',
      );
      expect(l.hits).toHaveLength(1);
      const row = await p.ctx.db.job.findUniqueOrThrow({ where: { id } });
      expect(row.webhookDeliveredAt).toBeNull();
      expect(row.webhookAttempts).toBe(1);
    } finally {
      l.server.close();
    }
  });
});
