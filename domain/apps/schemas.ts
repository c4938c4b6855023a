import { Type } from 'typebox';
import { MAX_ARTIFACT_BYTES, ManifestSchema, NameSchema, Sha256Schema } from './manifest.ts';

/** The request bodies of the apps REST API (docs/apps.md "Platform REST"); its responses are api/routes/shapes/app.ts's. */

export const CreateAppSchema = Type.Object(
  { name: NameSchema, environment: Type.Optional(NameSchema) },
  { additionalProperties: false },
);
export const CreateEnvironmentSchema = Type.Object({ name: NameSchema }, { additionalProperties: false });
export const PrepareUploadSchema = Type.Object(
  {
    sha256: Sha256Schema,
    size: Type.Integer({ minimum: 1, maximum: MAX_ARTIFACT_BYTES, description: 'bytes of the gzip file' }),
    manifest: ManifestSchema,
  },
  { additionalProperties: false },
);
export const DeployBuildSchema = Type.Object(
  { buildId: Type.String({ minLength: 1, maxLength: 64 }) },
  { additionalProperties: false },
);

export const ProvisionResourceSchema = DeployBuildSchema;
