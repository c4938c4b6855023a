import type { Account } from '../../../generated/prisma/client.ts';
import { liveServerlessDiscount } from '../../../domain/accounts/index.ts';
import type { UserParent } from '../parents.ts';

/** An account as GraphQL's User (`myself`, `updateUserSettings`); its lists are User's own resolvers. */
export function userNode(account: Account): UserParent {
  const factor = liveServerlessDiscount(account);
  return {
    id: account.id,
    email: account.email,
    pubKey: account.pubKey,
    serverlessDiscount:
      factor === null
        ? null
        : {
            discountFactor: factor,
            type: account.serverlessDiscountType ?? 'DISCOUNT',
            expirationDate: account.serverlessDiscountExpires?.toISOString() ?? null,
          },
  };
}
