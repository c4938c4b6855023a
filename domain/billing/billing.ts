import { requireEndpointAccess, requireScope, type Principal } from '../accounts/auth.ts';
import { recordedCpuInstance } from '../catalog/cpu-instances.ts';
import type { DomainContext } from '../context.ts';
import { DomainError } from '../errors.ts';
import { cpuRate, gpuRate, priceTable, type PriceTable } from './pricing.ts';
import { validate } from '../shared/validation.ts';
import { BillingQuerySchema, ServerlessBillingQuerySchema, type BucketSize } from './schemas.ts';

/**
 * Billing: what usage cost, from UsageRecord rows (a worker's running time) and the price table.
 * A GPU worker costs seconds x price of its GPU type per GPU x gpuCount; a CPU worker costs
 * seconds x price of its flavor per vCPU x vCPUs. A row that spans buckets is split across them in
 * proportion to the time it overlaps each. The account's serverless discount (a factor the list
 * price is multiplied by, e.g. 0.8 for 20% off) applies to serverless usage before its expiry.
 * Buckets are UTC calendar units; weeks start on Monday. Buckets without spend are left out.
 * The REST shapes are api/routes/shapes/billing.ts.
 */

// ---------------------------------------------------------------- models

/** The window a query resolved to: whole buckets from `start` to `end` (exclusive). */
export interface BillingWindow {
  start: Date;
  end: Date;
  bucketSize: BucketSize;
}

/** The account's serverless discount: list prices are multiplied by `factor` until `expires`. */
export interface ServerlessDiscount {
  factor: number;
  type: string | null;
  expires: Date | null;
}

/** A bucket: its time range and what was spent in it, in USD rounded to micro-dollars. */
export interface BilledBucket<S> {
  start: Date;
  end: Date;
  spend: S;
}

/** Serverless spend: GPU workers, CPU workers, and both. */
export interface ServerlessSpend {
  total: number;
  gpu: number;
  cpu: number;
}

/** Serverless spend per endpoint per bucket (listServerlessBilling). */
export interface ServerlessBillingModel {
  window: BillingWindow;
  /** The one endpoint asked for; null for all. */
  endpointId: string | null;
  buckets: Array<BilledBucket<ServerlessSpend> & { endpointId: string }>;
  totals: ServerlessSpend;
  discount: ServerlessDiscount | null;
}

/** What Gantry charges: serverless workers, pods, calls of public models, and all of it. */
export interface Spend {
  total: number;
  podGpu: number;
  podCpu: number;
  serverlessGpu: number;
  serverlessCpu: number;
  publicModels: number;
}

/** All spend per bucket (listBilling). */
export interface BillingModel {
  window: BillingWindow;
  buckets: BilledBucket<Spend>[];
  totals: Spend;
  discount: ServerlessDiscount | null;
}

/** Calls of public models per bucket (listEndpointBilling); spend in USD. */
export interface PublicModelBillingModel {
  window: BillingWindow;
  buckets: BilledBucket<number>[];
  total: number;
}

// ---------------------------------------------------------------- time buckets

export function bucketStart(t: Date, size: BucketSize): Date {
  const d = new Date(t.getTime());
  switch (size) {
    case 'hour':
      d.setUTCMinutes(0, 0, 0);
      return d;
    case 'day':
      d.setUTCHours(0, 0, 0, 0);
      return d;
    case 'week': {
      d.setUTCHours(0, 0, 0, 0);
      d.setUTCDate(d.getUTCDate() - ((d.getUTCDay() + 6) % 7));
      return d;
    }
    case 'month':
      return new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1));
    case 'year':
      return new Date(Date.UTC(d.getUTCFullYear(), 0, 1));
  }
}

/** The start of the bucket after the one starting at `start`, or `n` buckets on (n may be negative). */
export function bucketShift(start: Date, size: BucketSize, n = 1): Date {
  const d = new Date(start.getTime());
  switch (size) {
    case 'hour':
      return new Date(d.getTime() + n * 3_600_000);
    case 'day':
      d.setUTCDate(d.getUTCDate() + n);
      return d;
    case 'week':
      d.setUTCDate(d.getUTCDate() + 7 * n);
      return d;
    case 'month':
      d.setUTCMonth(d.getUTCMonth() + n);
      return d;
    case 'year':
      d.setUTCFullYear(d.getUTCFullYear() + n);
      return d;
  }
}

const MAX_BUCKETS = 10_000;

function resolveWindow(
  q: { startTime?: string; endTime?: string; bucketSize?: string; lastN?: string },
  now = new Date(),
): BillingWindow {
  const size = (q.bucketSize ?? 'day') as BucketSize;
  if (q.lastN !== undefined && (q.startTime !== undefined || q.endTime !== undefined)) {
    throw new DomainError('bad_request', 'lastN and startTime/endTime exclude each other; give one or the other');
  }
  let start: Date;
  let end: Date;
  if (q.lastN !== undefined) {
    const current = bucketStart(now, size);
    start = bucketShift(current, size, -(Number(q.lastN) - 1));
    end = bucketShift(current, size);
  } else {
    const rawEnd = q.endTime !== undefined ? new Date(q.endTime) : now;
    const rawStart = q.startTime !== undefined ? new Date(q.startTime) : new Date(rawEnd.getTime() - 30 * 86_400_000);
    start = bucketStart(rawStart, size);
    const endFloor = bucketStart(rawEnd, size);
    end = endFloor.getTime() === rawEnd.getTime() ? endFloor : bucketShift(endFloor, size);
    if (rawStart.getTime() >= rawEnd.getTime())
      throw new DomainError('bad_request', 'startTime must be before endTime');
  }
  let buckets = 0;
  for (let t = start; t < end && buckets <= MAX_BUCKETS; t = bucketShift(t, size)) buckets++;
  if (buckets > MAX_BUCKETS)
    throw new DomainError(
      'bad_request',
      `the window spans more than ${MAX_BUCKETS} ${size} buckets; use a larger bucketSize or a shorter window`,
    );
  return { start, end, bucketSize: size };
}

// ---------------------------------------------------------------- pricing usage

interface UsageRow {
  endpointId: string | null;
  gpuTypeId: string | null;
  gpuCount: number;
  cpuFlavorId: string | null;
  startedAt: Date;
  endedAt: Date;
  seconds: number;
}

interface Charge {
  kind: 'gpu' | 'cpu';
  /** USD per second of this row at list price. */
  perSecond: number;
}

function charge(
  row: UsageRow,
  table: PriceTable,
  product: 'serverless' | 'pod',
  endpointVcpus: Map<string, number | null>,
): Charge | undefined {
  if (row.gpuTypeId && row.gpuCount > 0) {
    const rate = gpuRate(table, row.gpuTypeId);
    return {
      kind: 'gpu',
      perSecond: ((product === 'serverless' ? rate.serverlessPerHour : rate.podPerHour) / 3600) * row.gpuCount,
    };
  }
  if (row.cpuFlavorId) {
    const { flavorId, vcpus } = recordedCpuInstance(
      row.cpuFlavorId,
      row.endpointId ? endpointVcpus.get(row.endpointId) : undefined,
    );
    const rate = cpuRate(table, flavorId);
    return {
      kind: 'cpu',
      perSecond: ((product === 'serverless' ? rate.serverlessPerVcpuHour : rate.podPerVcpuHour) / 3600) * vcpus,
    };
  }
  return undefined;
}

/**
 * Splits a row over buckets (and at the discount's expiry) and calls `add` with each piece's
 * bucket start, its billed seconds, and whether the discount covers it.
 */
function spread(
  row: UsageRow,
  w: BillingWindow,
  discountExpires: Date | null,
  add: (bucket: Date, seconds: number, discounted: boolean) => void,
): void {
  const from = row.startedAt.getTime();
  const to = row.endedAt.getTime();
  const covered = (t: number): boolean => discountExpires === null || t < discountExpires.getTime();
  if (to <= from) {
    if (from >= w.start.getTime() && from < w.end.getTime())
      add(bucketStart(row.startedAt, w.bucketSize), row.seconds, covered(from));
    return;
  }
  const lo = Math.max(from, w.start.getTime());
  const hi = Math.min(to, w.end.getTime());
  for (let b = bucketStart(new Date(lo), w.bucketSize); b.getTime() < hi; b = bucketShift(b, w.bucketSize)) {
    const a = Math.max(lo, b.getTime());
    const z = Math.min(hi, bucketShift(b, w.bucketSize).getTime());
    if (z <= a) continue;
    const cut =
      discountExpires && discountExpires.getTime() > a && discountExpires.getTime() < z
        ? discountExpires.getTime()
        : undefined;
    const pieces: Array<[number, number]> =
      cut === undefined
        ? [[a, z]]
        : [
            [a, cut],
            [cut, z],
          ];
    for (const [p, q] of pieces) add(b, (row.seconds * (q - p)) / (to - from), covered(p));
  }
}

async function accountDiscount(ctx: DomainContext, accountId: string): Promise<ServerlessDiscount | null> {
  const account = await ctx.db.account.findUnique({
    where: { id: accountId },
    select: { serverlessDiscountFactor: true, serverlessDiscountType: true, serverlessDiscountExpires: true },
  });
  if (!account || account.serverlessDiscountFactor === null) return null;
  return {
    factor: account.serverlessDiscountFactor,
    type: account.serverlessDiscountType,
    expires: account.serverlessDiscountExpires,
  };
}

/** Micro-dollars: enough for per-second prices, and sums stay stable. */
const money = (x: number): number => Math.round(x * 1e6) / 1e6;

async function usageRows(
  ctx: DomainContext,
  principal: Principal,
  w: BillingWindow,
  endpointId: string | undefined,
  serverlessOnly: boolean,
): Promise<UsageRow[]> {
  const restricted = principal.endpointIds.length > 0;
  return ctx.db.usageRecord.findMany({
    where: {
      accountId: principal.accountId,
      startedAt: { lt: w.end },
      endedAt: { gte: w.start },
      ...(endpointId !== undefined
        ? { endpointId }
        : restricted
          ? { endpointId: { in: [...principal.endpointIds] } }
          : serverlessOnly
            ? { endpointId: { not: null } }
            : {}),
    },
    select: {
      endpointId: true,
      gpuTypeId: true,
      gpuCount: true,
      cpuFlavorId: true,
      startedAt: true,
      endedAt: true,
      seconds: true,
    },
  });
}

async function vcpusOfEndpoints(ctx: DomainContext, rows: UsageRow[]): Promise<Map<string, number | null>> {
  const ids = [...new Set(rows.filter((r) => r.cpuFlavorId && r.endpointId).map((r) => r.endpointId!))];
  if (ids.length === 0) return new Map();
  const endpoints = await ctx.db.endpoint.findMany({
    where: { id: { in: ids } },
    select: { id: true, cpuVcpuCount: true },
  });
  return new Map(endpoints.map((e) => [e.id, e.cpuVcpuCount]));
}

// ---------------------------------------------------------------- operations

/** Serverless spend per endpoint per bucket (listServerlessBilling). */
export async function serverlessBilling(
  ctx: DomainContext,
  principal: Principal,
  query: unknown,
): Promise<ServerlessBillingModel> {
  requireScope(principal, 'READ');
  const q = validate(ServerlessBillingQuerySchema, query);
  if (q.serverlessId !== undefined && q.endpointId !== undefined && q.serverlessId !== q.endpointId) {
    throw new DomainError('bad_request', 'serverlessId and endpointId name different endpoints; give one');
  }
  const endpointId = q.serverlessId ?? q.endpointId;
  if (endpointId !== undefined) requireEndpointAccess(principal, endpointId);
  const w = resolveWindow(q);
  const [rows, discount] = await Promise.all([
    usageRows(ctx, principal, w, endpointId, true),
    accountDiscount(ctx, principal.accountId),
  ]);
  const vcpus = await vcpusOfEndpoints(ctx, rows);
  const table = priceTable(ctx.settings.pricesFile);
  const spent = serverlessSpendByBucket(rows, w, discount, (row) => charge(row, table, 'serverless', vcpus));
  const totals = { gpu: 0, cpu: 0 };
  const buckets = spent.map((b) => {
    totals.gpu += b.gpu;
    totals.cpu += b.cpu;
    return { start: b.start, end: bucketShift(b.start, w.bucketSize), endpointId: b.endpointId, spend: rounded(b) };
  });
  return { window: w, endpointId: endpointId ?? null, buckets, totals: rounded(totals), discount };
}

const rounded = ({ gpu, cpu }: { gpu: number; cpu: number }): ServerlessSpend => ({
  total: money(gpu + cpu),
  gpu: money(gpu),
  cpu: money(cpu),
});

/** Serverless spend (not rounded) per bucket and endpoint, by bucket start then endpoint id. */
function serverlessSpendByBucket(
  rows: UsageRow[],
  w: BillingWindow,
  discount: ServerlessDiscount | null,
  chargeOf: (row: UsageRow) => Charge | undefined,
): Array<{ start: Date; endpointId: string; gpu: number; cpu: number }> {
  const buckets = new Map<string, { start: Date; endpointId: string; gpu: number; cpu: number }>();
  for (const row of rows) {
    const c = chargeOf(row);
    if (!c) continue;
    spread(row, w, discount?.expires ?? null, (bucket, seconds, discounted) => {
      const key = `${bucket.toISOString()} ${row.endpointId}`;
      let b = buckets.get(key);
      if (!b) buckets.set(key, (b = { start: bucket, endpointId: row.endpointId!, gpu: 0, cpu: 0 }));
      const amount = seconds * c.perSecond * (discount && discounted ? discount.factor : 1);
      b[c.kind] += amount;
    });
  }
  return [...buckets.values()].sort(
    (a, b) => a.start.getTime() - b.start.getTime() || a.endpointId.localeCompare(b.endpointId),
  );
}

const noSpend = (): Spend => ({
  total: 0,
  podGpu: 0,
  podCpu: 0,
  serverlessGpu: 0,
  serverlessCpu: 0,
  publicModels: 0,
});

const SPEND_FIELD = {
  serverless: { gpu: 'serverlessGpu', cpu: 'serverlessCpu' },
  pod: { gpu: 'podGpu', cpu: 'podCpu' },
} as const;

/** All spend per bucket: serverless workers and pods (listBilling). */
export async function billing(ctx: DomainContext, principal: Principal, query: unknown): Promise<BillingModel> {
  requireScope(principal, 'READ');
  const w = resolveWindow(validate(BillingQuerySchema, query));
  const [rows, discount, modelCharges] = await Promise.all([
    usageRows(ctx, principal, w, undefined, false),
    accountDiscount(ctx, principal.accountId),
    modelChargesByBucket(ctx, principal, w),
  ]);
  const vcpus = await vcpusOfEndpoints(ctx, rows);
  const table = priceTable(ctx.settings.pricesFile);
  const spent = spendByBucket(rows, w, discount, modelCharges, (row, product) => charge(row, table, product, vcpus));
  const totals = noSpend();
  const buckets = [...spent.entries()]
    .sort(([a], [b]) => a - b)
    .map(([start, spend]) => {
      spend.total = spend.podGpu + spend.podCpu + spend.serverlessGpu + spend.serverlessCpu + spend.publicModels;
      const roundedSpend = noSpend();
      for (const k of Object.keys(spend) as (keyof Spend)[]) {
        totals[k] += spend[k];
        roundedSpend[k] = money(spend[k]);
      }
      return { start: new Date(start), end: bucketShift(new Date(start), w.bucketSize), spend: roundedSpend };
    });
  for (const k of Object.keys(totals) as (keyof Spend)[]) totals[k] = money(totals[k]);
  return { window: w, buckets, totals, discount };
}

/** Spend (not rounded, `total` not summed) per bucket (epoch ms of its start): usage rows and calls of public models. */
function spendByBucket(
  rows: UsageRow[],
  w: BillingWindow,
  discount: ServerlessDiscount | null,
  modelCharges: Map<number, number>,
  chargeOf: (row: UsageRow, product: 'serverless' | 'pod') => Charge | undefined,
): Map<number, Spend> {
  const buckets = new Map<number, Spend>();
  const at = (bucket: number): Spend => {
    let b = buckets.get(bucket);
    if (!b) buckets.set(bucket, (b = noSpend()));
    return b;
  };
  for (const [bucket, amount] of modelCharges) at(bucket).publicModels += amount;
  for (const row of rows) {
    // Usage without an endpoint is a pod's.
    const product = row.endpointId ? 'serverless' : 'pod';
    const c = chargeOf(row, product);
    if (!c) continue;
    spread(row, w, discount?.expires ?? null, (bucket, seconds, discounted) => {
      const factor = product === 'serverless' && discount && discounted ? discount.factor : 1;
      at(bucket.getTime())[SPEND_FIELD[product][c.kind]] += seconds * c.perSecond * factor;
    });
  }
  return buckets;
}

/**
 * What the account's calls of public models cost, per bucket (epoch ms of its start): each
 * completed call's charge (PublicModelCharge, written with its result) in the bucket of its completion.
 */
async function modelChargesByBucket(
  ctx: DomainContext,
  principal: Principal,
  w: BillingWindow,
): Promise<Map<number, number>> {
  const charges = await ctx.db.publicModelCharge.findMany({
    where: { accountId: principal.accountId, createdAt: { gte: w.start, lt: w.end } },
    select: { createdAt: true, amount: true },
  });
  const buckets = new Map<number, number>();
  for (const c of charges) {
    const start = bucketStart(c.createdAt, w.bucketSize).getTime();
    buckets.set(start, (buckets.get(start) ?? 0) + c.amount);
  }
  return buckets;
}

/** Public models the account called (listEndpointBilling): the charges of its completed calls, per bucket. */
export async function publicEndpointBilling(
  ctx: DomainContext,
  principal: Principal,
  query: unknown,
): Promise<PublicModelBillingModel> {
  requireScope(principal, 'READ');
  const w = resolveWindow(validate(BillingQuerySchema, query));
  const charges = await modelChargesByBucket(ctx, principal, w);
  let total = 0;
  const buckets = [...charges.entries()]
    .sort(([a], [b]) => a - b)
    .map(([start, amount]) => {
      total += amount;
      return { start: new Date(start), end: bucketShift(new Date(start), w.bucketSize), spend: money(amount) };
    });
  return { window: w, buckets, total: money(total) };
}
