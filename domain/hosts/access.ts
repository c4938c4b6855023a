import type { Host } from '../../generated/prisma/client.ts';
import type { SshTarget } from '../../hostctl/ssh.ts';
import type { SecretBox } from '../shared/secrets.ts';

/** A host row without a stored private key: nothing can connect to it (agent authentication is not offered). */
export class HostKeyMissingError extends Error {
  override readonly name = 'HostKeyMissingError';
  constructor() {
    super('the host has no private key stored (SSH agent authentication is not available)');
  }
}

/** How to reach a stored host over SSH: its address, its key (unsealed), and the pinned host key when there is one. */
export function sshTargetOf(
  host: Pick<Host, 'address' | 'port' | 'user' | 'privateKey' | 'hostKeySha256'>,
  secrets: SecretBox,
  pin: string | null | undefined = host.hostKeySha256,
): SshTarget {
  if (!host.privateKey) throw new HostKeyMissingError();
  return {
    host: host.address,
    port: host.port,
    user: host.user,
    privateKey: secrets.open(host.privateKey),
    ...(pin ? { expectedHostKeySha256: pin } : {}),
  };
}
