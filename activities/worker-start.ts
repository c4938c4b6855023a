/**
 * A worker's image and container for the worker workflow (workflows/worker.ts): the registry login
 * and pull, and the container's start (an endpoint worker's with the worker protocol's environment,
 * a pod's with its own). Assembled into the worker activities by activities/worker.ts.
 */
import { Context, ApplicationFailure } from '@temporalio/activity';
import { splitArgs } from '../domain/containers/index.ts';
import { ENDPOINT_VOLUME_MOUNT, recordedCpuInstance } from '../domain/catalog/index.ts';
import { podPorts } from '../domain/pods/index.ts';
import { artifactDownloadUrl, currentRuntimeImage, flashWorker } from '../domain/apps/index.ts';
import { registerWorkerCredential } from '../domain/workers/index.ts';
import type { Pod } from '../generated/prisma/client.ts';
import {
  containerNameOf,
  inspectContainer,
  LABELS,
  podVolumeName,
  removeContainer,
  runContainer,
  type ContainerSpec,
} from '../hostctl/containers.ts';
import { hostHandle, sshTrouble, type OrchestrationRuntime } from './orchestration-runtime.ts';
import { networkVolumeMount } from './network-volumes.ts';
import { endpointWorkerImage, ensureWorkerImage, type WorkerImage } from './worker-image.ts';
import { publishAddressOf, tenantNetwork } from './tenant-network.ts';

/** Where a deployed app's worker finds its account's artifact cache (docs/apps.md). */
const ARTIFACT_CACHE_MOUNT = '/var/cache/gantry/artifacts';

/** Label of a pod's container (pod workers carry no endpoint label). */
export const POD_LABEL = 'gantry.pod';

export function createWorkerStartActivities(rt: OrchestrationRuntime) {
  const { db } = rt;

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

  type WorkerRow = Awaited<ReturnType<typeof workerRow>>;

  /** `PUBLIC_KEY`: the account's keys (updateUserSettings), one a line; none when the pod sets its own. */
  async function podPublicKey(accountId: string, env: Record<string, string>): Promise<Record<string, string>> {
    if ('PUBLIC_KEY' in env) return {};
    const account = await db.account.findUnique({ where: { id: accountId }, select: { pubKey: true } });
    return account?.pubKey ? { PUBLIC_KEY: account.pubKey } : {};
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
    const { network } = await tenantNetwork(rt, h, pod.accountId);
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
    const env = { ...(pod.env as Record<string, string>), ...platform };
    const spec: ContainerSpec = {
      name,
      image: pod.imageName,
      args: splitArgs(pod.dockerArgs),
      env,
      // The account's SSH keys as the hosted service gives them, for the image's start-up to put in
      // authorized_keys; read at each start, so a resumed or replaced container has the current ones.
      publicEnv: await podPublicKey(pod.accountId, env),
      labels: {
        [POD_LABEL]: pod.id,
        [LABELS.worker]: w.id,
        [LABELS.release]: String(w.releaseVersion),
        [LABELS.host]: w.hostId,
      },
      network: network.name,
      publishAddress: await publishAddressOf(w.host.address),
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

  return {
    /**
     * Logs in (with the endpoint's or pod's stored registry credential) and pulls the worker's image,
     * as a pre-pull does (worker-image.ts: one path for both).
     */
    async prepareWorkerImage(workerId: string): Promise<{ image: string; outcome: string; ms: number }> {
      const started = Date.now();
      const row = await workerRow(workerId);
      if (!row.hostId) throw ApplicationFailure.nonRetryable('the worker has no host', 'NotPlaced');
      let want: WorkerImage;
      if (row.pod) {
        want = { image: row.pod.imageName, registryId: row.pod.registryId, accountId: row.pod.accountId };
      } else {
        const w = endpointWorker(row);
        const release = await db.release.findUnique({
          where: { endpointId_version: { endpointId: w.endpoint.id, version: w.releaseVersion } },
        });
        want = await endpointWorkerImage(rt, w.endpoint, release);
      }
      const { outcome } = await ensureWorkerImage(rt, row.hostId, want, 'worker');
      return { image: want.image, outcome, ms: Date.now() - started };
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
      // The account's network, and the worker-facing address from it: the public URL, or with a
      // loopback one the listener on the network's gateway.
      const { network, workerBase: base } = await tenantNetwork(rt, h, e.accountId);
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
      const flash = await flashWorker(rt, rt.platform.apps, e, config.image);
      const image = currentRuntimeImage(rt.platform.apps, flash?.image ?? config.image);
      // A gantry deploy's endpoint names its build; flash's runtime runs its environment's active build.
      const buildId = env.GANTRY_BUILD_ID ?? flash?.buildId;
      const artifact = buildId ? await artifactDownloadUrl(rt, base, e.accountId, buildId) : undefined;
      const binds: NonNullable<ContainerSpec['binds']> = [];
      if (artifact) {
        // Workers of one account on one host share downloads; other accounts' artifacts are not there to read.
        protocol.GANTRY_ARTIFACT_URL = artifact.url;
        protocol.GANTRY_ARTIFACT_SHA256 = artifact.sha256;
        protocol.GANTRY_ARTIFACT_CACHE = ARTIFACT_CACHE_MOUNT;
        binds.push({ source: `${rt.platform.apps.artifactCacheDir}/${e.accountId}`, path: ARTIFACT_CACHE_MOUNT });
      }
      // Nothing of an endpoint worker is published on its host but what the platform itself reaches:
      // a load-balancing worker's app port, for the proxy (which checks the key). A queue worker's
      // `ports` are not published at all (it takes its jobs from the queue; as on the hosted
      // service, nothing outside reaches it), nor a load-balancing worker's other ports: a port on
      // the host's address would be reachable past every key check, and no answer would say where.
      const publishFixed: string[] = [];
      if (e.type === 'LOAD_BALANCING') {
        // The app keeps its own port; the proxy reaches it on the worker's host port.
        const appPort = Number((config.ports.find((p) => p.endsWith('/http')) ?? '80/http').split('/')[0]);
        protocol.PORT = String(appPort);
        protocol.PORT_HEALTH = String(appPort);
        publishFixed.push(`${w.hostPort}:${appPort}`);
      }
      const cpu = w.cpuFlavorId ? recordedCpuInstance(w.cpuFlavorId) : undefined;
      const spec: ContainerSpec = {
        name,
        image,
        args: splitArgs(config.args),
        env: { ...env, ...protocol },
        labels: {
          [LABELS.endpoint]: e.id,
          [LABELS.worker]: workerId,
          [LABELS.release]: String(w.releaseVersion),
          [LABELS.host]: w.hostId,
        },
        network: network.name,
        publishAddress: await publishAddressOf(w.host.address),
        publish: [],
        publishFixed,
        gpuUuids: w.gpuUuids,
        gpuMethod: (w.host.gpuMethod ?? 'none') as ContainerSpec['gpuMethod'],
        // The runtime's size option where the host's storage has quotas; elsewhere the watchdog (inspectWorker).
        diskGb: w.host.diskLimitMethod === 'storage-opt' ? config.disk : undefined,
        // The instance the worker was placed (and reserved) with, not the endpoint's current one.
        ...(cpu ? { cpus: cpu.vcpus, memoryGb: cpu.memoryGb } : {}),
        // Always the hosted service's serverless path, whatever the template's volumeMountPath says
        // (that one is a pod's): worker code written for that service opens /runpod-volume/...
        ...(await networkVolumeMount(db, e.networkVolumeIds, w.host, ENDPOINT_VOLUME_MOUNT)),
      };
      if (binds.length > 0) spec.binds = [...(spec.binds ?? []), ...binds];
      return runWorkerContainer(workerId, w.hostId, h, spec, 'waiting for the worker to ask for a job');
    },
  };
}
