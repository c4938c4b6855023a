import type { Client } from '@temporalio/client';
import type { SshPool } from '../hostctl/ssh.ts';
import type { BlobStore } from './blobs/blob-store.ts';
import type { Db } from './shared/db.ts';
import type { JobRuntime } from './jobs/runtime.ts';
import type { RateLimiter } from './rate-limits/rate-limits.ts';
import type { RecordCaches } from './shared/record-cache.ts';
import type { SecretBox } from './shared/secrets.ts';
import type { PlatformSettings } from './shared/settings.ts';

/** What every domain operation may use; built once per process and shared by REST and GraphQL. */
export interface DomainContext {
  db: Db;
  temporal: Client;
  taskQueue: string;
  /** Base address clients and worker containers use to reach this API. */
  publicUrl: string;
  /** Base address worker containers use (the worker-facing listener when publicUrl is loopback); default publicUrl. */
  workerUrl?: string;
  /** With the worker-facing listener: its port, on every container network's gateway (api/worker-listener.ts). */
  workerListenerPort?: number;
  secrets: SecretBox;
  /** What the platform runs with, read once from the environment (infra/config.ts). */
  settings: PlatformSettings;
  /** SSH connections to hosts (log streaming; the activities of this process): one pool per process. */
  ssh: SshPool;
  /**
   * The job service (queue connections, wake-ups, workflow signals): built by the composition root
   * in processes that serve the API (infra/job-runtime.ts), absent in a Temporal-worker-only one.
   */
  jobs?: JobRuntime;
  /**
   * What the job API, the proxy and the worker protocol remember of keys, worker credentials and
   * endpoints, for at most the revocation bound (domain/shared/record-cache.ts): one per process, built by
   * the composition root; contexts made for other uses (the activities') have none.
   */
  records?: RecordCaches;
  /**
   * The process's request limiter (domain/rate-limits/rate-limits.ts RateLimiter: counts batched to PostgreSQL),
   * built and stopped by the composition root; without one every counted request runs its statement.
   */
  rateLimiter?: RateLimiter;
  /** Build artifacts (a directory of the data dir, or an S3-compatible store). */
  blobs: BlobStore;
  /** The key of the platform's signed URLs (artifact upload and download), derived from the secret key. */
  signingKey: Buffer;
}
