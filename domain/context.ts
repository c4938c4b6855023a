import type { Client } from '@temporalio/client';
import type { SshPool } from '../hostctl/ssh.ts';
import type { Db } from './db.ts';
import type { SecretBox } from './secrets.ts';

/** What every domain operation may use; built once per process and shared by REST and GraphQL. */
export interface DomainContext {
  db: Db;
  temporal: Client;
  taskQueue: string;
  /** Base address clients and worker containers use to reach this API. */
  publicUrl: string;
  /** Base address worker containers use (the worker-facing listener when publicUrl is loopback); default publicUrl. */
  workerUrl?: string;
  secrets: SecretBox;
  /** SSH connections to hosts (log streaming; the activities of this process): one pool per process. */
  ssh: SshPool;
}
