import { Type, type Static } from 'typebox';
import {
  kindFromDb,
  ModelOutputKindSchema,
  ModelPriceSchema,
  unitFromDb,
  type PublicModelFacts,
} from '../../../domain/public-models/index.ts';

/** A public model in REST v2 (`/v2/public-endpoints`): the catalogue's entry, the endpoint behind it for the operator only. */
export const PublicEndpointSchema = Type.Object({
  id: Type.String(),
  name: Type.String(),
  description: Type.String(),
  outputKind: ModelOutputKindSchema,
  inputSchema: Type.Object({}, { additionalProperties: true }),
  price: ModelPriceSchema,
  runUrl: Type.String({ description: 'base of the job API for this model: {runUrl}/run, /runsync, /status/{id}' }),
  endpointId: Type.Optional(Type.String({ description: 'the endpoint behind the model (the operator only)' })),
  createdAt: Type.String({ format: 'date-time' }),
  updatedAt: Type.String({ format: 'date-time' }),
});
export type PublicEndpointView = Static<typeof PublicEndpointSchema>;

/** The REST shape of a public model, from the domain's model. */
export function publicEndpointView(m: PublicModelFacts): PublicEndpointView {
  const { row } = m;
  return {
    id: row.id,
    name: row.name,
    description: row.description,
    outputKind: kindFromDb(row.outputKind),
    inputSchema: row.inputSchema as Record<string, unknown>,
    price: { amount: row.priceAmount, unit: unitFromDb(row.priceUnit) },
    runUrl: m.runUrl,
    ...(m.showsEndpoint ? { endpointId: row.endpointId } : {}),
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
  };
}
