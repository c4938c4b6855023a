import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { historyFromJSON } from '@temporalio/common/lib/proto-utils.js';
import { bundleWorkflowCode, Worker, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { beforeAll, describe, expect, it } from 'vitest';

const here = path.dirname(fileURLToPath(import.meta.url));
const dir = path.join(here, 'histories');
const files = readdirSync(dir).filter((f) => f.endsWith('.json'));
/** The worker's bundle entry (workers/temporal-worker.ts bundles the same file). */
const workflowsPath = path.join(here, '..', '..', 'workflows', 'index.ts');

// Every committed history must replay against today's workflow code: a change that would break
// running workflows fails here unless it is guarded with patched().
describe('replay of committed workflow histories', () => {
  // One bundle for every history (bundling takes seconds; a replay, milliseconds).
  let workflowBundle: WorkflowBundleWithSourceMap;
  beforeAll(async () => {
    workflowBundle = await bundleWorkflowCode({
      workflowsPath,
      logger: { trace() {}, debug() {}, info() {}, warn: console.warn, error: console.error, log() {} },
    });
  }, 120_000);

  it('has histories to replay', () => {
    expect(files.length).toBeGreaterThan(0);
  });

  for (const file of files) {
    it(`replays ${file}`, async () => {
      const history = historyFromJSON(JSON.parse(readFileSync(path.join(dir, file), 'utf8')));
      await expect(Worker.runReplayHistory({ workflowBundle, replayName: file }, history)).resolves.toBeUndefined();
    });
  }
});
