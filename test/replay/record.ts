/**
 * Records the workflow histories that test/replay/replay.test.ts replays. Run it after a deliberate,
 * patched workflow change to add a history of the new shape, never to overwrite an old one:
 *   node --import tsx test/replay/record.ts
 * Activities here return fixed data: replay checks workflow determinism, and activity results are
 * read back from the history.
 */
import { existsSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { spawnSync } from 'node:child_process';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import { loadConfig } from '../../infra/config.ts';
import { resolveTemporalBinary } from '../../infra/temporal.ts';
import { workflowsPath } from '../../workers/temporal-worker.ts';
import type { EndpointActivities } from '../../activities/endpoints.ts';
import { deleteEndpoint, getSpec, updateSpec } from '../../workflows/endpoint.ts';

const dir = path.join(path.dirname(fileURLToPath(import.meta.url)), 'histories');
const binary = resolveTemporalBinary(loadConfig());
if (!binary) throw new Error('no Temporal CLI');
const env = await TestWorkflowEnvironment.createLocal({ server: { executable: { type: 'existing-path', path: binary } } });

const activities: EndpointActivities = {
  async loadEndpointSpec(endpointId) {
    return { endpointId, workersMin: 0, workersMax: 3, scalerType: 'QUEUE_DELAY', scalerValue: 4, idleTimeout: 5, timeoutMs: 600_000, releaseVersion: 1 };
  },
  async removeEndpointRecord() {},
};

async function record(name: string, scenario: () => Promise<string>): Promise<void> {
  const file = path.join(dir, `${name}.json`);
  if (existsSync(file)) {
    console.log(`kept ${file} (histories are never overwritten)`);
    return;
  }
  const worker = await Worker.create({ connection: env.nativeConnection, taskQueue: 'record', workflowsPath, activities });
  const workflowId = await worker.runUntil(scenario);
  // The CLI writes the standard JSON history format (the one the Temporal UI downloads).
  const shown = spawnSync(binary as string, ['workflow', 'show', '--address', env.address, '--workflow-id', workflowId, '--output', 'json'], { encoding: 'utf8' });
  if (shown.status !== 0) throw new Error(`temporal workflow show failed: ${shown.stderr}`);
  writeFileSync(file, shown.stdout);
  console.log(`wrote ${file}`);
}

try {
  await record('endpointWorkflow-v1-update-and-delete', async () => {
    const workflowId = 'endpoint:recorded00000001';
    const handle = await env.client.workflow.start('endpointWorkflow', { workflowId, taskQueue: 'record', args: [{ endpointId: 'recorded00000001' }] });
    await handle.executeUpdate(updateSpec, { args: [{ workersMin: 1, workersMax: 4 }] });
    // A rejected update leaves no trace in the history but must not disturb it either.
    await handle.executeUpdate(updateSpec, { args: [{ workersMin: 9, workersMax: 1 }] }).catch(() => undefined);
    await handle.query(getSpec);
    await handle.signal(deleteEndpoint);
    await handle.result();
    return workflowId;
  });
} finally {
  await env.teardown();
}
