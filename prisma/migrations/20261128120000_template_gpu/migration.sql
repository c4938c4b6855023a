-- A template's GPU type and count (GraphQL saveTemplate's common input fields): a pod deployed from
-- the template takes them when its own input names none.
ALTER TABLE "Template" ADD COLUMN "gpuTypeId" TEXT,
ADD COLUMN "gpuCount" INTEGER;
