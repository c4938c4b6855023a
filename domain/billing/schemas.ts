/**
 * The billing queries and answers (REST listBilling, listServerlessBilling, listEndpointBilling):
 * their time windows, bucket sizes and amounts.
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

const TimeRange = {
  startTime: Type.String({ format: 'date-time', description: 'inclusive' }),
  endTime: Type.String({ format: 'date-time', description: 'exclusive' }),
};

const usd = (description: string) => Type.Number({ description: `${description}, USD` });

const serverlessAmounts = {
  totalAmount: usd('total'),
  gpuAmount: usd('GPU workers'),
  cpuAmount: usd('CPU workers'),
  diskAmount: usd('disk (not charged by Gantry)'),
  feeAmount: usd('platform fee (not charged by Gantry)'),
};
const ServerlessAmountsSchema = Type.Object(serverlessAmounts);

const DiscountSchema = Type.Union(
  [
    Type.Object({
      discountFactor: Type.Number({ description: 'list prices are multiplied by this' }),
      type: Type.Union([Type.String(), Type.Null()]),
      expirationDate: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
    }),
    Type.Null(),
  ],
  { description: "the account's serverless discount, applied to serverless amounts before it expires" },
);

export const ServerlessBillingResponseSchema = Type.Object({
  records: Type.Array(Type.Object({ ...TimeRange, serverlessId: Type.String(), ...serverlessAmounts })),
  metadata: Type.Object({
    query: Type.Object({
      ...TimeRange,
      bucketSize: BucketSizeSchema,
      serverlessId: Type.Union([Type.String(), Type.Null()]),
    }),
    recordCount: Type.Integer(),
    uniqueServerlessCount: Type.Integer(),
    totals: ServerlessAmountsSchema,
    discount: DiscountSchema,
  }),
});
export type ServerlessBillingResponse = Static<typeof ServerlessBillingResponseSchema>;

const allAmounts = {
  totalAmount: usd('total'),
  podGpuAmount: usd('GPU pods'),
  podCpuAmount: usd('CPU pods'),
  podDiskAmount: usd('pod disk (not charged by Gantry)'),
  serverlessGpuAmount: usd('serverless GPU workers'),
  serverlessCpuAmount: usd('serverless CPU workers'),
  serverlessDiskAmount: usd('serverless disk (not charged by Gantry)'),
  serverlessFeeAmount: usd('serverless platform fee (not charged by Gantry)'),
  storageStandardAmount: usd('network volume storage (not charged by Gantry)'),
  storageHighPerformanceAmount: usd('high-performance storage (not offered by Gantry)'),
  endpointAmount: usd('public models called (their per-call prices)'),
  clusterGpuAmount: usd('clusters (not offered by Gantry)'),
  clusterDiskAmount: usd('clusters (not offered by Gantry)'),
  clusterNetworkingAmount: usd('clusters (not offered by Gantry)'),
};
export type AllAmounts = { [K in keyof typeof allAmounts]: number };

export const BillingResponseSchema = Type.Object({
  records: Type.Array(Type.Object({ ...TimeRange, ...allAmounts })),
  metadata: Type.Object({
    query: Type.Object({ ...TimeRange, bucketSize: BucketSizeSchema }),
    recordCount: Type.Integer(),
    totals: Type.Object(allAmounts),
    discount: DiscountSchema,
  }),
});
export type BillingResponse = Static<typeof BillingResponseSchema>;

export const EndpointBillingResponseSchema = Type.Object({
  records: Type.Array(Type.Object({ ...TimeRange, totalAmount: usd('public endpoints') })),
  metadata: Type.Object({
    query: Type.Object({ ...TimeRange, bucketSize: BucketSizeSchema }),
    recordCount: Type.Integer(),
    totals: Type.Object({ totalAmount: usd('public endpoints') }),
  }),
});
export type EndpointBillingResponse = Static<typeof EndpointBillingResponseSchema>;
