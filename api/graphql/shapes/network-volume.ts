import type { NetworkVolume } from '../../../generated/prisma/client.ts';
import type { NetworkVolume as NetworkVolumeNode } from '../generated-types.ts';

/** GraphQL's `NetworkVolume` (the main schema's and flash's), from the volume's row. */
export function networkVolumeNode(v: NetworkVolume): NetworkVolumeNode {
  return { id: v.id, name: v.name, size: v.size, dataCenterId: v.dataCenterId };
}
