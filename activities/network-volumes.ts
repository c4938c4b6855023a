/**
 * Called by no workflow: where a worker's network volumes let it run (placement) and how its
 * container mounts them, for the worker activities (activities/worker.ts).
 */
import { ApplicationFailure } from '@temporalio/activity';
import type { Db } from '../domain/shared/index.ts';
import type { Prisma } from '../generated/prisma/client.ts';
import { hostVolumeName, sharedVolumeDir, volumeStorage } from '../domain/catalog/index.ts';
import type { ContainerSpec } from '../hostctl/containers.ts';

type DbOrTx = Db | Prisma.TransactionClient;

/**
 * The hosts a worker mounting these network volumes may run on: every host of a data center with
 * shared storage for its volume, or the one host holding it. `bindings`: hosts that would bind a
 * not-yet-bound single-host volume to themselves. Undefined `onlyHostIds`: no volumes, no limit.
 */
export async function networkVolumeHosts(
  db: DbOrTx,
  volumeIds: readonly string[],
): Promise<{ onlyHostIds?: string[]; bindings: Map<string, string>; problems: string[] }> {
  if (volumeIds.length === 0) return { bindings: new Map(), problems: [] };
  const volumes = await db.networkVolume.findMany({ where: { id: { in: [...volumeIds] }, deletedAt: null } });
  const dcIds = [...new Set(volumes.map((v) => v.dataCenterId))];
  const [settings, hosts] = await Promise.all([
    db.dataCenter.findMany({ where: { id: { in: dcIds } } }),
    db.host.findMany({
      where: { dataCenterId: { in: dcIds } },
      select: { id: true, dataCenterId: true },
      orderBy: { createdAt: 'asc' },
    }),
  ]);
  const allowed = new Set<string>();
  const bindings = new Map<string, string>();
  const problems = volumeIds
    .filter((id) => !volumes.some((v) => v.id === id))
    .map((id) => `network volume ${id} was deleted`);
  for (const v of volumes) {
    const inDc = hosts.filter((h) => h.dataCenterId === v.dataCenterId).map((h) => h.id);
    const storage = volumeStorage(
      v,
      settings.find((d) => d.id === v.dataCenterId),
      inDc,
    );
    if (storage.kind === 'shared-path') inDc.forEach((id) => allowed.add(id));
    else if (storage.kind === 'host') {
      allowed.add(storage.hostId);
      if (storage.bindTo) bindings.set(storage.bindTo, v.id);
    } else problems.push(`network volume ${v.id}: ${storage.reason}`);
  }
  return { onlyHostIds: [...allowed], bindings, problems };
}

/**
 * How a worker on `host` mounts the network volume of its data center: a named volume on the host
 * that holds it, or the volume's directory on the data center's shared storage.
 */
export async function networkVolumeMount(
  db: Db,
  volumeIds: readonly string[],
  host: { id: string; dataCenterId: string },
  target: string,
): Promise<Pick<ContainerSpec, 'volumes' | 'binds'>> {
  if (volumeIds.length === 0) return {};
  const volumes = await db.networkVolume.findMany({ where: { id: { in: [...volumeIds] }, deletedAt: null } });
  const bound = volumes.find((v) => v.hostId === host.id);
  if (bound) return { volumes: [{ name: hostVolumeName(host.id, bound.id), path: target }] };
  const dc = await db.dataCenter.findUnique({ where: { id: host.dataCenterId } });
  const shared = volumes.find((v) => !v.hostId && v.dataCenterId === host.dataCenterId);
  if (shared && dc?.networkVolumePath)
    return { binds: [{ source: sharedVolumeDir(dc.networkVolumePath, shared.id), path: target }] };
  throw ApplicationFailure.nonRetryable(
    `none of the network volumes ${volumeIds.join(', ')} is reachable from host ${host.id} (data center ${host.dataCenterId})`,
    'VolumeUnavailable',
  );
}
