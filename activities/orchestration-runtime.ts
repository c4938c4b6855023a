/**
 * Called by no workflow: what the host, endpoint, worker, pod and rollout activities are bound to
 * (OrchestrationRuntime), and how they reach a host: its SSH target and container handle, what SSH
 * trouble means, and heartbeating while a long host call runs.
 */
import type { Client } from '@temporalio/client';
import { ApplicationFailure, Context } from '@temporalio/activity';
import type { Db } from '../domain/shared/index.ts';
import type { Host } from '../generated/prisma/client.ts';
import type { SecretBox } from '../domain/shared/index.ts';
import { HostKeyMissingError, sshTargetOf } from '../domain/hosts/index.ts';
import type { HostHandle, RuntimeName } from '../hostctl/containers.ts';
import { HostKeyMismatchError, SshConnectError, type SshPool, type SshTarget } from '../hostctl/ssh.ts';
import type { OrchestrationSettings } from '../domain/shared/index.ts';
import type { PlatformSettings } from '../domain/shared/index.ts';

/** What orchestration activities share: the database, secrets, the SSH pool, the Temporal client. */
export interface OrchestrationRuntime {
  db: Db;
  secrets: SecretBox;
  publicUrl: string;
  /** Base address worker containers reach the API at (see DomainContext.workerUrl). */
  workerUrl: string;
  /** Set when containers reach the worker-facing listener on their network's gateway (a loopback public URL): its port. */
  workerListenerPort?: number;
  temporal: Client;
  pool: SshPool;
  settings: OrchestrationSettings;
  /** The rest of what the platform runs with (job retention, prices, ...). */
  platform: PlatformSettings;
  /** Signs the artifact URLs handed to workers of deployed apps. */
  signingKey: Buffer;
}

/** The SSH target of a host row (domain/hosts/access.ts); a host without a key fails the activity for good. */
export function targetOf(
  host: Pick<Host, 'address' | 'port' | 'user' | 'privateKey' | 'hostKeySha256'>,
  secrets: SecretBox,
  pin?: string | null,
): SshTarget {
  try {
    return sshTargetOf(host, secrets, pin === undefined ? host.hostKeySha256 : pin);
  } catch (err) {
    if (err instanceof HostKeyMissingError) throw ApplicationFailure.nonRetryable(err.message, 'NoHostKey');
    throw err;
  }
}

/** Container commands on a READY host; fails without retries when the host cannot be used. */
export async function hostHandle(rt: OrchestrationRuntime, hostId: string): Promise<HostHandle & { host: Host }> {
  const host = await rt.db.host.findUnique({ where: { id: hostId } });
  if (!host) throw ApplicationFailure.nonRetryable(`host ${hostId} no longer exists`, 'HostGone');
  if (host.status === 'HOST_KEY_MISMATCH')
    throw ApplicationFailure.nonRetryable(
      `host ${host.name}: ${host.statusReason ?? 'host key mismatch'}`,
      'HostKeyMismatch',
    );
  const runtime = (host.containerRuntime ?? 'podman') as RuntimeName;
  return { hostId, host, target: targetOf(host, rt.secrets), runtime };
}

/** Turns a HostKeyMismatchError into the host's status, so that no more work goes there. */
export async function recordHostKeyMismatch(db: Db, hostId: string, err: HostKeyMismatchError): Promise<void> {
  await db.host.updateMany({
    where: { id: hostId },
    data: {
      status: 'HOST_KEY_MISMATCH',
      statusReason: `host key changed: pinned ${err.expected}, the host now presents ${err.actual}. Work on this host has stopped. If the host was reinstalled, probe it with {"acceptHostKey": "${err.actual}"}.`,
    },
  });
}

/**
 * SSH trouble that says nothing about the worker itself (its message; undefined for any other
 * error): the host workflow decides reachability. A changed host key is recorded on the host and
 * ends the activity for good.
 */
export async function sshTrouble(db: Db, hostId: string, err: unknown): Promise<string | undefined> {
  if (err instanceof HostKeyMismatchError) {
    await recordHostKeyMismatch(db, hostId, err);
    throw ApplicationFailure.nonRetryable(err.message, 'HostKeyMismatch');
  }
  if (err instanceof SshConnectError || (err instanceof Error && /^Ssh/.test(err.name))) return err.message;
  return undefined;
}

/** How often the long host activities heartbeat; the workflows' heartbeat timeout is several of these. */
export const ACTIVITY_HEARTBEAT_MS = 5_000;

/** `fn`, heartbeating every ACTIVITY_HEARTBEAT_MS while it runs. */
export function heartbeating<A extends unknown[], R>(fn: (...args: A) => Promise<R>): (...args: A) => Promise<R> {
  return async (...args: A) => {
    const context = Context.current();
    const timer = setInterval(() => context.heartbeat(), ACTIVITY_HEARTBEAT_MS);
    try {
      return await fn(...args);
    } finally {
      clearInterval(timer);
    }
  };
}
