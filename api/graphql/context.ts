import type { Principal } from '../../domain/accounts/index.ts';
import type { DomainContext } from '../../domain/context.ts';

/** What every resolver gets as its context (api/graphql/index.ts builds it per request). */
export interface GraphqlContext {
  ctx: DomainContext;
  principal: Principal;
  /** The client's address: set only for a request without a key (flash login's). */
  requesterIp?: string;
}
