import { Type, type Static } from 'typebox';
import type { RegistryCredentialFacts } from '../../../domain/registries/index.ts';

/** A container registry credential in REST v2 (`/v2/registries`): never its login. */
export const RegistrySchema = Type.Object(
  {
    id: Type.String(),
    name: Type.String(),
    registry: Type.Union([Type.String(), Type.Null()], {
      description:
        'the registry host the credential is bound to; null: not bound yet (a credential from before binding), refused until bound',
    }),
  },
  { description: 'a registry credential; its secret parts are never returned' },
);
export const RegistryListSchema = Type.Object({ registries: Type.Array(RegistrySchema) });

export function registryView(r: RegistryCredentialFacts): Static<typeof RegistrySchema> {
  return { id: r.id, name: r.name, registry: r.registry };
}
