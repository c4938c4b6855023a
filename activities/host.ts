/**
 * Called by the host workflow (workflows/host.ts; orchestrationSettings by every orchestration
 * workflow). Host side effects: probing over SSH (pinning the host key on first contact), recording
 * what was found, and rebuilding state from container labels after a restart (adopt or remove).
 */
import { WorkflowNotFoundError } from '@temporalio/client';
import { ApplicationFailure, Context } from '@temporalio/activity';
import type { Host, Prisma } from '../generated/prisma/client.ts';
import { probeHost, type DiskLimit, type HostProbe } from './host-probe.ts';
import {
  containerNameOf,
  listManagedContainers,
  listVolumes,
  podVolumePrefix,
  removeContainer,
  removeDirectory,
  removeVolume,
  type HostHandle,
} from '../hostctl/containers.ts';
import { hostVolumeName, hostVolumePrefix, sharedVolumeDir } from '../domain/catalog/index.ts';
import { HostKeyMismatchError, normalizeFingerprint } from '../hostctl/ssh.ts';
import { pruneAccountNetworks } from '../hostctl/networks.ts';
import { isLiveWorker, liveWorker } from '../domain/workers/index.ts';
import { prismaSql, requeueLostJobs } from '../domain/jobs/index.ts';
import type { OrchestrationSettings } from '../domain/shared/index.ts';
import { workerWorkflowId, type HostProbeResult } from '../contracts/workflows.ts';
import { hostHandle, recordHostKeyMismatch, targetOf, type OrchestrationRuntime } from './orchestration-runtime.ts';

export type { OrchestrationSettings } from '../domain/shared/index.ts';

function gpuMethodOf(probe: HostProbe): string {
  return probe.gpuPassthrough.method;
}

function probeDetails(probe: HostProbe): object {
  return {
    hostname: probe.hostname,
    os: probe.os ?? null,
    kernel: probe.kernel,
    arch: probe.arch,
    uid: probe.uid ?? null,
    memoryAvailableMb: probe.memoryAvailableMb ?? null,
    diskPath: probe.diskPath,
    diskTotalGb: probe.diskTotalGb,
    runtime: probe.containerRuntime
      ? {
          name: probe.containerRuntime.name,
          version: probe.containerRuntime.version ?? null,
          path: probe.containerRuntime.path,
        }
      : null,
    cudaVersion: probe.cudaVersion ?? null,
    gpuError: probe.gpuError ?? null,
    gpuHint: probe.gpuPassthrough.hint ?? null,
    wallsHint: probe.containerRuntime?.walls?.problem ?? null,
    cdiDevices: probe.gpuPassthrough.cdiDevices.length,
    storage: probe.containerRuntime
      ? { driver: probe.containerRuntime.storageDriver ?? null, fs: probe.containerRuntime.storageFs ?? null }
      : null,
    diskLimit: probe.diskLimit,
  };
}

/**
 * How the host enforces container disk sizes: what the probe found, unless the operator's label
 * `gantry.io/disk-quota` says otherwise ("true": the runtime's size option works here; "false": use
 * the watchdog).
 */
export function effectiveDiskLimit(probe: HostProbe, labels: Record<string, string>): DiskLimit {
  const label = labels['gantry.io/disk-quota'];
  if (label === 'true') return { method: 'storage-opt', why: 'the host label gantry.io/disk-quota=true' };
  if (label === 'false') return { method: 'watchdog', why: 'the host label gantry.io/disk-quota=false' };
  return probe.diskLimit;
}

export function createHostActivities(rt: OrchestrationRuntime) {
  const { db } = rt;

  /**
   * Writes what a probe found under the row's lock, re-reading its status there: a host being
   * removed (DISABLED, set by an operator while the probe ran) stays DISABLED whatever the probe saw.
   */
  async function recordStatus(
    hostId: string,
    found: { status: 'READY' | 'PENDING' | 'UNREACHABLE'; statusReason: string | null },
    facts: Prisma.HostUpdateInput,
    wasReady: boolean,
  ): Promise<HostProbeResult> {
    return db.$transaction(async (tx) => {
      const [now] = await tx.$queryRaw<
        Array<{ status: string; statusReason: string | null }>
      >`SELECT status::text AS status, "statusReason" FROM "Host" WHERE id = ${hostId} FOR UPDATE`;
      if (!now) return { status: 'GONE' as const, statusReason: null, becameReady: false };
      const result =
        now.status === 'DISABLED' ? { status: 'DISABLED' as const, statusReason: now.statusReason } : found;
      await tx.host.update({ where: { id: hostId }, data: { ...facts, ...result } });
      return { ...result, becameReady: result.status === 'READY' && !wasReady };
    });
  }

  /**
   * The data of network volumes deleted by their owners, where this host holds it: its own named
   * volumes, and directories on its data center's shared storage (any host there may remove those).
   * A volume's row goes once its data has. Named network volumes of this host that no row knows of
   * (their account was deleted) go too.
   */
  async function removeDeletedNetworkVolumes(h: HostHandle & { host: Host }): Promise<string[]> {
    const removed: string[] = [];
    const dc = await db.dataCenter.findUnique({ where: { id: h.host.dataCenterId } });
    const deleted = await db.networkVolume.findMany({
      where: {
        deletedAt: { not: null },
        OR: [{ hostId: h.hostId }, { hostId: null, dataCenterId: h.host.dataCenterId }],
      },
      select: { id: true, hostId: true },
    });
    for (const v of deleted) {
      Context.current().heartbeat();
      if (v.hostId) {
        await removeVolume(rt.pool, h, hostVolumeName(v.hostId, v.id));
        removed.push(hostVolumeName(v.hostId, v.id));
      } else if (dc?.networkVolumePath) {
        await removeDirectory(rt.pool, h, sharedVolumeDir(dc.networkVolumePath, v.id));
        removed.push(sharedVolumeDir(dc.networkVolumePath, v.id));
      }
      await db.networkVolume.deleteMany({ where: { id: v.id, deletedAt: { not: null } } });
    }
    const prefix = hostVolumePrefix(h.hostId);
    const named = await listVolumes(rt.pool, h, prefix);
    const known = new Set(
      (
        await db.networkVolume.findMany({
          where: { id: { in: named.map((n) => n.slice(prefix.length)) } },
          select: { id: true },
        })
      ).map((v) => v.id),
    );
    for (const name of named) {
      if (known.has(name.slice(prefix.length))) continue;
      await removeVolume(rt.pool, h, name);
      removed.push(name);
    }
    return removed;
  }

  return {
    /** Settings every orchestration workflow runs with (recorded in its history once per run). */
    async orchestrationSettings(): Promise<OrchestrationSettings> {
      return rt.settings;
    },

    /**
     * Connects (pinning the host key on first contact), probes, and records the result. Never
     * throws for an unreachable host: that is a status, the workflow keeps probing.
     */
    async probeAndRecordHost(hostId: string, options: { acceptHostKey?: string } = {}): Promise<HostProbeResult> {
      const host = await db.host.findUnique({ where: { id: hostId } });
      if (!host) return { status: 'GONE', statusReason: null, becameReady: false };
      const wasReady = host.status === 'READY';
      const pin = options.acceptHostKey ? normalizeFingerprint(options.acceptHostKey) : host.hostKeySha256;
      let probe: HostProbe;
      let seenKey: string;
      try {
        const conn = await rt.pool.get(targetOf(host, rt.secrets, pin));
        seenKey = conn.hostKeySha256;
        probe = await probeHost(conn, { timeoutMs: 120_000 });
      } catch (err) {
        if (err instanceof HostKeyMismatchError) {
          await recordHostKeyMismatch(db, hostId, err);
          const after = await db.host.findUnique({ where: { id: hostId }, select: { statusReason: true } });
          return { status: 'HOST_KEY_MISMATCH', statusReason: after?.statusReason ?? err.message, becameReady: false };
        }
        if (err instanceof ApplicationFailure) throw err;
        const reason = `unreachable: ${err instanceof Error ? err.message : String(err)}`.slice(0, 1000);
        // A mismatch stays a mismatch until the operator accepts the new key.
        if (host.status === 'HOST_KEY_MISMATCH' && !options.acceptHostKey)
          return { status: 'HOST_KEY_MISMATCH', statusReason: host.statusReason, becameReady: false };
        return recordStatus(
          hostId,
          { status: 'UNREACHABLE', statusReason: reason },
          { lastProbeAt: new Date() },
          false,
        );
      }
      const runtime = probe.containerRuntime;
      // A Docker daemon that does not wall tenants apart gets no workers, unless the operator said so.
      const unwalled = rt.platform.allowUnwalledDocker ? undefined : runtime?.walls?.problem;
      const found = !runtime
        ? {
            status: 'PENDING' as const,
            statusReason: 'no usable container runtime: install Podman or Docker on the host',
          }
        : unwalled
          ? {
              status: 'PENDING' as const,
              statusReason: `${unwalled} (GANTRY_ALLOW_UNWALLED_DOCKER=true accepts such hosts: docs/hosts.md)`,
            }
          : { status: 'READY' as const, statusReason: null };
      return recordStatus(
        hostId,
        found,
        {
          hostKeySha256: seenKey,
          cpuCount: probe.cpuCount,
          memoryMb: probe.memoryMb,
          diskFreeGb: Math.floor(probe.diskFreeGb),
          containerRuntime: runtime?.name ?? null,
          gpuPassthrough: probe.gpuPassthrough.method !== 'none',
          gpuMethod: gpuMethodOf(probe),
          diskLimitMethod: effectiveDiskLimit(probe, (host.labels ?? {}) as Record<string, string>).method,
          gpus: probe.gpus.map((g) => ({
            uuid: g.uuid,
            name: g.name,
            memoryMb: g.memoryMb,
            driverVersion: g.driverVersion,
            pool: g.pool ?? null,
          })),
          probe: {
            ...probeDetails(probe),
            diskLimit: effectiveDiskLimit(probe, (host.labels ?? {}) as Record<string, string>),
          },
          lastProbeAt: new Date(),
          lastSeenAt: new Date(),
        },
        wasReady,
      );
    },

    /**
     * Rebuilds state from container labels: a container whose worker is live on this host is
     * adopted (its id recorded); any other managed container is removed. Live workers recorded on
     * this host whose workflow no longer runs are closed, so that they are replaced. Volumes of pods
     * that no longer exist (terminated while the host was away) are removed, and so are the networks
     * of accounts with no live worker left here.
     */
    async reconcileHostContainers(hostId: string): Promise<{
      adopted: string[];
      removed: string[];
      closed: string[];
      removedVolumes: string[];
      removedNetworks: string[];
    }> {
      const h = await hostHandle(rt, hostId);
      const containers = await listManagedContainers(rt.pool, h);
      const workerIds = containers.map((c) => c.workerId).filter(Boolean);
      const workers = await db.worker.findMany({ where: { OR: [{ id: { in: workerIds } }, { hostId }] } });
      const byId = new Map(workers.map((w) => [w.id, w]));
      const adopted: string[] = [];
      const removed: string[] = [];
      const closed: string[] = [];

      const running = async (workerId: string): Promise<boolean> => {
        try {
          const d = await rt.temporal.workflow.getHandle(workerWorkflowId(workerId)).describe();
          return d.status.name === 'RUNNING';
        } catch (err) {
          if (err instanceof WorkflowNotFoundError) return false;
          throw err;
        }
      };

      for (const c of containers) {
        Context.current().heartbeat();
        const w = byId.get(c.workerId);
        const live = w && w.hostId === hostId && isLiveWorker(w.status) && (await running(w.id));
        if (live) {
          if (w.containerId !== c.id)
            await db.worker.update({ where: { id: w.id }, data: { containerId: c.id, containerName: c.name } });
          adopted.push(c.name);
        } else {
          await removeContainer(rt.pool, h, c.name, 0);
          removed.push(c.name);
        }
      }
      const names = new Set(containers.map((c) => c.name));
      for (const w of workers) {
        if (w.hostId !== hostId || !isLiveWorker(w.status)) continue;
        if (names.has(containerNameOf(w.id)) || (await running(w.id))) continue;
        await db.$transaction(async (tx) => {
          await tx.worker.update({
            where: { id: w.id },
            data: {
              status: 'FAILED',
              statusReason: 'its workflow was gone when the host was reconciled',
              stoppedAt: new Date(),
              credentialHash: null,
            },
          });
          // Its jobs by the one rule for a lost worker (domain/jobs/queue.ts): back in the queue, or failed at their last loss.
          await requeueLostJobs(
            prismaSql(tx),
            { workerId: w.id },
            { tag: 'orchestration', retention: rt.platform.jobs.retention },
          );
        });
        closed.push(w.id);
      }
      const prefix = podVolumePrefix(hostId);
      const volumes = await listVolumes(rt.pool, h, prefix);
      const kept = new Set(
        // Any pod row still there keeps its volume: a live pod's data is never removed from here.
        (
          await db.pod.findMany({
            where: { id: { in: volumes.map((v) => v.slice(prefix.length)) } },
            select: { id: true },
          })
        ).map((p) => p.id),
      );
      const removedVolumes: string[] = [];
      for (const v of volumes) {
        if (kept.has(v.slice(prefix.length))) continue;
        await removeVolume(rt.pool, h, v);
        removedVolumes.push(v);
      }
      removedVolumes.push(...(await removeDeletedNetworkVolumes(h)));
      // A worker being placed or started here is live: its account's network stays.
      const live = await db.worker.findMany({
        where: { hostId, ...liveWorker },
        select: { endpoint: { select: { accountId: true } }, pod: { select: { accountId: true } } },
      });
      const accounts = live.flatMap((w) => [w.endpoint?.accountId, w.pod?.accountId]).filter((a) => a !== undefined);
      const removedNetworks = await pruneAccountNetworks(rt.pool, h, [...new Set(accounts)]);
      return { adopted, removed, closed, removedVolumes, removedNetworks };
    },

    /** Live workers placed on the host (the host workflow drains them before the host is removed). */
    async liveWorkersOnHost(hostId: string): Promise<string[]> {
      const rows = await db.worker.findMany({ where: { hostId, ...liveWorker }, select: { id: true } });
      return rows.map((r) => r.id);
    },

    async deleteHostRecord(hostId: string): Promise<void> {
      await db.host.deleteMany({ where: { id: hostId } });
    },
  };
}

export type HostActivities = ReturnType<typeof createHostActivities>;
