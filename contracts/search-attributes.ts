/**
 * Gantry's custom Temporal search attributes: the one list the dev server flags, the cluster
 * registration at start-up, the starters (domain/*.ts) and the workflows (upserts) all use.
 * Plain data and @temporalio/common only: the workflow bundle imports this file.
 *
 * In a visibility query (the Temporal UI's search box, `temporal workflow list --query`):
 *   GantryEndpointId = 'abc' AND GantryKind = 'job' AND GantryJobStatus = 'FAILED'
 *   GantryHostId = 'h1' AND GantryKind = 'worker' AND ExecutionStatus = 'Running'
 */
import { defineSearchAttributeKey, SearchAttributeType, type SearchAttributePair } from '@temporalio/common';

/** What the workflow is: `endpoint`, `job`, `worker`, `host`, `pod`, `rollout` or `prepull` (an image pulled ahead). */
export const GantryKind = defineSearchAttributeKey('GantryKind', SearchAttributeType.KEYWORD);
/** The endpoint a workflow belongs to (endpoint, job, worker of an endpoint, rollout, prepull). */
export const GantryEndpointId = defineSearchAttributeKey('GantryEndpointId', SearchAttributeType.KEYWORD);
/** The owning account (endpoint, job, pod, and the workers and rollouts those start). */
export const GantryAccountId = defineSearchAttributeKey('GantryAccountId', SearchAttributeType.KEYWORD);
/** The release a worker runs, a rollout rolls out or a pre-pull pulls the image of. */
export const GantryReleaseVersion = defineSearchAttributeKey('GantryReleaseVersion', SearchAttributeType.INT);
/** The host: of a host workflow, and of a worker once it is placed (upserted then). */
export const GantryHostId = defineSearchAttributeKey('GantryHostId', SearchAttributeType.KEYWORD);
/** The pod: of a pod workflow and of its workers. */
export const GantryPodId = defineSearchAttributeKey('GantryPodId', SearchAttributeType.KEYWORD);
/**
 * A job's status as the job API reports it (IN_QUEUE, IN_PROGRESS, COMPLETED, FAILED, CANCELLED,
 * TIMED_OUT), kept current by the job workflow; GONE once the job no longer exists (its TTL passed
 * while queued, or its queue was purged).
 */
export const GantryJobStatus = defineSearchAttributeKey('GantryJobStatus', SearchAttributeType.KEYWORD);

/** Every attribute, for registration (a cluster with SQL visibility has 10 Keyword and 3 Int slots per namespace). */
export const GANTRY_SEARCH_ATTRIBUTES = [
  GantryKind,
  GantryEndpointId,
  GantryAccountId,
  GantryReleaseVersion,
  GantryHostId,
  GantryPodId,
  GantryJobStatus,
] as const;

export type GantryWorkflowKind = 'endpoint' | 'job' | 'worker' | 'host' | 'pod' | 'rollout' | 'prepull';

export interface GantryAttributeValues {
  endpointId?: string;
  accountId?: string;
  releaseVersion?: number;
  hostId?: string;
  podId?: string;
  jobStatus?: string;
}

/**
 * Patch id of the one-time upsert by which entity workflows started before these attributes existed
 * (endpoint, host, pod: they run for ever) label themselves with what they know (kind and own id).
 */
export const LABEL_OLD_RUNS_PATCH = 'label-runs-without-search-attributes-v1';

/** The search attributes a workflow of `kind` starts with; values that are absent or empty are left out. */
export function gantrySearchAttributes(kind: GantryWorkflowKind, v: GantryAttributeValues = {}): SearchAttributePair[] {
  const pairs: SearchAttributePair[] = [{ key: GantryKind, value: kind }];
  if (v.endpointId) pairs.push({ key: GantryEndpointId, value: v.endpointId });
  if (v.accountId) pairs.push({ key: GantryAccountId, value: v.accountId });
  if (v.releaseVersion !== undefined) pairs.push({ key: GantryReleaseVersion, value: v.releaseVersion });
  if (v.hostId) pairs.push({ key: GantryHostId, value: v.hostId });
  if (v.podId) pairs.push({ key: GantryPodId, value: v.podId });
  if (v.jobStatus) pairs.push({ key: GantryJobStatus, value: v.jobStatus });
  return pairs;
}

/**
 * The memo the Temporal UI shows with a workflow: names for people (ids are in the search
 * attributes). Set at start from what the starter has at hand; a later rename does not update it.
 */
export interface GantryMemo {
  endpointName?: string;
  podName?: string;
  hostName?: string;
}

/** The memo with the names that are known (an empty object when none is). */
export function gantryMemo(m: GantryMemo): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(m)) if (typeof v === 'string' && v) out[k] = v;
  return out;
}

/** A name from a workflow's own memo (`workflowInfo().memo`), to hand on to the workflows it starts. */
export function memoName(memo: Record<string, unknown> | undefined, key: keyof GantryMemo): string | undefined {
  const v = memo?.[key];
  return typeof v === 'string' && v ? v : undefined;
}
