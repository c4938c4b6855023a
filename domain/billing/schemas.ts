/**
 * The billing queries (REST listBilling, listServerlessBilling, listEndpointBilling): their time
 * windows and bucket sizes. The answers' shapes are api/routes/shapes/billing.ts.
 */
import { Type, type Static } from 'typebox';

export const BucketSizeSchema = Type.Union(
  [Type.Literal('hour'), Type.Literal('day'), Type.Literal('week'), Type.Literal('month'), Type.Literal('year')],
  {
    description: 'length of each bucket; default day',
  },
);
export type BucketSize = Static<typeof BucketSizeSchema>;

const windowParams = {
  startTime: Type.Optional(
    Type.String({
      format: 'date-time',
      description: 'start (RFC 3339), snapped down to its bucket; default 30 days ago',
    }),
  ),
  endTime: Type.Optional(
    Type.String({
      format: 'date-time',
      description: 'end (RFC 3339, exclusive), snapped up to a bucket boundary; default now',
    }),
  ),
  bucketSize: Type.Optional(BucketSizeSchema),
  lastN: Type.Optional(
    Type.String({
      pattern: '^[1-9][0-9]{0,4}$',
      description: 'the last N buckets, ending with the current one; not with startTime/endTime',
    }),
  ),
};

export const BillingQuerySchema = Type.Object(windowParams, { additionalProperties: false });

export const ServerlessBillingQuerySchema = Type.Object(
  {
    ...windowParams,
    serverlessId: Type.Optional(Type.String({ minLength: 1, description: 'only this endpoint' })),
    endpointId: Type.Optional(Type.String({ minLength: 1, description: 'same as serverlessId' })),
  },
  { additionalProperties: false },
);
