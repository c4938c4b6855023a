/**
 * Public models (docs/public-models.md): the operator publishes a queue-based endpoint under a
 * model id; another account's RUN key calls it with the job API; inputs are validated against the
 * model's schema; media come back as signed URLs from the output store; each completed call is
 * billed to its caller and its output carries `cost`; URLs expire (410) and a Temporal schedule
 * purges what expired. The image model is a real worker process (the Pillow fixture on the hosted
 * service's worker SDK); the refusal and pricing cases drive the worker protocol by hand.
 */
import { deflateSync } from 'node:zlib';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issueApiKey } from '../../domain/accounts/index.ts';
import { newId } from '../../domain/shared/index.ts';
import { purgeOutputsScheduleId } from '../../contracts/workflows.ts';
import { call, startTestPlatform, type TestPlatform } from '../support/platform.ts';
import { createQueueEndpoint, createWorker, eventually, workerCall, type TestWorker } from '../support/jobs.ts';
import { IMAGE_INPUT_SCHEMA, startPublicModelFixture, type PublicModelFixture } from '../support/public-models.ts';

const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

/** A valid PNG of `width` x `height` (one grey row repeated), made here so the test controls its size. */
function png(width: number, height: number): Buffer {
  const crcTable = Array.from({ length: 256 }, (_, n) => {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    return c >>> 0;
  });
  const crc = (b: Buffer) => {
    let c = 0xffffffff;
    for (const x of b) c = crcTable[(c ^ x) & 0xff]! ^ (c >>> 8);
    return (c ^ 0xffffffff) >>> 0;
  };
  const chunk = (type: string, data: Buffer) => {
    const len = Buffer.alloc(4);
    len.writeUInt32BE(data.length);
    const body = Buffer.concat([Buffer.from(type, 'ascii'), data]);
    const sum = Buffer.alloc(4);
    sum.writeUInt32BE(crc(body));
    return Buffer.concat([len, body, sum]);
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr[8] = 8; // bit depth
  ihdr[9] = 0; // greyscale
  const rows = Buffer.concat(
    Array.from({ length: height }, () => Buffer.concat([Buffer.from([0]), Buffer.alloc(width, 0x80)])),
  );
  return Buffer.concat([
    PNG_SIGNATURE,
    chunk('IHDR', ihdr),
    chunk('IDAT', deflateSync(rows)),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

async function fetchBytes(url: string): Promise<{ status: number; headers: Headers; bytes: Buffer }> {
  const res = await fetch(url);
  return { status: res.status, headers: res.headers, bytes: Buffer.from(await res.arrayBuffer()) };
}

describe('public models', () => {
  let f: PublicModelFixture;
  let p: TestPlatform;

  beforeAll(async () => {
    f = await startPublicModelFixture();
    p = f.platform;
  }, 600_000);

  afterAll(async () => {
    await f?.stop();
  }, 60_000);

  describe('publishing', () => {
    it("is the operator's: a tenant key (even ADMIN of its own account) is refused, the catalogue is anyone's", async () => {
      const tenantAdmin = (await issueApiKey(p.ctx.db, f.callerAccountId, 'tenant admin', ['ADMIN'])).key;
      const body = {
        id: 'sneaky-model',
        endpointId: f.endpointId,
        name: 'x',
        outputKind: 'json',
        inputSchema: { type: 'object' },
        price: { amount: 0, unit: 'call' },
      };
      expect((await call(f.url, 'POST', '/v2/public-endpoints', { key: tenantAdmin, body })).status).toBe(403);
      expect((await call(f.url, 'POST', '/v2/public-endpoints', { key: f.callerKey, body })).status).toBe(403);
      expect((await call(f.url, 'POST', '/v2/public-endpoints', { body })).status).toBe(401);

      const listed = await call(f.url, 'GET', '/v2/public-endpoints', { key: f.callerKey });
      expect(listed.status).toBe(200);
      const model = listed.body.find((m: { id: string }) => m.id === f.modelId);
      expect(model).toMatchObject({
        outputKind: 'image',
        price: { amount: 0.002, unit: 'call' },
        runUrl: `${f.url}/v2/${f.modelId}`,
        inputSchema: IMAGE_INPUT_SCHEMA,
      });
      // Kept as written: the playground's form follows the author's order.
      expect(Object.keys(model.inputSchema.properties)).toEqual(Object.keys(IMAGE_INPUT_SCHEMA.properties));
      // Which endpoint (and account) serves it is the operator's business.
      expect(model.endpointId).toBeUndefined();
      expect((await call(f.url, 'GET', `/v2/public-endpoints/${f.modelId}`, { key: p.adminKey })).body.endpointId).toBe(
        f.endpointId,
      );
      expect((await call(f.url, 'GET', '/v2/public-endpoints/no-such-model', { key: f.callerKey })).status).toBe(404);
    });

    it('refuses bad input with problem+json naming the field, and conflicts with 409', async () => {
      const ep = await createQueueEndpoint(p);
      const base = {
        id: 'ok-model',
        endpointId: ep,
        name: 'ok',
        outputKind: 'json',
        inputSchema: { type: 'object' },
        price: { amount: 0.01, unit: 'call' },
      };
      const refused = async (body: Record<string, unknown>) => {
        const r = await call(f.url, 'POST', '/v2/public-endpoints', { key: p.adminKey, body: { ...base, ...body } });
        expect(r.status, JSON.stringify(r.body)).toBe(422);
        expect(r.headers.get('content-type')).toMatch(/application\/problem\+json/);
        return (r.body.errors as string[]).join('\n');
      };
      // Model ids never look like endpoint ids (those have no "-") and never take an API route.
      expect(await refused({ id: 'nodash' })).toMatch(/^\$\.id: /);
      expect(await refused({ id: 'Upper-Case' })).toMatch(/^\$\.id: /);
      expect(await refused({ id: 'public-endpoints' })).toMatch(/^\$\.id: /);
      expect(await refused({ inputSchema: { type: 'string' } })).toMatch(/\$\.inputSchema: must describe an object/);
      expect(await refused({ inputSchema: { type: 'object', properties: { a: { type: 'no-such-type' } } } })).toMatch(
        /\$\.inputSchema: is not a usable JSON Schema/,
      );
      expect(await refused({ inputSchema: { type: 'object', description: 'x'.repeat(70_000) } })).toMatch(
        /\$\.inputSchema: is larger than/,
      );
      expect(await refused({ price: { amount: -1, unit: 'call' } })).toMatch(/^\$\.price\.amount/);
      expect(await refused({ price: { amount: 1, unit: 'token' } })).toMatch(/^\$\.price\.unit/);
      expect(await refused({ endpointId: 'nosuchendpoint' })).toMatch(/\$\.endpointId: no endpoint/);
      const lb = await createQueueEndpoint(p, undefined, { type: 'LOAD_BALANCING' });
      expect(await refused({ endpointId: lb })).toMatch(/only a queue-based endpoint/);

      expect(
        (await call(f.url, 'POST', '/v2/public-endpoints', { key: p.adminKey, body: { ...base, id: f.modelId } }))
          .status,
      ).toBe(409);
      expect(
        (
          await call(f.url, 'POST', '/v2/public-endpoints', {
            key: p.adminKey,
            body: { ...base, endpointId: f.endpointId },
          })
        ).status,
      ).toBe(409);
    });

    it('works the same over GraphQL: publish, read, change, unpublish', async () => {
      const ep = await createQueueEndpoint(p);
      const gql = (key: string, query: string, variables: Record<string, unknown> = {}) =>
        call(f.url, 'POST', '/graphql', { key, body: { query, variables } });
      const published = await gql(
        p.adminKey,
        'mutation($i: PublishPublicEndpointInput!) { publishPublicEndpoint(input: $i) { id outputKind inputSchema price { amount unit } runUrl endpointId } }',
        {
          i: {
            id: 'gql-echo-1',
            endpointId: ep,
            name: 'Echo',
            outputKind: 'json',
            inputSchema: JSON.stringify({ type: 'object', properties: { text: { type: 'string' } } }),
            price: { amount: 0.5, unit: 'call' },
          },
        },
      );
      expect(published.body.errors).toBeUndefined();
      expect(published.body.data.publishPublicEndpoint).toMatchObject({
        id: 'gql-echo-1',
        outputKind: 'json',
        price: { amount: 0.5, unit: 'call' },
        runUrl: `${f.url}/v2/gql-echo-1`,
        endpointId: ep,
      });
      expect(JSON.parse(published.body.data.publishPublicEndpoint.inputSchema)).toEqual({
        type: 'object',
        properties: { text: { type: 'string' } },
      });

      const seen = await gql(
        f.callerKey,
        '{ publicEndpoints { id endpointId } publicEndpoint(id: "gql-echo-1") { name } missing: publicEndpoint(id: "no-such-model") { name } }',
      );
      expect(seen.body.data.publicEndpoints).toContainEqual({ id: 'gql-echo-1', endpointId: null });
      expect(seen.body.data.publicEndpoint).toEqual({ name: 'Echo' });
      expect(seen.body.data.missing).toBeNull();

      const denied = await gql(f.callerKey, 'mutation { unpublishPublicEndpoint(id: "gql-echo-1") }');
      expect(denied.body.errors[0].extensions.code).toBe('FORBIDDEN');
      const bad = await gql(
        p.adminKey,
        'mutation { updatePublicEndpoint(id: "gql-echo-1", input: { inputSchema: "{not json" }) { id } }',
      );
      expect(bad.body.errors[0].extensions.code).toBe('BAD_USER_INPUT');
      const changed = await gql(
        p.adminKey,
        'mutation { updatePublicEndpoint(id: "gql-echo-1", input: { price: { amount: 0.25, unit: "call" } }) { price { amount } } }',
      );
      expect(changed.body.data.updatePublicEndpoint.price.amount).toBe(0.25);
      expect(
        (await gql(p.adminKey, 'mutation { unpublishPublicEndpoint(id: "gql-echo-1") }')).body.data
          .unpublishPublicEndpoint,
      ).toBe(true);
      expect((await call(f.url, 'GET', '/v2/public-endpoints/gql-echo-1', { key: f.callerKey })).status).toBe(404);
    });
  });

  describe('calling a model by its id from another account', () => {
    let jobId: string;
    let imageUrl: string;

    it("runs the job on the model's worker: output with image_url and cost, the image served by the signed URL alone", async () => {
      const r = await call(f.url, 'POST', `/v2/${f.modelId}/runsync`, {
        key: f.callerKey,
        body: { input: { prompt: 'a red bicycle', seed: 1234, width: 320, height: 256 } },
      });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      expect(r.body).toMatchObject({
        status: 'COMPLETED',
        output: { seed: 1234, width: 320, height: 256, cost: 0.002 },
      });
      expect(r.body.output.image).toBeUndefined();
      expect(typeof r.body.delayTime).toBe('number');
      expect(typeof r.body.executionTime).toBe('number');
      jobId = r.body.id;
      imageUrl = r.body.output.image_url;
      expect(imageUrl).toMatch(
        new RegExp(`^${f.url}/v2/outputs/[a-z0-9]{24}/image\\.png\\?expires=\\d+&sig=[A-Za-z0-9_-]{43}$`),
      );
      // 7 days, give or take the clock between here and the server.
      const expires = Number(new URL(imageUrl).searchParams.get('expires')) * 1000;
      expect(Math.abs(expires - (Date.now() + 7 * 86_400_000))).toBeLessThan(60_000);

      const image = await fetchBytes(imageUrl);
      expect(image.status).toBe(200);
      expect(image.bytes.subarray(0, 8).equals(PNG_SIGNATURE)).toBe(true);
      expect(image.bytes.readUInt32BE(16)).toBe(320);
      expect(image.bytes.readUInt32BE(20)).toBe(256);
      expect(image.headers.get('content-type')).toBe('image/png');
      expect(image.headers.get('x-content-type-options')).toBe('nosniff');
      expect(image.headers.get('content-security-policy')).toContain('sandbox');
    });

    it("filled the schema's defaults into the input", async () => {
      const r = await call(f.url, 'POST', `/v2/${f.modelId}/runsync`, {
        key: f.callerKey,
        body: { input: { prompt: 'defaults' } },
      });
      expect(r.body).toMatchObject({ status: 'COMPLETED', output: { seed: 42, width: 512, height: 512 } });
    });

    it('keeps each caller to its own jobs: status, cancel, stream, purge and health see nothing of others', async () => {
      const status = await call(f.url, 'GET', `/v2/${f.modelId}/status/${jobId}`, { key: f.callerKey });
      expect(status.body).toMatchObject({ id: jobId, status: 'COMPLETED', output: { image_url: imageUrl } });
      // The operator's account calls the same model: it is another caller.
      expect((await call(f.url, 'GET', `/v2/${f.modelId}/status/${jobId}`, { key: p.adminKey })).status).toBe(404);
      const third = (
        await p.ctx.db.account.create({ data: { id: newId(), email: `${newId()}@third.test`, name: 'third' } })
      ).id;
      const thirdKey = (await issueApiKey(p.ctx.db, third, 'third', ['RUN'])).key;
      for (const [method, route] of [
        ['GET', `/v2/${f.modelId}/status/${jobId}`],
        ['GET', `/v2/${f.modelId}/stream/${jobId}`],
        ['POST', `/v2/${f.modelId}/cancel/${jobId}`],
        ['POST', `/v2/${f.modelId}/retry/${jobId}`],
      ] as const) {
        expect((await call(f.url, method, route, { key: thirdKey })).status, `${method} ${route}`).toBe(404);
      }
      // Another account's key never reaches the endpoint behind the model by its id.
      expect(
        (await call(f.url, 'POST', `/v2/${f.endpointId}/run`, { key: thirdKey, body: { input: { prompt: 'x' } } }))
          .status,
      ).toBe(404);
      // /health counts the caller's own jobs: the caller sees its completed job, the third account none.
      const mine = await call(f.url, 'GET', `/v2/${f.modelId}/health`, { key: f.callerKey });
      expect(mine.body.jobs.completed).toBeGreaterThanOrEqual(1);
      const theirs = await call(f.url, 'GET', `/v2/${f.modelId}/health`, { key: thirdKey });
      expect(theirs.status).toBe(200);
      expect(theirs.body.jobs).toEqual({ completed: 0, failed: 0, inProgress: 0, inQueue: 0, retried: 0 });
      const purged = await call(f.url, 'POST', `/v2/${f.modelId}/purge-queue`, { key: thirdKey });
      expect(purged.body).toEqual({ removed: 0, status: 'completed' });
      // A key limited to some endpoints reaches a model only if its list names it.
      const limited = (await issueApiKey(p.ctx.db, third, 'limited', ['RUN'], undefined, ['someendpoint00'])).key;
      expect(
        (await call(f.url, 'POST', `/v2/${f.modelId}/run`, { key: limited, body: { input: { prompt: 'x' } } })).status,
      ).toBe(403);
    });

    it("validates the input against the model's schema: 422 naming each field, nothing queued", async () => {
      const before = await p.ctx.db.job.count({ where: { endpointId: f.endpointId } });
      const refused = async (input: unknown) => {
        const r = await call(f.url, 'POST', `/v2/${f.modelId}/run`, { key: f.callerKey, body: { input } });
        expect(r.status, JSON.stringify(r.body)).toBe(422);
        expect(r.headers.get('content-type')).toMatch(/application\/problem\+json/);
        return (r.body.errors as string[]).join('\n');
      };
      expect(await refused({ prompt: 'x', width: 4096 })).toMatch(/^\$\.input\.width: must be <= 2048$/m);
      expect(await refused({ prompt: 'x', width: 100 })).toMatch(/^\$\.input\.width: must be multiple of 8$/m);
      expect(await refused({ width: 512 })).toMatch(/^\$\.input: missing property 'prompt'$/m);
      expect(await refused({ prompt: 'x', output_format: 'bmp' })).toMatch(
        /^\$\.input\.output_format: must be equal to one of the allowed values$/m,
      );
      expect(await refused({ prompt: 'x', shell: 'rm -rf /' })).toMatch(/additional properties 'shell' not allowed/);
      const both = await refused({ prompt: '', seed: -1 });
      expect(both).toMatch(/\$\.input\.prompt: /);
      expect(both).toMatch(/\$\.input\.seed: /);
      expect(await p.ctx.db.job.count({ where: { endpointId: f.endpointId } })).toBe(before);
    });

    it('bills the caller, not the publisher: the charges add up in /v2/billing/endpoints and /v2/billing', async () => {
      const completed = await p.ctx.db.job.count({
        where: { endpointId: f.endpointId, accountId: f.callerAccountId, status: 'COMPLETED' },
      });
      expect(completed).toBeGreaterThanOrEqual(2);
      const charges = await p.ctx.db.publicModelCharge.findMany({ where: { accountId: f.callerAccountId } });
      expect(charges).toHaveLength(completed);
      expect(charges.every((c) => c.modelId === f.modelId && c.amount === 0.002 && c.units === 1)).toBe(true);
      const endpoints = await call(f.url, 'GET', '/v2/billing/endpoints?bucketSize=day', { key: f.callerKey });
      expect(endpoints.status).toBe(200);
      expect(endpoints.body.metadata.totals.totalAmount).toBeCloseTo(0.002 * completed, 6);
      const all = await call(f.url, 'GET', '/v2/billing', { key: f.callerKey });
      expect(all.body.metadata.totals.endpointAmount).toBeCloseTo(0.002 * completed, 6);
      expect(all.body.metadata.totals.totalAmount).toBeCloseTo(0.002 * completed, 6);
      const publisher = await call(f.url, 'GET', '/v2/billing/endpoints', { key: p.adminKey });
      expect(publisher.body.metadata.totals.totalAmount).toBe(0);
    });

    it('refuses forged and altered output URLs with 403, counted as failed authentications', async () => {
      const u = new URL(imageUrl);
      const sig = u.searchParams.get('sig')!;
      const forged = new URL(imageUrl);
      forged.searchParams.set('sig', `${sig[0] === 'A' ? 'B' : 'A'}${sig.slice(1)}`);
      const later = new URL(imageUrl);
      later.searchParams.set('expires', String(Number(u.searchParams.get('expires')) + 86_400));
      const other = new URL(imageUrl);
      other.pathname = other.pathname.replace(/\/outputs\/[a-z0-9]{24}\//, `/outputs/${'a'.repeat(24)}/`);
      for (const url of [forged, later, other]) {
        const r = await call(url.origin, 'GET', url.pathname + url.search);
        expect(r.status, url.href).toBe(403);
        expect(r.headers.get('content-type')).toMatch(/application\/problem\+json/);
      }
      const counted = await p.ctx.db.rateLimitCounter.findMany({
        where: { accountId: { startsWith: 'auth-failure/' } },
      });
      expect(counted.length).toBeGreaterThan(0);
    });

    it('stops answering within the revocation bound once unpublished, and answers again when published again', async () => {
      const ep = await createQueueEndpoint(p);
      const body = {
        id: 'short-lived-1',
        endpointId: ep,
        name: 'short',
        outputKind: 'json',
        inputSchema: { type: 'object' },
        price: { amount: 0, unit: 'call' },
      };
      expect((await call(f.url, 'POST', '/v2/public-endpoints', { key: p.adminKey, body })).status).toBe(201);
      expect(
        (await call(f.url, 'POST', '/v2/short-lived-1/run', { key: f.callerKey, body: { input: {} } })).status,
      ).toBe(200);
      expect((await call(f.url, 'DELETE', '/v2/public-endpoints/short-lived-1', { key: p.adminKey })).status).toBe(204);
      await eventually(
        async () =>
          (await call(f.url, 'POST', '/v2/short-lived-1/run', { key: f.callerKey, body: { input: {} } })).status ===
          404,
        5_000,
        'unpublished model refused',
      );
    });
  });

  describe('outputs a worker returns', () => {
    let ep: string;
    let w: TestWorker;
    const take = async () => {
      const r = await workerCall(p.url, 'GET', `/v2/${ep}/job-take/${w.id}?gpu=X&job_in_progress=0`, w.key);
      expect(r.status).toBe(200);
      return r.body.id as string;
    };
    const done = (id: string, body: unknown) =>
      workerCall(
        p.url,
        'POST',
        `/v2/${ep}/job-done/${w.id}/${id}?gpu=X&isStream=false`,
        w.key,
        body,
        'application/json',
      );

    beforeAll(async () => {
      ep = await createQueueEndpoint(p);
      w = await createWorker(p, ep);
      const published = await call(f.url, 'POST', '/v2/public-endpoints', {
        key: p.adminKey,
        body: {
          id: 'megapixel-model',
          endpointId: ep,
          name: 'Priced per megapixel',
          outputKind: 'image',
          inputSchema: { type: 'object' },
          price: { amount: 0.01, unit: 'megapixel' },
        },
      });
      expect(published.status).toBe(201);
    });

    it('prices by the megapixels of the image returned (a data: URI under image_url)', async () => {
      const run = await call(f.url, 'POST', '/v2/megapixel-model/run', { key: f.callerKey, body: { input: {} } });
      const id = await take();
      expect(id).toBe(run.body.id);
      expect(
        (
          await done(id, {
            output: { image_url: `data:image/png;base64,${png(1000, 500).toString('base64')}`, note: 'kept' },
          })
        ).status,
      ).toBe(200);
      const status = await call(f.url, 'GET', `/v2/megapixel-model/status/${id}`, { key: f.callerKey });
      expect(status.body).toMatchObject({ status: 'COMPLETED', output: { note: 'kept', cost: 0.005 } });
      const image = await fetchBytes(status.body.output.image_url);
      expect(image.bytes.equals(png(1000, 500))).toBe(true);
      expect(await p.ctx.db.publicModelCharge.findUnique({ where: { jobId: id } })).toMatchObject({
        units: 0.5,
        amount: 0.005,
      });
      // The worker SDK posts a result up to three times: the repeat changes nothing and bills nothing more.
      expect((await done(id, { output: { image: png(8, 8).toString('base64') } })).status).toBe(200);
      expect(await p.ctx.db.outputObject.count({ where: { jobId: id } })).toBe(1);
    });

    it('fails the job, unbilled, when the bytes are not the media their field says (HTML is never stored)', async () => {
      for (const output of [
        { image: Buffer.from('<html><script>alert(1)</script></html>').toString('base64') },
        { image: 'not base64 at all!' },
        { audio: png(4, 4).toString('base64') },
      ]) {
        const run = await call(f.url, 'POST', '/v2/megapixel-model/run', { key: f.callerKey, body: { input: {} } });
        const id = await take();
        expect(id).toBe(run.body.id);
        expect((await done(id, { output })).status).toBe(200);
        const status = await call(f.url, 'GET', `/v2/megapixel-model/status/${id}`, { key: f.callerKey });
        expect(status.body.status, JSON.stringify(status.body)).toBe('FAILED');
        expect(status.body.error).toMatch(/the model's output was refused: output\.(image|audio)/);
        expect(await p.ctx.db.publicModelCharge.count({ where: { jobId: id } })).toBe(0);
        expect(await p.ctx.db.outputObject.count({ where: { jobId: id } })).toBe(0);
      }
    });

    it('bills nothing for a failed job', async () => {
      await call(f.url, 'POST', '/v2/megapixel-model/run', { key: f.callerKey, body: { input: {} } });
      const id = await take();
      expect((await done(id, { error: 'out of memory' })).status).toBe(200);
      expect((await call(f.url, 'GET', `/v2/megapixel-model/status/${id}`, { key: f.callerKey })).body).toMatchObject({
        status: 'FAILED',
        error: 'out of memory',
      });
      expect(await p.ctx.db.publicModelCharge.count({ where: { jobId: id } })).toBe(0);
    });

    it('follows its endpoint: deleting the endpoint unpublishes the model, at once and for good', async () => {
      const listed = async () =>
        ((await call(f.url, 'GET', '/v2/public-endpoints', { key: f.callerKey })).body as Array<{ id: string }>).map(
          (m) => m.id,
        );
      expect(await listed()).toContain('megapixel-model');
      expect((await call(p.url, 'DELETE', `/v2/serverless/${ep}`, { key: p.adminKey })).status).toBe(204);
      // The catalogue never lists a model that cannot run, and a call names the model, not a missing endpoint.
      expect(await listed()).not.toContain('megapixel-model');
      const run = await call(f.url, 'POST', '/v2/megapixel-model/run', { key: f.callerKey, body: { input: {} } });
      expect(run.status).toBe(404);
      expect(await p.ctx.db.publicModel.count({ where: { id: 'megapixel-model' } })).toBe(0);
    });
  });
});

describe('output URL expiry and the purge schedule', () => {
  let p: TestPlatform;
  const TTL_MS = 3_000;

  beforeAll(async () => {
    p = await startTestPlatform({
      GANTRY_OUTPUT_URL_TTL_MS: String(TTL_MS),
      GANTRY_OUTPUT_PURGE_INTERVAL_MS: '3600000',
    });
  }, 120_000);

  afterAll(async () => {
    await p?.ctx.temporal.schedule
      .getHandle(purgeOutputsScheduleId(p.taskQueue))
      .delete()
      .catch(() => undefined);
    await p?.stop();
  }, 60_000);

  it('answers 410 once the URL expired; the scheduled workflow deletes the bytes and the row', async () => {
    const schedule = await p.ctx.temporal.schedule.getHandle(purgeOutputsScheduleId(p.taskQueue)).describe();
    expect(schedule.spec.intervals?.[0]?.every).toBe(3_600_000);
    expect(schedule.action).toMatchObject({
      type: 'startWorkflow',
      workflowType: 'purgeExpiredOutputsWorkflow',
      taskQueue: p.taskQueue,
    });

    const ep = await createQueueEndpoint(p);
    const w = await createWorker(p, ep);
    const published = await call(p.url, 'POST', '/v2/public-endpoints', {
      key: p.adminKey,
      body: {
        id: 'expiring-model',
        endpointId: ep,
        name: 'x',
        outputKind: 'audio',
        inputSchema: { type: 'object' },
        price: { amount: 0.1, unit: 'call' },
      },
    });
    expect(published.status).toBe(201);
    const run = await call(p.url, 'POST', '/v2/expiring-model/run', { key: p.adminKey, body: { input: {} } });
    const taken = await workerCall(p.url, 'GET', `/v2/${ep}/job-take/${w.id}?gpu=X`, w.key);
    expect(taken.body.id).toBe(run.body.id);
    // A short WAV: 0.1 s of silence, 8 kHz mono 16-bit.
    const pcm = Buffer.alloc(1600);
    const header = Buffer.alloc(44);
    header.write('RIFF', 0);
    header.writeUInt32LE(36 + pcm.length, 4);
    header.write('WAVEfmt ', 8);
    header.writeUInt32LE(16, 16);
    header.writeUInt16LE(1, 20);
    header.writeUInt16LE(1, 22);
    header.writeUInt32LE(8000, 24);
    header.writeUInt32LE(16000, 28);
    header.writeUInt16LE(2, 32);
    header.writeUInt16LE(16, 34);
    header.write('data', 36);
    header.writeUInt32LE(pcm.length, 40);
    const wav = Buffer.concat([header, pcm]);
    await workerCall(
      p.url,
      'POST',
      `/v2/${ep}/job-done/${w.id}/${run.body.id}`,
      w.key,
      { output: { audio: wav.toString('base64') } },
      'application/json',
    );
    const done = await call(p.url, 'GET', `/v2/expiring-model/status/${run.body.id}`, { key: p.adminKey });
    expect(done.body).toMatchObject({ status: 'COMPLETED', output: { cost: 0.1 } });
    const url: string = done.body.output.audio_url;
    expect(url).toMatch(/\/v2\/outputs\/[a-z0-9]{24}\/audio\.wav\?/);
    const object = await p.ctx.db.outputObject.findFirstOrThrow({ where: { jobId: run.body.id } });
    expect(object.contentType).toMatch(/^audio\/(wav|vnd\.wave|x-wav)$/);

    const fresh = await fetch(url);
    expect(fresh.status).toBe(200);
    expect(Buffer.from(await fresh.arrayBuffer()).equals(wav)).toBe(true);

    await sleep(TTL_MS + 1_200);
    const expired = await call(new URL(url).origin, 'GET', new URL(url).pathname + new URL(url).search);
    expect(expired.status).toBe(410);
    expect(expired.headers.get('content-type')).toMatch(/application\/problem\+json/);
    expect(expired.body.detail).toMatch(/expired/);
    // Still stored until the purge runs.
    expect(await p.ctx.blobs.stat(object.blobKey)).not.toBeNull();

    await p.ctx.temporal.schedule.getHandle(purgeOutputsScheduleId(p.taskQueue)).trigger();
    await eventually(
      async () => (await p.ctx.db.outputObject.count({ where: { id: object.id } })) === 0,
      30_000,
      'the purge workflow deleted the row',
    );
    expect(await p.ctx.blobs.stat(object.blobKey)).toBeNull();
    const runs = [];
    for await (const wf of p.ctx.temporal.workflow.list({
      query: `WorkflowType = 'purgeExpiredOutputsWorkflow' AND TaskQueue = '${p.taskQueue}'`,
    }))
      runs.push(wf);
    expect(runs.length).toBeGreaterThan(0);
    expect((await call(new URL(url).origin, 'GET', new URL(url).pathname + new URL(url).search)).status).toBe(410);
  });
});
