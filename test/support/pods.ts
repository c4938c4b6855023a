/** Helpers shared by the pod tests, GraphQL and REST (not a test file itself). */
import { spawnSync } from 'node:child_process';
import { call, type TestPlatform } from './platform.ts';
import { managedContainers, type ManagedContainerInfo } from './orchestration.ts';

/** A GraphQL call with a key as `?api_key=` (none: null); the answer's fields with its HTTP status. */
export async function graphql(
  p: TestPlatform,
  query: string,
  variables?: Record<string, unknown>,
  key: string | null = p.adminKey,
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- GraphQL answers are arbitrary JSON
): Promise<any> {
  const qs = key === null ? '' : `?api_key=${encodeURIComponent(key)}`;
  const r = await call(p.url, 'POST', `/graphql${qs}`, { body: { query, variables } });
  return { status: r.status, ...r.body };
}

/** The containers of one pod on the host `hostId` (this machine's Podman). */
export function podContainers(hostId: string, podId: string): ManagedContainerInfo[] {
  return managedContainers(hostId).filter(
    (c) =>
      spawnSync('podman', ['inspect', '--format', '{{index .Config.Labels "gantry.pod"}}', c.id], {
        encoding: 'utf8',
      }).stdout.trim() === podId,
  );
}

/** A container's environment, `KEY=VALUE` strings. */
export function containerEnv(containerId: string): string[] {
  const r = spawnSync('podman', ['inspect', '--format', '{{json .Config.Env}}', containerId], { encoding: 'utf8' });
  return JSON.parse(r.stdout) as string[];
}
