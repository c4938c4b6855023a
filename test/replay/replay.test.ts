import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { historyFromJSON } from '@temporalio/common/lib/proto-utils.js';
import { Worker } from '@temporalio/worker';
import { describe, expect, it } from 'vitest';
import { workflowsPath } from '../../workers/temporal-worker.ts';

const dir = path.join(path.dirname(fileURLToPath(import.meta.url)), 'histories');
const files = readdirSync(dir).filter((f) => f.endsWith('.json'));

// Every committed history must replay against today's workflow code: a change that would break
// running workflows fails here unless it is guarded with patched().
describe('replay of committed workflow histories', () => {
  it('has histories to replay', () => {
    expect(files.length).toBeGreaterThan(0);
  });

  for (const file of files) {
    it(`replays ${file}`, async () => {
      const history = historyFromJSON(JSON.parse(readFileSync(path.join(dir, file), 'utf8')));
      await expect(Worker.runReplayHistory({ workflowsPath, replayName: file }, history)).resolves.toBeUndefined();
    });
  }
});
