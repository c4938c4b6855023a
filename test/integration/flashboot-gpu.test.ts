/**
 * FlashBoot on a GPU host (docs/endpoints.md, "FlashBoot"): a standby keeps its GPU while frozen and
 * a thaw resumes the same process in the same container with the same device; a worker of another
 * account that finds every GPU held by standbys evicts one (the oldest FLASHBOOT one) and gets its
 * GPU; PRIORITY_FLASHBOOT standbys are evicted after FLASHBOOT ones, whatever their age.
 *
 * The host: the GPU test host (test/support/gpu-test-host.ts) with two H100s of one pool, captured
 * nvidia-smi answers and a CDI spec whose stand-in device nodes this machine's Podman injects. The
 * worker: the orchestration test worker (test/fixtures/orchestration-worker), whose job output names
 * its worker and can carry a file it reads (here /proc/self/stat: its process id and start time, a
 * token of the process). What its container sees of GPUs is read with `podman exec` while a job holds
 * it running (a paused container cannot be exec'd into).
 */
import { spawnSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGpuTestHost, type GpuTestHost } from '../support/gpu-test-host.ts';
import { call } from '../support/platform.ts';
import {
  containerState,
  ensureOrchestrationWorkerImage,
  managedContainers,
  ORCHESTRATION_WORKER_IMAGE,
  startOneHostPlatform,
  until,
  type OneHostPlatform,
} from '../support/orchestration.ts';

type Flashboot = 'OFF' | 'FLASHBOOT' | 'PRIORITY_FLASHBOOT';
interface JobOutput {
  worker: string;
  read: string | null;
  echo: Record<string, unknown>;
}
/** What a job saw: its output, and what its worker's container saw of GPUs while it ran. */
interface Seen {
  output: JobOutput;
  dev: string[];
  containerId: string;
  pid: number;
}

const CONTROL_NODES = ['nvidia-uvm', 'nvidia-uvm-tools', 'nvidiactl'];

/** `<pid> <start time>` of the process whose /proc/<pid>/stat this is (fields 1 and 22). */
function processToken(stat: string | null): string {
  expect(stat, 'the job read /proc/self/stat').toBeTruthy();
  const afterComm = stat!.slice(stat!.lastIndexOf(')') + 2).split(' ');
  // afterComm[0] is field 3 (state): field 22 is afterComm[19].
  const token = `${stat!.split(' ')[0]} ${afterComm[19]}`;
  expect(token).toMatch(/^\d+ \d+$/);
  return token;
}

describe('FlashBoot standby workers on a GPU host', () => {
  let f: OneHostPlatform;
  let host: GpuTestHost;
  let otherKey: string;
  const api = (method: string, route: string, body?: unknown, key?: string) =>
    call(f.p.url, method, route, { key: key ?? f.p.adminKey, body });
  const row = (workerId: string) => f.p.ctx.db.worker.findUniqueOrThrow({ where: { id: workerId } });
  const indexOf = (uuid: string) => host.gpus.find((g) => g.uuid === uuid)!.index;
  const listed = async (id: string, key?: string) =>
    (await api('GET', `/v2/serverless/${id}/workers`, undefined, key)).body.workers as Array<{
      id: string;
      status: string;
      statusReason: string | null;
    }>;
  const created: Array<{ id: string; key?: string }> = [];

  const create = async (name: string, flashboot: Flashboot, key?: string, idleTimeout = 1) => {
    const r = await api(
      'POST',
      '/v2/serverless',
      {
        name,
        image: ORCHESTRATION_WORKER_IMAGE,
        gpu: { pools: ['ADA_80_PRO'], count: 1 },
        workers: { min: 0, max: 1 },
        scaling: { type: 'QUEUE_DELAY', value: 1, idleTimeout },
        flashboot,
      },
      key,
    );
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    created.push({ id: r.body.id as string, ...(key ? { key } : {}) });
    return r.body.id as string;
  };

  /** The NVIDIA device nodes the container of a running worker sees, its container id and main process. */
  function containerView(workerId: string): { dev: string[]; containerId: string; pid: number } {
    const c = managedContainers(f.hostId).find((x) => x.workerId === workerId && x.running);
    if (!c) throw new Error(`no running container of worker ${workerId}`);
    const r = spawnSync(
      'podman',
      [
        'exec',
        c.id,
        'node',
        '-e',
        `console.log(JSON.stringify(require('fs').readdirSync('/dev').filter((n) => n.startsWith('nvidia')).sort()))`,
      ],
      { encoding: 'utf8' },
    );
    expect(r.status, r.stderr).toBe(0);
    const inspect = spawnSync(
      'podman',
      ['inspect', '--type', 'container', '--format', '{{.Id}} {{.State.Pid}}', c.id],
      {
        encoding: 'utf8',
      },
    );
    expect(inspect.status, inspect.stderr).toBe(0);
    const [containerId, pid] = inspect.stdout.trim().split(' ');
    return { dev: JSON.parse(r.stdout) as string[], containerId: containerId!, pid: Number(pid) };
  }

  /**
   * Runs a job that holds its worker for 2.5 s and reads /proc/self/stat; while it runs, reads what
   * the worker's container sees (containerView).
   */
  const runViewing = async (id: string, n: number, key?: string): Promise<Seen> => {
    const r = await api('POST', `/v2/${id}/run`, { input: { n, sleepMs: 2500, readFile: '/proc/self/stat' } }, key);
    expect(r.status, JSON.stringify(r.body)).toBeLessThan(300);
    const jobId = r.body.id as string;
    const job = () => f.p.ctx.db.job.findUniqueOrThrow({ where: { id: jobId } });
    const running = await until(
      `job ${jobId} in progress on a running container`,
      async () => {
        const j = await job();
        return j.status === 'IN_PROGRESS' && j.workerId && containerState(j.workerId) === 'running' ? j : undefined;
      },
      90_000,
      100,
      async () => ({ job: await job(), workers: await listed(id, key) }),
    );
    const view = containerView(running.workerId!);
    const done = await until(
      `job ${jobId} done`,
      async () => {
        const s = await api('GET', `/v2/${id}/status/${jobId}`, undefined, key);
        return s.body.status === 'COMPLETED' || s.body.status === 'FAILED' ? s.body : undefined;
      },
      60_000,
      200,
    );
    expect(done, JSON.stringify(done)).toMatchObject({ status: 'COMPLETED', output: { echo: { n } } });
    const output = done.output as JobOutput;
    expect(output.worker).toBe(running.workerId);
    return { output, ...view };
  };

  /** The endpoint's one worker once it stands by: row STANDBY (REST and database) and container paused. */
  const standby = (id: string, key?: string) =>
    until(
      `a standby worker of ${id}`,
      async () => {
        const w = (await listed(id, key)).find((x) => x.status === 'STANDBY');
        return w && containerState(w.id) === 'paused' ? row(w.id) : undefined;
      },
      60_000,
      200,
      () => listed(id, key),
    );

  /** Deletes the endpoints made so far and waits for their containers to go. */
  const cleanUp = async () => {
    for (const e of created.splice(0))
      expect((await api('DELETE', `/v2/serverless/${e.id}`, undefined, e.key)).status).toBeLessThan(300);
    await until(
      'no containers left on the host',
      async () => managedContainers(f.hostId).length === 0,
      60_000,
      300,
      async () => managedContainers(f.hostId),
    );
  };

  beforeAll(async () => {
    ensureOrchestrationWorkerImage();
    f = await startOneHostPlatform('flashboot-gpu-box', {}, async () => {
      host = await startGpuTestHost('2x-h100-80gb-hbm3.csv');
      return host;
    });
    expect(host.gpus).toHaveLength(2);
    const other = await api('POST', '/v2/accounts', { email: 'gpu-other@example.test', name: 'GPU Other' });
    expect(other.status, JSON.stringify(other.body)).toBeLessThan(300);
    const key = await api('POST', '/v2/keys', {
      name: 'gpu-other',
      scopes: ['READ', 'WRITE', 'RUN'],
      accountId: other.body.id,
    });
    expect(key.status, JSON.stringify(key.body)).toBeLessThan(300);
    otherKey = key.body.key as string;
  }, 600_000);
  afterAll(async () => {
    await f?.stop();
  }, 120_000);

  it('a standby keeps its GPU; a job thaws the same process in the same container, seeing the same device', async () => {
    const id = await create('fbg-thaw', 'FLASHBOOT');
    const cold = await runViewing(id, 1);
    const w = await row(cold.output.worker);
    expect(w.gpuUuids).toHaveLength(1);
    const gpu = w.gpuUuids[0]!;
    expect(host.gpus.map((g) => g.uuid)).toContain(gpu);
    expect(cold.dev).toEqual([`nvidia${indexOf(gpu)}`, ...CONTROL_NODES].sort());

    // Retired for idleness: frozen, its GPU still its own.
    const held = await standby(id);
    expect(held.id).toBe(w.id);
    expect(held.statusReason).toMatch(/FlashBoot/);
    expect(held.gpuUuids).toEqual([gpu]);
    expect(held.hostId).toBe(f.hostId);
    const paused = spawnSync(
      'podman',
      ['inspect', '--type', 'container', '--format', '{{.Id}} {{.State.Pid}}', `gantry-${w.id}`],
      {
        encoding: 'utf8',
      },
    );
    expect(paused.stdout.trim()).toBe(`${cold.containerId} ${cold.pid}`);

    // The next job thaws it: the same worker, container and process, the same GPU and device node.
    const warm = await runViewing(id, 2);
    expect(warm.output.worker).toBe(w.id);
    expect(warm.containerId).toBe(cold.containerId);
    expect(warm.pid).toBe(cold.pid);
    expect(processToken(warm.output.read)).toBe(processToken(cold.output.read));
    expect(warm.dev).toEqual(cold.dev);
    expect((await row(w.id)).gpuUuids).toEqual([gpu]);
    expect((await listed(id)).map((x) => x.id)).toEqual([w.id]);
    // It stands by again, GPU kept.
    expect((await standby(id)).gpuUuids).toEqual([gpu]);
    await cleanUp();
  }, 180_000);

  it('with every GPU held by standbys, a worker of another account evicts the oldest and gets its GPU', async () => {
    const older = await create('fbg-older', 'FLASHBOOT');
    await runViewing(older, 1);
    const first = await standby(older);
    const newer = await create('fbg-newer', 'FLASHBOOT');
    await runViewing(newer, 1);
    const second = await standby(newer);
    // Every GPU of the host is held by a standby.
    expect(new Set([...first.gpuUuids, ...second.gpuUuids])).toEqual(new Set(host.gpus.map((g) => g.uuid)));
    expect(first.standbySince!.getTime()).toBeLessThan(second.standbySince!.getTime());

    // Another account's endpoint (idle for a while after its job, so its container can be looked at).
    const theirs = await create('fbg-theirs', 'OFF', otherKey, 60);
    const seen = await runViewing(theirs, 1, otherKey);
    expect(seen.output.worker).not.toBe(first.id);
    const placed = await row(seen.output.worker);
    expect(placed.gpuUuids).toEqual(first.gpuUuids);
    expect(seen.dev).toEqual([`nvidia${indexOf(first.gpuUuids[0]!)}`, ...CONTROL_NODES].sort());

    // The evicted standby is gone: container removed, row STOPPED with the eviction's reason.
    expect(containerState(first.id)).toBe('gone');
    const evicted = await until(
      'the evicted worker STOPPED',
      async () => {
        const r = await row(first.id);
        return r.status === 'STOPPED' ? r : undefined;
      },
      30_000,
      200,
      () => row(first.id),
    );
    expect(evicted.statusReason).toMatch(/^evicted/);
    expect(await listed(older)).not.toContainEqual(expect.objectContaining({ id: first.id, status: 'STANDBY' }));
    // The other standby stays, frozen, on its GPU; their account's list names no one else's worker.
    const kept = await row(second.id);
    expect(kept).toMatchObject({ status: 'STANDBY', gpuUuids: second.gpuUuids });
    expect(containerState(second.id)).toBe('paused');
    expect(JSON.stringify(await listed(theirs, otherKey))).not.toContain(first.id);
    await cleanUp();
  }, 180_000);

  it('PRIORITY_FLASHBOOT is evicted last: the newer FLASHBOOT standby goes, the older priority one stays', async () => {
    const priority = await create('fbg-priority', 'PRIORITY_FLASHBOOT');
    await runViewing(priority, 1);
    const p = await standby(priority);
    const plain = await create('fbg-plain', 'FLASHBOOT');
    await runViewing(plain, 1);
    const q = await standby(plain);
    expect(new Set([...p.gpuUuids, ...q.gpuUuids])).toEqual(new Set(host.gpus.map((g) => g.uuid)));
    // Oldest first alone would pick the priority standby.
    expect(p.standbySince!.getTime()).toBeLessThan(q.standbySince!.getTime());

    const needy = await create('fbg-needy', 'OFF', otherKey, 60);
    const seen = await runViewing(needy, 1, otherKey);
    expect((await row(seen.output.worker)).gpuUuids).toEqual(q.gpuUuids);
    await until(
      'the FLASHBOOT standby evicted',
      async () => {
        const r = await row(q.id);
        return r.status === 'STOPPED' && /^evicted/.test(r.statusReason ?? '') && containerState(q.id) === 'gone';
      },
      30_000,
      200,
      () => row(q.id),
    );
    expect(await row(p.id)).toMatchObject({ status: 'STANDBY', gpuUuids: p.gpuUuids });
    expect(containerState(p.id)).toBe('paused');

    // The priority standby still thaws, on its own GPU.
    const warm = await runViewing(priority, 2);
    expect(warm.output.worker).toBe(p.id);
    expect(warm.dev).toEqual([`nvidia${indexOf(p.gpuUuids[0]!)}`, ...CONTROL_NODES].sort());
    await cleanUp();
  }, 180_000);
});
