/**
 * Called by the worker workflow (workflows/worker.ts), which runs every endpoint worker and every
 * pod's worker. Worker side effects: placement, image pulls, container start and stop over SSH, the
 * checks that decide readiness and health, draining, and the worker's final state.
 */
import { randomInt } from 'node:crypto';
import { Context, ApplicationFailure } from '@temporalio/activity';
import type { DomainContext } from '../domain/context.ts';
import { meterWorker } from '../domain/billing/index.ts';
import { splitArgs } from '../domain/containers/index.ts';
import { gpuTypeId } from '../domain/catalog/index.ts';
import { prismaSql, requeueLostJobs } from '../domain/jobs/index.ts';
import { lbWorkerInFlight, probeLbWorker } from '../domain/load-balancing/index.ts';
import { placeWorker, type PlacementGpu, type PlacementHost } from '../domain/workers/index.ts';
import { podPorts } from '../domain/pods/index.ts';
import { FINAL_WORKER_STATUSES, liveWorker } from '../domain/workers/index.ts';
import { cpuInstanceId, recordedCpuInstance, type CpuInstance } from '../domain/catalog/index.ts';
import { ENDPOINT_VOLUME_MOUNT } from '../domain/catalog/index.ts';
import { artifactDownloadUrl } from '../domain/apps/index.ts';
import { openRegistryCredential } from '../domain/registries/index.ts';
import { registerWorkerCredential } from '../domain/workers/index.ts';
import type { Pod } from '../generated/prisma/client.ts';
import {
  containerLogTail,
  containerNameOf,
  ensureImage,
  inspectContainer,
  LABELS,
  podVolumeName,
  registryOf,
  removeContainer,
  runContainer,
  type ContainerSpec,
} from '../hostctl/containers.ts';
import { heartbeating, hostHandle, sshTrouble, type OrchestrationRuntime } from './orchestration-runtime.ts';
import { networkVolumeHosts, networkVolumeMount } from './network-volumes.ts';
import { ensureRuntimeImage } from './runtime-image.ts';

/** Where a deployed app's worker finds its account's artifact cache (docs/apps.md). */
const ARTIFACT_CACHE_MOUNT = '/var/cache/gantry/artifacts';

/** Host ports handed to load-balancing workers (their PORT) and to pods (their exposed ports). */
const HOST_PORTS = { first: 20_000, last: 29_999 };

/** The placement pool name a pod's GPUs of its GPU type are given (pods ask for a type, not a pool). */
const POD_GPU_POOL = 'pod-gpu-type';

/** Label of a pod's container (pod workers carry no endpoint label). */
export const POD_LABEL = 'gantry.pod';

/** A CPU endpoint's instance (its row's flavor and size). */
function endpointCpuInstance(e: {
  cpuFlavorId: string | null;
  cpuVcpuCount: number | null;
  cpuMemoryGb: number | null;
}): CpuInstance {
  return e.cpuVcpuCount && e.cpuMemoryGb
    ? { flavorId: e.cpuFlavorId!, vcpus: e.cpuVcpuCount, memoryGb: e.cpuMemoryGb }
    : recordedCpuInstance(e.cpuFlavorId!);
}

/** What a placed CPU worker holds on its host (GPU workers hold their GPUs, no CPUs). */
function reservationOf(cpuFlavorId: string | null): { vcpus: number; memoryMb: number } | null {
  if (!cpuFlavorId) return null;
  const i = recordedCpuInstance(cpuFlavorId);
  return { vcpus: i.vcpus, memoryMb: i.memoryGb * 1024 };
}

export type ReadyCheck =
  { state: 'ready' } | { state: 'waiting'; reason?: string } | { state: 'failed'; reason: string };
export type WatchResult =
  | { state: 'ok' }
  | { state: 'unknown'; reason: string }
  | { state: 'failed'; reason: string }
  | { state: 'stopped'; reason: string }
  | { state: 'gone' };

export interface PlacementResult {
  placed: boolean;
  hostId?: string;
  reason?: string;
}

export function createWorkerActivities(rt: OrchestrationRuntime) {
  const { db } = rt;
  // The registry lookup takes a domain context; it reads only the database and the secrets.
  const registryCtx = { db: rt.db, secrets: rt.secrets } satisfies Pick<DomainContext, 'db' | 'secrets'>;

  async function workerRow(workerId: string) {
    const worker = await db.worker.findUnique({
      where: { id: workerId },
      include: { endpoint: true, host: true, pod: true },
    });
    if (!worker) throw ApplicationFailure.nonRetryable(`worker ${workerId} no longer exists`, 'WorkerGone');
    return worker;
  }

  function endpointWorker(worker: Awaited<ReturnType<typeof workerRow>>) {
    if (!worker.endpoint) throw ApplicationFailure.nonRetryable(`worker ${worker.id} has no endpoint`, 'WorkerGone');
    return { ...worker, endpoint: worker.endpoint };
  }

  /**
   * A ready load-balancing worker's health check: the API processes only take a failing worker out
   * of their rotation; one that keeps failing for lbUnhealthySec (an app that hangs while its
   * container runs) is replaced here. 204 (initializing) counts as alive.
   */
  async function watchLbHealth(
    workerId: string,
    host: string,
    port: number,
    failingSince: Date | null,
  ): Promise<WatchResult> {
    const probe = await probeLbWorker(host, port);
    if (probe.state !== 'unhealthy') {
      if (failingSince) await db.worker.update({ where: { id: workerId }, data: { healthFailingSince: null } });
      return { state: 'ok' };
    }
    if (!failingSince) {
      await db.worker.update({ where: { id: workerId }, data: { healthFailingSince: new Date() } });
      return { state: 'ok' };
    }
    const failingSec = Math.round((Date.now() - failingSince.getTime()) / 1000);
    if (failingSec < rt.settings.lbUnhealthySec) return { state: 'ok' };
    return { state: 'failed', reason: `its health check kept failing for ${failingSec} s: ${probe.reason}` };
  }

  type WorkerRow = Awaited<ReturnType<typeof workerRow>>;

  /** When each watched worker's disk was last measured (a throttle only: a restart measures sooner). */
  const diskCheckedAt = new Map<string, number>();
  function diskCheckDue(workerId: string): boolean {
    const last = diskCheckedAt.get(workerId) ?? 0;
    if (Date.now() - last < rt.settings.diskCheckIntervalSec * 1000) return false;
    if (diskCheckedAt.size > 100_000) diskCheckedAt.clear();
    diskCheckedAt.set(workerId, Date.now());
    return true;
  }

  /** The container disk (GB) a worker was started with: its release's for an endpoint worker, its pod's for a pod. */
  async function workerDiskGb(w: {
    endpointId: string | null;
    podId: string | null;
    releaseVersion: number;
  }): Promise<number> {
    if (w.podId)
      return (
        (await db.pod.findUnique({ where: { id: w.podId }, select: { containerDiskInGb: true } }))?.containerDiskInGb ??
        Infinity
      );
    const release = await db.release.findUnique({
      where: { endpointId_version: { endpointId: w.endpointId!, version: w.releaseVersion } },
      select: { disk: true },
    });
    return (
      release?.disk ??
      (await db.endpoint.findUnique({ where: { id: w.endpointId! }, select: { disk: true } }))?.disk ??
      Infinity
    );
  }

  /**
   * A pod's container: its own image, command, environment and disk, its exposed ports published on
   * the worker's block of host ports (always on a bridge network: a pod does not speak the worker
   * protocol, so it needs no route to the API, and its ports must not collide with other pods'),
   * and no worker credential. Idempotent as startWorkerContainer is.
   */
  async function startPodContainer(w: WorkerRow & { hostId: string; host: NonNullable<WorkerRow['host']>; pod: Pod }) {
    const { pod } = w;
    const h = await hostHandle(rt, w.hostId);
    const name = containerNameOf(w.id);
    const existing =
      Context.current().info.attempt > 1 || w.containerId ? await inspectContainer(rt.pool, h, name) : null;
    if (existing?.running) {
      await db.worker.update({ where: { id: w.id }, data: { containerId: existing.id, containerName: name } });
      return { containerId: existing.id, adopted: true };
    }
    if (existing) await removeContainer(rt.pool, h, name, 0);

    const ports = podPorts(pod.ports);
    const platform: Record<string, string> = {
      RUNPOD_POD_ID: pod.id,
      RUNPOD_POD_HOSTNAME: name,
      RUNPOD_GPU_COUNT: String(w.gpuUuids.length),
      RUNPOD_GPU_TYPE_ID: w.gpuTypeId ?? '',
      RUNPOD_DC_ID: w.host.dataCenterId,
      RUNPOD_PUBLIC_IP: w.host.address,
    };
    // Where each exposed TCP port is reachable from outside, as the hosted service tells its pods.
    ports.forEach((p, i) => {
      if (p.protocol !== 'udp' && w.hostPort) platform[`RUNPOD_TCP_PORT_${p.port}`] = String(w.hostPort + i);
    });
    const spec: ContainerSpec = {
      name,
      image: pod.imageName,
      args: splitArgs(pod.dockerArgs),
      env: { ...(pod.env as Record<string, string>), ...platform },
      labels: {
        [POD_LABEL]: pod.id,
        [LABELS.worker]: w.id,
        [LABELS.release]: String(w.releaseVersion),
        [LABELS.host]: w.hostId,
      },
      publish: [],
      publishFixed: w.hostPort
        ? ports.map((p, i) => `${w.hostPort! + i}:${p.port}/${p.protocol === 'udp' ? 'udp' : 'tcp'}`)
        : [],
      gpuUuids: w.gpuUuids,
      gpuMethod: (w.host.gpuMethod ?? 'none') as ContainerSpec['gpuMethod'],
      diskGb: w.host.diskLimitMethod === 'storage-opt' ? pod.containerDiskInGb : undefined,
      // A network volume is the pod's volume; otherwise its own (volumeInGb) on this host.
      ...(pod.networkVolumeId
        ? await networkVolumeMount(db, [pod.networkVolumeId], w.host, pod.volumeMountPath)
        : {
            volumes: pod.volumeInGb > 0 ? [{ name: podVolumeName(w.hostId, pod.id), path: pod.volumeMountPath }] : [],
          }),
    };
    return runWorkerContainer(w.id, w.hostId, h, spec, 'waiting for the container to run');
  }

  /**
   * Marks the worker INITIALIZING, runs its container and records it. SSH trouble and a name already
   * in use (an earlier attempt got further than it knew; the retry inspects and adopts) are thrown as
   * they are, for the activity's retry; any other failure ends the start.
   */
  async function runWorkerContainer(
    workerId: string,
    hostId: string,
    h: Awaited<ReturnType<typeof hostHandle>>,
    spec: ContainerSpec,
    waitingFor: string,
  ) {
    await db.worker.update({
      where: { id: workerId },
      data: { status: 'INITIALIZING', statusReason: 'starting the container', startedAt: new Date() },
    });
    try {
      const containerId = await runContainer(rt.pool, h, spec);
      await db.worker.update({
        where: { id: workerId },
        data: { containerId, containerName: spec.name, statusReason: waitingFor },
      });
      return { containerId, adopted: false };
    } catch (err) {
      const ssh = await sshTrouble(db, hostId, err);
      if (ssh || (err instanceof Error && /already in use|Conflict/i.test(err.message))) throw err;
      throw ApplicationFailure.nonRetryable(err instanceof Error ? err.message : String(err), 'StartFailed');
    }
  }

  const activities = {
    /**
     * Finds the worker a place: serialized over all placements (an advisory lock), so that two
     * workers never get one GPU. Leaves the worker PENDING with the reason when nothing fits.
     */
    async placeWorker(workerId: string, options: { avoidHostIds?: string[] } = {}): Promise<PlacementResult> {
      return db.$transaction(
        async (tx) => {
          await tx.$executeRaw`select pg_advisory_xact_lock(hashtext('gantry.placement'))`;
          const worker = await tx.worker.findUnique({
            where: { id: workerId },
            include: { endpoint: true, pod: true },
          });
          if (!worker || (!worker.endpoint && !worker.pod))
            throw ApplicationFailure.nonRetryable(`worker ${workerId} no longer exists`, 'WorkerGone');
          if (worker.hostId && worker.status !== 'PENDING') return { placed: true, hostId: worker.hostId };
          const pending = async (reason: string): Promise<PlacementResult> => {
            await tx.worker.update({ where: { id: workerId }, data: { status: 'PENDING', statusReason: reason } });
            return { placed: false, reason };
          };
          // A pod's volume lives on one host: once it has one, the pod runs there or waits for it.
          const volumeHostId = worker.pod?.volumeHostId ?? null;
          const hosts = await tx.host.findMany({
            where: { status: 'READY', ...(volumeHostId ? { id: volumeHostId } : {}) },
          });
          if (volumeHostId && hosts.length === 0)
            return pending(`waiting for host ${volumeHostId}, which holds the pod's volume and is not ready`);
          const e = worker.endpoint;
          const pod = worker.pod;
          // A network volume is where its data is: the worker runs there (and binds a single-host volume to its host).
          const volumeIds = pod ? (pod.networkVolumeId ? [pod.networkVolumeId] : []) : e!.networkVolumeIds;
          const volumes = await networkVolumeHosts(tx, volumeIds);
          if (volumes.onlyHostIds && volumes.onlyHostIds.length === 0)
            return pending(
              `no capacity: the network volume cannot be mounted anywhere: ${volumes.problems.join('; ')}`,
            );
          const placed = await tx.worker.findMany({
            where: { hostId: { not: null }, ...liveWorker, id: { not: workerId } },
            select: {
              hostId: true,
              endpointId: true,
              gpuUuids: true,
              hostPort: true,
              cpuFlavorId: true,
              pod: { select: { ports: true } },
            },
          });
          const countries = await tx.dataCenter.findMany({
            where: { id: { in: [...new Set(hosts.map((h) => h.dataCenterId))] } },
            select: { id: true, country: true },
          });
          const countryOf = new Map(countries.map((c) => [c.id, c.country]));
          const candidates: PlacementHost[] = hosts.map((h) => {
            const gpus = (h.gpus as unknown as PlacementGpu[]) ?? [];
            const overcommit = Number(((h.labels ?? {}) as Record<string, string>)['gantry.io/cpu-overcommit'] ?? 1);
            return {
              id: h.id,
              name: h.name,
              status: h.status,
              dataCenterId: h.dataCenterId,
              // A pod asks for a GPU type, not a pool: the matching cards form the one pool it asks for.
              gpus: pod
                ? gpus.map((g) => ({
                    ...g,
                    pool: !pod.gpuTypeId || gpuTypeId(g.name) === pod.gpuTypeId ? POD_GPU_POOL : null,
                  }))
                : gpus,
              gpuMethod: h.gpuMethod,
              maxWorkers: h.maxWorkers,
              country: countryOf.get(h.dataCenterId) ?? null,
              cpuCount: h.cpuCount,
              memoryMb: h.memoryMb,
              cpuOvercommit: Number.isFinite(overcommit) && overcommit > 0 ? overcommit : 1,
            };
          });
          const cpu = !pod && e!.gpuPools.length === 0 && e!.cpuFlavorId ? endpointCpuInstance(e!) : undefined;
          const constraints = {
            ...(volumes.onlyHostIds ? { onlyHostIds: volumes.onlyHostIds } : {}),
            ...(cpu ? { cpu: { vcpus: cpu.vcpus, memoryMb: cpu.memoryGb * 1024 } } : {}),
          };
          const request = pod
            ? {
                endpointId: `pod:${pod.id}`,
                gpuPools: pod.gpuCount > 0 ? [POD_GPU_POOL] : [],
                gpuCount: pod.gpuCount,
                dataCenterIds: [],
                avoidHostIds: volumeHostId ? [] : (options.avoidHostIds ?? []),
                ...constraints,
              }
            : {
                endpointId: e!.id,
                gpuPools: e!.gpuPools,
                gpuCount: e!.gpuCount ?? 1,
                dataCenterIds: e!.dataCenterIds,
                avoidHostIds: options.avoidHostIds ?? [],
                countries: e!.locations.split(',').filter(Boolean),
                ...constraints,
              };
          const p = placeWorker(
            request,
            candidates,
            placed.map((w) => ({
              hostId: w.hostId!,
              endpointId: w.endpointId,
              gpuUuids: w.gpuUuids,
              cpu: reservationOf(w.cpuFlavorId),
            })),
          );
          if (!p.ok)
            return pending(volumes.problems.length > 0 ? `${p.reason}; ${volumes.problems.join('; ')}` : p.reason);
          const binding = volumes.bindings.get(p.hostId);
          if (binding)
            await tx.networkVolume.updateMany({ where: { id: binding, hostId: null }, data: { hostId: p.hostId } });
          // Host ports: one for a load-balancing worker (its PORT), a block of consecutive ones for a
          // pod (one per exposed port, in the order of its `ports`). A random free start rather than
          // the first: other software (or another installation) on the host may use ports of the
          // range that this database does not know of.
          const wanted = pod ? podPorts(pod.ports).length : e!.type === 'LOAD_BALANCING' ? 1 : 0;
          let hostPort: number | null = null;
          if (wanted > 0) {
            const taken = new Set<number>();
            for (const w of placed) {
              if (w.hostId !== p.hostId || !w.hostPort) continue;
              const span = w.pod ? Math.max(1, podPorts(w.pod.ports).length) : 1;
              for (let i = 0; i < span; i++) taken.add(w.hostPort + i);
            }
            const size = HOST_PORTS.last - HOST_PORTS.first + 2 - wanted;
            const offset = randomInt(size);
            for (let i = 0; i < size && hostPort === null; i++) {
              const first = HOST_PORTS.first + ((offset + i) % size);
              if (Array.from({ length: wanted }, (_, k) => first + k).every((port) => !taken.has(port)))
                hostPort = first;
            }
            if (hostPort === null)
              return pending(`no capacity: no ${wanted} free consecutive host ports on the chosen host`);
          }
          await tx.worker.update({
            where: { id: workerId },
            data: {
              hostId: p.hostId,
              gpuUuids: p.gpuUuids,
              gpuTypeId: p.gpuName ? gpuTypeId(p.gpuName) : null,
              cpuFlavorId: cpu ? cpuInstanceId(cpu) : null,
              hostPort,
              status: 'INITIALIZING',
              statusReason: 'pulling the image',
              containerName: containerNameOf(workerId),
            },
          });
          if (pod && pod.volumeInGb > 0 && !volumeHostId)
            await tx.pod.update({ where: { id: pod.id }, data: { volumeHostId: p.hostId } });
          return { placed: true, hostId: p.hostId };
        },
        { timeout: 30_000, maxWait: 30_000 },
      );
    },

    /** Logs in (with the endpoint's or pod's stored registry credential) and pulls the worker's image. */
    async prepareWorkerImage(workerId: string): Promise<{ image: string; outcome: string; ms: number }> {
      const started = Date.now();
      const row = await workerRow(workerId);
      if (!row.hostId) throw ApplicationFailure.nonRetryable('the worker has no host', 'NotPlaced');
      let image: string;
      let registryId: string | null;
      let accountId: string;
      if (row.pod) {
        ({ imageName: image, registryId, accountId } = row.pod);
      } else {
        const w = endpointWorker(row);
        const release = await db.release.findUnique({
          where: { endpointId_version: { endpointId: w.endpoint.id, version: w.releaseVersion } },
        });
        image = release?.image ?? w.endpoint.image;
        registryId = release ? release.registryId : w.endpoint.registryId;
        accountId = w.endpoint.accountId;
      }
      const w = { hostId: row.hostId };
      const login = registryId ? await openRegistryCredential(registryCtx, accountId, registryId) : undefined;
      // Checked when written too; here because this is where the password would leave.
      if (login && (login.registry === null || registryOf(image) !== login.registry)) {
        const why =
          login.registry === null
            ? 'is not bound to a registry yet (its owner gives the registry with the login)'
            : `is bound to ${login.registry}`;
        throw ApplicationFailure.nonRetryable(
          `the registry credential ${why}; the image '${image}' is on ${registryOf(image)}`,
          'RegistryMismatch',
        );
      }
      const h = await hostHandle(rt, w.hostId);
      const heartbeat = setInterval(() => Context.current().heartbeat(), 5000);
      try {
        const built = await ensureRuntimeImage(rt.pool, h, image, rt.platform.apps, rt.settings.pullTimeoutSec * 1000);
        if (built !== 'not-runtime') return { image, outcome: built, ms: Date.now() - started };
        const outcome = await ensureImage(rt.pool, h, image, login, {
          timeoutMs: rt.settings.pullTimeoutSec * 1000,
          signal: Context.current().cancellationSignal,
        });
        return { image, outcome, ms: Date.now() - started };
      } catch (err) {
        const ssh = await sshTrouble(db, w.hostId, err);
        if (ssh) throw err;
        throw ApplicationFailure.nonRetryable(err instanceof Error ? err.message : String(err), 'PullFailed');
      } finally {
        clearInterval(heartbeat);
      }
    },

    /**
     * Runs the worker's container with the endpoint environment plus the worker protocol's
     * variables. Idempotent: a running container of this worker (a retry after a lost answer) is
     * adopted, a stopped one replaced.
     */
    async startWorkerContainer(workerId: string): Promise<{ containerId: string; adopted: boolean }> {
      const row = await workerRow(workerId);
      if (!row.hostId || !row.host) throw ApplicationFailure.nonRetryable('the worker has no host', 'NotPlaced');
      if (row.pod) return startPodContainer({ ...row, hostId: row.hostId, host: row.host, pod: row.pod });
      const w = { ...endpointWorker(row), hostId: row.hostId, host: row.host };
      const e = w.endpoint;
      const release = await db.release.findUnique({
        where: { endpointId_version: { endpointId: e.id, version: w.releaseVersion } },
      });
      const config = release ?? { image: e.image, args: e.args, disk: e.disk, ports: e.ports, env: e.env };
      const h = await hostHandle(rt, w.hostId);
      const name = containerNameOf(workerId);

      // Only a retry of this activity can have made the container (its name is the worker's own).
      const existing =
        Context.current().info.attempt > 1 || w.containerId ? await inspectContainer(rt.pool, h, name) : null;
      if (existing?.running) {
        await db.worker.update({ where: { id: workerId }, data: { containerId: existing.id, containerName: name } });
        return { containerId: existing.id, adopted: true };
      }
      if (existing) await removeContainer(rt.pool, h, name, 0);

      const credential = await registerWorkerCredential(db, { workerId, endpointId: e.id });
      // The worker-facing address: the public URL, or with a loopback one the listener on the bridge.
      const base = rt.workerUrl;
      const gpuParam = encodeURIComponent(w.gpuTypeId ?? 'CPU');
      const protocol: Record<string, string> = {
        RUNPOD_WEBHOOK_GET_JOB: `${base}/v2/${e.id}/job-take/$ID?gpu=${gpuParam}`,
        RUNPOD_WEBHOOK_POST_OUTPUT: `${base}/v2/${e.id}/job-done/$RUNPOD_POD_ID/$ID?gpu=${gpuParam}`,
        RUNPOD_WEBHOOK_POST_STREAM: `${base}/v2/${e.id}/job-stream/$RUNPOD_POD_ID/$ID?gpu=${gpuParam}`,
        RUNPOD_WEBHOOK_PING: `${base}/v2/${e.id}/ping/$RUNPOD_POD_ID`,
        RUNPOD_PING_INTERVAL: String(rt.settings.pingIntervalMs),
        RUNPOD_AI_API_KEY: credential,
        RUNPOD_POD_ID: workerId,
        RUNPOD_ENDPOINT_ID: e.id,
        RUNPOD_POD_HOSTNAME: name,
        RUNPOD_GPU_COUNT: String(w.gpuUuids.length),
        RUNPOD_GPU_TYPE_ID: w.gpuTypeId ?? '',
        RUNPOD_DC_ID: w.host.dataCenterId,
      };
      const env = config.env as Record<string, string>;
      const artifact = env.GANTRY_BUILD_ID
        ? await artifactDownloadUrl(rt, base, e.accountId, env.GANTRY_BUILD_ID)
        : undefined;
      const binds: NonNullable<ContainerSpec['binds']> = [];
      if (artifact) {
        // Workers of one account on one host share downloads; other accounts' artifacts are not there to read.
        protocol.GANTRY_ARTIFACT_URL = artifact.url;
        protocol.GANTRY_ARTIFACT_SHA256 = artifact.sha256;
        protocol.GANTRY_ARTIFACT_CACHE = ARTIFACT_CACHE_MOUNT;
        binds.push({ source: `${rt.platform.apps.artifactCacheDir}/${e.accountId}`, path: ARTIFACT_CACHE_MOUNT });
      }
      const publish: string[] = [];
      const publishFixed: string[] = [];
      if (e.type === 'LOAD_BALANCING') {
        // The app keeps its own port; the proxy reaches it on the worker's host port.
        const appPort = Number((config.ports.find((p) => p.endsWith('/http')) ?? '80/http').split('/')[0]);
        protocol.PORT = String(appPort);
        protocol.PORT_HEALTH = String(appPort);
        publishFixed.push(`${w.hostPort}:${appPort}`);
      }
      for (const p of config.ports) publish.push(`${p.split('/')[0]}/${p.endsWith('/udp') ? 'udp' : 'tcp'}`);
      const cpu = w.cpuFlavorId ? recordedCpuInstance(w.cpuFlavorId) : undefined;
      const spec: ContainerSpec = {
        name,
        image: config.image,
        args: splitArgs(config.args),
        env: { ...env, ...protocol },
        labels: {
          [LABELS.endpoint]: e.id,
          [LABELS.worker]: workerId,
          [LABELS.release]: String(w.releaseVersion),
          [LABELS.host]: w.hostId,
        },
        publish,
        publishFixed: [...new Set(publishFixed)],
        gpuUuids: w.gpuUuids,
        gpuMethod: (w.host.gpuMethod ?? 'none') as ContainerSpec['gpuMethod'],
        // The runtime's size option where the host's storage has quotas; elsewhere the watchdog (inspectWorker).
        diskGb: w.host.diskLimitMethod === 'storage-opt' ? config.disk : undefined,
        // The instance the worker was placed (and reserved) with, not the endpoint's current one.
        ...(cpu ? { cpus: cpu.vcpus, memoryGb: cpu.memoryGb } : {}),
        ...(await networkVolumeMount(db, e.networkVolumeIds, w.host, ENDPOINT_VOLUME_MOUNT)),
      };
      if (binds.length > 0) spec.binds = [...(spec.binds ?? []), ...binds];
      return runWorkerContainer(workerId, w.hostId, h, spec, 'waiting for the worker to ask for a job');
    },

    /**
     * Ready: a queue worker has spoken the worker protocol since its container started (the job API
     * moved it to IDLE or RUNNING, or it pinged, or it took a job); a load-balancing worker answers
     * 200 on its health path. Ready workers are IDLE; a pod's worker is RUNNING once its container
     * runs. A container that exited is a failure.
     */
    async checkWorkerReady(workerId: string): Promise<ReadyCheck> {
      const w = await db.worker.findUnique({
        where: { id: workerId },
        include: { endpoint: { select: { type: true } }, host: true },
      });
      if (!w) return { state: 'failed', reason: 'the worker record is gone' };
      if (w.status === 'IDLE' || w.status === 'RUNNING') return { state: 'ready' };
      if (w.status === 'UNHEALTHY')
        return { state: 'failed', reason: w.statusReason ?? 'the worker reported itself unhealthy' };
      const spoke =
        (w.lastPingAt && w.startedAt && w.lastPingAt >= w.startedAt) ||
        (await db.job.count({ where: { workerId }, take: 1 })) > 0;
      if (spoke && w.endpoint?.type !== 'LOAD_BALANCING') {
        await db.worker.updateMany({
          where: { id: workerId, status: 'INITIALIZING' },
          data: { status: 'IDLE', readyAt: new Date(), statusReason: null },
        });
        return { state: 'ready' };
      }
      if (!w.hostId || !w.host) return { state: 'failed', reason: 'the worker lost its host' };
      if (w.host.status === 'UNREACHABLE' || w.host.status === 'HOST_KEY_MISMATCH')
        return { state: 'failed', reason: `host ${w.host.name} is ${w.host.status}: ${w.host.statusReason ?? ''}` };
      // The container first: a health answer on its port counts only while the container runs (the
      // port could be another program's if the app failed to bind it).
      try {
        const h = await hostHandle(rt, w.hostId);
        const state = await inspectContainer(rt.pool, h, containerNameOf(workerId));
        if (!state) return { state: 'failed', reason: 'the container disappeared before the worker was ready' };
        if (!state.running) {
          const tail = await containerLogTail(rt.pool, h, containerNameOf(workerId), 20).catch(() => '');
          return {
            state: 'failed',
            reason:
              `the container exited with code ${state.exitCode} before the worker was ready${tail ? `; last output:\n${tail}` : ''}`.slice(
                0,
                4000,
              ),
          };
        }
      } catch (err) {
        const ssh = await sshTrouble(db, w.hostId, err);
        if (ssh) return { state: 'waiting', reason: ssh };
        throw err;
      }
      // A pod is what its container runs: ready (RUNNING) once the container is.
      if (w.podId) {
        await db.worker.updateMany({
          where: { id: workerId, status: 'INITIALIZING' },
          data: { status: 'RUNNING', readyAt: new Date(), statusReason: null },
        });
        return { state: 'ready' };
      }
      if (
        w.endpoint?.type === 'LOAD_BALANCING' &&
        w.hostPort &&
        (await probeLbWorker(w.host.address, w.hostPort)).state === 'healthy'
      ) {
        await db.worker.updateMany({
          where: { id: workerId, status: 'INITIALIZING' },
          data: { status: 'IDLE', readyAt: new Date(), statusReason: null },
        });
        return { state: 'ready' };
      }
      return { state: 'waiting' };
    },

    async markWorkerReady(workerId: string): Promise<void> {
      await db.worker.updateMany({
        where: { id: workerId, readyAt: null },
        data: { readyAt: new Date(), statusReason: null },
      });
    },

    /**
     * A ready worker's health: its container runs, its host is reachable, it keeps pinging (queue
     * workers) or its health check keeps passing (load-balancing workers).
     */
    async inspectWorker(workerId: string): Promise<WatchResult> {
      const w = await db.worker.findUnique({
        where: { id: workerId },
        include: {
          host: true,
          endpoint: { select: { type: true, accountId: true } },
          pod: { select: { accountId: true } },
        },
      });
      if (!w) return { state: 'gone' };
      if (!w.hostId || !w.host) return { state: 'failed', reason: 'the worker lost its host' };
      if (w.host.status === 'UNREACHABLE' || w.host.status === 'HOST_KEY_MISMATCH') {
        return {
          state: 'failed',
          reason: `host ${w.host.name} is ${w.host.status}${w.host.statusReason ? `: ${w.host.statusReason}` : ''}`,
        };
      }
      if (w.status === 'UNHEALTHY')
        return { state: 'failed', reason: w.statusReason ?? 'the worker reported itself unhealthy' };
      // Only once a worker has pinged is its silence a sign of trouble (pings start with the SDK).
      if (w.lastPingAt && Date.now() - w.lastPingAt.getTime() > rt.settings.silentAfterSec * 1000) {
        return { state: 'failed', reason: `no ping for ${Math.round((Date.now() - w.lastPingAt.getTime()) / 1000)} s` };
      }
      try {
        const h = await hostHandle(rt, w.hostId);
        // Where the runtime cannot cap the container's disk, its writable layer is measured now and then.
        const measure = w.host.diskLimitMethod !== 'storage-opt' && diskCheckDue(workerId);
        const state = await inspectContainer(rt.pool, h, containerNameOf(workerId), { withSize: measure });
        if (!state) return { state: 'failed', reason: 'the container is gone' };
        if (state.running && state.writtenBytes !== undefined) {
          const diskGb = await workerDiskGb(w);
          if (state.writtenBytes > diskGb * 1024 ** 3) {
            return {
              state: 'failed',
              reason: `the container wrote ${(state.writtenBytes / 1024 ** 3).toFixed(2)} GB outside its volumes, more than its disk of ${diskGb} GB`,
            };
          }
        }
        if (!state.running) {
          // A worker that said it would leave (stopPod) and did is stopped, not failed.
          if (w.desiredStatus === 'EXITED' && state.exitCode === 0)
            return { state: 'stopped', reason: w.statusReason ?? 'the worker exited as it said it would' };
          const tail = await containerLogTail(rt.pool, h, containerNameOf(workerId), 20).catch(() => '');
          return {
            state: 'failed',
            reason: `the container exited with code ${state.exitCode}${tail ? `; last output:\n${tail}` : ''}`.slice(
              0,
              4000,
            ),
          };
        }
        await meterWorker(db, w);
        if (w.endpoint?.type === 'LOAD_BALANCING' && w.hostPort)
          return await watchLbHealth(w.id, w.host.address, w.hostPort, w.healthFailingSince);
        return { state: 'ok' };
      } catch (err) {
        const ssh = await sshTrouble(db, w.hostId, err);
        if (ssh) return { state: 'unknown', reason: ssh };
        throw err;
      }
    },

    /** No new jobs for this worker from now on (the job API hands jobs only to IDLE/RUNNING workers). */
    async beginDrain(workerId: string, reason: string): Promise<void> {
      await db.worker.updateMany({
        where: { id: workerId, ...liveWorker },
        data: { status: 'DRAINING', desiredStatus: 'EXITED', statusReason: reason },
      });
    },

    /** Jobs under way on the worker, or for a load-balancing worker the requests (and proxies) that still use it. */
    async workerJobsInFlight(workerId: string): Promise<number> {
      const w = await db.worker.findUnique({
        where: { id: workerId },
        select: { endpoint: { select: { type: true } } },
      });
      if (w?.endpoint?.type === 'LOAD_BALANCING') return lbWorkerInFlight(db, workerId);
      return db.job.count({ where: { workerId, status: 'IN_PROGRESS' } });
    },

    /** Stops and removes the container; answers false when the host cannot be reached (its reconcile removes it later). */
    async removeWorkerContainer(workerId: string): Promise<boolean> {
      const w = await db.worker.findUnique({ where: { id: workerId }, include: { host: true } });
      if (!w?.hostId || !w.host) return true;
      if (w.host.status === 'HOST_KEY_MISMATCH') return false;
      try {
        const h = await hostHandle(rt, w.hostId);
        await removeContainer(rt.pool, h, containerNameOf(workerId), rt.settings.stopGraceSec);
        return true;
      } catch (err) {
        if (err instanceof ApplicationFailure) return false;
        const ssh = await sshTrouble(db, w.hostId, err).catch(() => 'host key mismatch');
        if (ssh && w.host.status !== 'READY') return false;
        throw err;
      }
    },

    /** Final state: no credential, jobs it held back in the queue. */
    async finishWorker(
      workerId: string,
      outcome: { status: 'STOPPED' | 'FAILED'; reason: string },
    ): Promise<{ requeued: number }> {
      return db.$transaction(async (tx) => {
        // The worker is gone: its jobs go back to the queue, or fail at their last loss (domain/jobs/queue.ts).
        const requeued = (
          await requeueLostJobs(
            prismaSql(tx),
            { workerId },
            { tag: 'orchestration', retention: rt.platform.jobs.retention },
          )
        ).length;
        await tx.worker.updateMany({
          where: { id: workerId, status: { notIn: [...FINAL_WORKER_STATUSES] } },
          data: {
            status: outcome.status,
            statusReason: outcome.reason.slice(0, 4000),
            stoppedAt: new Date(),
            credentialHash: null,
            desiredStatus: 'TERMINATED',
          },
        });
        await meterWorker(tx, workerId);
        return { requeued };
      });
    },
  };
  // Each reaches a host over SSH and can take minutes: it heartbeats, so that one whose Temporal
  // worker died (kill -9, a lost machine) is retried elsewhere after the workflow's heartbeat
  // timeout instead of its whole start-to-close timeout (a drain or a release would wait that long).
  activities.startWorkerContainer = heartbeating(activities.startWorkerContainer);
  activities.checkWorkerReady = heartbeating(activities.checkWorkerReady);
  activities.inspectWorker = heartbeating(activities.inspectWorker);
  activities.removeWorkerContainer = heartbeating(activities.removeWorkerContainer);
  return activities;
}

export type WorkerActivities = ReturnType<typeof createWorkerActivities>;
