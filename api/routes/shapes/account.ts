import { Type, type Static } from 'typebox';
import type { Account } from '../../../generated/prisma/client.ts';

/** An account in REST v2 (`/v2/accounts`, the platform admin's). */
export const AccountSchema = Type.Object({
  id: Type.String(),
  email: Type.String(),
  name: Type.String(),
  isAdmin: Type.Boolean(),
  serverlessDiscount: Type.Union([
    Type.Object({
      discountFactor: Type.Number(),
      type: Type.Union([Type.String(), Type.Null()]),
      expirationDate: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
    }),
    Type.Null(),
  ]),
  createdAt: Type.String({ format: 'date-time' }),
});
export const AccountListSchema = Type.Object({ accounts: Type.Array(AccountSchema) });

export function accountView(a: Account): Static<typeof AccountSchema> {
  return {
    id: a.id,
    email: a.email,
    name: a.name,
    isAdmin: a.isAdmin,
    serverlessDiscount:
      a.serverlessDiscountFactor === null
        ? null
        : {
            discountFactor: a.serverlessDiscountFactor,
            type: a.serverlessDiscountType,
            expirationDate: a.serverlessDiscountExpires?.toISOString() ?? null,
          },
    createdAt: a.createdAt.toISOString(),
  };
}
