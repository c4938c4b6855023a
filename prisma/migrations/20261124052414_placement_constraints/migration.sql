-- AlterTable
ALTER TABLE "Host" ADD COLUMN     "diskLimitMethod" TEXT;

-- AlterTable
ALTER TABLE "NetworkVolume" ADD COLUMN     "deletedAt" TIMESTAMP(3),
ADD COLUMN     "hostId" TEXT;

-- AlterTable
ALTER TABLE "Pod" ADD COLUMN     "networkVolumeId" TEXT;

-- CreateTable
CREATE TABLE "DataCenter" (
    "id" TEXT NOT NULL,
    "country" TEXT,
    "networkVolumePath" TEXT,
    "source" TEXT NOT NULL DEFAULT 'api',
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "DataCenter_pkey" PRIMARY KEY ("id")
);

-- AddForeignKey
ALTER TABLE "NetworkVolume" ADD CONSTRAINT "NetworkVolume_hostId_fkey" FOREIGN KEY ("hostId") REFERENCES "Host"("id") ON DELETE SET NULL ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "Pod" ADD CONSTRAINT "Pod_networkVolumeId_fkey" FOREIGN KEY ("networkVolumeId") REFERENCES "NetworkVolume"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- Endpoints without GPUs ran with no CPU or memory limit and were not billed: they become CPU
-- endpoints of the smallest Compute-Optimized size (2 vCPUs, 4 GB), what a REST create without
-- `gpu` makes from now on.
UPDATE "Endpoint" SET "cpuFlavorId" = 'cpu3c', "cpuVcpuCount" = 2, "cpuMemoryGb" = 4
WHERE cardinality("gpuPools") = 0 AND "cpuFlavorId" IS NULL;
