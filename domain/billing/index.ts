/**
 * Billing: the price table (list prices the catalog shows and billing charges) and what usage
 * cost, from UsageRecord rows. Owns UsageRecord.
 */
export * from './billing.ts';
export * from './metering.ts';
export * from './pricing.ts';
export * from './schemas.ts';
