-- A GPU pod's CUDA constraint (allowedCudaVersions, minCudaVersion), which placement reads as it
-- reads an endpoint's.
ALTER TABLE "Pod" ADD COLUMN "allowedCudaVersions" TEXT[] DEFAULT ARRAY[]::TEXT[],
ADD COLUMN "minCudaVersion" TEXT;
