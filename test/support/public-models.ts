/**
 * A platform with one public image model behind a real worker: the image-model fixture
 * (test/fixtures/image-model/handler.py, Pillow, written with the hosted service's worker SDK)
 * running as a process against the worker protocol, on an endpoint of the operator's account,
 * published as `test-image-1`; and another account whose RUN key calls it.
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'vitest';
import { issueApiKey } from '../../domain/accounts/index.ts';
import { newId } from '../../domain/shared/index.ts';
import { ensurePythonClients } from './python-clients.ts';
import { purgeOutputsScheduleId } from '../../contracts/workflows.ts';
import { call, startTestPlatform, type TestPlatform } from './platform.ts';
import { createQueueEndpoint, createWorker, workerEnv, wrapWorker, type WorkerProcess } from './jobs.ts';

const here = path.dirname(fileURLToPath(import.meta.url));
export const IMAGE_MODEL_HANDLER = path.join(here, '..', 'fixtures', 'image-model', 'handler.py');
export const REPO_ROOT = path.join(here, '..', '..');

/** The input schema of the test model: what an image model's playground form shows. */
export const IMAGE_INPUT_SCHEMA = {
  type: 'object',
  required: ['prompt'],
  additionalProperties: false,
  properties: {
    prompt: { type: 'string', title: 'Prompt', minLength: 1, maxLength: 1000, description: 'What to draw.' },
    negative_prompt: {
      type: 'string',
      title: 'Negative prompt',
      maxLength: 1000,
      default: '',
      description: 'What to leave out.',
    },
    width: { type: 'integer', title: 'Width', minimum: 64, maximum: 2048, multipleOf: 8, default: 512 },
    height: { type: 'integer', title: 'Height', minimum: 64, maximum: 2048, multipleOf: 8, default: 512 },
    seed: {
      type: 'integer',
      title: 'Seed',
      minimum: 0,
      maximum: 2147483647,
      default: 42,
      description: 'The same seed and input give the same image.',
    },
    num_inference_steps: { type: 'integer', title: 'Steps', minimum: 1, maximum: 100, default: 20 },
    guidance: { type: 'number', title: 'Guidance', minimum: 0, maximum: 20, default: 7.5 },
    output_format: { type: 'string', title: 'Output format', enum: ['png', 'jpeg', 'webp'], default: 'png' },
  },
} as const;

export interface PublicModelFixture {
  url: string;
  modelId: string;
  /** A RUN key of an account that is not the publisher's. */
  callerKey: string;
  callerAccountId: string;
  /** python3 of a venv with the `runpod` client (and Pillow). */
  python: string;
  /** A directory from which `import "runpod-sdk"` resolves. */
  nodeModulesDir: string;
  endpointId: string;
  platform: TestPlatform;
  worker: WorkerProcess;
  stop(): Promise<void>;
}

export async function startPublicModelFixture(
  opts: {
    env?: Record<string, string>;
    modelId?: string;
    price?: { amount: number; unit: 'call' | 'megapixel' | 'second' };
  } = {},
): Promise<PublicModelFixture> {
  const python = await ensurePythonClients();
  const platform = await startTestPlatform(opts.env ?? {});
  let worker: WorkerProcess | undefined;
  try {
    const endpointId = await createQueueEndpoint(platform, `image-model-${newId().slice(0, 6)}`);
    const credential = await createWorker(platform, endpointId);
    const env = workerEnv(platform.ctx.workerUrl ?? platform.url, endpointId, credential, {
      RUNPOD_PING_INTERVAL: '2000',
      RUNPOD_SKIP_AUTO_SYSTEM_CHECKS: 'true',
      RUNPOD_SKIP_GPU_CHECK: 'true',
      RUNPOD_LOG_LEVEL: 'WARN',
    });
    worker = wrapWorker(
      spawn(python, [IMAGE_MODEL_HANDLER], {
        env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/root', ...env },
        stdio: ['ignore', 'pipe', 'inherit'],
      }),
    );
    const modelId = opts.modelId ?? 'test-image-1';
    const published = await call(platform.url, 'POST', '/v2/public-endpoints', {
      key: platform.adminKey,
      body: {
        id: modelId,
        endpointId,
        name: 'Test image model',
        description: 'A stand-in image model for tests: draws the prompt and the seed with Pillow.',
        outputKind: 'image',
        inputSchema: IMAGE_INPUT_SCHEMA,
        price: opts.price ?? { amount: 0.002, unit: 'call' },
      },
    });
    expect(published.status, JSON.stringify(published.body)).toBe(201);
    const callerAccountId = (
      await platform.ctx.db.account.create({ data: { id: newId(), email: `${newId()}@caller.test`, name: 'caller' } })
    ).id;
    const callerKey = (await issueApiKey(platform.ctx.db, callerAccountId, 'caller', ['RUN', 'READ'])).key;
    const running = worker;
    return {
      url: platform.url,
      modelId,
      callerKey,
      callerAccountId,
      python,
      nodeModulesDir: REPO_ROOT,
      endpointId,
      platform,
      worker: running,
      async stop() {
        await running.kill('SIGTERM');
        await platform.ctx.temporal.schedule
          .getHandle(purgeOutputsScheduleId(platform.taskQueue))
          .delete()
          .catch(() => undefined);
        await platform.stop();
      },
    };
  } catch (err) {
    await worker?.kill();
    await platform.stop();
    throw err;
  }
}
