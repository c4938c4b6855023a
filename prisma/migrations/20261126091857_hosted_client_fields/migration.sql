-- Fields the hosted service's Python client reads and writes (docs/graphql.md): an account's SSH
-- public keys (updateUserSettings) and an endpoint's allowed CUDA
-- versions (saveEndpoint allowedCudaVersions; stored and answered).
ALTER TABLE "Account" ADD COLUMN "pubKey" TEXT;

ALTER TABLE "Endpoint" ADD COLUMN "allowedCudaVersions" TEXT[] DEFAULT ARRAY[]::TEXT[];
