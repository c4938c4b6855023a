/**
 * Where worker containers on this machine reach Gantry when its public URL is a loopback address.
 * Tenant containers never share the host's network namespace, so they cannot reach 127.0.0.1,
 * where the embedded PostgreSQL and Temporal listen; instead the API opens a worker-facing listener
 * on the gateway address of the local container bridge network, which serves the worker protocol
 * only (api/worker-listener.ts).
 */
import { spawnSync } from 'node:child_process';

export const isLoopbackUrl = (url: string): boolean => {
  const host = new URL(url).hostname.replace(/^\[|\]$/g, '');
  return host === 'localhost' || host === '::1' || /^127\./.test(host);
};

/** The IPv4 gateway of the default bridge network of the local Podman (or Docker), if there is one. */
export function localContainerGateway(): string | undefined {
  const ask = (cmd: string, args: string[]): string | undefined => {
    const r = spawnSync(cmd, args, { encoding: 'utf8', timeout: 20_000 });
    if (r.status !== 0) return undefined;
    return r.stdout
      .split(/\s+/)
      .map((s) => s.trim())
      .find((s) => /^\d+\.\d+\.\d+\.\d+$/.test(s));
  };
  return (
    ask('podman', ['network', 'inspect', 'podman', '--format', '{{range .Subnets}}{{.Gateway}} {{end}}']) ??
    ask('docker', ['network', 'inspect', 'bridge', '--format', '{{range .IPAM.Config}}{{.Gateway}} {{end}}'])
  );
}
