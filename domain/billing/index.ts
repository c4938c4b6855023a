/**
 * Billing: the price table (list prices the catalog shows and billing charges) and what usage
 * cost, from UsageRecord rows. Owns UsageRecord.
 */
export * from './billing.ts';
export * from './pricing.ts';
