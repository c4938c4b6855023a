/**
 * The endpoint's worker problem: why no worker of its current release can run right now, in one
 * shape every surface answers (the workers route, the job API's /health and a queued job's status,
 * GraphQL's Endpoint.workerProblem). Read with one statement on the caller's connection, cheap
 * enough for every status poll (docs/endpoints.md#why-a-job-waits).
 */
import { Type, type Static } from 'typebox';
import type { SqlRunner } from '../jobs/lost-workers.ts';

/** How the reason of a worker no READY host could take, even empty, begins (activities/worker-placement.ts). */
export const UNPLACEABLE = 'cannot be placed';

const WORKER_PROBLEM_PROPERTIES = {
  kind: Type.Union([Type.Literal('image'), Type.Literal('start'), Type.Literal('placement')], {
    description:
      '`image`: the newest worker of the release failed before its container ran (its image could not be pulled or built); `start`: its container ran but exited or never became ready; `placement`: a worker waits that no READY host could take, even empty (GPU pools, GPU count, CPU size, locations, network volume).',
  }),
  reason: Type.String({ description: 'what went wrong, as the worker recorded it' }),
  workerId: Type.Union([Type.String(), Type.Null()], { description: 'the worker it happened to' }),
  since: Type.String({
    format: 'date-time',
    description: 'when: the failed worker stopped, or the waiting worker was made',
  }),
};

/** The shape, described for where it is answered. */
export const workerProblemSchema = (
  description = 'Why no worker of the endpoint’s current release can run right now (docs/endpoints.md#why-a-job-waits).',
) => Type.Object(WORKER_PROBLEM_PROPERTIES, { description });

export const WorkerProblemSchema = workerProblemSchema();
export type WorkerProblem = Static<typeof WorkerProblemSchema>;

/** The field as answered where it is always present: null while nothing stands in the way. */
export const nullableWorkerProblemSchema = (
  description = 'Why no worker of the endpoint’s current release can run right now (docs/endpoints.md#why-a-job-waits); null while nothing stands in the way.',
) => Type.Union([Type.Object(WORKER_PROBLEM_PROPERTIES), Type.Null()], { description });

interface ProblemRow {
  source: 'placement' | 'failed';
  id: string;
  reason: string | null;
  at: string;
  started: boolean;
}

/**
 * One statement, every branch on the (endpointId, status) index. `live` is the release's waiting
 * and ready workers (a handful); the failure is looked up only while none of them is ready (a
 * one-time filter) and proved stale only for the one row found: a worker of the release that became
 * ready after it failed (and has since stopped) means the release can run, an old failure is not
 * why a job waits now. Times leave as ISO text, the same through Prisma and node-postgres.
 */
const PROBLEM_SQL = `
  WITH e AS MATERIALIZED (
    SELECT coalesce($3::int, "currentReleaseVersion") AS v FROM "Endpoint" WHERE id = $1
  ), live AS MATERIALIZED (
    SELECT w.id, w.status::text AS status, w."statusReason", w."createdAt"
    FROM "Worker" w JOIN e ON w."releaseVersion" = e.v
    WHERE w."endpointId" = $1 AND w.status IN ('PENDING', 'IDLE', 'RUNNING')
  ), ready AS MATERIALIZED (
    SELECT EXISTS (SELECT 1 FROM live WHERE status IN ('IDLE', 'RUNNING')) AS yes
  ), failed AS MATERIALIZED (
    SELECT w.id, w."statusReason", coalesce(w."stoppedAt", w."createdAt") AS at, w."startedAt" IS NOT NULL AS started
    FROM "Worker" w JOIN e ON w."releaseVersion" = e.v
    WHERE w."endpointId" = $1 AND w.status = 'FAILED' AND w."readyAt" IS NULL AND NOT (SELECT yes FROM ready)
    ORDER BY w."stoppedAt" DESC NULLS LAST LIMIT 1
  )
  (SELECT 'placement' AS source, id, "statusReason" AS reason,
          to_char("createdAt", 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS at, false AS started
   FROM live
   WHERE status = 'PENDING' AND starts_with("statusReason", $2) AND NOT (SELECT yes FROM ready)
   ORDER BY "createdAt" LIMIT 1)
  UNION ALL
  SELECT 'failed', f.id, f."statusReason", to_char(f.at, 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), f.started
  FROM failed f JOIN e ON true
  WHERE NOT EXISTS (
    SELECT 1 FROM "Worker" r
    WHERE r."endpointId" = $1 AND r.status IN ('STOPPED', 'DRAINING', 'UNHEALTHY')
      AND r."releaseVersion" = e.v AND r."readyAt" > f.at)`;

/**
 * Why no worker of the endpoint's current release can run right now; null
 * once one of them is IDLE or RUNNING, or when nothing is known to stand in the way (workers that
 * wait for busy hosts, or are pulling and starting for the first time). A waiting worker no host
 * could ever take (`placement`) comes first: until it is placed nothing else can be tried. Else the
 * newest worker of the release that failed without ever becoming ready: `image` when it failed
 * before its container was started (the pull, a runtime image's build, the registry login), `start`
 * when the container ran. A worker that served and then crashed is not a problem of starting: its
 * replacement is on the way.
 */
export async function endpointWorkerProblem(sql: SqlRunner, endpointId: string): Promise<WorkerProblem | null> {
  const rows = await problemRows(sql, endpointId, null);
  return problemOf(rows.find((r) => r.source === 'placement') ?? rows[0]);
}

/**
 * The failure half of endpointWorkerProblem for one release: its newest worker that failed to
 * start, while none of it is ready and none became ready since. Placement notes it in the status of
 * the next worker it places ("pulling the image (the last try failed: ...)").
 */
export async function lastStartFailure(
  sql: SqlRunner,
  endpointId: string,
  releaseVersion: number,
): Promise<WorkerProblem | null> {
  return problemOf((await problemRows(sql, endpointId, releaseVersion)).find((r) => r.source === 'failed'));
}

function problemRows(sql: SqlRunner, endpointId: string, releaseVersion: number | null): Promise<ProblemRow[]> {
  return sql<ProblemRow>(PROBLEM_SQL, [endpointId, `${UNPLACEABLE}:`, releaseVersion]);
}

function problemOf(row: ProblemRow | undefined): WorkerProblem | null {
  if (!row) return null;
  return {
    kind: row.source === 'placement' ? 'placement' : row.started ? 'start' : 'image',
    reason: row.reason ?? 'failed (no reason recorded)',
    workerId: row.id,
    since: row.at,
  };
}

/** How the workflow prefixes a failure of the start (workflows/worker.ts): said once is enough in a note. */
const START_PREFIX = /^could not start: /;

/**
 * A problem's reason shortened to about `max` characters, on one line: for a note in another
 * worker's status ("pulling the image (the last try failed: ...)").
 */
export function shortReason(reason: string, max = 300): string {
  const flat = reason
    .replace(START_PREFIX, '')
    .replace(/\s*\n\s*/g, ' / ')
    .trim();
  return flat.length <= max ? flat : `${flat.slice(0, max - 1).trimEnd()}…`;
}
