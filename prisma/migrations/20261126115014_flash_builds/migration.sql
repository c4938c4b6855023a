-- Builds of the hosted service's `flash` tool (docs/graphql.md "flash"): it declares no digest and
-- sends its manifest when it finalizes the upload, so those columns are null until then; a FLASH
-- build is made active without the deploy workflow (its client writes the endpoints), so its
-- deployment has no workflow id.
CREATE TYPE "BuildKind" AS ENUM ('GANTRY', 'FLASH');

ALTER TABLE "Build" ADD COLUMN     "kind" "BuildKind" NOT NULL DEFAULT 'GANTRY',
ALTER COLUMN "sha256" DROP NOT NULL,
ALTER COLUMN "fingerprint" DROP NOT NULL,
ALTER COLUMN "pythonVersion" DROP NOT NULL,
ALTER COLUMN "manifest" DROP NOT NULL;

ALTER TABLE "Deployment" ALTER COLUMN "workflowId" DROP NOT NULL;

ALTER TABLE "Endpoint" ADD COLUMN     "minCudaVersion" TEXT;
