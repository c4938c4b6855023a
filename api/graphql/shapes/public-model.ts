import { kindFromDb, unitFromDb, type PublicModelFacts } from '../../../domain/public-models/index.ts';
import type { PublicEndpoint } from '../generated-types.ts';

/** GraphQL's `PublicEndpoint`, from the domain's model of a public model. */
export function publicEndpointNode(m: PublicModelFacts): PublicEndpoint {
  const { row } = m;
  return {
    id: row.id,
    name: row.name,
    description: row.description,
    outputKind: kindFromDb(row.outputKind),
    // GraphQL has no JSON type here: the schema travels as JSON text.
    inputSchema: JSON.stringify(row.inputSchema),
    price: { amount: row.priceAmount, unit: unitFromDb(row.priceUnit) },
    runUrl: m.runUrl,
    // Shown to the operator only.
    endpointId: m.showsEndpoint ? row.endpointId : null,
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
  };
}
