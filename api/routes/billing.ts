import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import {
  billing,
  BillingQuerySchema,
  publicEndpointBilling,
  serverlessBilling,
  ServerlessBillingQuerySchema,
} from '../../domain/billing/index.ts';
import type { DomainContext } from '../../domain/context.ts';
import { principalOf } from '../auth.ts';
import {
  BillingResponseSchema,
  billingView,
  EndpointBillingResponseSchema,
  endpointBillingView,
  ServerlessBillingResponseSchema,
  serverlessBillingView,
} from './shapes/billing.ts';

const tags = ['Billing'];
const WINDOW =
  'The window is startTime/endTime (default: the last 30 days) or lastN buckets ending with the current one, in UTC buckets of bucketSize (hour, day, week from Monday, month, year; default day); its ends snap to bucket boundaries. Buckets without spend are left out. Amounts in USD at the prices of the price table (GANTRY_PRICES_FILE) in force now. Scope: READ.';

/** REST /v2/billing: spend computed from worker usage and the price table. */
export const billingRoutes: FastifyPluginAsyncTypebox<{ ctx: DomainContext }> = async (app, { ctx }) => {
  app.get(
    '/v2/billing',
    {
      config: { requiredScope: 'READ' },
      schema: {
        operationId: 'listBilling',
        summary: 'Get aggregated billing history',
        description: `Spend per bucket: serverless workers (serverlessGpuAmount, serverlessCpuAmount, with the account's serverless discount) and pods (podGpuAmount, podCpuAmount). Components Gantry does not charge are 0. A key limited to endpoints sees only their spend. ${WINDOW}`,
        tags,
        querystring: BillingQuerySchema,
        response: { 200: BillingResponseSchema },
      },
    },
    async (request) => billingView(await billing(ctx, principalOf(request), request.query)),
  );

  app.get(
    '/v2/billing/serverless',
    {
      config: { requiredScope: 'READ' },
      schema: {
        operationId: 'listServerlessBilling',
        summary: 'Get serverless billing history',
        description: `Serverless spend, one record per endpoint per bucket: worker seconds x the price of the GPU type per GPU x GPUs (or of the CPU flavor per vCPU x vCPUs), times the account's serverless discount factor while it has not expired. serverlessId (or its alias endpointId) narrows to one endpoint; a key limited to endpoints sees only theirs (403 for another). ${WINDOW}`,
        tags,
        querystring: ServerlessBillingQuerySchema,
        response: { 200: ServerlessBillingResponseSchema },
      },
    },
    async (request) => serverlessBillingView(await serverlessBilling(ctx, principalOf(request), request.query)),
  );

  app.get(
    '/v2/billing/endpoints',
    {
      config: { requiredScope: 'READ' },
      schema: {
        operationId: 'listEndpointBilling',
        summary: 'Get public endpoint billing history',
        description: `Spend on public models (GET /v2/public-endpoints) called with this account's keys: each completed call at the model's price, in the bucket of its completion. Spend per serverless endpoint is in GET /v2/billing/serverless. ${WINDOW}`,
        tags,
        querystring: BillingQuerySchema,
        response: { 200: EndpointBillingResponseSchema },
      },
    },
    async (request) => endpointBillingView(await publicEndpointBilling(ctx, principalOf(request), request.query)),
  );
};
