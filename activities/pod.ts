/**
 * Called by the pod workflow (workflows/pod.ts): what it reads and writes besides the worker
 * activities (activities/worker.ts): a pod runs one worker at a time through the same worker
 * workflow and activities.
 */
import { Context } from '@temporalio/activity';
import { liveWorker } from '../domain/workers/index.ts';
import { podVolumeName, removeVolume } from '../hostctl/containers.ts';
import { hostHandle, type OrchestrationRuntime } from './orchestration-runtime.ts';

export interface PodState {
  /** False once the pod's row is gone. */
  exists: boolean;
  desiredStatus: 'RUNNING' | 'EXITED' | 'TERMINATED';
  workers: Array<{ id: string; status: string }>;
}

export function createPodActivities(rt: OrchestrationRuntime) {
  const { db } = rt;
  return {
    /** What a pod's workflow decides on: the pod's desired state and its live workers. */
    async podState(podId: string): Promise<PodState> {
      const pod = await db.pod.findUnique({
        where: { id: podId },
        select: {
          desiredStatus: true,
          workers: { where: { ...liveWorker }, select: { id: true, status: true }, orderBy: { createdAt: 'asc' } },
        },
      });
      if (!pod) return { exists: false, desiredStatus: 'TERMINATED', workers: [] };
      return { exists: true, desiredStatus: pod.desiredStatus, workers: pod.workers };
    },

    /** The row of a pod's next worker (PENDING), before its workflow starts. */
    async createPodWorker(input: { podId: string; workerId: string }): Promise<boolean> {
      const pod = await db.pod.findUnique({ where: { id: input.podId }, select: { id: true } });
      if (!pod) return false;
      await db.worker.createMany({
        data: [{ id: input.workerId, podId: input.podId, status: 'PENDING', statusReason: 'waiting for placement' }],
        skipDuplicates: true,
      });
      return true;
    },

    /**
     * A terminated pod's row goes once its containers have (its worker rows with it), its volume
     * first. A host that cannot be reached keeps the volume; its reconcile removes it later.
     */
    async removePodRecord(podId: string): Promise<void> {
      const pod = await db.pod.findUnique({
        where: { id: podId },
        select: { desiredStatus: true, volumeHostId: true },
      });
      if (pod?.desiredStatus !== 'TERMINATED') return;
      if (pod.volumeHostId) {
        try {
          await removeVolume(
            rt.pool,
            await hostHandle(rt, pod.volumeHostId),
            podVolumeName(pod.volumeHostId, podId),
            15_000,
          );
        } catch (err) {
          Context.current().log.warn('the pod volume stays until its host is reconciled', {
            podId,
            hostId: pod.volumeHostId,
            error: String(err),
          });
        }
      }
      await db.pod.deleteMany({ where: { id: podId, desiredStatus: 'TERMINATED' } });
    },
  };
}

export type PodActivities = ReturnType<typeof createPodActivities>;
