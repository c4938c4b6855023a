import { Type, type Static } from 'typebox';
import type { NetworkVolume } from '../../../generated/prisma/client.ts';

/** A network volume in REST v2 (`/v2/network-volumes`). */
export const NetworkVolumeSchema = Type.Object({
  id: Type.String(),
  name: Type.String(),
  size: Type.Integer({ description: 'GB' }),
  dataCenter: Type.String(),
  type: Type.Literal('STANDARD'),
  createdAt: Type.String({ format: 'date-time' }),
});
export const NetworkVolumeListSchema = Type.Object({ networkVolumes: Type.Array(NetworkVolumeSchema) });

export function networkVolumeView(v: NetworkVolume): Static<typeof NetworkVolumeSchema> {
  return {
    id: v.id,
    name: v.name,
    size: v.size,
    dataCenter: v.dataCenterId,
    type: 'STANDARD',
    createdAt: v.createdAt.toISOString(),
  };
}

/**
 * A network volume in the hosted service's REST shape (`/v2/networkvolumes`, which its `flash` tool
 * calls): `dataCenterId` for `dataCenter`, and exactly these four fields (flash builds its model
 * from the answer and refuses any other field).
 */
export const HostedNetworkVolumeSchema = Type.Object({
  id: Type.String(),
  name: Type.String(),
  size: Type.Integer({ description: 'GB' }),
  dataCenterId: Type.String(),
});

export function hostedNetworkVolume(v: NetworkVolume): Static<typeof HostedNetworkVolumeSchema> {
  return { id: v.id, name: v.name, size: v.size, dataCenterId: v.dataCenterId };
}
