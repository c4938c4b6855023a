import { Type, type Static } from 'typebox';
import {
  BucketSizeSchema,
  type BillingModel,
  type BillingWindow,
  type PublicModelBillingModel,
  type ServerlessBillingModel,
  type ServerlessDiscount,
  type ServerlessSpend,
  type Spend,
} from '../../../domain/billing/index.ts';

/**
 * The billing answers in REST v2 (`/v2/billing`, `/v2/billing/serverless`, `/v2/billing/endpoints`):
 * records per bucket with the hosted service's amount fields; those Gantry does not charge are 0.
 */
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
type AllAmounts = { [K in keyof typeof allAmounts]: number };

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

const timeRange = (t: { start: Date; end: Date }): { startTime: string; endTime: string } => ({
  startTime: t.start.toISOString(),
  endTime: t.end.toISOString(),
});

const windowQuery = (
  w: BillingWindow,
): { startTime: string; endTime: string; bucketSize: BillingWindow['bucketSize'] } => ({
  ...timeRange(w),
  bucketSize: w.bucketSize,
});

const discountView = (d: ServerlessDiscount | null): Static<typeof DiscountSchema> =>
  d ? { discountFactor: d.factor, type: d.type, expirationDate: d.expires?.toISOString() ?? null } : null;

const serverlessAmountsView = (s: ServerlessSpend): Static<typeof ServerlessAmountsSchema> => ({
  totalAmount: s.total,
  gpuAmount: s.gpu,
  cpuAmount: s.cpu,
  diskAmount: 0,
  feeAmount: 0,
});

/** The REST shape of serverless spend per endpoint per bucket, from the domain's model. */
export function serverlessBillingView(b: ServerlessBillingModel): ServerlessBillingResponse {
  const records = b.buckets.map((r) => ({
    ...timeRange(r),
    serverlessId: r.endpointId,
    ...serverlessAmountsView(r.spend),
  }));
  return {
    records,
    metadata: {
      query: { ...windowQuery(b.window), serverlessId: b.endpointId },
      recordCount: records.length,
      uniqueServerlessCount: new Set(records.map((r) => r.serverlessId)).size,
      totals: serverlessAmountsView(b.totals),
      discount: discountView(b.discount),
    },
  };
}

const allAmountsView = (s: Spend): AllAmounts => ({
  totalAmount: s.total,
  podGpuAmount: s.podGpu,
  podCpuAmount: s.podCpu,
  podDiskAmount: 0,
  serverlessGpuAmount: s.serverlessGpu,
  serverlessCpuAmount: s.serverlessCpu,
  serverlessDiskAmount: 0,
  serverlessFeeAmount: 0,
  storageStandardAmount: 0,
  storageHighPerformanceAmount: 0,
  endpointAmount: s.publicModels,
  clusterGpuAmount: 0,
  clusterDiskAmount: 0,
  clusterNetworkingAmount: 0,
});

/** The REST shape of all spend per bucket, from the domain's model. */
export function billingView(b: BillingModel): BillingResponse {
  const records = b.buckets.map((r) => ({ ...timeRange(r), ...allAmountsView(r.spend) }));
  return {
    records,
    metadata: {
      query: windowQuery(b.window),
      recordCount: records.length,
      totals: allAmountsView(b.totals),
      discount: discountView(b.discount),
    },
  };
}

/** The REST shape of what calls of public models cost per bucket, from the domain's model. */
export function endpointBillingView(b: PublicModelBillingModel): EndpointBillingResponse {
  const records = b.buckets.map((r) => ({ ...timeRange(r), totalAmount: r.spend }));
  return {
    records,
    metadata: {
      query: windowQuery(b.window),
      recordCount: records.length,
      totals: { totalAmount: b.total },
    },
  };
}
