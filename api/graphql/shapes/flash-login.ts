import type { FlashLoginModel } from '../../../domain/accounts/index.ts';
import type { FlashAuthRequest } from '../generated-types.ts';

/** GraphQL's `FlashAuthRequest` (flash login), from the domain's model of the request. */
export function flashAuthRequestNode(r: FlashLoginModel): FlashAuthRequest {
  return {
    id: r.id,
    status: r.status,
    expiresAt: r.expiresAt.toISOString(),
    createdAt: r.createdAt.toISOString(),
    requesterIp: r.requesterIp,
    apiKey: r.apiKey ?? null,
  };
}
