import { ApplicationFailure, Context } from '@temporalio/activity';
import type { Build } from '../generated/prisma/client.ts';
import { writeResourceEndpoints, type Manifest } from '../domain/apps/index.ts';
import type { Principal } from '../domain/accounts/index.ts';
import type { DomainContext } from '../domain/context.ts';
import { deleteEndpoint } from '../domain/endpoints/index.ts';
import { DomainError } from '../domain/errors.ts';
import { stableId } from '../domain/shared/index.ts';
import { endpointsUnplaceable, UNPLACEABLE } from './worker-placement.ts';

/**
 * How long a release's worker, or a resource, may stay unplaceable before the deploy fails on it:
 * hosts being registered or probed get that long to become READY.
 */
const UNPLACEABLE_GRACE_MS = 30_000;

/** One endpoint's release made by a deployment. */
export interface DeployedRelease {
  endpointId: string;
  resource: string;
  version: number;
  /** Made by this deployment (a revert removes it). */
  created: boolean;
}

/** The deploy acts for the account that asked for it, with what creating endpoints takes. */
const accountPrincipal = (accountId: string, deploymentId: string): Principal => ({
  accountId,
  keyId: `deployment:${deploymentId}`,
  scopes: new Set(['READ', 'WRITE']),
  endpointIds: [],
  isAdmin: false,
});

/** A refusal a retry cannot change (a name taken, a rule broken): the deployment fails with its words. */
function refused(err: unknown): never {
  if (err instanceof DomainError) {
    const detail = err.errors?.length ? `${err.message} ${err.errors.join('; ')}` : err.message;
    throw ApplicationFailure.nonRetryable(detail, 'DeployRefused');
  }
  throw err;
}

export function createDeployActivities(ctx: DomainContext) {
  const db = ctx.db;

  async function load(deploymentId: string) {
    const d = await db.deployment.findUniqueOrThrow({
      where: { id: deploymentId },
      include: { environment: { include: { app: true } } },
    });
    const build = await db.build.findUniqueOrThrow({ where: { id: d.buildId } });
    const previous = d.previousBuildId ? await db.build.findUnique({ where: { id: d.previousBuildId } }) : null;
    return { d, env: d.environment, app: d.environment.app, build, previous };
  }

  const manifestOf = (b: Build): Manifest => b.manifest as unknown as Manifest;

  /**
   * Writes the endpoints of a build (domain writeResourceEndpoints): every resource's endpoint is
   * created or updated, each with the discovery variables of all of them. Idempotent: a retry finds
   * what an earlier attempt made, and new endpoints get ids derived from the deployment, so the URLs
   * already written into other endpoints stay true.
   */
  async function writeEndpoints(
    deploymentId: string,
    accountId: string,
    appName: string,
    envId: string,
    envName: string,
    build: Build,
    only?: Set<string>,
  ): Promise<DeployedRelease[]> {
    try {
      return await writeResourceEndpoints(ctx, accountPrincipal(accountId, deploymentId), {
        app: appName,
        environment: { id: envId, name: envName },
        build,
        only,
        discovery: 'build',
        newEndpointId: (resource) => stableId('deployment', deploymentId, resource),
      });
    } catch (err) {
      refused(err);
    }
  }

  return {
    async applyDeployment(deploymentId: string): Promise<{ releases: DeployedRelease[] }> {
      const { d, env, app, build } = await load(deploymentId);
      if (d.status !== 'RUNNING')
        throw ApplicationFailure.nonRetryable(`the deployment is ${d.status}`, 'DeployRefused');
      if (build.status !== 'READY') throw ApplicationFailure.nonRetryable('the build is not uploaded', 'DeployRefused');
      // A retry of this activity must not count endpoints it made itself as older ones: they are recorded by resource.
      const releases = await writeEndpoints(deploymentId, app.accountId, app.name, env.id, env.name, build);
      return { releases };
    },

    /** Until every release is COMPLETED (or one did not finish); heartbeats while it waits. */
    async waitForReleases(
      releases: DeployedRelease[],
    ): Promise<{ failed: Array<{ resource: string; reason: string }> }> {
      // When each resource was first seen that no READY host could ever run.
      const unplaceableSince = new Map<string, number>();
      for (;;) {
        const rows = await db.release.findMany({
          where: { OR: releases.map((r) => ({ endpointId: r.endpointId, version: r.version })) },
          select: { endpointId: true, version: true, status: true, statusReason: true },
        });
        // A release worker that no READY host could take for a while: waiting longer cannot help.
        const stuck = await db.worker.findMany({
          where: {
            OR: releases.map((r) => ({ endpointId: r.endpointId, releaseVersion: r.version })),
            status: 'PENDING',
            statusReason: { startsWith: `${UNPLACEABLE}:` },
            createdAt: { lt: new Date(Date.now() - UNPLACEABLE_GRACE_MS) },
          },
          select: { endpointId: true, releaseVersion: true, statusReason: true },
        });
        const failed: Array<{ resource: string; reason: string }> = [];
        let pending = 0;
        for (const r of releases) {
          const row = rows.find((x) => x.endpointId === r.endpointId && x.version === r.version);
          const unplaceable = stuck.find((w) => w.endpointId === r.endpointId && w.releaseVersion === r.version);
          if (!row) failed.push({ resource: r.resource, reason: 'its endpoint was deleted' });
          else if (row.status === 'ROLLING_OUT' && unplaceable)
            failed.push({ resource: r.resource, reason: `its worker ${unplaceable.statusReason}` });
          else if (row.status === 'ROLLING_OUT') pending++;
          else if (row.status === 'HALTED' || row.status === 'ROLLED_BACK')
            failed.push({ resource: r.resource, reason: row.statusReason ?? row.status.toLowerCase() });
          // COMPLETED, or SUPERSEDED by a newer change of the endpoint: this release is no longer waited on.
        }
        // Every resource must be placeable somewhere, whether or not it keeps workers (a scale-to-zero
        // GPU resource on hosts without its GPUs would take jobs it can never run). A platform
        // without any host yet is being set up: its workers wait, saying why.
        let judging = 0;
        const judged = releases.filter((r) => !failed.some((f) => f.resource === r.resource));
        const unplaceable =
          judged.length > 0 && (await db.host.count()) > 0
            ? await endpointsUnplaceable(
                db,
                judged.map((r) => r.endpointId),
              )
            : new Map<string, string>();
        for (const r of judged) {
          const reason = unplaceable.get(r.endpointId);
          if (!reason) {
            unplaceableSince.delete(r.endpointId);
            continue;
          }
          const since = unplaceableSince.get(r.endpointId) ?? Date.now();
          unplaceableSince.set(r.endpointId, since);
          if (Date.now() - since >= UNPLACEABLE_GRACE_MS)
            failed.push({ resource: r.resource, reason: `its workers ${reason}` });
          else judging++;
        }
        if (failed.length > 0 || (pending === 0 && judging === 0)) return { failed };
        Context.current().heartbeat({ pending });
        await Context.current().sleep(1000);
      }
    },

    /** After a failed release: endpoints this deployment made go, the others return to the previous build. */
    async revertDeployment(deploymentId: string, releases: DeployedRelease[]): Promise<void> {
      const { env, app, previous } = await load(deploymentId);
      const principal = accountPrincipal(app.accountId, deploymentId);
      const before = new Set(previous ? manifestOf(previous).resources.map((r) => r.name) : []);
      for (const r of releases) {
        if (r.created || !before.has(r.resource)) {
          await deleteEndpoint(ctx, principal, r.endpointId).catch((err: unknown) => {
            if (!(err instanceof DomainError && err.kind === 'not_found')) throw err;
          });
        }
      }
      if (previous) {
        const back = new Set(releases.filter((r) => !r.created && before.has(r.resource)).map((r) => r.resource));
        if (back.size > 0)
          await writeEndpoints(deploymentId, app.accountId, app.name, env.id, env.name, previous, back);
      }
    },

    /** All released: resources gone from the code lose their endpoints, the environment moves to the build. */
    async completeDeployment(deploymentId: string): Promise<void> {
      const { d, env, app, build } = await load(deploymentId);
      const keep = new Set(manifestOf(build).resources.map((r) => r.name));
      const principal = accountPrincipal(app.accountId, deploymentId);
      const stale = await db.endpoint.findMany({ where: { appEnvironmentId: env.id, deletingAt: null } });
      for (const e of stale.filter((x) => !keep.has(x.appResource ?? ''))) {
        await deleteEndpoint(ctx, principal, e.id).catch((err: unknown) => {
          if (!(err instanceof DomainError && err.kind === 'not_found')) throw err;
        });
      }
      await db.$transaction([
        db.appEnvironment.update({ where: { id: env.id }, data: { currentBuildId: d.buildId } }),
        db.deployment.update({ where: { id: d.id }, data: { status: 'SUCCEEDED', finishedAt: new Date() } }),
      ]);
    },

    async failDeployment(deploymentId: string, error: string): Promise<void> {
      await db.deployment.updateMany({
        where: { id: deploymentId, status: 'RUNNING' },
        data: { status: 'FAILED', error: error.slice(0, 4000), finishedAt: new Date() },
      });
    },
  };
}

export type DeployActivities = ReturnType<typeof createDeployActivities>;
